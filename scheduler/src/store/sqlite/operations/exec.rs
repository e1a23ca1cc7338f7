//! How an operation runs on SQLite: the macros every operation file uses (`query!`, `read!`,
//! `write_tx!`), the writer's turn and the pooled connection they wait for within the
//! operation timeout, what becomes of a connection whose operation failed or timed out, and the
//! statements written once for both backends (`store/dialect.rs`) as SQLite binds and runs
//! them.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::pool::PoolConnection;
use sqlx::query::Query;
use sqlx::sqlite::{SqliteArguments, SqliteQueryResult, SqliteRow};
use sqlx::{Sqlite, SqliteConnection};
use tokio::time::Instant;

use super::bind::{earlier, micros, names_json};
use crate::store::dialect::{self, Dialect, Fetch, Fetched, Own, Statement, bind_all};
use crate::store::in_use::InUse;
use crate::store::sqlite::{Inner, SqliteStore, classify};
use crate::store::{StoreError, StoreResult};

macro_rules! query {
    ($file:literal) => {
        include_str!(concat!("../queries/", $file, ".sql"))
    };
}

/// Runs `$body` (an expression using `$conn: &mut SqliteConnection` and the operation's clock
/// `$now`, evaluating to the operation's value) on a pooled connection within the operation
/// timeout. On timeout, or if the operation is dropped half-way, the connection is closed instead
/// of returned to the pool.
macro_rules! read {
    ($store:ident, $op:expr, |$conn:ident, $now:ident| $body:expr) => {{
        let inner: &crate::store::sqlite::Inner = &$store.inner;
        let limit = inner.op_timeout;
        let deadline = tokio::time::Instant::now() + limit;
        let mut guard =
            crate::store::in_use::InUse::new(inner.acquire($op, deadline, limit).await?);
        let result = tokio::time::timeout_at(deadline, async {
            let $conn: &mut sqlx::SqliteConnection = &mut guard.conn;
            let $now: chrono::DateTime<chrono::Utc> = inner.clock.now();
            Ok::<_, sqlx::Error>($body)
        })
        .await;
        crate::store::sqlite::operations::exec::settle($op, &mut guard, result, limit)
    }};
}

/// Like `read!`, in a write transaction `$tx` begun with `BEGIN IMMEDIATE` after this process's
/// writer turn, committed when `$body` has its value (`return` from it rolls back). `$now` is
/// taken once the transaction holds the write lock. `limit = ...` replaces the operation timeout.
macro_rules! write_tx {
    ($store:ident, $op:expr, |$tx:ident, $now:ident| $body:expr) => {
        write_tx!($store, $op, limit = $store.inner.op_timeout, |$tx, $now| {
            $body
        })
    };
    ($store:ident, $op:expr, limit = $limit:expr, |$tx:ident, $now:ident| $body:expr) => {{
        let inner: &crate::store::sqlite::Inner = &$store.inner;
        let limit: std::time::Duration = $limit;
        let deadline = tokio::time::Instant::now() + limit;
        let _turn = inner.writer_turn($op, deadline, limit).await?;
        let mut guard =
            crate::store::in_use::InUse::new(inner.acquire($op, deadline, limit).await?);
        let result = tokio::time::timeout_at(deadline, async {
            let conn: &mut sqlx::SqliteConnection = &mut guard.conn;
            let mut $tx = sqlx::Connection::begin_with(conn, "BEGIN IMMEDIATE").await?;
            let $now: chrono::DateTime<chrono::Utc> = inner.clock.now();
            let value = $body;
            $tx.commit().await?;
            Ok::<_, sqlx::Error>(value)
        })
        .await;
        crate::store::sqlite::operations::exec::settle($op, &mut guard, result, limit)
    }};
}

