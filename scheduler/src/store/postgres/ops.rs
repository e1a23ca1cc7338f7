//! [`Store`] on PostgreSQL: each operation is one of the `queries/*.sql`, run on a connection
//! acquired and used within the store's timeouts (see the module docs of `postgres`).

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::pool::PoolConnection;
use sqlx::{Acquire, Postgres, Row};
use uuid::Uuid;

use super::{PgStore, classify, listener::PgChangeListener, migrate, millis};
use crate::store::{
    ChangeListener, ClaimOutcome, ClaimPolicy, ClaimRequest, ClaimedRun, ConfigPlan, ConfigPlanner,
    ConfigSnapshot, ConfigState, DueDecision, DueTask, ExpiredLock, FinishResult, Heartbeat,
    LockKey, LockedRun, NodeInfo, Recovery, RescueDecision, RescuedLock, RunEnd, RunFinish,
    RunRecord, RunStatus, SkipReason, SkipRecord, Store, StoreError, StoreResult, TaskChange,
    TaskRow, WakeInfo,
};

macro_rules! query {
    ($file:literal) => {
        include_str!(concat!("queries/", $file, ".sql"))
    };
}

/// The most expired locks one claim looks at.
const MAX_EXPIRED_PER_CLAIM: i64 = 1_000;

/// Runs `$body` (an expression using `$conn: &mut PgConnection`) on a pooled connection within
/// the operation timeout; on timeout or a broken connection, the connection is closed instead of
/// returned to the pool.
macro_rules! timed {
    ($store:ident, $op:literal, |$conn:ident| $body:expr) => {{
        let mut guard = $store.acquire($op).await?;
        let result = {
            let $conn: &mut sqlx::PgConnection = &mut guard;
            tokio::time::timeout($store.op_timeout, async { $body }).await
        };
        $store.settle($op, &mut guard, result)
    }};
}

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

fn parse_status(s: &str) -> Result<RunStatus, sqlx::Error> {
    RunStatus::parse(s)
        .ok_or_else(|| sqlx::Error::Decode(format!("unknown run status `{s}`").into()))
}

fn parse_recovery(s: &str) -> Recovery {
    // A value this binary does not know is treated as the safe default of older binaries.
    s.parse().unwrap_or_default()
}

fn task_row(row: &sqlx::postgres::PgRow) -> Result<TaskRow, sqlx::Error> {
    let mut task = TaskRow::new(
        row.try_get("name")?,
        row.try_get("cron")?,
        row.try_get("timezone")?,
        row.try_get("enabled")?,
    );
    task.next_run_at = row.try_get("next_run_at")?;
    task.last_scheduled_at = row.try_get("last_scheduled_at")?;
    task.orphaned_since = row.try_get("orphaned_since")?;
    Ok(task)
}

#[async_trait]
impl Store for PgStore {
    fn describe(&self) -> String {
        self.description.clone()
    }

    async fn migrate(&self) -> StoreResult<()> {
        let mut conn = self.acquire("migrate").await?;
        migrate::run(&mut conn, &self.schema).await
    }

    async fn register_node(&self, node: &NodeInfo) -> StoreResult<()> {
        timed!(self, "register_node", |conn| {
            sqlx::query(query!("register_node"))
                .bind(&node.node_id)
                .bind(&node.hostname)
                .bind(i32::try_from(node.pid).unwrap_or(i32::MAX))
                .bind(&node.version)
                .bind(&node.tasks)
                .execute(conn)
                .await
                .map(|_| ())
        })
    }

    async fn heartbeat(&self, node_id: &str, silent_after: Duration) -> StoreResult<Heartbeat> {
        timed!(self, "heartbeat", |conn| {
            let row = sqlx::query(query!("heartbeat"))
                .bind(node_id)
                .bind(millis(silent_after))
                .fetch_one(conn)
                .await?;
            Ok(Heartbeat {
                registered: row.try_get("registered")?,
                silent: row.try_get("silent")?,
            })
        })
    }

    async fn deregister_node(&self, node_id: &str) -> StoreResult<()> {
        timed!(self, "deregister_node", |conn| {
            sqlx::query(query!("deregister_node"))
                .bind(node_id)
                .execute(conn)
                .await
                .map(|_| ())
        })
    }

    async fn next_wake(&self, tasks: &[String]) -> StoreResult<WakeInfo> {
        timed!(self, "next_wake", |conn| {
            let row = sqlx::query(query!("next_wake"))
                .bind(tasks)
                .fetch_one(conn)
                .await?;
            Ok(WakeInfo {
                db_now: row.try_get("db_now")?,
                due_at: row.try_get("due_at")?,
                expiry_at: row.try_get("expiry_at")?,
            })
        })
    }

