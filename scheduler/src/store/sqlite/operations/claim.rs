//! Claims: when to look next, the claim transaction (expired locks offered to the engine's
//! rescue, due tasks to its plan, the decisions applied), and upkeep's rescheduling of tasks
//! left without a next run.

use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::Row;
use sqlx::sqlite::SqliteRow;
use uuid::Uuid;

use super::{
    insert_skips, later, micros, names_json, parse_recovery, parse_trigger, pause_of,
    requeue_values, time_at, time_opt, token, token_at,
};
use crate::store::sqlite::SqliteStore;
use crate::store::{
    ClaimOutcome, ClaimPlan, ClaimRequest, ClaimRules, ClaimedRun, DueDecision, DueTask,
    ExpiredLock, LockKey, LockedRun, NextRun, PendingManual, PendingRetry, RescueDecision,
    RescuedLock, SkipRecord, StoreResult, WakeInfo,
};

/// The most expired locks one claim looks at (as on PostgreSQL).
const MAX_EXPIRED_PER_CLAIM: i64 = 1_000;

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
