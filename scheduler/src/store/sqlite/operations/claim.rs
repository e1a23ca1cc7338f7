//! Nodes, claims, lock renewal and the end of runs.

use std::collections::HashSet;
use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::Row;
use sqlx::sqlite::SqliteRow;
use uuid::Uuid;

use super::{
    earlier, insert_skips, later, micros, names_json, parse_recovery, parse_trigger, pause_of,
    time_at, time_opt, token, token_at,
};
use crate::store::sqlite::SqliteStore;
use crate::store::{
    Cancellation, ClaimOutcome, ClaimPlan, ClaimRequest, ClaimRules, ClaimedRun, DueDecision,
    DueTask, ExpiredLock, FinishResult, Heartbeat, LockKey, LockedRun, NextRun, NodeInfo,
    PendingManual, PendingRetry, Requeue, RescueDecision, RescuedLock, RunFinish, SkipRecord,
    StoreResult, WakeInfo,
};

/// The most expired locks one claim looks at (as on PostgreSQL).
const MAX_EXPIRED_PER_CLAIM: i64 = 1_000;
/// A task is counted overdue by the heartbeat when its next run is this late (as on PostgreSQL).
const OVERDUE_HINT: Duration = Duration::from_secs(2);

/// A requeue as the bound values of release_lock and finish_release: kind, tick, attempt, due
/// time, asker.
type RequeueValues = (
    Option<&'static str>,
    Option<i64>,
    Option<i32>,
    Option<i64>,
    Option<String>,
);

fn requeue_values(requeue: Option<&Requeue>) -> RequeueValues {
    match requeue {
        None => (None, None, None, None, None),
        Some(Requeue::Tick(tick)) => (Some("tick"), Some(micros(*tick)), None, None, None),
        Some(Requeue::Retry { tick, attempt, at }) => (
            Some("retry"),
            Some(micros(*tick)),
            Some(*attempt),
            Some(micros(*at)),
            None,
        ),
        Some(Requeue::Manual { at, by }) => {
            (Some("manual"), None, None, Some(micros(*at)), by.clone())
        }
    }
}

/// `(set the next run?, the next run)` as bound.
fn next_values(next: NextRun) -> (bool, Option<i64>) {
    match next {
        NextRun::Keep => (false, None),
        NextRun::Set(next) => (true, next.map(micros)),
    }
}

