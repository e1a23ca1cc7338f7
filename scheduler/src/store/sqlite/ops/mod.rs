//! [`Store`] on SQLite: each operation runs the `queries/*.sql` it needs on one pooled
//! connection, writes in one `BEGIN IMMEDIATE` transaction, within the operation timeout (see
//! the module docs of `sqlite`). SQLite has no array parameters, so a batch is one statement per
//! item inside the operation's transaction: still one commit, and statements are prepared once
//! and cached per connection. The trait implementation only delegates, one file per concern (as
//! the PostgreSQL store's).

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::pool::PoolConnection;
use sqlx::sqlite::SqliteRow;
use sqlx::{Row, Sqlite, SqliteConnection};
use tokio::time::Instant;
use uuid::Uuid;
use uuid::fmt::Hyphenated;

use super::listener::SqliteChangeListener;
use super::{Inner, MIGRATION_TIMEOUT, SqliteStore, classify, migrate};
use crate::store::{
    AuditEntry, ChangeListener, ClaimOutcome, ClaimPolicy, ClaimRequest, ConfigPlan, ConfigPlanner,
    ConfigState, Delivery, DeliveryRecord, FinishResult, Heartbeat, LockKey, LogChunk, NewEvent,
    NodeInfo, NodeRecord, OutboxRow, OverdueTask, Pause, Recovery, ResumePlanner, RunFinish,
    RunQuery, RunRecord, RunRequest, RunStatus, SkipReason, SkipRecord, Store, StoreError,
    StoreResult, TaskRow, TaskState, Trigger, WakeInfo,
};

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
            let $now: chrono::DateTime<chrono::Utc> = chrono::Utc::now();
            Ok::<_, sqlx::Error>($body)
        })
        .await;
        crate::store::sqlite::ops::settle($op, guard.done(), result, limit)
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
            let $now: chrono::DateTime<chrono::Utc> = chrono::Utc::now();
            let value = $body;
            $tx.commit().await?;
            Ok::<_, sqlx::Error>(value)
        })
        .await;
        crate::store::sqlite::ops::settle($op, guard.done(), result, limit)
    }};
}

mod claim;
mod config;
mod history;
mod operator;
mod outbox;

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

fn time(us: i64) -> Result<DateTime<Utc>, sqlx::Error> {
    DateTime::from_timestamp_micros(us)
        .ok_or_else(|| sqlx::Error::Decode(format!("timestamp {us} µs is out of range").into()))
}

fn time_at(row: &SqliteRow, column: &str) -> Result<DateTime<Utc>, sqlx::Error> {
    time(row.try_get(column)?)
}

fn time_opt(row: &SqliteRow, column: &str) -> Result<Option<DateTime<Utc>>, sqlx::Error> {
    row.try_get::<Option<i64>, _>(column)?.map(time).transpose()
}

fn token(t: Uuid) -> Hyphenated {
    t.hyphenated()
}

fn token_at(row: &SqliteRow, column: &str) -> Result<Uuid, sqlx::Error> {
    Ok(row.try_get::<Hyphenated, _>(column)?.into_uuid())
}

/// A list of names as the JSON array the queries read with `json_each`.
fn names_json(names: &[String]) -> String {
    serde_json::to_string(names).expect("strings serialize")
}