    async fn claim(
        &self,
        request: ClaimRequest<'_>,
        policy: &dyn ClaimPolicy,
    ) -> StoreResult<ClaimOutcome> {
        timed!(self, "claim", |conn| {
            let mut tx = conn.begin().await?;
            let mut outcome = ClaimOutcome::default();

            let expired = sqlx::query(query!("claim_expired"))
                .bind(MAX_EXPIRED_PER_CLAIM)
                .fetch_all(&mut *tx)
                .await?;
            let mut release = Release::default();
            for row in &expired {
                let db_now: DateTime<Utc> = row.try_get("db_now")?;
                let run_id: Option<i64> = row.try_get("run_id")?;
                let run = match run_id {
                    Some(run_id) => Some(LockedRun {
                        run_id,
                        scheduled_at: row.try_get("run_scheduled_at")?,
                        recovery: parse_recovery(row.try_get("run_recovery")?),
                    }),
                    None => None,
                };
                let lock = ExpiredLock {
                    key: LockKey::new(
                        row.try_get::<String, _>("name")?,
                        row.try_get("lock_token")?,
                    ),
                    owner: row.try_get("lock_owner")?,
                    expired_at: row.try_get("lock_expires_at")?,
                    run,
                };
                match policy.rescue(&lock, db_now) {
                    RescueDecision::Wait => outcome.waiting.push(lock),
                    RescueDecision::Release {
                        run_end,
                        rerun_at,
                        failures,
                    } => {
                        release.push(&lock, run_end.as_ref(), rerun_at, failures.as_str());
                        outcome.rescued.push(RescuedLock {
                            task_name: lock.key.task_name.clone(),
                            previous_owner: lock.owner.clone(),
                            run_id: lock.run.as_ref().map(|r| r.run_id),
                            run_scheduled_at: lock.run.as_ref().map(|r| r.scheduled_at),
                            run_end,
                            rerun_at,
                        });
                    }
                }
            }
            if !release.names.is_empty() {
                let released: Vec<String> = sqlx::query(query!("release_locks"))
                    .bind(&release.names)
                    .bind(&release.tokens)
                    .bind(&release.run_ids)
                    .bind(&release.statuses)
                    .bind(&release.errors)
                    .bind(&release.rerun_at)
                    .bind(&release.failures)
                    .fetch_all(&mut *tx)
                    .await?
                    .iter()
                    .map(|row| row.try_get("name"))
                    .collect::<Result<_, _>>()?;
                // A lock its owner renewed meanwhile was not released: nothing happened to it.
                outcome.rescued.retain(|r| released.contains(&r.task_name));
            }

            if request.limit > 0 {
                let due = sqlx::query(query!("claim_select"))
                    .bind(request.tasks)
                    .bind(i64::try_from(request.limit).unwrap_or(i64::MAX))
                    .fetch_all(&mut *tx)
                    .await?;
                let mut plan = Plan::default();
                let mut db_now = None;
                let mut previous = std::collections::HashMap::new();
                for row in &due {
                    let now: DateTime<Utc> = row.try_get("db_now")?;
                    db_now = Some(now);
                    let task = DueTask {
                        name: row.try_get("name")?,
                        cron: row.try_get("cron")?,
                        timezone: row.try_get("timezone")?,
                        next_run_at: row.try_get("next_run_at")?,
                        last_finished_at: row.try_get("last_finished_at")?,
                    };
                    match policy.plan(&task, now) {
                        DueDecision::Run(p) => {
                            previous.insert(task.name.clone(), task.last_finished_at);
                            plan.names.push(task.name);
                            plan.tokens.push(Uuid::new_v4());
                            plan.scheduled.push(p.scheduled_at);
                            plan.next.push(p.next_run_at);
                            plan.recovery.push(p.recovery.as_str());
                        }
                        DueDecision::Leave => outcome.left.push(task.name),
                    }
                }
                if !plan.names.is_empty() {
                    let claimed_at = db_now.expect("a row was planned");
                    outcome.claimed = sqlx::query(query!("claim_apply"))
                        .bind(request.node_id)
                        .bind(millis(request.lock_lifetime))
                        .bind(&plan.names)
                        .bind(&plan.tokens)
                        .bind(&plan.scheduled)
                        .bind(&plan.next)
                        .bind(&plan.recovery)
                        .fetch_all(&mut *tx)
                        .await?
                        .iter()
                        .map(|row| {
                            let task_name: String = row.try_get("task_name")?;
                            Ok(ClaimedRun {
                                run_id: row.try_get("id")?,
                                previous_finished_at: previous.get(&task_name).copied().flatten(),
                                task_name,
                                lock_token: row.try_get("lock_token")?,
                                scheduled_at: row.try_get("scheduled_at")?,
                                claimed_at,
                            })
                        })
                        .collect::<Result<_, sqlx::Error>>()?;
                }
            }
            tx.commit().await?;
            Ok(outcome)
        })
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
        let names: Vec<&str> = held.iter().map(|k| k.task_name.as_str()).collect();
        let tokens: Vec<Uuid> = held.iter().map(|k| k.token).collect();
        timed!(self, "renew_locks", |conn| {
            sqlx::query(query!("renew_locks"))
                .bind(node_id)
                .bind(millis(lock_lifetime))
                .bind(&names)
                .bind(&tokens)
                .fetch_all(conn)
                .await?
                .iter()
                .map(|row| {
                    Ok(LockKey::new(
                        row.try_get::<String, _>("name")?,
                        row.try_get("lock_token")?,
                    ))
                })
                .collect()
        })
    }

