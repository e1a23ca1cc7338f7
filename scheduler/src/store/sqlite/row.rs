//! [`ReadRow`] over SQLite's rows: times are stored as unix microseconds, lock tokens as
//! hyphenated text, lists of names as JSON arrays; booleans and integers are SQLite's integers.

use chrono::{DateTime, Utc};
use sqlx::Row;
use sqlx::sqlite::SqliteRow;
use uuid::Uuid;
use uuid::fmt::Hyphenated;

use crate::store::row::{ReadRow, read_natively};

/// A stored timestamp (unix microseconds) as a time.
pub(super) fn time(us: i64) -> Result<DateTime<Utc>, sqlx::Error> {
    DateTime::from_timestamp_micros(us)
        .ok_or_else(|| sqlx::Error::Decode(format!("timestamp {us} µs is out of range").into()))
}

impl ReadRow for SqliteRow {
    read_natively! {
        text: String,
        text_opt: Option<String>,
        int: i64,
        int_opt: Option<i64>,
        int32: i32,
        int32_opt: Option<i32>,
        flag: bool,
    }

    fn time(&self, column: &str) -> Result<DateTime<Utc>, sqlx::Error> {
        time(self.try_get(column)?)
    }

    fn time_opt(&self, column: &str) -> Result<Option<DateTime<Utc>>, sqlx::Error> {
        self.try_get::<Option<i64>, _>(column)?
            .map(time)
            .transpose()
    }

    fn uuid(&self, column: &str) -> Result<Uuid, sqlx::Error> {
        Ok(self.try_get::<Hyphenated, _>(column)?.into_uuid())
    }

    fn names(&self, column: &str) -> Result<Vec<String>, sqlx::Error> {
        let json: String = self.try_get(column)?;
        serde_json::from_str(&json).map_err(|e| sqlx::Error::Decode(Box::new(e)))
    }
}
