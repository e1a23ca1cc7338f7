//! Claims: the claim transaction (expired locks offered to the engine's rescue, due tasks to its
//! plan, the decisions applied), and upkeep's rescheduling of tasks left without a next run.
//! When to look next is `wake`'s.

mod columns;

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::{Acquire, Row};
use uuid::Uuid;

use super::columns::{SkipColumns, millis};
use super::commit::{Written, commit, written};
use super::wake::Names;
use crate::shard::ShardFacts;
use crate::store::claim_loop::{self, BroadcastTick, ClaimSteps, LockRelease, ShardTick, TaskSkip};
use crate::store::postgres::PgStore;
use crate::store::records::{due_task, expired_lock, parse_trigger, shard_facts};
use crate::store::{
    ClaimOutcome, ClaimPlan, ClaimRequest, ClaimRules, ClaimedRun, DueTask, ExpiredLock,
    SkipRecord, StoreResult,
};
use columns::{Claimed, Plan, Release, Skip};

/// Locks up to `request.limit` due rows of the requested tasks, earliest first (see
/// claim_due.sql): every task's due rows without a name test, this node's kept; by name
/// (claim_select.sql) only when the page came back full with others' tasks among it (another
/// binary's, or one left out of claims), since this node's own may lie beyond it. A page that
/// is not full holds every due row, this node's with the others.
async fn select_due(
    tx: &mut sqlx::PgConnection,
    request: &ClaimRequest<'_>,
) -> Result<Vec<sqlx::postgres::PgRow>, sqlx::Error> {
    let limit = i64::try_from(request.limit).unwrap_or(i64::MAX);
    let mut due = sqlx::query(due_select!(query!("claim_due")))
        .bind(limit)
        .bind(millis(request.ahead))
        .bind(request.node_id)
        .bind(request.left_out)
        .fetch_all(&mut *tx)
        .await?;
    let full = due.len() >= request.limit;
    let mine = Names::new(request.tasks);
    let mut strangers = false;
    let mut seen = HashSet::new();
    due.retain(|row| {
        let Ok(name) = row.try_get::<&str, _>("name") else {
            return false;
        };
        // A shard's row (`name[i]`) is its task's.
        let mine = mine.contains(crate::shard::split_row(name).0);
        strangers |= !mine;
        // A task due in two kinds (its tick and its retry, say) comes twice: the first stays.
        mine && seen.insert(name.to_owned())
    });
    if !full || !strangers {
        return Ok(due);
    }
    // Rows locked above and not claimed stay as they were; this transaction holds them until
    // its end, so the query by name returns them again with the rest.
    sqlx::query(due_select!(query!("claim_select")))
        .bind(request.tasks)
        .bind(limit)
        .bind(millis(request.ahead))
        .bind(request.node_id)
        .fetch_all(&mut *tx)
        .await
}

pub(super) async fn claim(
    store: &PgStore,
    request: ClaimRequest<'_>,
    rules: &dyn ClaimRules,
) -> StoreResult<ClaimOutcome> {
    let mut sent = None;
    let result = timed!(store, "claim", |conn| {
        let mut tx = conn.begin().await?;
        let outcome = claim_loop::claim(&mut Steps { tx: &mut tx }, &request, rules).await?;
        commit(tx, &mut sent, outcome).await
    });
    match written(result, sent) {
        Written::Done(outcome) => Ok(outcome),
        Written::Failed(error) => Err(error),
        Written::Unknown(outcome, error) => {
            let node_id = request.node_id;
            store
                .read_back("claim", error, store.op_timeout, || {
                    read_back_claim(store, node_id, &outcome)
                })
                .await
                .map(|live| keep_live(outcome, &live))
        }
    }
}

/// The claim's locks that are this node's, by token, and whether each is still live; `None` if
/// none of them is (the claim was not committed). A claim that took no lock cannot be told
/// apart from one not committed: `None` too (claiming again is safe).
async fn read_back_claim(
    store: &PgStore,
    node_id: &str,
    outcome: &ClaimOutcome,
) -> StoreResult<Option<HashMap<Uuid, bool>>> {
    let tokens: Vec<Uuid> = outcome.claimed.iter().map(|r| r.lock_token).collect();
    if tokens.is_empty() {
        return Ok(None);
    }
    let found: Vec<(Uuid, bool)> = timed!(store, "claim_read_back", |conn| {
        sqlx::query_as(query!("claim_read_back"))
            .bind(node_id)
            .bind(&tokens)
            .fetch_all(conn)
            .await
    })?;
    Ok((!found.is_empty()).then(|| found.into_iter().collect()))
}

