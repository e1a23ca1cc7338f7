//! [`ReadRow`] over PostgreSQL's rows: every value in its native type, an integer of any width
//! widened to `i64` (`integer` columns, such as `shards`, read as `int` like SQLite's).

use chrono::{DateTime, Utc};
use sqlx::postgres::PgRow;
use sqlx::{Column, Postgres, Row, Type};
use uuid::Uuid;

use crate::store::row::{ReadRow, read_natively};

impl ReadRow for PgRow {
    read_natively! {
        text: String,
        text_opt: Option<String>,
        int32: i32,
        int32_opt: Option<i32>,
        flag: bool,
        time: DateTime<Utc>,
        time_opt: Option<DateTime<Utc>>,
        uuid: Uuid,
        names: Vec<String>,
    }

    fn int(&self, column: &str) -> Result<i64, sqlx::Error> {
        match width(self, column)? {
            Width::Int2 => self.try_get::<i16, _>(column).map(i64::from),
            Width::Int4 => self.try_get::<i32, _>(column).map(i64::from),
            Width::Other => self.try_get(column),
        }
    }

    fn int_opt(&self, column: &str) -> Result<Option<i64>, sqlx::Error> {
        Ok(match width(self, column)? {
            Width::Int2 => self.try_get::<Option<i16>, _>(column)?.map(i64::from),
            Width::Int4 => self.try_get::<Option<i32>, _>(column)?.map(i64::from),
            Width::Other => self.try_get(column)?,
        })
    }
}

/// How an integer column is stored: `smallint`, `integer`, or anything else (`bigint`, read as
/// is; another type fails as `i64` would).
enum Width {
    Int2,
    Int4,
    Other,
}

fn width(row: &PgRow, column: &str) -> Result<Width, sqlx::Error> {
    let ty = row.try_column(column)?.type_info();
    Ok(if <i32 as Type<Postgres>>::compatible(ty) {
        Width::Int4
    } else if <i16 as Type<Postgres>>::compatible(ty) {
        Width::Int2
    } else {
        Width::Other
    })
}
