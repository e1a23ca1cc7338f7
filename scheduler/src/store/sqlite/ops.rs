//! [`Store`] on SQLite: each operation runs the `queries/*.sql` it needs on one pooled
//! connection, writes in one `BEGIN IMMEDIATE` transaction, within the operation timeout (see
//! the module docs of `sqlite`). SQLite has no array parameters, so a batch is one statement per
//! item inside the operation's transaction: still one commit, and statements are prepared once
//! and cached per connection.

use std::collections::HashSet;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::pool::PoolConnection;
use sqlx::sqlite::SqliteRow;
use sqlx::{Connection, Row, Sqlite, SqliteConnection};
use tokio::time::Instant;
use uuid::Uuid;
use uuid::fmt::Hyphenated;

use super::listener::SqliteChangeListener;
use super::{Inner, MIGRATION_TIMEOUT, SqliteStore, classify, migrate};
use crate::store::{
    ChangeListener, ClaimOutcome, ClaimPolicy, ClaimRequest, ClaimedRun, ConfigPlan, ConfigPlanner,
    ConfigSnapshot, ConfigState, DueDecision, DueTask, ExpiredLock, FinishResult, Heartbeat,
    LockKey, LockedRun, NodeInfo, Recovery, RescueDecision, RescuedLock, RunFinish, RunRecord,
    RunStatus, SkipReason, SkipRecord, Store, StoreError, StoreResult, TaskChange, TaskRow,
    WakeInfo,
};

macro_rules! query {
    ($file:literal) => {
        include_str!(concat!("queries/", $file, ".sql"))
    };
}

/// The most expired locks one claim looks at (as on PostgreSQL).
const MAX_EXPIRED_PER_CLAIM: i64 = 1_000;

