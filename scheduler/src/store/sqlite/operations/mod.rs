//! [`Store`](crate::store::Store) on SQLite: each operation is a function here or in the module of
//! its concept (as on PostgreSQL), running the `queries/*.sql` it needs on one pooled connection,
//! writes in one `BEGIN IMMEDIATE` transaction, within the operation timeout (see the module docs
//! of `sqlite`). SQLite has no array parameters, so a batch is one statement per item inside the
//! operation's transaction: still one commit, and statements are prepared once and cached per
//! connection. The `impl Store` that calls them is generated (`store_fns!`).

use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::pool::PoolConnection;
use sqlx::{Sqlite, SqliteConnection};
use tokio::time::Instant;
use uuid::Uuid;
use uuid::fmt::Hyphenated;

use super::listener::SqliteChangeListener;
use super::{Inner, MIGRATION_TIMEOUT, SqliteStore, classify, migrate};
use crate::store::{AuditEntry, ChangeListener, SkipRecord, StoreError, StoreResult};

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
    ($store:ident, $op:literal, |$conn:ident, $now:ident| $body:expr) => {{
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
        crate::store::sqlite::operations::settle($op, guard.done(), result, limit)
    }};
}

/// Like `read!`, in a write transaction `$tx` begun with `BEGIN IMMEDIATE` after this process's
/// writer turn, committed when `$body` has its value (`return` from it rolls back). `$now` is
/// taken once the transaction holds the write lock. `limit = ...` replaces the operation timeout.
macro_rules! write_tx {
    ($store:ident, $op:literal, |$tx:ident, $now:ident| $body:expr) => {
        write_tx!($store, $op, limit = $store.inner.op_timeout, |$tx, $now| {
            $body
        })
    };
    ($store:ident, $op:literal, limit = $limit:expr, |$tx:ident, $now:ident| $body:expr) => {{
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
        crate::store::sqlite::operations::settle($op, guard.done(), result, limit)
    }};
}

mod backfill;
mod claim;
mod config;
mod finish;
mod history;
mod incidents;
mod nodes;
mod operator;
mod outbox;
mod renew;

use backfill::*;
use claim::*;
use config::*;
use finish::*;
use history::*;
use incidents::*;
use nodes::*;
use operator::*;
use outbox::*;
use renew::*;

impl SqliteStore {
    /// What only the node owning the file may do; refused for an operator store.
    fn refuse_operator(&self, what: &str) -> StoreResult<()> {
        if self.inner.operator {
            return Err(StoreError::setup(format!(
                "an operator store of `{}` does not {what}: only the node that owns the file does",
                self.inner.path.display()
            )));
        }
        Ok(())
    }
}