    async fn finish_runs(&self, finishes: &[RunFinish]) -> StoreResult<Vec<FinishResult>> {
        if finishes.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<i64> = finishes.iter().map(|f| f.run_id).collect();
        let names: Vec<&str> = finishes.iter().map(|f| f.lock.task_name.as_str()).collect();
        let tokens: Vec<Uuid> = finishes.iter().map(|f| f.lock.token).collect();
        let statuses: Vec<&str> = finishes.iter().map(|f| f.end.status.as_str()).collect();
        let errors: Vec<Option<&str>> = finishes.iter().map(|f| f.end.error.as_deref()).collect();
        let hand_over: Vec<Option<DateTime<Utc>>> =
            finishes.iter().map(|f| f.hand_over_at).collect();
        let failures: Vec<&str> = finishes.iter().map(|f| f.failures.as_str()).collect();
        let collapsed: Vec<i32> = finishes
            .iter()
            .map(|f| {
                let n: i64 = f.skips.iter().map(|s| s.ticks).sum();
                i32::try_from(n).unwrap_or(i32::MAX)
            })
            .collect();
        let skips = SkipColumns::collect(finishes.iter().flat_map(|f| f.skips.iter()));
        timed!(self, "finish_runs", |conn| {
            let mut tx = conn.begin().await?;
            let results = sqlx::query(query!("finish_runs"))
                .bind(&ids)
                .bind(&names)
                .bind(&tokens)
                .bind(&statuses)
                .bind(&errors)
                .bind(&hand_over)
                .bind(&failures)
                .bind(&collapsed)
                .bind(&self.channel)
                .fetch_all(&mut *tx)
                .await?
                .iter()
                .map(|row| {
                    Ok(FinishResult {
                        run_id: row.try_get("run_id")?,
                        lock_held: row.try_get("lock_held")?,
                    })
                })
                .collect::<Result<Vec<_>, sqlx::Error>>()?;
            if !skips.names.is_empty() {
                skips
                    .bind(sqlx::query(query!("skips_insert")))
                    .execute(&mut *tx)
                    .await?;
            }
            tx.commit().await?;
            Ok(results)
        })
    }

    async fn reschedule(&self, next_runs: &[(String, DateTime<Utc>)]) -> StoreResult<Vec<String>> {
        if next_runs.is_empty() {
            return Ok(Vec::new());
        }
        let (names, next): (Vec<&str>, Vec<DateTime<Utc>>) =
            next_runs.iter().map(|(n, t)| (n.as_str(), *t)).unzip();
        timed!(self, "reschedule", |conn| {
            sqlx::query(query!("tasks_reschedule"))
                .bind(&names)
                .bind(&next)
                .fetch_all(conn)
                .await?
                .iter()
                .map(|row| row.try_get("name"))
                .collect()
        })
    }