impl Inner {
    pub(super) async fn writer_turn(
        &self,
        operation: &'static str,
        deadline: Instant,
        limit: Duration,
    ) -> StoreResult<tokio::sync::MutexGuard<'_, ()>> {
        tokio::time::timeout_at(deadline, self.writer.lock())
            .await
            .map_err(|_| StoreError::Timeout {
                operation,
                timeout: limit,
            })
    }

    pub(super) async fn acquire(
        &self,
        operation: &'static str,
        deadline: Instant,
        limit: Duration,
    ) -> StoreResult<PoolConnection<Sqlite>> {
        match tokio::time::timeout_at(deadline, self.pool.acquire()).await {
            Ok(Ok(conn)) => Ok(conn),
            Ok(Err(e)) => Err(classify(operation, e)),
            Err(_) => Err(StoreError::Timeout {
                operation,
                timeout: limit,
            }),
        }
    }

    /// Wakes every listener (after a commit that released a lock, applied a config, queued a
    /// manual run or ended a pause; or when asked to).
    pub(super) fn wake(&self) {
        self.changes.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Tells every listener that a run is to be cancelled (after the request's commit).
    pub(super) fn cancel_requested(&self) {
        self.cancels.send_modify(|n| *n = n.wrapping_add(1));
    }
}

/// The operation's answer (see `InUse::settle`): a connection whose worker thread failed is not
/// reused.
pub(super) fn settle<T>(
    operation: &'static str,
    guard: &mut InUse<Sqlite>,
    result: Result<Result<T, sqlx::Error>, tokio::time::error::Elapsed>,
    limit: Duration,
) -> StoreResult<T> {
    let broken = |e: &sqlx::Error| matches!(e, sqlx::Error::Io(_) | sqlx::Error::WorkerCrashed);
    guard.settle(operation, result, limit, broken, classify)
}

/// A value SQLite represents its own way (see `store/dialect.rs`), bound with the operation's
/// clock `now`.
fn bind<'q>(
    query: Query<'q, Sqlite, SqliteArguments>,
    value: Own<'_>,
    now: DateTime<Utc>,
) -> Query<'q, Sqlite, SqliteArguments> {
    match value {
        Own::Time(v) => query.bind(v.map(micros)),
        Own::Names(v) => query.bind(names_json(v)),
        Own::Ids(v) => query.bind(serde_json::to_string(v).expect("integers serialize")),
        Own::Ago(d) => query.bind(earlier(now, d)),
        Own::Now => query.bind(micros(now)),
    }
}

#[async_trait]
impl Dialect for SqliteStore {
    type Row = SqliteRow;
    type Conn = SqliteConnection;
    type Clock = DateTime<Utc>;

    fn refuse_operator(&self, what: &str) -> StoreResult<()> {
        if self.inner.operator {
            return Err(StoreError::setup(format!(
                "an operator store of `{}` does not {what}: only the node that owns the file does",
                self.inner.path.display()
            )));
        }
        Ok(())
    }

    async fn run(
        conn: &mut SqliteConnection,
        now: DateTime<Utc>,
        statement: Statement<'_>,
        fetch: Fetch,
    ) -> Result<Fetched<SqliteRow>, sqlx::Error> {
        let query = sqlx::query(statement.sql.sqlite);
        let query = bind_all(query, statement.params, |query, value: Own<'_>| {
            bind(query, value, now)
        });
        dialect::fetch(conn, query, fetch, SqliteQueryResult::rows_affected).await
    }

    async fn once(
        &self,
        statement: Statement<'_>,
        fetch: Fetch,
    ) -> StoreResult<Fetched<SqliteRow>> {
        // A write in a transaction of its own, after this process's writer turn; a read beside.
        let store = self;
        if fetch == Fetch::Count {
            write_tx!(store, statement.operation, |tx, now| {
                Self::run(&mut tx, now, statement, fetch).await?
            })
        } else {
            read!(store, statement.operation, |conn, now| {
                Self::run(conn, now, statement, fetch).await?
            })
        }
    }
}
