//! [`Store`] on PostgreSQL: each operation is one of the `queries/*.sql`, run on a connection
//! acquired and used within the store's timeouts (see the module docs of `postgres`). The trait
//! implementation only delegates, one file per concern.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::pool::PoolConnection;
use sqlx::{Postgres, Row};

use super::{PgStore, classify};
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

/// Runs `$body` (an expression using `$conn: &mut PgConnection`) on a pooled connection within
/// the operation timeout; on timeout or a broken connection, or if the operation is dropped
/// half-way, the connection is closed instead of returned to the pool.
macro_rules! timed {
    ($store:ident, $op:literal, |$conn:ident| $body:expr) => {{
        let mut guard = crate::store::in_use::InUse::new($store.acquire($op).await?);
        let result = {
            let $conn: &mut sqlx::PgConnection = &mut guard.conn;
            tokio::time::timeout($store.op_timeout, async { $body }).await
        };
        $store.settle($op, guard.done(), result)
    }};
}

mod claim;
mod config;
mod history;
mod operator;
mod outbox;

impl PgStore {
    async fn acquire(&self, operation: &'static str) -> StoreResult<PoolConnection<Postgres>> {
        // The pool has its own acquire timeout; this one also covers a connect that hangs.
        match tokio::time::timeout(
            self.acquire_timeout + Duration::from_secs(1),
            self.pool.acquire(),
        )
        .await
        {
            Ok(Ok(conn)) => Ok(conn),
            Ok(Err(e)) => Err(classify(operation, e)),
            Err(_) => Err(StoreError::Timeout {
                operation,
                timeout: self.acquire_timeout,
            }),
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
                if matches!(e, sqlx::Error::Io(_) | sqlx::Error::Protocol(_)) {
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

/// Milliseconds of a duration as the `int8` the queries multiply by `interval '1 millisecond'`.
fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
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
    })
}

fn task_state(row: &sqlx::postgres::PgRow) -> Result<TaskState, sqlx::Error> {
    let last_status: Option<String> = row.try_get("last_status")?;
    Ok(TaskState {
        name: row.try_get("name")?,
        cron: row.try_get("cron")?,
        timezone: row.try_get("timezone")?,
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
    })
}

/// Parallel arrays for skips_insert.
#[derive(Default)]
struct SkipColumns {
    names: Vec<String>,
    reasons: Vec<&'static str>,
    first: Vec<DateTime<Utc>>,
    last: Vec<DateTime<Utc>>,
    ticks: Vec<i64>,
    exact: Vec<bool>,
    run_ids: Vec<Option<i64>>,
}

impl SkipColumns {
    fn collect<'a>(skips: impl Iterator<Item = &'a SkipRecord>) -> Self {
        let mut c = Self::default();
        for s in skips {
            c.names.push(s.task_name.clone());
            c.reasons.push(s.reason.as_str());
            c.first.push(s.first_tick);
            c.last.push(s.last_tick);
            c.ticks.push(s.ticks);
            c.exact.push(s.exact);
            c.run_ids.push(s.run_id);
        }
        c
    }

    fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// Inserts the records on `conn` (nothing when there are none).
    async fn insert(&self, conn: &mut sqlx::PgConnection) -> Result<(), sqlx::Error> {
        if self.is_empty() {
            return Ok(());
        }
        sqlx::query(query!("skips_insert"))
            .bind(&self.names)
            .bind(&self.reasons)
            .bind(&self.first)
            .bind(&self.last)
            .bind(&self.ticks)
            .bind(&self.exact)
            .bind(&self.run_ids)
            .execute(conn)
            .await
            .map(drop)
    }
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

#[async_trait]
impl Store for PgStore {
    fn describe(&self) -> String {
        self.description.clone()
    }

    async fn migrate(&self) -> StoreResult<()> {
        let mut conn = self.acquire("migrate").await?;
        super::migrate::run(&mut conn, &self.schema).await
    }

    async fn register_node(&self, node: &NodeInfo) -> StoreResult<()> {
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
        Ok(Box::new(super::listener::PgChangeListener::new(
            self.pool.clone(),
            self.channel.clone(),
            self.op_timeout,
        )))
    }

    async fn notify(&self) -> StoreResult<()> {
        timed!(self, "notify", |conn| {
            sqlx::query(query!("notify"))
                .bind(&self.channel)
                .bind("request")
                .execute(conn)
                .await
                .map(drop)
        })
    }
}
