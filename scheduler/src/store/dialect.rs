//! The binding-side seam: what lets an operation be written once for both backends when the
//! two differ only in their SQL text and in how a value is bound.
//!
//! A statement is named once ([`statement!`]: the file of that name in each backend's
//! `queries/`, or one file of `store/queries/` both run as it is) and its parameters are
//! [`Param`]s, each bound as its backend stores the value:
//!
//! | parameter | PostgreSQL | SQLite |
//! |---|---|---|
//! | [`Param::Text`] | `text` | `TEXT` |
//! | [`Param::Int`] | `int8` | `INTEGER` |
//! | [`Param::Flag`] | `boolean` | `INTEGER` 0 or 1 |
//! | [`Param::Time`] | `timestamptz` | `INTEGER` unix microseconds |
//! | [`Param::Names`] | `text[]` | `TEXT`, a JSON array of strings |
//! | [`Param::Ids`] | `int8[]` | `TEXT`, a JSON array of integers |
//! | [`Param::Ago`] | `int8` milliseconds, taken from `now()` | the operation's clock less it |
//! | [`Param::Now`] | not bound: the statement reads `now()` | the operation's clock, as a time |
//!
//! A backend implements [`Dialect`]: it runs such a statement within its timeouts, on its
//! connection, and hands the rows to the decoders of `records.rs` (through `row.rs`). What is
//! written once against it lives in the store's modules (`reads.rs`); what a backend runs its
//! own way (PostgreSQL's batched statements and commit read-back, SQLite's per-row statements
//! in one `BEGIN IMMEDIATE`) stays in its `operations/`.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::store::row::ReadRow;
use crate::store::{StoreError, StoreResult};

/// A statement of both backends: the text each of them runs (see [`statement!`]).
#[derive(Clone, Copy)]
pub(crate) struct Sql {
    #[cfg(feature = "postgres")]
    pub(crate) postgres: &'static str,
    #[cfg(feature = "sqlite")]
    pub(crate) sqlite: &'static str,
}

impl Sql {
    /// A statement both backends run as it is (`store/queries/`, see `shared_query!`).
    pub(crate) const fn shared(text: &'static str) -> Self {
        Self {
            #[cfg(feature = "postgres")]
            postgres: text,
            #[cfg(feature = "sqlite")]
            sqlite: text,
        }
    }
}

/// The [`Sql`] of `queries/<name>.sql` in each backend (`postgres: "a", sqlite: "b"` when their
/// files are named apart). `runs` before the names: a SELECT of run records, with the runs'
/// columns included (`runs_select!`).
macro_rules! statement {
    ($file:literal) => {
        statement!(postgres: $file, sqlite: $file)
    };
    (runs $file:literal) => {
        statement!(runs postgres: $file, sqlite: $file)
    };
    (postgres: $postgres:literal, sqlite: $sqlite:literal) => {
        statement!(@sql [], $postgres, $sqlite)
    };
    (runs postgres: $postgres:literal, sqlite: $sqlite:literal) => {
        statement!(@sql [runs_select!], $postgres, $sqlite)
    };
    (@sql [$($wrap:tt)*], $postgres:literal, $sqlite:literal) => {
        crate::store::dialect::Sql {
            #[cfg(feature = "postgres")]
            postgres: statement!(@text [$($wrap)*], "postgres", $postgres),
            #[cfg(feature = "sqlite")]
            sqlite: statement!(@text [$($wrap)*], "sqlite", $sqlite),
        }
    };
    (@text [], $backend:literal, $file:literal) => {
        include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/src/store/",
            $backend,
            "/queries/",
            $file,
            ".sql"
        ))
    };
    (@text [$wrap:ident!], $backend:literal, $file:literal) => {
        $wrap!(statement!(@text [], $backend, $file))
    };
}

