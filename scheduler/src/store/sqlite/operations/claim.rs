//! Claims: when to look next, the claim transaction (expired locks offered to the engine's
//! rescue, due tasks to its plan, the decisions applied), and upkeep's rescheduling of tasks
//! left without a next run.

use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::SqliteConnection;
use uuid::Uuid;

use super::bind::{later, micros, names_json, token};
use super::finish::release_lock;
use super::writes::insert_skips;
use crate::shard::ShardFacts;
use crate::store::claim_loop::{self, BroadcastTick, ClaimSteps, LockRelease, ShardTick, TaskSkip};
use crate::store::records::{due_task, expired_lock, shard_facts};
use crate::store::row::ReadRow;
use crate::store::sqlite::SqliteStore;
use crate::store::{
    ClaimOutcome, ClaimPlan, ClaimRequest, ClaimRules, ClaimedRun, DueTask, ExpiredLock, LastRun,
    NextRun, SkipRecord, StoreResult, WakeInfo,
};

/// `(set the next run?, the next run, its tick when jitter shifted it)` as bound.
fn next_values(next: NextRun) -> (bool, Option<i64>, Option<i64>) {
    match next.columns() {
        None => (false, None, None),
        Some((start, tick)) => (true, start.map(micros), tick.map(micros)),
    }
}

pub(super) async fn next_wake(
    store: &SqliteStore,
    node_id: &str,
    tasks: &[String],
) -> StoreResult<WakeInfo> {
    let names = names_json(tasks);
    read!(store, "next_wake", |conn, now| {
        let row = sqlx::query(query!("next_wake"))
            .bind(&names)
            .bind(node_id)
            .fetch_one(conn)
            .await?;
        WakeInfo {
            db_now: now,
            due_at: row.time_opt("due_at")?,
            expiry_at: row.time_opt("expiry_at")?,
        }
    })
}

pub(super) async fn claim(
    store: &SqliteStore,
    request: ClaimRequest<'_>,
    rules: &dyn ClaimRules,
) -> StoreResult<ClaimOutcome> {
    let names = names_json(request.tasks);
    let mut outcome = write_tx!(store, "claim", |tx, now| {
        let mut steps = Steps {
            tx: &mut tx,
            now,
            names: &names,
        };
        claim_loop::claim(&mut steps, &request, rules).await?
    })?;
    // The store's clock is this node's: how long from now until each run's start.
    let end = store.inner.clock.now();
    for run in &mut outcome.claimed {
        run.starts_in = (run.due_at.max(run.claimed_at) - end)
            .to_std()
            .unwrap_or(Duration::ZERO);
    }
    if !outcome.rescued.is_empty() {
        store.inner.wake();
    }
    Ok(outcome)
}

/// A claim's steps on SQLite: one statement per item, on the claim's clock (`now`, taken once
/// the transaction holds the write lock).
struct Steps<'t> {
    tx: &'t mut SqliteConnection,
    now: DateTime<Utc>,
    /// The claiming node's tasks, as JSON.
    names: &'t str,
}

