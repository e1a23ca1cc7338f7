//! [`Store`](crate::store::Store) on PostgreSQL: each operation is a function here or in the
//! module of its concept, running the `queries/*.sql` it needs on a connection acquired and used
//! within the store's timeouts (see the module docs of `postgres`). The `impl Store` that calls
//! them is generated (`store_fns!`).

use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::pool::PoolConnection;
use sqlx::{Postgres, Row};

use super::{PgStore, classify};
use crate::store::{
    AuditEntry, ChangeListener, Pause, Recovery, RunRecord, RunStatus, SkipReason, StoreError,
    StoreResult, TaskState, Trigger,
};

macro_rules! query {
    ($file:literal) => {
        include_str!(concat!("../queries/", $file, ".sql"))
    };
}

/// A statement that releases locks (`release_locks`, `finish_runs`), with its
/// `-- @include release_requeue.sql` line replaced by that file: the one place the release of a
/// lock and the requeue the engine decided are written.
macro_rules! releasing_query {
    ($file:literal) => {{
        static SQL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
            crate::store::postgres::operations::include_release(query!($file))
        });
        SQL.as_str()
    }};
}

/// Runs `$body` (an expression using `$conn: &mut PgConnection`) on a pooled connection within
/// the operation timeout; on timeout or a broken connection, or if the operation is dropped
/// half-way, the connection is closed instead of returned to the pool.
///
/// Through a transaction-mode pooler, `$body` runs in one transaction opened with the store's
/// `SET LOCAL`s (see `PgStore::transaction_begin`): the pooler keeps the server connection for
/// the whole operation, and an inner `begin()` becomes a savepoint.
macro_rules! timed {
    ($store:ident, $op:literal, |$conn:ident| $body:expr) => {{
        let mut guard = crate::store::in_use::InUse::new($store.acquire($op).await?);
        let result = {
            let conn: &mut sqlx::PgConnection = &mut guard.conn;
            tokio::time::timeout($store.op_timeout, async {
                match $store.transaction_begin() {
                    None => {
                        let $conn = conn;
                        $body
                    }
                    Some(begin) => {
                        let mut tx = sqlx::Connection::begin_with(conn, begin).await?;
                        let value: Result<_, sqlx::Error> = {
                            let $conn: &mut sqlx::PgConnection = &mut tx;
                            $body
                        };
                        let value = value?;
                        tx.commit().await?;
                        Ok(value)
                    }
                }
            })
            .await
        };
        $store.settle($op, guard.done(), result)
    }};
}

mod backfill;
mod claim;
mod columns;
mod commit;
mod config;
mod finish;
mod history;
mod incidents;
mod nodes;
mod operator;
mod outbox;
mod renew;
mod server;
mod wake;

use backfill::*;
use claim::*;
use columns::*;
use config::*;
use finish::*;
use history::*;
use incidents::*;
use nodes::*;
use operator::*;
use outbox::*;
use renew::*;
use server::*;
use wake::*;

impl PgStore {
    async fn acquire(&self, operation: &'static str) -> StoreResult<PoolConnection<Postgres>> {
        // The pool has its own acquire timeout; this one also covers a connect that hangs, and
        // the choice of server before it (several hosts or a target_session_attrs).
        let acquire = async {
            if let Some(servers) = &self.servers {
                servers
                    .ensure(&self.pool)
                    .await
                    .map_err(sqlx::Error::Protocol)?;
            }
            self.pool.acquire().await
        };
        match tokio::time::timeout(self.acquire_timeout + Duration::from_secs(1), acquire).await {
            Ok(Ok(conn)) => Ok(conn),
            Ok(Err(e)) => {
                self.doubt_server(&e);
                Err(classify(operation, e))
            }
            Err(_) => {
                if let Some(servers) = &self.servers {
                    servers.suspect();
                }
                Err(StoreError::Timeout {
                    operation,
                    timeout: self.acquire_timeout,
                })
            }
        }
    }

    fn settle<T>(
        &self,
        operation: &'static str,
        conn: &mut PoolConnection<Postgres>,
        result: Result<Result<T, sqlx::Error>, tokio::time::error::Elapsed>,
    ) -> StoreResult<T> {
        match result {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) => {
                // A lost connection, or a server that shut down or no longer takes writes:
                // this connection is not reused, and the next one chooses the server again.
                if self.doubt_server(&e) {
                    conn.close_on_drop();
                }
                Err(classify(operation, e))
            }
            Err(_) => {
                conn.close_on_drop();
                Err(StoreError::Timeout {
                    operation,
                    timeout: self.op_timeout,
                })
            }
        }
    }
}

/// `statement` with its `-- @include release_requeue.sql` line replaced by that file.
fn include_release(statement: &str) -> String {
    const LINE: &str = "    -- @include release_requeue.sql\n";
    assert!(
        statement.contains(LINE),
        "a releasing statement includes the release"
    );
    statement.replace(LINE, query!("release_requeue"))
}