impl Inner {
    async fn writer_turn(
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

    async fn acquire(
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
    fn wake(&self) {
        self.changes.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Tells every listener that a run is to be cancelled (after the request's commit).
    fn cancel_requested(&self) {
        self.cancels.send_modify(|n| *n = n.wrapping_add(1));
    }
}

/// The result of an operation run within `limit`: on timeout or a broken connection, the
/// connection is closed instead of returned to the pool.
fn settle<T>(
    operation: &'static str,
    conn: &mut PoolConnection<Sqlite>,
    result: Result<Result<T, sqlx::Error>, tokio::time::error::Elapsed>,
    limit: Duration,
) -> StoreResult<T> {
    match result {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(e)) => {
            if matches!(e, sqlx::Error::Io(_) | sqlx::Error::WorkerCrashed) {
                conn.close_on_drop();
            }
            Err(classify(operation, e))
        }
        Err(_) => {
            // The statement may still be running on the connection's worker thread; a fresh
            // connection is cheaper than finding out.
            conn.close_on_drop();
            Err(StoreError::Timeout {
                operation,
                timeout: limit,
            })
        }
    }
}

/// A timestamp as stored: unix microseconds.
pub(super) fn micros(t: DateTime<Utc>) -> i64 {
    t.timestamp_micros()
}

/// A duration in microseconds, saturating.
fn span(d: Duration) -> i64 {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}

fn later(t: DateTime<Utc>, d: Duration) -> i64 {
    micros(t).saturating_add(span(d))
}

fn earlier(t: DateTime<Utc>, d: Duration) -> i64 {
    micros(t).saturating_sub(span(d))
}

fn token(t: Uuid) -> Hyphenated {
    t.hyphenated()
}

/// A list of names as the JSON array the queries read with `json_each`.
fn names_json(names: &[String]) -> String {
    serde_json::to_string(names).expect("strings serialize")
}

/// A limit as SQLite binds it (a `u32` is never the negative LIMIT SQLite reads as none).
fn limit_of(n: u32) -> i64 {
    i64::from(n)
}

/// Records ranges of skipped ticks on `conn`, recorded at `now`.
async fn insert_skips<'a>(
    conn: &mut SqliteConnection,
    skips: impl IntoIterator<Item = &'a SkipRecord>,
    now: DateTime<Utc>,
) -> Result<(), sqlx::Error> {
    for skip in skips {
        sqlx::query(query!("skips_insert"))
            .bind(&skip.task_name)
            .bind(skip.reason.as_str())
            .bind(micros(skip.first_tick))
            .bind(micros(skip.last_tick))
            .bind(skip.ticks)
            .bind(skip.exact)
            .bind(skip.run_id)
            .bind(micros(now))
            .execute(&mut *conn)
            .await?;
    }
    Ok(())
}

/// Records an audit entry on `conn`, at the store's clock `now` (as PostgreSQL records it at
/// `now()`, whatever the entry's own `at` says), and counts it in `own` (the store's
/// `own_audits`, which tells the change listener this process's entries from another's).
async fn insert_audit(
    conn: &mut SqliteConnection,
    a: &AuditEntry,
    now: DateTime<Utc>,
    own: &std::sync::atomic::AtomicU64,
) -> Result<(), sqlx::Error> {
    sqlx::query(query!("audit_insert"))
        .bind(&a.actor)
        .bind(&a.action)
        .bind(&a.task)
        .bind(&a.detail)
        .bind(&a.source)
        .bind(micros(now))
        .execute(conn)
        .await?;
    // Counted before the commit, while this writer holds the writer turn: the listener reads
    // the count and the table under the same turn, so it sees both or neither.
    own.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    Ok(())
}

store_fns!(SqliteStore);

fn describe(store: &SqliteStore) -> String {
    store.inner.description.clone()
}

/// An SQLite store has no server: nothing to fail over, nothing to report.
fn database_server(_: &SqliteStore) -> Option<crate::store::DatabaseServer> {
    None
}

/// No replication: one file.
async fn replication(_: &SqliteStore) -> StoreResult<Option<crate::store::Replication>> {
    Ok(None)
}

async fn migrate(store: &SqliteStore) -> StoreResult<()> {
    store.refuse_operator("migrate the database")?;
    let path = store.inner.path.clone();
    let applied = write_tx!(store, "migrate", limit = MIGRATION_TIMEOUT, |tx, now| {
        match migrate::apply_all(&mut tx, now, &path).await? {
            Ok(applied) => Ok(applied),
            // Refused: roll back whatever was created, and say why.
            Err(refusal) => return Ok(Err(refusal)),
        }
    })??;
    for version in applied {
        tracing::info!(version, path = %path.display(), "applied migration");
    }
    Ok(())
}

async fn listener(store: &SqliteStore) -> StoreResult<Box<dyn ChangeListener>> {
    Ok(Box::new(SqliteChangeListener::new(
        store.inner.cancels.subscribe(),
        store.inner.changes.subscribe(),
        std::sync::Arc::downgrade(&store.inner),
    )))
}

async fn notify(store: &SqliteStore) -> StoreResult<()> {
    // Listeners in this process wake now; one in another (a node beside this operator
    // store) sees the commit through `PRAGMA data_version`.
    store.inner.wake();
    Ok(())
}