impl ClaimSteps for Steps<'_> {
    type Error = sqlx::Error;

    async fn expired_locks(
        &mut self,
        limit: i64,
    ) -> Result<Vec<(ExpiredLock, DateTime<Utc>)>, sqlx::Error> {
        sqlx::query(query!("claim_expired"))
            .bind(micros(self.now))
            .bind(limit)
            .fetch_all(&mut *self.tx)
            .await?
            .iter()
            .map(|row| Ok((expired_lock(row)?, self.now)))
            .collect()
    }

    async fn release(&mut self, releases: &[LockRelease]) -> Result<Vec<String>, sqlx::Error> {
        let now = self.now;
        let mut released = Vec::new();
        for r in releases {
            let lock = &r.lock;
            let run_id = r.ended_run();
            let status = r.run_end.as_ref().map(|e| e.status.as_str());
            let error = r.run_end.as_ref().and_then(|e| e.error.as_deref());
            // Fenced by token and expiry like PostgreSQL's release_locks; in this transaction
            // nobody can have renewed the lock since it was read, so this always holds.
            let end = r.run_end.as_ref().map(|e| (e, LastRun::Record));
            let requeue = r.requeue.as_ref();
            if !release_lock(
                self.tx, &lock.key, run_id, end, r.failures, requeue, now, true,
            )
            .await?
            {
                continue;
            }
            if let (Some(run_id), Some(status)) = (run_id, status) {
                sqlx::query(query!("release_run_end"))
                    .bind(run_id)
                    .bind(token(lock.key.token))
                    .bind(status)
                    .bind(error)
                    .bind(micros(now))
                    .execute(&mut *self.tx)
                    .await?;
            }
            released.push(lock.key.task_name.clone());
        }
        Ok(released)
    }

    async fn due_tasks(
        &mut self,
        request: &ClaimRequest<'_>,
    ) -> Result<Vec<(DueTask, DateTime<Utc>)>, sqlx::Error> {
        sqlx::query(due_select!(query!("claim_select")))
            .bind(micros(self.now))
            .bind(self.names)
            .bind(i64::try_from(request.limit).unwrap_or(i64::MAX))
            .bind(later(self.now, request.ahead))
            .bind(request.node_id)
            .fetch_all(&mut *self.tx)
            .await?
            .iter()
            .map(|row| Ok((due_task(row)?, self.now)))
            .collect()
    }

    async fn shard_facts(
        &mut self,
        node_id: &str,
        live_window: Duration,
        shards: &[ShardTick<'_>],
    ) -> Result<Vec<ShardFacts>, sqlx::Error> {
        let live_since =
            micros(self.now) - i64::try_from(live_window.as_micros()).unwrap_or(i64::MAX);
        let mut all = Vec::with_capacity(shards.len());
        for shard in shards {
            let row = sqlx::query(query!("shard_facts"))
                .bind(shard.row)
                .bind(shard.task)
                .bind(micros(shard.tick))
                .bind(node_id)
                .bind(live_since)
                .bind(shard.group)
                .bind(shard.key)
                .fetch_one(&mut *self.tx)
                .await?;
            all.push(shard_facts(&row)?);
        }
        Ok(all)
    }

    async fn broadcast_nodes(
        &mut self,
        live_window: Duration,
        ticks: &[BroadcastTick],
    ) -> Result<Vec<Vec<String>>, sqlx::Error> {
        let live_since =
            micros(self.now) - i64::try_from(live_window.as_micros()).unwrap_or(i64::MAX);
        let mut all = Vec::with_capacity(ticks.len());
        for tick in ticks {
            sqlx::query(query!("broadcast_nodes"))
                .bind(&tick.group)
                .bind(micros(tick.tick))
                .bind(micros(self.now))
                .bind(live_since)
                .bind(&tick.task)
                .execute(&mut *self.tx)
                .await?;
            let nodes: Option<String> = sqlx::query_scalar(query!("broadcast_nodes_read"))
                .bind(&tick.group)
                .bind(micros(tick.tick))
                .fetch_optional(&mut *self.tx)
                .await?;
            all.push(
                nodes
                    .and_then(|json| serde_json::from_str::<Vec<String>>(&json).ok())
                    .unwrap_or_default(),
            );
        }
        Ok(all)
    }

    async fn limit_rooms(
        &mut self,
        names: &[String],
    ) -> Result<Vec<(String, crate::limits::Room)>, sqlx::Error> {
        let json = names_json(names);
        let mut rooms: std::collections::HashMap<String, crate::limits::Room> =
            std::collections::HashMap::new();
        for row in sqlx::query(query!("limit_lock"))
            .bind(&json)
            .fetch_all(&mut *self.tx)
            .await?
        {
            rooms.entry(row.text("name")?).or_default().size = u32::try_from(row.int("size")?).ok();
        }
        for row in sqlx::query(query!("limit_holders"))
            .bind(&json)
            .fetch_all(&mut *self.tx)
            .await?
        {
            rooms.entry(row.text("name")?).or_default().holders =
                u32::try_from(row.int("holders")?).unwrap_or(u32::MAX);
        }
        Ok(rooms.into_iter().collect())
    }

    async fn mark_waiting(&mut self, names: &[String]) -> Result<(), sqlx::Error> {
        for name in names {
            sqlx::query(query!("limit_waiting"))
                .bind(name)
                .bind(micros(self.now))
                .execute(&mut *self.tx)
                .await?;
        }
        Ok(())
    }

    async fn skip(&mut self, skips: &[TaskSkip]) -> Result<(), sqlx::Error> {
        for skip in skips {
            let (set_next, next, tick) = next_values(skip.next_run_at);
            sqlx::query(query!("claim_skip"))
                .bind(&skip.name)
                .bind(set_next)
                .bind(next)
                .bind(skip.clear_retry)
                .bind(skip.clear_pause)
                .bind(micros(self.now))
                .bind(skip.clear_manual)
                .bind(tick)
                .execute(&mut *self.tx)
                .await?;
        }
        Ok(())
    }

    async fn record_skips(&mut self, skips: &[SkipRecord]) -> Result<(), sqlx::Error> {
        insert_skips(&mut *self.tx, skips, self.now).await
    }

    async fn start_runs(
        &mut self,
        node_id: &str,
        runs: Vec<(DueTask, ClaimPlan)>,
        claimed_at: DateTime<Utc>,
    ) -> Result<Vec<ClaimedRun>, sqlx::Error> {
        let now = self.now;
        let mut claimed = Vec::with_capacity(runs.len());
        for (task, plan) in runs {
            let lock_token = Uuid::new_v4();
            let (set_next, next, tick) = next_values(plan.next_run_at);
            let fence: Option<i64> = sqlx::query_scalar(query!("claim_lock"))
                .bind(&task.name)
                .bind(node_id)
                .bind(token(lock_token))
                .bind(later(now, plan.lock_lifetime))
                .bind(set_next)
                .bind(next)
                .bind(plan.trigger.as_str())
                .bind(micros(plan.scheduled_at))
                .bind(plan.clear_retry)
                .bind(micros(now))
                .bind(tick)
                .bind(micros(plan.starts_at))
                .bind(task.limit.as_deref())
                .fetch_optional(&mut *self.tx)
                .await?;
            let Some(fencing_token) = fence else {
                continue; // another claim took it first
            };
            // A tick claimed ahead starts on its tick (a jittered one, on its start).
            let started_at = now.max(plan.starts_at);
            let shard = task.shard();
            let (args, args_override) = task.run_args(plan.trigger);
            let run_id: i64 = sqlx::query_scalar(query!("claim_run"))
                .bind(crate::shard::split_row(&task.name).0)
                .bind(micros(plan.scheduled_at))
                .bind(micros(started_at))
                .bind(node_id)
                .bind(token(lock_token))
                .bind(plan.recovery.as_str())
                .bind(plan.attempt)
                .bind(plan.trigger.as_str())
                .bind(plan.triggered_by.as_deref())
                .bind(fencing_token)
                .bind(i64::from(shard.index))
                .bind(i64::from(shard.total))
                .bind(crate::instance::split_row(&task.name).map(|(_, key)| key))
                .bind(args_override)
                .fetch_one(&mut *self.tx)
                .await?;
            if let Some(backfill_id) = plan.backfill_id {
                sqlx::query(query!("backfill_claimed"))
                    .bind(backfill_id)
                    .bind(micros(plan.scheduled_at))
                    .bind(run_id)
                    .bind(&task.name)
                    .execute(&mut *self.tx)
                    .await?;
                sqlx::query(query!("backfill_next"))
                    .bind(&task.name)
                    .bind(micros(now))
                    .execute(&mut *self.tx)
                    .await?;
            }
            claimed.push(ClaimedRun {
                run_id,
                timezone: task.timezone,
                task_name: task.name,
                lock_token,
                fencing_token,
                scheduled_at: plan.scheduled_at,
                due_at: plan.starts_at,
                claimed_at,
                // Set by the caller, from the clock at the end of the claim.
                starts_in: Duration::ZERO,
                previous_finished_at: task.last_finished_at,
                attempt: plan.attempt,
                trigger: plan.trigger,
                triggered_by: plan.triggered_by,
                missed_since: task.missed_since,
                shard,
                args,
                tags: task.tags,
            });
        }
        Ok(claimed)
    }
}

pub(super) async fn reschedule(
    store: &SqliteStore,
    next_runs: &[crate::store::Reschedule],
) -> StoreResult<Vec<String>> {
    write_tx!(store, "reschedule", |tx, now| {
        let mut changed = Vec::new();
        for (name, next, tick) in next_runs {
            let row: Option<String> = sqlx::query_scalar(query!("tasks_reschedule"))
                .bind(name)
                .bind(micros(*next))
                .bind(micros(now))
                .bind(tick.map(micros))
                .fetch_optional(&mut *tx)
                .await?;
            changed.extend(row);
        }
        changed
    })
}