/// A claim read back after its answer was lost: it committed (one of its locks is this node's),
/// so its runs start, except those whose lock already expired (another node may take them
/// over; the expired-lock rescue records them).
fn keep_live(mut outcome: ClaimOutcome, locks: &HashMap<Uuid, bool>) -> ClaimOutcome {
    outcome.claimed.retain(|run| {
        let live = locks.get(&run.lock_token).copied().unwrap_or(false);
        if !live {
            tracing::warn!(task = %run.task_name, run_id = run.run_id, "a claimed run's lock expired before its claim was read back: not started here");
        }
        live
    });
    outcome
}

/// A claim's steps on PostgreSQL: each a statement (or two) over parallel arrays.
struct Steps<'t> {
    tx: &'t mut sqlx::PgConnection,
}

impl ClaimSteps for Steps<'_> {
    type Error = sqlx::Error;

    async fn expired_locks(
        &mut self,
        limit: i64,
    ) -> Result<Vec<(ExpiredLock, DateTime<Utc>)>, sqlx::Error> {
        let mut locks = sqlx::query(query!("claim_expired"))
            .bind(limit)
            .fetch_all(&mut *self.tx)
            .await?
            .iter()
            .map(|row| Ok((expired_lock(row)?, row.try_get("db_now")?)))
            .collect::<Result<Vec<(ExpiredLock, DateTime<Utc>)>, sqlx::Error>>()?;
        if locks.is_empty() {
            return Ok(locks);
        }
        // Which rows another transaction holds: looked at under a savepoint rolled back at
        // once, so this claim holds none of them while the engine decides.
        let names: Vec<&str> = locks.iter().map(|(l, _)| &*l.key.task_name).collect();
        sqlx::query("SAVEPOINT expired_rows")
            .execute(&mut *self.tx)
            .await?;
        let free: HashSet<String> = sqlx::query_scalar(query!("claim_expired_free"))
            .bind(&names)
            .fetch_all(&mut *self.tx)
            .await?
            .into_iter()
            .collect();
        sqlx::query("ROLLBACK TO SAVEPOINT expired_rows")
            .execute(&mut *self.tx)
            .await?;
        for (lock, _) in &mut locks {
            lock.busy = !free.contains(&lock.key.task_name);
        }
        Ok(locks)
    }

    async fn release(&mut self, releases: &[LockRelease]) -> Result<Vec<String>, sqlx::Error> {
        let mut release = Release::default();
        for r in releases {
            release.push(r);
        }
        release
            .bind(sqlx::query(releasing_query!("release_locks")))
            .fetch_all(&mut *self.tx)
            .await?
            .iter()
            .map(|row| row.try_get("name"))
            .collect()
    }

    async fn due_tasks(
        &mut self,
        request: &ClaimRequest<'_>,
    ) -> Result<Vec<(DueTask, DateTime<Utc>)>, sqlx::Error> {
        select_due(&mut *self.tx, request)
            .await?
            .iter()
            .map(|row| Ok((due_task(row)?, row.try_get("db_now")?)))
            .collect()
    }

    async fn shard_facts(
        &mut self,
        node_id: &str,
        live_window: Duration,
        shards: &[ShardTick<'_>],
    ) -> Result<Vec<ShardFacts>, sqlx::Error> {
        let rows: Vec<&str> = shards.iter().map(|s| s.row).collect();
        let tasks: Vec<&str> = shards.iter().map(|s| s.task).collect();
        let ticks: Vec<DateTime<Utc>> = shards.iter().map(|s| s.tick).collect();
        let groups: Vec<&str> = shards.iter().map(|s| s.group).collect();
        let keys: Vec<Option<&str>> = shards.iter().map(|s| s.key).collect();
        sqlx::query(query!("shard_facts"))
            .bind(&rows)
            .bind(&tasks)
            .bind(&ticks)
            .bind(node_id)
            .bind(millis(live_window))
            .bind(&groups)
            .bind(&keys)
            .fetch_all(&mut *self.tx)
            .await?
            .iter()
            .map(shard_facts)
            .collect()
    }

    async fn broadcast_nodes(
        &mut self,
        live_window: Duration,
        ticks: &[BroadcastTick],
    ) -> Result<Vec<Vec<String>>, sqlx::Error> {
        let groups: Vec<&str> = ticks.iter().map(|t| t.group.as_str()).collect();
        let tasks: Vec<&str> = ticks.iter().map(|t| t.task.as_str()).collect();
        let at: Vec<DateTime<Utc>> = ticks.iter().map(|t| t.tick).collect();
        sqlx::query(query!("broadcast_nodes"))
            .bind(&groups)
            .bind(&at)
            .bind(millis(live_window))
            .bind(&tasks)
            .execute(&mut *self.tx)
            .await?;
        let rows = sqlx::query(query!("broadcast_nodes_read"))
            .bind(&groups)
            .bind(&at)
            .fetch_all(&mut *self.tx)
            .await?;
        let mut nodes: HashMap<(String, DateTime<Utc>), Vec<String>> = HashMap::new();
        for row in &rows {
            let task: String = row.try_get("task")?;
            let tick: DateTime<Utc> = row.try_get("tick")?;
            nodes.insert((task, tick), row.try_get("nodes")?);
        }
        Ok(ticks
            .iter()
            .map(|t| nodes.remove(&(t.group.clone(), t.tick)).unwrap_or_default())
            .collect())
    }

    async fn limit_rooms(
        &mut self,
        names: &[String],
    ) -> Result<Vec<(String, crate::limits::Room)>, sqlx::Error> {
        let mut rooms: HashMap<String, crate::limits::Room> = HashMap::new();
        for row in sqlx::query(query!("limit_lock"))
            .bind(names)
            .fetch_all(&mut *self.tx)
            .await?
        {
            let size: i32 = row.try_get("size")?;
            rooms.entry(row.try_get("name")?).or_default().size = u32::try_from(size).ok();
        }
        // A statement of its own: its snapshot is taken with the limits' locks held.
        for row in sqlx::query(query!("limit_holders"))
            .bind(names)
            .fetch_all(&mut *self.tx)
            .await?
        {
            let holders: i64 = row.try_get("holders")?;
            rooms.entry(row.try_get("name")?).or_default().holders =
                u32::try_from(holders).unwrap_or(u32::MAX);
        }
        Ok(rooms.into_iter().collect())
    }

    async fn mark_waiting(&mut self, names: &[String]) -> Result<(), sqlx::Error> {
        sqlx::query(query!("limit_waiting"))
            .bind(names)
            .execute(&mut *self.tx)
            .await
            .map(drop)
    }

    async fn skip(&mut self, skips: &[TaskSkip]) -> Result<(), sqlx::Error> {
        let mut skip = Skip::default();
        for s in skips {
            skip.push(s);
        }
        sqlx::query(query!("claim_skip"))
            .bind(&skip.names)
            .bind(&skip.set_next)
            .bind(&skip.next)
            .bind(&skip.clear_retry)
            .bind(&skip.clear_pause)
            .bind(&skip.clear_manual)
            .bind(&skip.next_tick)
            .execute(&mut *self.tx)
            .await
            .map(drop)
    }

    async fn record_skips(&mut self, skips: &[SkipRecord]) -> Result<(), sqlx::Error> {
        SkipColumns::collect(skips.iter())
            .insert(&mut *self.tx)
            .await
    }

    async fn start_runs(
        &mut self,
        node_id: &str,
        runs: Vec<(DueTask, ClaimPlan)>,
        claimed_at: DateTime<Utc>,
    ) -> Result<Vec<ClaimedRun>, sqlx::Error> {
        // Per lock taken: the task's row, when its previous run ended, and its open missed
        // incident.
        let mut seen: HashMap<Uuid, Claimed> = HashMap::new();
        let mut backfills: HashMap<String, i64> = HashMap::new();
        let mut plan = Plan::default();
        for (task, p) in runs {
            if let Some(id) = p.backfill_id {
                backfills.insert(task.name.clone(), id);
            }
            let shard = task.shard();
            let (args, args_override) = task.run_args(p.trigger);
            let due_at = p.starts_at;
            let token = plan.push(
                task.name.clone(),
                p,
                shard,
                args_override,
                task.limit.clone(),
            );
            seen.insert(
                token,
                (
                    task.name,
                    [task.last_finished_at, task.missed_since, Some(due_at)],
                    args,
                    task.tags,
                    task.timezone,
                ),
            );
        }
        let claimed: Vec<ClaimedRun> =
            plan.bind(sqlx::query(query!("claim_apply")).bind(node_id))
                .fetch_all(&mut *self.tx)
                .await?
                .iter()
                .map(|row| {
                    let lock_token: Uuid = row.try_get("lock_token")?;
                    let (
                        task_name,
                        [previous_finished_at, missed_since, due_at],
                        args,
                        tags,
                        timezone,
                    ) = seen.remove(&lock_token).ok_or(sqlx::Error::RowNotFound)?;
                    let shard = crate::Shard {
                        index: u32::try_from(row.try_get::<i32, _>("shard_index")?).unwrap_or(0),
                        total: u32::try_from(row.try_get::<i32, _>("shard_total")?).unwrap_or(1),
                    };
                    let started_at: DateTime<Utc> = row.try_get("started_at")?;
                    let written_at: DateTime<Utc> = row.try_get("written_at")?;
                    Ok(ClaimedRun {
                        starts_in: (started_at - written_at).to_std().unwrap_or(Duration::ZERO),
                        run_id: row.try_get("id")?,
                        previous_finished_at,
                        missed_since,
                        task_name,
                        shard,
                        args,
                        tags,
                        timezone,
                        lock_token,
                        fencing_token: row.try_get("fencing_token")?,
                        scheduled_at: row.try_get("scheduled_at")?,
                        due_at: due_at.ok_or(sqlx::Error::RowNotFound)?,
                        claimed_at,
                        attempt: row.try_get("attempt")?,
                        trigger: parse_trigger(row.try_get("trigger")?)?,
                        triggered_by: row.try_get("triggered_by")?,
                    })
                })
                .collect::<Result<_, sqlx::Error>>()?;
        if !backfills.is_empty() {
            backfill_claimed(&mut *self.tx, &claimed, &backfills).await?;
        }
        Ok(claimed)
    }
}