fn decode(what: &str, value: &str) -> sqlx::Error {
    sqlx::Error::Decode(format!("unknown {what} `{value}`").into())
}

fn parse_status(s: &str) -> Result<RunStatus, sqlx::Error> {
    RunStatus::parse(s).ok_or_else(|| decode("run status", s))
}

fn parse_trigger(s: &str) -> Result<Trigger, sqlx::Error> {
    Trigger::parse(s).ok_or_else(|| decode("trigger", s))
}

fn parse_reason(s: &str) -> Result<SkipReason, sqlx::Error> {
    SkipReason::parse(s).ok_or_else(|| decode("skip reason", s))
}

fn parse_recovery(s: &str) -> Recovery {
    // A value this binary does not know is treated as the safe default of older binaries.
    s.parse().unwrap_or_default()
}

/// The pause held in a row's `paused_*` columns, if any.
fn pause_of(row: &sqlx::postgres::PgRow) -> Result<Option<Pause>, sqlx::Error> {
    let at: Option<DateTime<Utc>> = row.try_get("paused_at")?;
    Ok(match at {
        Some(at) => Some(Pause::new(
            at,
            row.try_get::<String, _>("paused_by")?,
            row.try_get::<String, _>("pause_reason")?,
            row.try_get("pause_until")?,
        )),
        None => None,
    })
}

fn run_record(row: &sqlx::postgres::PgRow) -> Result<RunRecord, sqlx::Error> {
    Ok(RunRecord {
        id: row.try_get("id")?,
        task_name: row.try_get("task_name")?,
        scheduled_at: row.try_get("scheduled_at")?,
        started_at: row.try_get("started_at")?,
        finished_at: row.try_get("finished_at")?,
        status: parse_status(row.try_get("status")?)?,
        node_id: row.try_get("node_id")?,
        ticks_collapsed: row.try_get("ticks_collapsed")?,
        error: row.try_get("error")?,
        attempt: row.try_get("attempt")?,
        trigger: parse_trigger(row.try_get("trigger")?)?,
        triggered_by: row.try_get("triggered_by")?,
        cancel_requested_at: row.try_get("cancel_requested_at")?,
        cancel_requested_by: row.try_get("cancel_requested_by")?,
        shard_index: u32::try_from(row.try_get::<i32, _>("shard_index")?).unwrap_or(0),
        shard_total: u32::try_from(row.try_get::<i32, _>("shard_total")?).unwrap_or(1),
    })
}

fn task_state(row: &sqlx::postgres::PgRow) -> Result<TaskState, sqlx::Error> {
    let last_status: Option<String> = row.try_get("last_status")?;
    Ok(TaskState {
        name: row.try_get("name")?,
        cron: row.try_get("cron")?,
        timezone: row.try_get("timezone")?,
        calendar: row.try_get("calendar")?,
        enabled: row.try_get("enabled")?,
        next_run_at: row.try_get("next_run_at")?,
        lock_owner: row.try_get("lock_owner")?,
        lock_expires_at: row.try_get("lock_expires_at")?,
        last_run_at: row.try_get("last_run_at")?,
        last_finished_at: row.try_get("last_finished_at")?,
        last_status: last_status.as_deref().map(parse_status).transpose()?,
        last_error: row.try_get("last_error")?,
        consecutive_failures: row.try_get("consecutive_failures")?,
        pause: pause_of(row)?,
        retry_at: row.try_get("retry_at")?,
        manual_at: row.try_get("manual_at")?,
        missed_since: row.try_get("missed_since")?,
        orphaned_since: row.try_get("orphaned_since")?,
        disabled_at: row.try_get("disabled_at")?,
        shards: u32::try_from(row.try_get::<i32, _>("shards")?).unwrap_or(1),
        broadcast: row.try_get::<Option<String>, _>("node_pin")?.is_some(),
    })
}

/// Records an audit entry on `conn`.
async fn insert_audit(conn: &mut sqlx::PgConnection, a: &AuditEntry) -> Result<(), sqlx::Error> {
    sqlx::query(query!("audit_insert"))
        .bind(&a.actor)
        .bind(&a.action)
        .bind(&a.task)
        .bind(&a.detail)
        .bind(&a.source)
        .execute(conn)
        .await
        .map(drop)
}

store_fns!(PgStore);

fn describe(store: &PgStore) -> String {
    store.description.to_string()
}

async fn migrate(store: &PgStore) -> StoreResult<()> {
    let mut conn = store.acquire("migrate").await?;
    super::migrate::run(&mut conn, &store.schema, store.transaction_begin()).await
}

async fn listener(store: &PgStore) -> StoreResult<Box<dyn ChangeListener>> {
    Ok(store.change_listener())
}

async fn notify(store: &PgStore) -> StoreResult<()> {
    timed!(store, "notify", |conn| {
        sqlx::query(query!("notify"))
            .bind(&store.channel)
            .bind("request")
            .execute(conn)
            .await
            .map(drop)
    })
}
