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
//! | [`Own::Time`] | `timestamptz` | `INTEGER` unix microseconds |
//! | [`Own::Names`] | `text[]` | `TEXT`, a JSON array of strings |
//! | [`Own::Ids`] | `int8[]` | `TEXT`, a JSON array of integers |
//! | [`Own::Ago`] | `int8` milliseconds, taken from `now()` | the operation's clock less it |
//! | [`Own::Now`] | not bound: the statement reads `now()` | the operation's clock, as a time |
//!
//! A backend implements [`Dialect`]: it runs such a statement within its timeouts, on its
//! connection, and hands the rows to the decoders of `records.rs` (through `row.rs`). What is
//! written once against it lives in the store's modules (`reads.rs`, `writes.rs`); what a
//! backend runs its own way (PostgreSQL's batched statements and commit read-back, SQLite's per-row statements
//! in one `BEGIN IMMEDIATE`) stays in its `operations/`.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::query::Query;
use sqlx::{Database, Encode, Executor, IntoArguments, Type};

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
    (states $file:literal) => {
        statement!(@sql [task_state_select!], $file, $file)
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
    /// A value each backend represents its own way.
    Own(Own<'a>),
}

/// A parameter's value that each backend represents its own way (see the module docs).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Own<'a> {
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

impl<'a> From<&'a String> for Param<'a> {
    fn from(v: &'a String) -> Self {
        Param::Text(Some(v))
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

impl From<bool> for Param<'_> {
    fn from(v: bool) -> Self {
        Param::Flag(Some(v))
    }
}

impl From<Option<bool>> for Param<'_> {
    fn from(v: Option<bool>) -> Self {
        Param::Flag(v)
    }
}

impl From<DateTime<Utc>> for Param<'_> {
    fn from(v: DateTime<Utc>) -> Self {
        Param::Own(Own::Time(Some(v)))
    }
}

impl From<Option<DateTime<Utc>>> for Param<'_> {
    fn from(v: Option<DateTime<Utc>>) -> Self {
        Param::Own(Own::Time(v))
    }
}

impl<'a> From<&'a [String]> for Param<'a> {
    fn from(v: &'a [String]) -> Self {
        Param::Own(Own::Names(v))
    }
}

/// The parameters of a statement, each converted to a [`Param`]: `params![task, since, Now]`.
macro_rules! params {
    ($($value:expr),* $(,)?) => {
        [$(crate::store::dialect::Param::from($value)),*]
    };
}

impl<'a> From<&'a [i64]> for Param<'a> {
    fn from(v: &'a [i64]) -> Self {
        Param::Own(Own::Ids(v))
    }
}

impl From<std::time::Duration> for Param<'_> {
    /// The store's clock less the duration ([`Own::Ago`]).
    fn from(v: std::time::Duration) -> Self {
        Param::Own(Own::Ago(v))
    }
}

impl From<Now> for Param<'_> {
    fn from(_: Now) -> Self {
        Param::Own(Own::Now)
    }
}

/// The store's clock as a parameter of `params!` ([`Own::Now`]).
pub(crate) struct Now;

/// A statement with its parameters.
#[derive(Clone, Copy)]
pub(crate) struct Statement<'a> {
    /// The operation it is run as by [`Dialect::once`] (its errors name it); a statement run on
    /// a connection inside an operation is named for what it does there.
    pub(crate) operation: &'static str,
    /// The statement of each backend.
    pub(crate) sql: Sql,
    /// Its parameters, in order.
    pub(crate) params: &'a [Param<'a>],
}

/// What a run of a statement hands back.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fetch {
    /// Every row it returns.
    All,
    /// Its first row, if any (the driver stops reading there).
    First,
    /// No rows: how many it changed.
    Count,
}

/// The rows of a statement's run, or ([`Fetch::Count`]) how many rows it changed.
pub(crate) struct Fetched<R> {
    pub(crate) rows: Vec<R>,
    pub(crate) count: u64,
}

/// How a backend runs a statement written once for both (see the module docs): on one of its
/// connections inside an operation, and as an operation of its own, within the operation
/// timeout.
#[async_trait]
pub(crate) trait Dialect: Send + Sync {
    /// A result row of this backend.
    type Row: ReadRow + Send + Sync;
    /// A connection of this backend inside an operation (in its transaction, if it writes).
    type Conn: Send;
    /// What an operation's statements are bound with besides their parameters: SQLite's clock
    /// of the operation ([`Own::Now`]); nothing on PostgreSQL, whose statements read `now()`.
    type Clock: Copy + Send + Sync;