    async fn record_skips(&self, skips: &[SkipRecord]) -> StoreResult<()> {
        if skips.is_empty() {
            return Ok(());
        }
        let columns = SkipColumns::collect(skips.iter());
        timed!(self, "record_skips", |conn| {
            columns
                .bind(sqlx::query(query!("skips_insert")))
                .execute(conn)
                .await
                .map(|_| ())
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
                let deleted = timed!(self, "prune_history", |conn| {
                    sqlx::query(sql)
                        .bind(millis(retention))
                        .bind(batch)
                        .execute(conn)
                        .await
                        .map(|done| done.rows_affected())
                })?;
                if op == "prune_runs" {
                    pruned += deleted;
                }
                if deleted < batch as u64 {
                    break;
                }
            }
        }
        timed!(self, "prune_history", |conn| {
            sqlx::query(query!("prune_nodes"))
                .bind(millis(retention))
                .execute(conn)
                .await
                .map(|_| ())
        })?;
        Ok(pruned)
    }

    async fn load_tasks(&self) -> StoreResult<(DateTime<Utc>, Vec<TaskRow>)> {
        timed!(self, "load_tasks", |conn| {
            let rows = sqlx::query(query!("load_tasks"))
                .fetch_all(&mut *conn)
                .await?;
            let db_now = match rows.first() {
                Some(row) => row.try_get("db_now")?,
                None => sqlx::query(query!("db_now"))
                    .fetch_one(&mut *conn)
                    .await?
                    .try_get("db_now")?,
            };
            let tasks = rows.iter().map(task_row).collect::<Result<Vec<_>, _>>()?;
            Ok((db_now, tasks))
        })
    }

    async fn config_state(&self) -> StoreResult<Option<ConfigState>> {
        timed!(self, "config_state", |conn| {
            let row = sqlx::query(query!("config_state"))
                .fetch_optional(conn)
                .await?;
            row.map(|row| {
                Ok(ConfigState::new(
                    row.try_get("version")?,
                    row.try_get::<String, _>("digest")?,
                    row.try_get::<String, _>("applied_by")?,
                ))
            })
            .transpose()
        })
    }

    async fn apply_config(&self, planner: &ConfigPlanner<'_>) -> StoreResult<ConfigPlan> {
        timed!(self, "apply_config", |conn| {
            let mut tx = conn.begin().await?;
            let state = sqlx::query(query!("config_state_lock"))
                .fetch_one(&mut *tx)
                .await?;
            let digest: String = state.try_get("digest")?;
            let applied = (!digest.is_empty()).then(|| -> Result<ConfigState, sqlx::Error> {
                Ok(ConfigState::new(
                    state.try_get("version")?,
                    digest.clone(),
                    state.try_get::<String, _>("applied_by")?,
                ))
            });
            let applied = applied.transpose()?;
            let rows = sqlx::query(query!("load_tasks_locked"))
                .fetch_all(&mut *tx)
                .await?;
            let db_now = match rows.first() {
                Some(row) => row.try_get("db_now")?,
                None => sqlx::query("SELECT clock_timestamp() AS db_now")
                    .fetch_one(&mut *tx)
                    .await?
                    .try_get("db_now")?,
            };
            let snapshot = ConfigSnapshot {
                db_now,
                applied,
                rows: rows.iter().map(task_row).collect::<Result<Vec<_>, _>>()?,
            };
            let plan = planner(&snapshot);
            let ConfigPlan::Apply { changes, state } = &plan else {
                tx.rollback().await?;
                return Ok(plan);
            };
            let mut create = TaskColumns::default();
            let mut update = TaskColumns::default();
            let (mut orphan_names, mut orphan_flags) = (Vec::new(), Vec::new());
            for change in changes {
                match change {
                    TaskChange::Create {
                        name,
                        cron,
                        timezone,
                        enabled,
                        next_run_at,
                    } => create.push(name, cron, timezone, *enabled, *next_run_at),
                    TaskChange::Update {
                        name,
                        cron,
                        timezone,
                        enabled,
                        next_run_at,
                    } => update.push(name, cron, timezone, *enabled, *next_run_at),
                    TaskChange::Orphaned { name, orphaned } => {
                        orphan_names.push(name.clone());
                        orphan_flags.push(*orphaned);
                    }
                }
            }
            if !create.names.is_empty() {
                create
                    .bind(sqlx::query(query!("tasks_create")))
                    .execute(&mut *tx)
                    .await?;
            }
            if !update.names.is_empty() {
                update
                    .bind(sqlx::query(query!("tasks_update")))
                    .execute(&mut *tx)
                    .await?;
            }
            if !orphan_names.is_empty() {
                sqlx::query(query!("tasks_orphaned"))
                    .bind(&orphan_names)
                    .bind(&orphan_flags)
                    .execute(&mut *tx)
                    .await?;
            }
            sqlx::query(query!("config_state_save"))
                .bind(state.version)
                .bind(&state.digest)
                .bind(&state.applied_by)
                .execute(&mut *tx)
                .await?;
            sqlx::query(query!("notify"))
                .bind(&self.channel)
                .bind("config")
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
            Ok(plan)
        })
    }