/// A limit as SQLite binds it (a `u32` is never the negative LIMIT SQLite reads as none).
fn limit_of(n: u32) -> i64 {
    i64::from(n)
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
fn pause_of(row: &SqliteRow) -> Result<Option<Pause>, sqlx::Error> {
    Ok(match time_opt(row, "paused_at")? {
        Some(at) => Some(Pause::new(
            at,
            row.try_get::<String, _>("paused_by")?,
            row.try_get::<String, _>("pause_reason")?,
            time_opt(row, "pause_until")?,
        )),
        None => None,
    })
}

fn run_record(row: &SqliteRow) -> Result<RunRecord, sqlx::Error> {
    Ok(RunRecord {
        id: row.try_get("id")?,
        task_name: row.try_get("task_name")?,
        scheduled_at: time_at(row, "scheduled_at")?,
        started_at: time_at(row, "started_at")?,
        finished_at: time_opt(row, "finished_at")?,
        status: parse_status(row.try_get("status")?)?,
        node_id: row.try_get("node_id")?,
        ticks_collapsed: row.try_get("ticks_collapsed")?,
        error: row.try_get("error")?,
        attempt: row.try_get("attempt")?,
        trigger: parse_trigger(row.try_get("trigger")?)?,
        triggered_by: row.try_get("triggered_by")?,
    })
}

fn task_state(row: &SqliteRow) -> Result<TaskState, sqlx::Error> {
    let last_status: Option<String> = row.try_get("last_status")?;
    Ok(TaskState {
        name: row.try_get("name")?,
        cron: row.try_get("cron")?,
        timezone: row.try_get("timezone")?,
        enabled: row.try_get("enabled")?,
        next_run_at: time_opt(row, "next_run_at")?,
        lock_owner: row.try_get("lock_owner")?,
        lock_expires_at: time_opt(row, "lock_expires_at")?,
        last_run_at: time_opt(row, "last_run_at")?,
        last_finished_at: time_opt(row, "last_finished_at")?,
        last_status: last_status.as_deref().map(parse_status).transpose()?,
        last_error: row.try_get("last_error")?,
        consecutive_failures: row.try_get("consecutive_failures")?,
        pause: pause_of(row)?,
        retry_at: time_opt(row, "retry_at")?,
        manual_at: time_opt(row, "manual_at")?,
        missed_since: time_opt(row, "missed_since")?,
        orphaned_since: time_opt(row, "orphaned_since")?,
        disabled_at: time_opt(row, "disabled_at")?,
    })
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

#[async_trait]
impl Store for SqliteStore {
    fn describe(&self) -> String {
        self.inner.description.clone()
    }

    async fn migrate(&self) -> StoreResult<()> {
        self.refuse_operator("migrate the database")?;
        let path = self.inner.path.clone();
        let applied = write_tx!(self, "migrate", limit = MIGRATION_TIMEOUT, |tx, now| {
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

    async fn register_node(&self, node: &NodeInfo) -> StoreResult<()> {
        self.refuse_operator("register a node")?;
        self.register_node_impl(node).await
    }

    async fn heartbeat(&self, node_id: &str, silent_after: Duration) -> StoreResult<Heartbeat> {
        self.heartbeat_impl(node_id, silent_after).await
    }

    async fn deregister_node(&self, node_id: &str) -> StoreResult<()> {
        self.deregister_node_impl(node_id).await
    }

    async fn nodes(&self) -> StoreResult<Vec<NodeRecord>> {
        self.nodes_impl().await
    }

    async fn next_wake(&self, tasks: &[String]) -> StoreResult<WakeInfo> {
        self.next_wake_impl(tasks).await
    }

    async fn claim(
        &self,
        request: ClaimRequest<'_>,
        policy: &dyn ClaimPolicy,
    ) -> StoreResult<ClaimOutcome> {
        self.claim_impl(request, policy).await
    }

    async fn renew_locks(
        &self,
        node_id: &str,
        held: &[(LockKey, Duration)],
    ) -> StoreResult<Vec<LockKey>> {
        self.renew_locks_impl(node_id, held).await
    }

    async fn finish_runs(&self, finishes: &[RunFinish]) -> StoreResult<Vec<FinishResult>> {
        self.finish_runs_impl(finishes).await
    }

    async fn reschedule(&self, next_runs: &[(String, DateTime<Utc>)]) -> StoreResult<Vec<String>> {
        self.reschedule_impl(next_runs).await
    }

    async fn record_skips(&self, skips: &[SkipRecord]) -> StoreResult<()> {
        self.record_skips_impl(skips).await
    }

    async fn request_run(
        &self,
        task: &str,
        by: &str,
        audit: &AuditEntry,
    ) -> StoreResult<RunRequest> {
        self.request_run_impl(task, by, audit).await
    }

    async fn overdue_tasks(&self, late_by: Duration, limit: u32) -> StoreResult<Vec<OverdueTask>> {
        self.overdue_tasks_impl(late_by, limit).await
    }

    async fn open_missed(&self, incidents: &[(String, DateTime<Utc>)]) -> StoreResult<Vec<String>> {
        self.open_missed_impl(incidents).await
    }

    async fn pause_task(&self, task: &str, pause: &Pause, audit: &AuditEntry) -> StoreResult<bool> {
        self.pause_task_impl(task, pause, audit).await
    }

    async fn resume_task(
        &self,
        task: &str,
        audit: &AuditEntry,
        planner: &ResumePlanner<'_>,
    ) -> StoreResult<Option<Pause>> {
        self.resume_task_impl(task, audit, planner).await
    }

    async fn audit_log(&self, limit: u32, before_id: Option<i64>) -> StoreResult<Vec<AuditEntry>> {
        self.audit_log_impl(limit, before_id).await
    }

    async fn runs(&self, query: &RunQuery) -> StoreResult<Vec<RunRecord>> {
        self.runs_impl(query).await
    }

    async fn run(&self, run_id: i64) -> StoreResult<Option<RunRecord>> {
        self.run_impl(run_id).await
    }

    async fn recent_runs(
        &self,
        task_name: Option<&str>,
        limit: i64,
    ) -> StoreResult<Vec<RunRecord>> {
        self.recent_runs_impl(task_name, limit).await
    }

    async fn skips(&self, task_name: &str, since: DateTime<Utc>) -> StoreResult<Vec<SkipRecord>> {
        self.skips_impl(task_name, since).await
    }

    async fn latest_runs_per_task(
        &self,
        tasks: &[String],
        per_task: u32,
        since: DateTime<Utc>,
    ) -> StoreResult<Vec<RunRecord>> {
        self.latest_runs_per_task_impl(tasks, per_task, since).await
    }

    async fn skips_since(&self, since: DateTime<Utc>, limit: u32) -> StoreResult<Vec<SkipRecord>> {
        self.skips_since_impl(since, limit).await
    }

    async fn append_run_logs(&self, chunks: &[LogChunk]) -> StoreResult<()> {
        self.append_run_logs_impl(chunks).await
    }

    async fn run_log(&self, run_id: i64) -> StoreResult<Vec<LogChunk>> {
        self.run_log_impl(run_id).await
    }

    async fn prune_history(&self, retention: Duration, batch: u32) -> StoreResult<u64> {
        self.prune_history_impl(retention, batch).await
    }

    async fn load_tasks(&self) -> StoreResult<(DateTime<Utc>, Vec<TaskRow>)> {
        self.load_tasks_impl().await
    }

    async fn task_states(&self, task: Option<&str>) -> StoreResult<Vec<TaskState>> {
        self.task_states_impl(task).await
    }

    async fn config_state(&self) -> StoreResult<Option<ConfigState>> {
        self.config_state_impl().await
    }

    async fn apply_config(&self, planner: &ConfigPlanner<'_>) -> StoreResult<ConfigPlan> {
        self.apply_config_impl(planner).await
    }

    async fn enqueue_events(&self, events: &[NewEvent]) -> StoreResult<()> {
        self.enqueue_events_impl(events).await
    }

    async fn claim_outbox(
        &self,
        node_id: &str,
        limit: u32,
        lease: Duration,
    ) -> StoreResult<Vec<OutboxRow>> {
        self.claim_outbox_impl(node_id, limit, lease).await
    }

    async fn record_deliveries(&self, deliveries: &[Delivery]) -> StoreResult<()> {
        self.record_deliveries_impl(deliveries).await
    }

    async fn deliveries(&self, limit: u32) -> StoreResult<Vec<DeliveryRecord>> {
        self.deliveries_impl(limit).await
    }

    async fn webhook_disabled(&self, url_digest: &str) -> StoreResult<Option<String>> {
        self.webhook_disabled_impl(url_digest).await
    }

    async fn disable_webhook(&self, url_digest: &str, reason: &str) -> StoreResult<()> {
        self.disable_webhook_impl(url_digest, reason).await
    }

    async fn listener(&self) -> StoreResult<Box<dyn ChangeListener>> {
        Ok(Box::new(SqliteChangeListener::new(
            self.inner.changes.subscribe(),
            std::sync::Arc::downgrade(&self.inner),
        )))
    }

    async fn notify(&self) -> StoreResult<()> {
        // Listeners in this process wake now; one in another (a node beside this operator
        // store) sees the commit through `PRAGMA data_version`.
        self.inner.wake();
        Ok(())
    }
}