/// Runs `$body` (an expression using `$conn: &mut SqliteConnection` and the operation's clock
/// `$now`, evaluating to the operation's value) on a pooled connection within the operation
/// timeout. On timeout the connection is closed instead of returned to the pool.
macro_rules! read {
    ($store:ident, $op:literal, |$conn:ident, $now:ident| $body:expr) => {{
        let inner: &Inner = &$store.inner;
        let limit = inner.op_timeout;
        let deadline = Instant::now() + limit;
        let mut guard = inner.acquire($op, deadline, limit).await?;
        let result = tokio::time::timeout_at(deadline, async {
            let $conn: &mut SqliteConnection = &mut guard;
            let $now: DateTime<Utc> = Utc::now();
            Ok::<_, sqlx::Error>($body)
        })
        .await;
        settle($op, &mut guard, result, limit)
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
        let inner: &Inner = &$store.inner;
        let limit: Duration = $limit;
        let deadline = Instant::now() + limit;
        let _turn = inner.writer_turn($op, deadline, limit).await?;
        let mut guard = inner.acquire($op, deadline, limit).await?;
        let result = tokio::time::timeout_at(deadline, async {
            let conn: &mut SqliteConnection = &mut guard;
            let mut $tx = conn.begin_with("BEGIN IMMEDIATE").await?;
            let $now: DateTime<Utc> = Utc::now();
            let value = $body;
            $tx.commit().await?;
            Ok::<_, sqlx::Error>(value)
        })
        .await;
        settle($op, &mut guard, result, limit)
    }};
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

    /// Wakes every listener (after a commit that released a lock or applied a config).
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

fn parse_status(s: &str) -> Result<RunStatus, sqlx::Error> {
    RunStatus::parse(s)
        .ok_or_else(|| sqlx::Error::Decode(format!("unknown run status `{s}`").into()))
}

fn parse_recovery(s: &str) -> Recovery {
    // A value this binary does not know is treated as the safe default of older binaries.
    s.parse().unwrap_or_default()
}

fn task_row(row: &SqliteRow) -> Result<TaskRow, sqlx::Error> {
    let mut task = TaskRow::new(
        row.try_get("name")?,
        row.try_get("cron")?,
        row.try_get("timezone")?,
        row.try_get("enabled")?,
    );
    task.next_run_at = time_opt(row, "next_run_at")?;
    task.last_scheduled_at = time_opt(row, "last_scheduled_at")?;
    task.orphaned_since = time_opt(row, "orphaned_since")?;
    Ok(task)
}

fn expired_lock(row: &SqliteRow) -> Result<ExpiredLock, sqlx::Error> {
    let run = match row.try_get::<Option<i64>, _>("run_id")? {
        Some(run_id) => Some(LockedRun {
            run_id,
            scheduled_at: time_at(row, "run_scheduled_at")?,
            recovery: parse_recovery(row.try_get("run_recovery")?),
        }),
        None => None,
    };
    Ok(ExpiredLock {
        key: LockKey::new(
            row.try_get::<String, _>("name")?,
            token_at(row, "lock_token")?,
        ),
        owner: row.try_get("lock_owner")?,
        expired_at: time_at(row, "lock_expires_at")?,
        run,
    })
}

async fn insert_skip(
    conn: &mut SqliteConnection,
    skip: &SkipRecord,
    now: DateTime<Utc>,
) -> Result<(), sqlx::Error> {
    sqlx::query(query!("skips_insert"))
        .bind(&skip.task_name)
        .bind(skip.reason.as_str())
        .bind(micros(skip.first_tick))
        .bind(micros(skip.last_tick))
        .bind(skip.ticks)
        .bind(skip.exact)
        .bind(skip.run_id)
        .bind(micros(now))
        .execute(conn)
        .await
        .map(|_| ())
}

#[async_trait]
impl Store for SqliteStore {
    fn describe(&self) -> String {
        self.inner.description.clone()
    }

    async fn migrate(&self) -> StoreResult<()> {
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
        let tasks = names_json(&node.tasks);
        write_tx!(self, "register_node", |tx, now| {
            sqlx::query(query!("register_node"))
                .bind(&node.node_id)
                .bind(&node.hostname)
                .bind(i32::try_from(node.pid).unwrap_or(i32::MAX))
                .bind(&node.version)
                .bind(&tasks)
                .bind(micros(now))
                .execute(&mut *tx)
                .await?;
        })
    }

    async fn heartbeat(&self, node_id: &str, silent_after: Duration) -> StoreResult<Heartbeat> {
        write_tx!(self, "heartbeat", |tx, now| {
            let registered = sqlx::query(query!("heartbeat"))
                .bind(node_id)
                .bind(micros(now))
                .execute(&mut *tx)
                .await?
                .rows_affected()
                > 0;
            let silent = sqlx::query_scalar(query!("silent_nodes"))
                .bind(node_id)
                .bind(earlier(now, silent_after))
                .fetch_all(&mut *tx)
                .await?;
            Heartbeat { registered, silent }
        })
    }

    async fn deregister_node(&self, node_id: &str) -> StoreResult<()> {
        write_tx!(self, "deregister_node", |tx, now| {
            sqlx::query(query!("deregister_node"))
                .bind(node_id)
                .bind(micros(now))
                .execute(&mut *tx)
                .await?;
        })
    }

    async fn next_wake(&self, tasks: &[String]) -> StoreResult<WakeInfo> {
        let names = names_json(tasks);
        read!(self, "next_wake", |conn, now| {
            let row = sqlx::query(query!("next_wake"))
                .bind(&names)
                .fetch_one(conn)
                .await?;
            WakeInfo {
                db_now: now,
                due_at: time_opt(&row, "due_at")?,
                expiry_at: time_opt(&row, "expiry_at")?,
            }
        })
    }

    async fn claim(
        &self,
        request: ClaimRequest<'_>,
        policy: &dyn ClaimPolicy,
    ) -> StoreResult<ClaimOutcome> {
        let names = names_json(request.tasks);
        let outcome = write_tx!(self, "claim", |tx, now| {
            let mut outcome = ClaimOutcome::default();

            let expired = sqlx::query(query!("claim_expired"))
                .bind(micros(now))
                .bind(MAX_EXPIRED_PER_CLAIM)
                .fetch_all(&mut *tx)
                .await?
                .iter()
                .map(expired_lock)
                .collect::<Result<Vec<_>, _>>()?;
            for lock in expired {
                let RescueDecision::Release {
                    run_end,
                    rerun_at,
                    failures,
                } = policy.rescue(&lock, now)
                else {
                    outcome.waiting.push(lock);
                    continue;
                };
                // A run is ended only when the decision says how (as on PostgreSQL).
                let run_id = run_end.as_ref().and(lock.run.as_ref()).map(|r| r.run_id);
                let status = run_end.as_ref().map(|e| e.status.as_str());
                let error = run_end.as_ref().and_then(|e| e.error.as_deref());
                // Fenced by token and expiry like PostgreSQL's release_locks; in this transaction
                // nobody can have renewed the lock since it was read, so this always holds.
                let released = sqlx::query(query!("release_lock"))
                    .bind(&lock.key.task_name)
                    .bind(token(lock.key.token))
                    .bind(run_id)
                    .bind(status)
                    .bind(rerun_at.map(micros))
                    .bind(error)
                    .bind(failures.as_str())
                    .bind(micros(now))
                    .fetch_optional(&mut *tx)
                    .await?
                    .is_some();
                if !released {
                    continue;
                }
                if let (Some(run_id), Some(status)) = (run_id, status) {
                    sqlx::query(query!("release_run_end"))
                        .bind(run_id)
                        .bind(token(lock.key.token))
                        .bind(status)
                        .bind(error)
                        .bind(micros(now))
                        .execute(&mut *tx)
                        .await?;
                }
                outcome.rescued.push(RescuedLock {
                    task_name: lock.key.task_name.clone(),
                    previous_owner: lock.owner.clone(),
                    run_id: lock.run.as_ref().map(|r| r.run_id),
                    run_scheduled_at: lock.run.as_ref().map(|r| r.scheduled_at),
                    run_end,
                    rerun_at,
                });
            }

            if request.limit > 0 {
                let due = sqlx::query(query!("claim_select"))
                    .bind(micros(now))
                    .bind(&names)
                    .bind(i64::try_from(request.limit).unwrap_or(i64::MAX))
                    .fetch_all(&mut *tx)
                    .await?
                    .iter()
                    .map(|row| {
                        Ok(DueTask {
                            name: row.try_get("name")?,
                            cron: row.try_get("cron")?,
                            timezone: row.try_get("timezone")?,
                            next_run_at: time_at(row, "next_run_at")?,
                            last_finished_at: time_opt(row, "last_finished_at")?,
                        })
                    })
                    .collect::<Result<Vec<_>, sqlx::Error>>()?;
                let expires_at = later(now, request.lock_lifetime);
                for task in due {
                    let plan = match policy.plan(&task, now) {
                        DueDecision::Run(plan) => plan,
                        DueDecision::Leave => {
                            outcome.left.push(task.name);
                            continue;
                        }
                    };
                    let lock_token = Uuid::new_v4();
                    let locked = sqlx::query(query!("claim_lock"))
                        .bind(&task.name)
                        .bind(request.node_id)
                        .bind(token(lock_token))
                        .bind(expires_at)
                        .bind(plan.next_run_at.map(micros))
                        .bind(micros(plan.scheduled_at))
                        .bind(micros(now))
                        .execute(&mut *tx)
                        .await?
                        .rows_affected()
                        > 0;
                    if !locked {
                        continue;
                    }
                    let run_id: i64 = sqlx::query_scalar(query!("claim_run"))
                        .bind(&task.name)
                        .bind(micros(plan.scheduled_at))
                        .bind(micros(now))
                        .bind(request.node_id)
                        .bind(token(lock_token))
                        .bind(plan.recovery.as_str())
                        .fetch_one(&mut *tx)
                        .await?;
                    outcome.claimed.push(ClaimedRun {
                        run_id,
                        task_name: task.name,
                        lock_token,
                        scheduled_at: plan.scheduled_at,
                        claimed_at: now,
                        previous_finished_at: task.last_finished_at,
                    });
                }
            }
            outcome
        })?;
        if !outcome.rescued.is_empty() {
            self.inner.wake();
        }
        Ok(outcome)
    }

    async fn renew_locks(
        &self,
        node_id: &str,
        held: &[LockKey],
        lock_lifetime: Duration,
    ) -> StoreResult<Vec<LockKey>> {
        if held.is_empty() {
            return Ok(Vec::new());
        }
        write_tx!(self, "renew_locks", |tx, now| {
            let expires_at = later(now, lock_lifetime);
            let mut seen = HashSet::new();
            let mut renewed = Vec::new();
            for key in held {
                if !seen.insert(key) {
                    continue;
                }
                if let Some(row) = sqlx::query(query!("renew_lock"))
                    .bind(&key.task_name)
                    .bind(node_id)
                    .bind(token(key.token))
                    .bind(expires_at)
                    .fetch_optional(&mut *tx)
                    .await?
                {
                    renewed.push(LockKey::new(
                        row.try_get::<String, _>("name")?,
                        token_at(&row, "lock_token")?,
                    ));
                }
            }
            renewed
        })
    }

    async fn finish_runs(&self, finishes: &[RunFinish]) -> StoreResult<Vec<FinishResult>> {
        if finishes.is_empty() {
            return Ok(Vec::new());
        }
        let results = write_tx!(self, "finish_runs", |tx, now| {
            let mut results = Vec::with_capacity(finishes.len());
            for f in finishes {
                let collapsed: i64 = f.skips.iter().map(|s| s.ticks).sum();
                // PostgreSQL stores the count as int4; the same bound here.
                let collapsed = collapsed.clamp(0, i64::from(i32::MAX));
                sqlx::query(query!("finish_run"))
                    .bind(f.run_id)
                    .bind(token(f.lock.token))
                    .bind(f.end.status.as_str())
                    .bind(f.end.error.as_deref())
                    .bind(collapsed)
                    .bind(micros(now))
                    .execute(&mut *tx)
                    .await?;
                let lock_held = sqlx::query(query!("finish_release"))
                    .bind(&f.lock.task_name)
                    .bind(token(f.lock.token))
                    .bind(f.hand_over_at.map(micros))
                    .bind(f.end.status.as_str())
                    .bind(f.end.error.as_deref())
                    .bind(f.failures.as_str())
                    .bind(micros(now))
                    .execute(&mut *tx)
                    .await?
                    .rows_affected()
                    > 0;
                results.push(FinishResult {
                    run_id: f.run_id,
                    lock_held,
                });
            }
            for skip in finishes.iter().flat_map(|f| f.skips.iter()) {
                insert_skip(&mut tx, skip, now).await?;
            }
            results
        })?;
        if results.iter().any(|r| r.lock_held) {
            self.inner.wake();
        }
        Ok(results)
    }

    async fn reschedule(&self, next_runs: &[(String, DateTime<Utc>)]) -> StoreResult<Vec<String>> {
        if next_runs.is_empty() {
            return Ok(Vec::new());
        }
        write_tx!(self, "reschedule", |tx, now| {
            let mut changed = Vec::new();
            for (name, next) in next_runs {
                let row: Option<String> = sqlx::query_scalar(query!("tasks_reschedule"))
                    .bind(name)
                    .bind(micros(*next))
                    .bind(micros(now))
                    .fetch_optional(&mut *tx)
                    .await?;
                changed.extend(row);
            }
            changed
        })
    }

    async fn record_skips(&self, skips: &[SkipRecord]) -> StoreResult<()> {
        if skips.is_empty() {
            return Ok(());
        }
        write_tx!(self, "record_skips", |tx, now| {
            for skip in skips {
                insert_skip(&mut tx, skip, now).await?;
            }
        })
    }

    async fn prune_history(&self, retention: Duration, batch: u32) -> StoreResult<u64> {
        let batch = i64::from(batch.max(1));
        let mut pruned = 0;
        for (op, sql) in [
            ("prune_runs", query!("prune_runs")),
            ("prune_skips", query!("prune_skips")),
        ] {
            loop {
                // One transaction per batch, so the write lock is never held for long.
                let deleted = write_tx!(self, "prune_history", |tx, now| {
                    sqlx::query(sql)
                        .bind(earlier(now, retention))
                        .bind(batch)
                        .execute(&mut *tx)
                        .await?
                        .rows_affected()
                })?;
                if op == "prune_runs" {
                    pruned += deleted;
                }
                if deleted < batch as u64 {
                    break;
                }
            }
        }
        write_tx!(self, "prune_history", |tx, now| {
            sqlx::query(query!("prune_nodes"))
                .bind(earlier(now, retention))
                .execute(&mut *tx)
                .await?;
        })?;
        Ok(pruned)
    }

    async fn load_tasks(&self) -> StoreResult<(DateTime<Utc>, Vec<TaskRow>)> {
        read!(self, "load_tasks", |conn, now| {
            let rows = sqlx::query(query!("load_tasks")).fetch_all(conn).await?;
            let tasks = rows.iter().map(task_row).collect::<Result<Vec<_>, _>>()?;
            (now, tasks)
        })
    }

    async fn config_state(&self) -> StoreResult<Option<ConfigState>> {
        read!(self, "config_state", |conn, _now| {
            let row = sqlx::query(query!("config_state"))
                .fetch_optional(conn)
                .await?;
            row.map(|row| config_state(&row)).transpose()?
        })
    }

    async fn apply_config(&self, planner: &ConfigPlanner<'_>) -> StoreResult<ConfigPlan> {
        let plan = write_tx!(self, "apply_config", |tx, now| {
            // The write lock is held from here on: no claim or other reconcile can interleave,
            // which is what PostgreSQL's config-state row lock and FOR UPDATE achieve.
            let applied = sqlx::query(query!("config_state"))
                .fetch_optional(&mut *tx)
                .await?
                .map(|row| config_state(&row))
                .transpose()?
                // A row with an empty digest records no document.
                .filter(|state| !state.digest.is_empty());
            let rows = sqlx::query(query!("load_tasks"))
                .fetch_all(&mut *tx)
                .await?
                .iter()
                .map(task_row)
                .collect::<Result<Vec<_>, _>>()?;
            let snapshot = ConfigSnapshot {
                db_now: now,
                applied,
                rows,
            };
            let plan = planner(&snapshot);
            let ConfigPlan::Apply { changes, state } = &plan else {
                // Nothing to write; the transaction rolls back.
                return Ok(plan);
            };
            // Creates, then updates, then orphan flags, as PostgreSQL's one statement per kind.
            for change in changes {
                if let TaskChange::Create {
                    name,
                    cron,
                    timezone,
                    enabled,
                    next_run_at,
                } = change
                {
                    sqlx::query(query!("tasks_create"))
                        .bind(name)
                        .bind(cron)
                        .bind(timezone)
                        .bind(enabled)
                        .bind(next_run_at.map(micros))
                        .bind(micros(now))
                        .execute(&mut *tx)
                        .await?;
                }
            }
            for change in changes {
                if let TaskChange::Update {
                    name,
                    cron,
                    timezone,
                    enabled,
                    next_run_at,
                } = change
                {
                    sqlx::query(query!("tasks_update"))
                        .bind(name)
                        .bind(cron)
                        .bind(timezone)
                        .bind(enabled)
                        .bind(next_run_at.map(micros))
                        .bind(micros(now))
                        .execute(&mut *tx)
                        .await?;
                }
            }
            for change in changes {
                if let TaskChange::Orphaned { name, orphaned } = change {
                    sqlx::query(query!("tasks_orphaned"))
                        .bind(name)
                        .bind(orphaned)
                        .bind(micros(now))
                        .execute(&mut *tx)
                        .await?;
                }
            }
            sqlx::query(query!("config_state_save"))
                .bind(state.version)
                .bind(&state.digest)
                .bind(&state.applied_by)
                .bind(micros(now))
                .execute(&mut *tx)
                .await?;
            plan
        })?;
        if matches!(plan, ConfigPlan::Apply { .. }) {
            self.inner.wake();
        }
        Ok(plan)
    }

    async fn recent_runs(
        &self,
        task_name: Option<&str>,
        limit: i64,
    ) -> StoreResult<Vec<RunRecord>> {
        if limit < 0 {
            // SQLite reads a negative LIMIT as none; PostgreSQL refuses it. Refuse it alike.
            return Err(StoreError::Rejected {
                operation: "recent_runs",
                source: "LIMIT must not be negative".into(),
            });
        }
        read!(self, "recent_runs", |conn, _now| {
            sqlx::query(query!("recent_runs"))
                .bind(task_name)
                .bind(limit)
                .fetch_all(conn)
                .await?
                .iter()
                .map(|row| {
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
                    })
                })
                .collect::<Result<Vec<_>, sqlx::Error>>()?
        })
    }

    async fn skips(&self, task_name: &str, since: DateTime<Utc>) -> StoreResult<Vec<SkipRecord>> {
        read!(self, "skips", |conn, _now| {
            sqlx::query(query!("skips_select"))
                .bind(task_name)
                .bind(micros(since))
                .fetch_all(conn)
                .await?
                .iter()
                .map(|row| {
                    let reason: String = row.try_get("reason")?;
                    let mut skip = SkipRecord::new(
                        row.try_get::<String, _>("task_name")?,
                        SkipReason::parse(&reason).ok_or_else(|| {
                            sqlx::Error::Decode(format!("unknown skip reason `{reason}`").into())
                        })?,
                        time_at(row, "first_tick")?,
                        time_at(row, "last_tick")?,
                        row.try_get("ticks")?,
                    );
                    skip.exact = row.try_get("exact")?;
                    skip.run_id = row.try_get("run_id")?;
                    Ok(skip)
                })
                .collect::<Result<Vec<_>, sqlx::Error>>()?
        })
    }

    async fn listener(&self) -> StoreResult<Box<dyn ChangeListener>> {
        Ok(Box::new(SqliteChangeListener::new(
            self.inner.changes.subscribe(),
        )))
    }
}

fn config_state(row: &SqliteRow) -> Result<ConfigState, sqlx::Error> {
    Ok(ConfigState::new(
        row.try_get("version")?,
        row.try_get::<String, _>("digest")?,
        row.try_get::<String, _>("applied_by")?,
    ))
}
