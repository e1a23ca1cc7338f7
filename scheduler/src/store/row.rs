//! The row-reading seam: the few typed getters the store's records are decoded with
//! (`store/records.rs`), each backend converting its own representation of the value.
//!
//! | getter | PostgreSQL | SQLite |
//! |---|---|---|
//! | `text`, `text_opt` | `text` | `TEXT` |
//! | `int`, `int_opt` | `bigint`, or a narrower integer widened | `INTEGER` |
//! | `int32`, `int32_opt` | `integer` | `INTEGER` in range |
//! | `flag` | `boolean` | `INTEGER` 0 or 1 |
//! | `time`, `time_opt` | `timestamptz` | `INTEGER` unix microseconds |
//! | `uuid` | `uuid` | `TEXT`, hyphenated |
//! | `names` | `text[]` | `TEXT`, a JSON array of strings |
//!
//! The implementations live with their driver (`postgres/row.rs`, `sqlite/row.rs`), behind its
//! feature; what is read from a row is written once, against this trait.

use chrono::{DateTime, Utc};
use uuid::Uuid;

/// A result row of either backend, read column by column (by the name the query gives it).
pub(crate) trait ReadRow {
    /// A text column.
    fn text(&self, column: &str) -> Result<String, sqlx::Error>;
    /// A nullable text column.
    fn text_opt(&self, column: &str) -> Result<Option<String>, sqlx::Error>;
    /// An integer column, as `i64`.
    fn int(&self, column: &str) -> Result<i64, sqlx::Error>;
    /// A nullable integer column, as `i64`.
    fn int_opt(&self, column: &str) -> Result<Option<i64>, sqlx::Error>;
    /// A 32-bit integer column (an error if the value does not fit).
    fn int32(&self, column: &str) -> Result<i32, sqlx::Error>;
    /// A nullable 32-bit integer column.
    fn int32_opt(&self, column: &str) -> Result<Option<i32>, sqlx::Error>;
    /// A boolean column.
    fn flag(&self, column: &str) -> Result<bool, sqlx::Error>;
    /// A point in time.
    fn time(&self, column: &str) -> Result<DateTime<Utc>, sqlx::Error>;
    /// A nullable point in time.
    fn time_opt(&self, column: &str) -> Result<Option<DateTime<Utc>>, sqlx::Error>;
    /// A UUID (a lock token).
    fn uuid(&self, column: &str) -> Result<Uuid, sqlx::Error>;
    /// A list of strings (a node's task names).
    fn names(&self, column: &str) -> Result<Vec<String>, sqlx::Error>;
}

/// Getters that read a column as the driver's own type of the value (`Row::try_get`), for a
/// backend's `ReadRow`: `read_natively! { text: String, flag: bool }`.
#[cfg(any(feature = "postgres", feature = "sqlite"))]
macro_rules! read_natively {
    ($($getter:ident: $ty:ty),* $(,)?) => {
        $(
            fn $getter(&self, column: &str) -> Result<$ty, sqlx::Error> {
                sqlx::Row::try_get(self, column)
            }
        )*
    };
}
#[cfg(any(feature = "postgres", feature = "sqlite"))]
pub(crate) use read_natively;

/// The error of a stored value this binary does not know (`what` it was: a run status, ...).
pub(crate) fn unknown(what: &str, value: &str) -> sqlx::Error {
    sqlx::Error::Decode(format!("unknown {what} `{value}`").into())
}