/// Records which runs serve the backfill ticks just claimed, and paces each task's backfill
/// (see backfill_claimed.sql).
async fn backfill_claimed(
    tx: &mut sqlx::PgConnection,
    claimed: &[ClaimedRun],
    backfills: &HashMap<String, i64>,
) -> Result<(), sqlx::Error> {
    let (mut names, mut ids, mut ticks, mut runs) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for run in claimed {
        if let Some(id) = backfills.get(&run.task_name) {
            names.push(run.task_name.as_str());
            ids.push(*id);
            ticks.push(run.scheduled_at);
            runs.push(run.run_id);
        }
    }
    if names.is_empty() {
        return Ok(());
    }
    sqlx::query(query!("backfill_claimed"))
        .bind(&names)
        .bind(&ids)
        .bind(&ticks)
        .bind(&runs)
        .execute(tx)
        .await
        .map(drop)
}

pub(super) async fn reschedule(
    store: &PgStore,
    next_runs: &[crate::store::Reschedule],
) -> StoreResult<Vec<String>> {
    let names: Vec<&str> = next_runs.iter().map(|(n, _, _)| n.as_str()).collect();
    let next: Vec<DateTime<Utc>> = next_runs.iter().map(|(_, start, _)| *start).collect();
    let ticks: Vec<Option<DateTime<Utc>>> = next_runs.iter().map(|(_, _, tick)| *tick).collect();
    timed!(store, "reschedule", |conn| {
        sqlx::query(query!("tasks_reschedule"))
            .bind(&names)
            .bind(&next)
            .bind(&ticks)
            .fetch_all(conn)
            .await?
            .iter()
            .map(|row| row.try_get("name"))
            .collect()
    })
}