fn expired_lock(row: &SqliteRow) -> Result<ExpiredLock, sqlx::Error> {
    let run = match row.try_get::<Option<i64>, _>("run_id")? {
        Some(run_id) => Some(LockedRun {
            run_id,
            scheduled_at: time_at(row, "run_scheduled_at")?,
            recovery: parse_recovery(row.try_get("run_recovery")?),
            attempt: row.try_get("run_attempt")?,
            trigger: parse_trigger(row.try_get("run_trigger")?)?,
            triggered_by: row.try_get("run_triggered_by")?,
            cancel_requested_by: row.try_get("run_cancel_requested_by")?,
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

fn due_task(row: &SqliteRow) -> Result<DueTask, sqlx::Error> {
    Ok(DueTask {
        name: row.try_get("name")?,
        cron: row.try_get("cron")?,
        timezone: row.try_get("timezone")?,
        enabled: row.try_get("enabled")?,
        next_run_at: time_opt(row, "next_run_at")?,
        last_finished_at: time_opt(row, "last_finished_at")?,
        retry: match time_opt(row, "retry_at")? {
            Some(at) => Some(PendingRetry {
                tick: time_at(row, "retry_tick")?,
                attempt: row.try_get("retry_attempt")?,
                at,
            }),
            None => None,
        },
        manual: match time_opt(row, "manual_at")? {
            Some(at) => Some(PendingManual {
                at,
                by: row.try_get("manual_by")?,
            }),
            None => None,
        },
        pause: pause_of(row)?,
        missed_since: time_opt(row, "missed_since")?,
    })
}

pub(super) async fn register_node(store: &SqliteStore, node: &NodeInfo) -> StoreResult<()> {
    store.refuse_operator("register a node")?;
    let tasks = names_json(&node.tasks);
    write_tx!(store, "register_node", |tx, now| {
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

pub(super) async fn heartbeat(
    store: &SqliteStore,
    node_id: &str,
    silent_after: Duration,
) -> StoreResult<Heartbeat> {
    write_tx!(store, "heartbeat", |tx, now| {
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
        let overdue = sqlx::query_scalar(query!("overdue_count"))
            .bind(earlier(now, OVERDUE_HINT))
            .fetch_one(&mut *tx)
            .await?;
        let others: i64 = sqlx::query_scalar(query!("live_nodes"))
            .bind(node_id)
            .bind(earlier(now, silent_after))
            .fetch_one(&mut *tx)
            .await?;
        Heartbeat {
            registered,
            silent,
            overdue,
            live: 1 + others,
        }
    })
}

pub(super) async fn deregister_node(store: &SqliteStore, node_id: &str) -> StoreResult<()> {
    write_tx!(store, "deregister_node", |tx, now| {
        sqlx::query(query!("deregister_node"))
            .bind(node_id)
            .bind(micros(now))
            .execute(&mut *tx)
            .await?;
    })
}

pub(super) async fn next_wake(store: &SqliteStore, tasks: &[String]) -> StoreResult<WakeInfo> {
    let names = names_json(tasks);
    read!(store, "next_wake", |conn, now| {
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

pub(super) async fn claim(
    store: &SqliteStore,
    request: ClaimRequest<'_>,
    policy: &dyn ClaimRules,
) -> StoreResult<ClaimOutcome> {
    let names = names_json(request.tasks);
    let mut outcome = write_tx!(store, "claim", |tx, now| {
        let mut outcome = ClaimOutcome::default();

        // Expired locks: the engine decides, the fenced release applies.
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
                requeue,
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
            let (kind, tick, attempt, at, by) = requeue_values(requeue.as_ref());
            // Fenced by token and expiry like PostgreSQL's release_locks; in this transaction
            // nobody can have renewed the lock since it was read, so this always holds.
            let released = sqlx::query(query!("release_lock"))
                .bind(&lock.key.task_name)
                .bind(token(lock.key.token))
                .bind(run_id)
                .bind(status)
                .bind(error)
                .bind(failures.as_str())
                .bind(kind)
                .bind(tick)
                .bind(attempt)
                .bind(at)
                .bind(by)
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
                requeue,
            });
        }

        if request.limit > 0 {
            let due = sqlx::query(query!("claim_select"))
                .bind(micros(now))
                .bind(&names)
                .bind(i64::try_from(request.limit).unwrap_or(i64::MAX))
                .bind(later(now, request.ahead))
                .fetch_all(&mut *tx)
                .await?
                .iter()
                .map(due_task)
                .collect::<Result<Vec<_>, sqlx::Error>>()?;
            // Every decision first, then the writes, in PostgreSQL's order: the skips, their
            // records, the runs.
            let mut runs: Vec<(DueTask, ClaimPlan)> = Vec::new();
            let mut skips: Vec<SkipRecord> = Vec::new();
            for task in due {
                match policy.plan(&task, now) {
                    DueDecision::Run(plan) => {
                        skips.extend(plan.skips.iter().cloned());
                        runs.push((task, plan));
                    }
                    DueDecision::Skip {
                        next_run_at,
                        clear_retry,
                        clear_pause,
                        skips: skipped,
                    } => {
                        let (set_next, next) = next_values(next_run_at);
                        sqlx::query(query!("claim_skip"))
                            .bind(&task.name)
                            .bind(set_next)
                            .bind(next)
                            .bind(clear_retry)
                            .bind(clear_pause)
                            .bind(micros(now))
                            .execute(&mut *tx)
                            .await?;
                        skips.extend(skipped);
                    }
                    DueDecision::Leave => outcome.left.push(task.name),
                }
            }
            insert_skips(&mut tx, &skips, now).await?;
            outcome.skipped = skips;
            for (task, plan) in runs {
                let lock_token = Uuid::new_v4();
                let (set_next, next) = next_values(plan.next_run_at);
                let locked = sqlx::query(query!("claim_lock"))
                    .bind(&task.name)
                    .bind(request.node_id)
                    .bind(token(lock_token))
                    .bind(later(now, plan.lock_lifetime))
                    .bind(set_next)
                    .bind(next)
                    .bind(plan.trigger.as_str())
                    .bind(micros(plan.scheduled_at))
                    .bind(plan.clear_retry)
                    .bind(micros(now))
                    .execute(&mut *tx)
                    .await?
                    .rows_affected()
                    > 0;
                if !locked {
                    continue;
                }
                // A tick claimed ahead starts on its tick.
                let started_at = now.max(plan.scheduled_at);
                let run_id: i64 = sqlx::query_scalar(query!("claim_run"))
                    .bind(&task.name)
                    .bind(micros(plan.scheduled_at))
                    .bind(micros(started_at))
                    .bind(request.node_id)
                    .bind(token(lock_token))
                    .bind(plan.recovery.as_str())
                    .bind(plan.attempt)
                    .bind(plan.trigger.as_str())
                    .bind(plan.triggered_by.as_deref())
                    .fetch_one(&mut *tx)
                    .await?;
                outcome.claimed.push(ClaimedRun {
                    run_id,
                    task_name: task.name,
                    lock_token,
                    scheduled_at: plan.scheduled_at,
                    claimed_at: now,
                    // Set below, from the clock at the end of the claim.
                    starts_in: Duration::ZERO,
                    previous_finished_at: task.last_finished_at,
                    attempt: plan.attempt,
                    trigger: plan.trigger,
                    triggered_by: plan.triggered_by,
                    missed_since: task.missed_since,
                });
            }
        }
        outcome
    })?;
    // The store's clock is this node's: how long from now until each run's start.
    let end = Utc::now();
    for run in &mut outcome.claimed {
        run.starts_in = (run.scheduled_at.max(run.claimed_at) - end)
            .to_std()
            .unwrap_or(Duration::ZERO);
    }
    if !outcome.rescued.is_empty() {
        store.inner.wake();
    }
    Ok(outcome)
}

pub(super) async fn cancel_requests(
    store: &SqliteStore,
    run_ids: &[i64],
) -> StoreResult<Vec<Cancellation>> {
    if run_ids.is_empty() {
        return Ok(Vec::new());
    }
    let ids = serde_json::to_string(run_ids).expect("integers serialize");
    read!(store, "cancel_requests", |conn, _now| {
        sqlx::query(query!("cancel_requests"))
            .bind(ids)
            .fetch_all(conn)
            .await?
            .iter()
            .map(|row| {
                Ok(Cancellation {
                    run_id: row.try_get("id")?,
                    by: row.try_get("cancel_requested_by")?,
                    at: time_at(row, "cancel_requested_at")?,
                })
            })
            .collect::<Result<Vec<_>, sqlx::Error>>()?
    })
}

pub(super) async fn renew_locks(
    store: &SqliteStore,
    node_id: &str,
    held: &[(LockKey, Duration)],
) -> StoreResult<Vec<LockKey>> {
    if held.is_empty() {
        return Ok(Vec::new());
    }
    write_tx!(store, "renew_locks", |tx, now| {
        let mut seen = HashSet::new();
        let mut renewed = Vec::new();
        for (key, lifetime) in held {
            // A lock named twice is extended once (PostgreSQL updates a row once per
            // statement).
            if !seen.insert(key) {
                continue;
            }
            if let Some(row) = sqlx::query(query!("renew_lock"))
                .bind(&key.task_name)
                .bind(node_id)
                .bind(token(key.token))
                .bind(later(now, *lifetime))
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

pub(super) async fn finish_runs(
    store: &SqliteStore,
    finishes: &[RunFinish],
) -> StoreResult<Vec<FinishResult>> {
    if finishes.is_empty() {
        return Ok(Vec::new());
    }
    let results = write_tx!(store, "finish_runs", |tx, now| {
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
            let (kind, tick, attempt, at, by) = requeue_values(f.requeue.as_ref());
            let lock_held = sqlx::query(query!("finish_release"))
                .bind(&f.lock.task_name)
                .bind(token(f.lock.token))
                .bind(f.end.status.as_str())
                .bind(f.end.error.as_deref())
                .bind(f.failures.as_str())
                .bind(kind)
                .bind(tick)
                .bind(attempt)
                .bind(at)
                .bind(by)
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
        for f in finishes {
            insert_skips(&mut tx, &f.skips, now).await?;
        }
        results
    })?;
    if results.iter().any(|r| r.lock_held) {
        store.inner.wake();
    }
    Ok(results)
}

pub(super) async fn reschedule(
    store: &SqliteStore,
    next_runs: &[(String, DateTime<Utc>)],
) -> StoreResult<Vec<String>> {
    if next_runs.is_empty() {
        return Ok(Vec::new());
    }
    write_tx!(store, "reschedule", |tx, now| {
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

pub(super) async fn record_skips(store: &SqliteStore, skips: &[SkipRecord]) -> StoreResult<()> {
    if skips.is_empty() {
        return Ok(());
    }
    write_tx!(store, "record_skips", |tx, now| {
        insert_skips(&mut tx, skips, now).await?;
    })
}