/// A statement parameter, bound by each backend as it stores the value (see the module docs).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Param<'a> {
    /// Text, or NULL.
    Text(Option<&'a str>),
    /// An integer, or NULL.
    Int(Option<i64>),
    /// A flag, or NULL.
    Flag(Option<bool>),
    /// A point in time, or NULL.
    Time(Option<DateTime<Utc>>),
    /// A list of names.
    Names(&'a [String]),
    /// A list of ids.
    Ids(&'a [i64]),
    /// The store's clock less a duration: PostgreSQL binds the duration's milliseconds, which
    /// the statement takes from `now()`; SQLite binds the time.
    Ago(std::time::Duration),
    /// The store's clock: bound on SQLite (the operation's `now`, taken where the backend takes
    /// it), not bound on PostgreSQL, whose statement reads `now()`. Always the last parameter,
    /// so the others are numbered alike.
    Now,
}

impl<'a> From<&'a str> for Param<'a> {
    fn from(v: &'a str) -> Self {
        Param::Text(Some(v))
    }
}

impl<'a> From<Option<&'a str>> for Param<'a> {
    fn from(v: Option<&'a str>) -> Self {
        Param::Text(v)
    }
}

impl From<i64> for Param<'_> {
    fn from(v: i64) -> Self {
        Param::Int(Some(v))
    }
}

impl From<Option<i64>> for Param<'_> {
    fn from(v: Option<i64>) -> Self {
        Param::Int(v)
    }
}

impl From<Option<bool>> for Param<'_> {
    fn from(v: Option<bool>) -> Self {
        Param::Flag(v)
    }
}

impl From<DateTime<Utc>> for Param<'_> {
    fn from(v: DateTime<Utc>) -> Self {
        Param::Time(Some(v))
    }
}

impl From<Option<DateTime<Utc>>> for Param<'_> {
    fn from(v: Option<DateTime<Utc>>) -> Self {
        Param::Time(v)
    }
}

impl<'a> From<&'a [String]> for Param<'a> {
    fn from(v: &'a [String]) -> Self {
        Param::Names(v)
    }
}

/// The parameters of a statement, each converted to a [`Param`]: `params![task, since, Now]`.
macro_rules! params {
    ($($value:expr),* $(,)?) => {
        [$(crate::store::dialect::Param::from($value)),*]
    };
}

impl From<Now> for Param<'_> {
    fn from(_: Now) -> Self {
        Param::Now
    }
}

/// The store's clock as a parameter of `params!` ([`Param::Now`]).
pub(crate) struct Now;

/// How a backend runs a statement written once for both (see the module docs): within the
/// operation timeout, on a connection of its own, the statement's text of this backend with
/// its parameters bound this backend's way.
#[async_trait]
pub(crate) trait Dialect: Sync {
    /// A result row of this backend.
    type Row: ReadRow + Send + Sync;

    /// Runs the read `sql` with `params` as `operation`: the rows it returns, or only the first
    /// (if any) when `first` (the driver stops reading there).
    async fn rows(
        &self,
        operation: &'static str,
        sql: Sql,
        params: &[Param<'_>],
        first: bool,
    ) -> StoreResult<Vec<Self::Row>>;

    /// Runs the read `sql` with `params` as `operation`, and decodes every row it returns.
    async fn fetch_all<T: Send>(
        &self,
        operation: &'static str,
        sql: Sql,
        params: &[Param<'_>],
        decode: for<'r> fn(&'r Self::Row) -> Result<T, sqlx::Error>,
    ) -> StoreResult<Vec<T>> {
        let rows = self.rows(operation, sql, params, false).await?;
        decoded(operation, rows.iter().map(decode).collect())
    }

    /// Runs the read `sql` with `params` as `operation`, and decodes the row it returns, if any.
    async fn fetch_optional<T: Send>(
        &self,
        operation: &'static str,
        sql: Sql,
        params: &[Param<'_>],
        decode: for<'r> fn(&'r Self::Row) -> Result<T, sqlx::Error>,
    ) -> StoreResult<Option<T>> {
        let rows = self.rows(operation, sql, params, true).await?;
        decoded(operation, rows.first().map(decode).transpose())
    }
}

/// A decoded value, or the decoding's error as both backends classify it (the stored value is
/// refused: retrying will not help).
fn decoded<T>(operation: &'static str, value: Result<T, sqlx::Error>) -> StoreResult<T> {
    value.map_err(|e| StoreError::classified(operation, Box::new(e), None))
}
