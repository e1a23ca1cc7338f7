//! [`ReadRow`] over PostgreSQL's rows: every value in its native type, an integer of any width
//! widened to `i64` (`integer` columns, such as `shards`, read as `int` like SQLite's).

use chrono::{DateTime, Utc};
use sqlx::postgres::PgRow;
use sqlx::{Column, Postgres, Row, Type};
use uuid::Uuid;

use crate::store::row::ReadRow;

impl ReadRow for PgRow {
    fn text(&self, column: &str) -> Result<String, sqlx::Error> {
        self.try_get(column)
    }

    fn text_opt(&self, column: &str) -> Result<Option<String>, sqlx::Error> {
        self.try_get(column)
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

    fn int32(&self, column: &str) -> Result<i32, sqlx::Error> {
        self.try_get(column)
    }

    fn int32_opt(&self, column: &str) -> Result<Option<i32>, sqlx::Error> {
        self.try_get(column)
    }

    fn flag(&self, column: &str) -> Result<bool, sqlx::Error> {
        self.try_get(column)
    }

    fn time(&self, column: &str) -> Result<DateTime<Utc>, sqlx::Error> {
        self.try_get(column)
    }

    fn time_opt(&self, column: &str) -> Result<Option<DateTime<Utc>>, sqlx::Error> {
        self.try_get(column)
    }

    fn uuid(&self, column: &str) -> Result<Uuid, sqlx::Error> {
        self.try_get(column)
    }

    fn names(&self, column: &str) -> Result<Vec<String>, sqlx::Error> {
        self.try_get(column)
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