    /// Refuses `what` (a sentence: "register a node") where only the store of the node that owns
    /// the database may do it (SQLite's operator store). Every PostgreSQL store may.
    fn refuse_operator(&self, what: &str) -> StoreResult<()> {
        let _ = what;
        Ok(())
    }

    /// Runs `statement` on `conn`, inside an operation that took `clock`.
    async fn run(
        conn: &mut Self::Conn,
        clock: Self::Clock,
        statement: Statement<'_>,
        fetch: Fetch,
    ) -> Result<Fetched<Self::Row>, sqlx::Error>;

    /// Runs `statement` as an operation of its own: a read, or ([`Fetch::Count`]) a write.
    async fn once(&self, statement: Statement<'_>, fetch: Fetch)
    -> StoreResult<Fetched<Self::Row>>;

    /// Runs the read `sql` with `params` as `operation`, and decodes every row it returns.
    async fn fetch_all<T: Send>(
        &self,
        operation: &'static str,
        sql: Sql,
        params: &[Param<'_>],
        decode: for<'r> fn(&'r Self::Row) -> Result<T, sqlx::Error>,
    ) -> StoreResult<Vec<T>> {
        let statement = Statement {
            operation,
            sql,
            params,
        };
        let rows = self.once(statement, Fetch::All).await?.rows;
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
        let statement = Statement {
            operation,
            sql,
            params,
        };
        let rows = self.once(statement, Fetch::First).await?.rows;
        decoded(operation, rows.first().map(decode).transpose())
    }

    /// Runs the write `sql` with `params` as `operation` of its own (its own transaction), and
    /// says how many rows it changed.
    async fn execute(
        &self,
        operation: &'static str,
        sql: Sql,
        params: &[Param<'_>],
    ) -> StoreResult<u64> {
        let statement = Statement {
            operation,
            sql,
            params,
        };
        Ok(self.once(statement, Fetch::Count).await?.count)
    }

    /// Runs the write `statement` on `conn`, inside an operation that took `clock`, and says how
    /// many rows it changed.
    async fn execute_on(
        conn: &mut Self::Conn,
        clock: Self::Clock,
        statement: Statement<'_>,
    ) -> Result<u64, sqlx::Error> {
        Ok(Self::run(conn, clock, statement, Fetch::Count).await?.count)
    }
}

/// `query` with `params` bound: text, integers and flags as every driver binds them, each other
/// kind by `own` (the backend's own representation of it).
pub(crate) fn bind_all<'q, DB>(
    query: Query<'q, DB, DB::Arguments>,
    params: &[Param<'_>],
    own: impl Fn(Query<'q, DB, DB::Arguments>, Own<'_>) -> Query<'q, DB, DB::Arguments>,
) -> Query<'q, DB, DB::Arguments>
where
    DB: Database,
    for<'a> Option<&'a str>: Encode<'a, DB> + Type<DB>,
    for<'a> Option<i64>: Encode<'a, DB> + Type<DB>,
    for<'a> Option<bool>: Encode<'a, DB> + Type<DB>,
{
    params.iter().fold(query, |query, param| match *param {
        Param::Text(v) => query.bind(v),
        Param::Int(v) => query.bind(v),
        Param::Flag(v) => query.bind(v),
        Param::Own(value) => own(query, value),
    })
}

/// Runs the bound `query` on `conn`, fetching what `fetch` asks for (`affected`: the rows a
/// write changed, as the driver says).
pub(crate) async fn fetch<DB>(
    conn: &mut DB::Connection,
    query: Query<'_, DB, DB::Arguments>,
    fetch: Fetch,
    affected: fn(&DB::QueryResult) -> u64,
) -> Result<Fetched<DB::Row>, sqlx::Error>
where
    DB: Database,
    DB::Arguments: IntoArguments<DB>,
    for<'e> &'e mut DB::Connection: Executor<'e, Database = DB>,
{
    Ok(match fetch {
        Fetch::All => Fetched {
            rows: query.fetch_all(conn).await?,
            count: 0,
        },
        Fetch::First => Fetched {
            rows: Vec::from_iter(query.fetch_optional(conn).await?),
            count: 0,
        },
        Fetch::Count => Fetched {
            rows: Vec::new(),
            count: affected(&query.execute(conn).await?),
        },
    })
}

/// A decoded value, or the decoding's error as both backends classify it (the stored value is
/// refused: retrying will not help).
fn decoded<T>(operation: &'static str, value: Result<T, sqlx::Error>) -> StoreResult<T> {
    value.map_err(|e| StoreError::classified(operation, Box::new(e), None))
}