    async fn recent_runs(
        &self,
        task_name: Option<&str>,
        limit: i64,
    ) -> StoreResult<Vec<RunRecord>> {
        timed!(self, "recent_runs", |conn| {
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
                        scheduled_at: row.try_get("scheduled_at")?,
                        started_at: row.try_get("started_at")?,
                        finished_at: row.try_get("finished_at")?,
                        status: parse_status(row.try_get("status")?)?,
                        node_id: row.try_get("node_id")?,
                        ticks_collapsed: row.try_get("ticks_collapsed")?,
                        error: row.try_get("error")?,
                    })
                })
                .collect()
        })
    }

    async fn skips(&self, task_name: &str, since: DateTime<Utc>) -> StoreResult<Vec<SkipRecord>> {
        timed!(self, "skips", |conn| {
            sqlx::query(query!("skips_select"))
                .bind(task_name)
                .bind(since)
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
                        row.try_get("first_tick")?,
                        row.try_get("last_tick")?,
                        row.try_get("ticks")?,
                    );
                    skip.exact = row.try_get("exact")?;
                    skip.run_id = row.try_get("run_id")?;
                    Ok(skip)
                })
                .collect()
        })
    }

    async fn listener(&self) -> StoreResult<Box<dyn ChangeListener>> {
        Ok(Box::new(PgChangeListener::new(
            self.pool.clone(),
            self.channel.clone(),
            self.op_timeout,
        )))
    }
}

/// Parallel arrays for release_locks.
#[derive(Default)]
struct Release {
    names: Vec<String>,
    tokens: Vec<Uuid>,
    run_ids: Vec<Option<i64>>,
    statuses: Vec<Option<&'static str>>,
    errors: Vec<Option<String>>,
    rerun_at: Vec<Option<DateTime<Utc>>>,
    failures: Vec<&'static str>,
}

impl Release {
    fn push(
        &mut self,
        lock: &ExpiredLock,
        end: Option<&RunEnd>,
        rerun_at: Option<DateTime<Utc>>,
        failures: &'static str,
    ) {
        self.names.push(lock.key.task_name.clone());
        self.tokens.push(lock.key.token);
        self.run_ids
            .push(end.and(lock.run.as_ref()).map(|r| r.run_id));
        self.statuses.push(end.map(|e| e.status.as_str()));
        self.errors.push(end.and_then(|e| e.error.clone()));
        self.rerun_at.push(rerun_at);
        self.failures.push(failures);
    }
}

/// Parallel arrays for claim_apply.
#[derive(Default)]
struct Plan {
    names: Vec<String>,
    tokens: Vec<Uuid>,
    scheduled: Vec<DateTime<Utc>>,
    next: Vec<Option<DateTime<Utc>>>,
    recovery: Vec<&'static str>,
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

    fn bind<'q>(
        &'q self,
        q: sqlx::query::Query<'q, Postgres, sqlx::postgres::PgArguments>,
    ) -> sqlx::query::Query<'q, Postgres, sqlx::postgres::PgArguments> {
        q.bind(&self.names)
            .bind(&self.reasons)
            .bind(&self.first)
            .bind(&self.last)
            .bind(&self.ticks)
            .bind(&self.exact)
            .bind(&self.run_ids)
    }
}

/// Parallel arrays for the `unnest` of tasks_create / tasks_update.
#[derive(Default)]
struct TaskColumns {
    names: Vec<String>,
    crons: Vec<String>,
    zones: Vec<String>,
    enabled: Vec<bool>,
    next: Vec<Option<DateTime<Utc>>>,
}

impl TaskColumns {
    fn push(
        &mut self,
        name: &str,
        cron: &str,
        zone: &str,
        enabled: bool,
        next: Option<DateTime<Utc>>,
    ) {
        self.names.push(name.to_owned());
        self.crons.push(cron.to_owned());
        self.zones.push(zone.to_owned());
        self.enabled.push(enabled);
        self.next.push(next);
    }

    fn bind<'q>(
        &'q self,
        q: sqlx::query::Query<'q, Postgres, sqlx::postgres::PgArguments>,
    ) -> sqlx::query::Query<'q, Postgres, sqlx::postgres::PgArguments> {
        q.bind(&self.names)
            .bind(&self.crons)
            .bind(&self.zones)
            .bind(&self.enabled)
            .bind(&self.next)
    }
}
