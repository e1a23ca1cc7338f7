//! The claim transaction written once for every backend: which expired locks are offered to the
//! engine's [`ClaimRules::rescue`], which due tasks to its [`ClaimRules::plan`], and in what order
//! the decisions are applied. A backend writes only the steps ([`ClaimSteps`]: read expired
//! locks, release them, lock due tasks, write skips, start runs) in its own SQL, inside its own
//! transaction; what a claim does with them is here, so the backends cannot drift apart.

use std::collections::HashMap;
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::{
    ClaimOutcome, ClaimPlan, ClaimRequest, ClaimRules, ClaimedRun, DueDecision, DueTask,
    ExpiredLock, FailureCount, NextRun, Requeue, RescueDecision, RescuedLock, RunEnd, SkipRecord,
    Trigger,
};
use crate::shard::{ShardFacts, may_take};

/// The most expired locks one claim looks at.
pub(super) const MAX_EXPIRED_PER_CLAIM: i64 = 1_000;

/// An expired lock the engine decided to release.
pub(super) struct LockRelease {
    pub(super) lock: ExpiredLock,
    /// How its run ended, if the decision says so (a run is ended only then).
    pub(super) run_end: Option<RunEnd>,
    pub(super) requeue: Option<Requeue>,
    pub(super) failures: FailureCount,
}

impl LockRelease {
    /// The run this release ends: the lock's run, when the decision says how it ended.
    pub(super) fn ended_run(&self) -> Option<i64> {
        self.run_end
            .as_ref()
            .and(self.lock.run.as_ref())
            .map(|r| r.run_id)
    }
}

/// A due task the engine decided to skip: where its schedule moves, what it clears.
pub(super) struct TaskSkip {
    pub(super) name: String,
    pub(super) next_run_at: NextRun,
    pub(super) clear_retry: bool,
    pub(super) clear_pause: bool,
    /// Drop the pending manual run (a broadcast task's own row, which never runs it).
    pub(super) clear_manual: bool,
}

/// A broadcast task's tick (or manual request) whose nodes a claim needs, offered to
/// [`ClaimSteps::broadcast_nodes`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct BroadcastTick {
    /// The task (the nodes registering it are the ones that may run the tick).
    pub(super) task: String,
    /// The row its node rows group under ([`crate::shard::group_row`]): the task's own, or an
    /// instance's (`task/key`, its rows `task/key[@node]`). The tick's record is the group's.
    pub(super) group: String,
    /// The tick (a manual run: when it was asked for).
    pub(super) tick: DateTime<Utc>,
}

/// A shard about to run a tick, offered to [`ClaimSteps::shard_facts`].
pub(super) struct ShardTick<'a> {
    /// The shard's row.
    pub(super) row: &'a str,
    /// Its task.
    pub(super) task: &'a str,
    /// The row its shards group under ([`crate::shard::group_row`]): the task's own row, or an
    /// instance's (`task/key`).
    pub(super) group: &'a str,
    /// The instance's key, if the shard is an instance's: its runs are recorded with it.
    pub(super) key: Option<&'a str>,
    /// The tick.
    pub(super) tick: DateTime<Utc>,
}

/// The steps of one claim, each a backend's own SQL, all inside the transaction the backend
/// opened for the claim.
pub(super) trait ClaimSteps {
    type Error;

    /// Up to `limit` locks past their expiry, each with the store's clock when it was read.
    async fn expired_locks(
        &mut self,
        limit: i64,
    ) -> Result<Vec<(ExpiredLock, DateTime<Utc>)>, Self::Error>;

    /// Releases each lock that still has its token and is still expired (its owner did not
    /// renew it meanwhile), ends its run as decided, and applies its requeue. Returns the names
    /// of the tasks released.
    async fn release(&mut self, releases: &[LockRelease]) -> Result<Vec<String>, Self::Error>;

    /// Locks up to `request.limit` unlocked tasks among `request.tasks` that have something
    /// due (skipping rows other transactions hold), each with the store's clock.
    async fn due_tasks(
        &mut self,
        request: &ClaimRequest<'_>,
    ) -> Result<Vec<(DueTask, DateTime<Utc>)>, Self::Error>;

    /// For each shard, what the store knows of its tick's other shards (in order; `total` and
    /// `tick_age` are left zero): whether an earlier tick still goes on, how many runs of the
    /// tick the node `node_id` and the other live nodes registering the task (a heartbeat
    /// within `live_window`) have had, how many those nodes are, and how many of the tick's
    /// shards have a run.
    async fn shard_facts(
        &mut self,
        node_id: &str,
        live_window: Duration,
        shards: &[ShardTick<'_>],
    ) -> Result<Vec<ShardFacts>, Self::Error>;

    /// The nodes alive at each broadcast tick (see [`crate::shard`]), in order: recorded by
    /// the first claim that asks (the nodes registering the task, not stopped, with a heartbeat
    /// within `live_window`, registered at or before the tick and whose row of the task was
    /// created before it), read back by every later one.
    async fn broadcast_nodes(
        &mut self,
        live_window: Duration,
        ticks: &[BroadcastTick],
    ) -> Result<Vec<Vec<String>>, Self::Error>;

    /// Locks the rows of the limits `names` (sorted, distinct) until the claim ends, so claims
    /// of one limit take turns across the nodes, then (in a statement of its own, after the
    /// locks are held) counts each limit's holders: the locked rows holding it. A limit with
    /// no row is not declared (size `None`).
    async fn limit_rooms(
        &mut self,
        names: &[String],
    ) -> Result<Vec<(String, crate::limits::Room)>, Self::Error>;

    /// Marks the rows `names` waiting for their limit, since now unless already waiting.
    async fn mark_waiting(&mut self, names: &[String]) -> Result<(), Self::Error>;

    /// Moves the schedules of skipped tasks and clears what the skips serve.
    async fn skip(&mut self, skips: &[TaskSkip]) -> Result<(), Self::Error>;

    /// Records ranges of skipped ticks.
    async fn record_skips(&mut self, skips: &[SkipRecord]) -> Result<(), Self::Error>;

    /// Locks each planned task for `node_id`, moves its schedule as planned, and records its
    /// run as running; `claimed_at` is the store's clock of the claim.
    async fn start_runs(
        &mut self,
        node_id: &str,
        runs: Vec<(DueTask, ClaimPlan)>,
        claimed_at: DateTime<Utc>,
    ) -> Result<Vec<ClaimedRun>, Self::Error>;
}

/// One claim ([`ClaimStore::claim`](super::ClaimStore::claim)) over a backend's steps: expired
/// locks offered to `rules.rescue` and released as decided (a busy one never); then the due
/// tasks offered to `rules.plan`, every decision taken before any is written; then the skips,
/// their records and the runs, in that order.
pub(super) async fn claim<S: ClaimSteps>(
    steps: &mut S,
    request: &ClaimRequest<'_>,
    rules: &dyn ClaimRules,
) -> Result<ClaimOutcome, S::Error> {
    let mut outcome = ClaimOutcome::default();

    // Expired locks: the engine decides, the fenced release applies.
    let mut releases = Vec::new();
    for (lock, now) in steps.expired_locks(MAX_EXPIRED_PER_CLAIM).await? {
        match rules.rescue(&lock, now) {
            // A row another transaction holds is never released here, whatever the rules say:
            // the release would wait behind the holder, which may be the owner's own write.
            RescueDecision::Wait | RescueDecision::Release { .. } if lock.busy => {
                outcome.waiting.push(lock)
            }
            RescueDecision::Wait => outcome.waiting.push(lock),
            RescueDecision::Release {
                run_end,
                requeue,
                failures,
            } => releases.push(LockRelease {
                lock,
                run_end,
                requeue,
                failures,
            }),
        }
    }
    if !releases.is_empty() {
        let released = steps.release(&releases).await?;
        // A lock its owner renewed meanwhile was not released: nothing happened to it.
        outcome.rescued = releases
            .into_iter()
            .filter(|r| released.contains(&r.lock.key.task_name))
            .map(|r| RescuedLock {
                run_id: r.lock.run.as_ref().map(|run| run.run_id),
                run_scheduled_at: r.lock.run.as_ref().map(|run| run.scheduled_at),
                task_name: r.lock.key.task_name,
                previous_owner: r.lock.owner,
                run_end: r.run_end,
                requeue: r.requeue,
            })
            .collect();
    }

    if request.limit == 0 {
        return Ok(outcome);
    }
    let mut runs = Vec::new();
    let mut skipped = Vec::new();
    let mut skips: Vec<SkipRecord> = Vec::new();
    let mut claimed_at = None;
    for (task, now) in steps.due_tasks(request).await? {
        claimed_at = Some(now);
        match rules.plan(&task, now) {
            DueDecision::Run(plan) => runs.push((task, plan)),
            DueDecision::Skip {
                next_run_at,
                clear_retry,
                clear_pause,
                skips: mut ticks,
            } => {
                // Late because it waited for its limit: the skip says so.
                if task.limit_waiting_since.is_some() {
                    limits::name_the_limit(&mut ticks);
                }
                skipped.push(TaskSkip {
                    name: task.name,
                    next_run_at,
                    clear_retry,
                    clear_pause,
                    clear_manual: false,
                });
                skips.extend(ticks);
            }
            DueDecision::Leave => outcome.left.push(task.name),
        }
    }
    if let Some(now) = claimed_at {
        runs = broadcast(steps, request, runs, &mut skipped).await?;
        runs = spread(steps, request, runs, now, &mut outcome).await?;
        runs = limits::limit(steps, runs, &mut outcome).await?;
        runs = slots(request, runs, now, &mut outcome);
    }
    for (_, plan) in &runs {
        skips.extend(plan.skips.iter().cloned());
    }
    if !skipped.is_empty() {
        steps.skip(&skipped).await?;
    }
    if !skips.is_empty() {
        steps.record_skips(&skips).await?;
    }
    outcome.skipped = skips;
    if let Some(claimed_at) = claimed_at.filter(|_| !runs.is_empty()) {
        outcome.claimed = steps.start_runs(request.node_id, runs, claimed_at).await?;
    }
    Ok(outcome)
}

/// Applies the broadcast rules ([`crate::shard`]) to the planned runs: a broadcast task's own
/// row never runs its ticks or manual requests (they only move it on, and have the tick's
/// nodes recorded; a backfill tick runs on it, once); a node's row runs only if its node is among the nodes recorded alive at the tick,
/// with its position among them as its shard and `recovery = never` (a broadcast run is its
/// node's own: never run again elsewhere), else it moves past the tick. Other runs are kept as
/// planned.
async fn broadcast<S: ClaimSteps>(
    steps: &mut S,
    request: &ClaimRequest<'_>,
    runs: Vec<(DueTask, ClaimPlan)>,
    skipped: &mut Vec<TaskSkip>,
) -> Result<Vec<(DueTask, ClaimPlan)>, S::Error> {
    let key = |task: &DueTask, plan: &ClaimPlan| BroadcastTick {
        task: crate::shard::split_row(&task.name).0.to_owned(),
        group: crate::shard::group_row(&task.name).to_owned(),
        tick: plan.scheduled_at,
    };
    let mut ticks: Vec<BroadcastTick> = Vec::new();
    for (task, plan) in &runs {
        if task.node_pin.is_some()
            && matches!(plan.trigger, Trigger::Schedule | Trigger::Manual)
            && !ticks.contains(&key(task, plan))
        {
            ticks.push(key(task, plan));
        }
    }
    if ticks.is_empty() {
        return Ok(runs);
    }
    let nodes: HashMap<BroadcastTick, Vec<String>> = ticks
        .iter()
        .cloned()
        .zip(steps.broadcast_nodes(request.live_window, &ticks).await?)
        .collect();
    let mut kept = Vec::with_capacity(runs.len());
    for (mut task, mut plan) in runs {
        // A backfill of a broadcast task runs on the task's own row, once per tick, on
        // whichever node takes it: no record says which nodes were alive at a past tick.
        if task.node_pin.is_none()
            || (task.is_broadcast_task_row() && plan.trigger == Trigger::Backfill)
        {
            kept.push((task, plan));
            continue;
        }
        let shard = nodes
            .get(&key(&task, &plan))
            .and_then(|alive| crate::shard::broadcast_shard(alive, request.node_id));
        match shard {
            Some(shard) if !task.is_broadcast_task_row() => {
                task.broadcast = Some(shard);
                plan.recovery = crate::policy::Recovery::Never;
                kept.push((task, plan));
            }
            // A retry or backfill of a node's own run: its tick's nodes were recorded when
            // it first ran.
            None if !task.is_broadcast_task_row()
                && !matches!(plan.trigger, Trigger::Schedule | Trigger::Manual) =>
            {
                plan.recovery = crate::policy::Recovery::Never;
                kept.push((task, plan));
            }
            _ => skipped.push(TaskSkip {
                name: task.name,
                next_run_at: if plan.trigger == Trigger::Schedule {
                    plan.next_run_at
                } else {
                    NextRun::Keep
                },
                clear_retry: plan.clear_retry,
                clear_pause: false,
                clear_manual: plan.trigger == Trigger::Manual,
            }),
        }
    }
    Ok(kept)
}

/// Keeps the planned runs the spread and overlap rules allow ([`may_take`]): a shard's
/// scheduled tick runs only if no earlier tick of its task still goes on, and only within this
/// node's share of the tick; the others are left for now (`outcome.left`, counted in
/// `outcome.held_back`, and `outcome.spread_wait` says when more may be taken). Other runs are
/// kept as planned.
async fn spread<S: ClaimSteps>(
    steps: &mut S,
    request: &ClaimRequest<'_>,
    runs: Vec<(DueTask, ClaimPlan)>,
    now: DateTime<Utc>,
    outcome: &mut ClaimOutcome,
) -> Result<Vec<(DueTask, ClaimPlan)>, S::Error> {
    let sharded =
        |task: &DueTask, plan: &ClaimPlan| task.shards > 1 && plan.trigger == Trigger::Schedule;
    let ticks: Vec<ShardTick<'_>> = runs
        .iter()
        .filter(|(task, plan)| sharded(task, plan))
        .map(|(task, plan)| ShardTick {
            row: &task.name,
            task: crate::shard::split_row(&task.name).0,
            group: crate::shard::group_row(&task.name),
            key: crate::instance::split_row(&task.name).map(|(_, key)| key),
            tick: plan.scheduled_at,
        })
        .collect();
    if ticks.is_empty() {
        return Ok(runs);
    }
    let facts = steps
        .shard_facts(request.node_id, request.live_window, &ticks)
        .await?;
    drop(ticks);
    let mut facts = facts.into_iter();
    let mut taken: HashMap<(String, DateTime<Utc>), u32> = HashMap::new();
    let mut kept = Vec::with_capacity(runs.len());
    for (task, plan) in runs {
        if !sharded(&task, &plan) {
            kept.push((task, plan));
            continue;
        }
        let mut facts = facts.next().unwrap_or(ShardFacts {
            behind: true,
            ..ShardFacts::default()
        });
        facts.tick_age = (now - plan.starts_at).to_std().unwrap_or(Duration::ZERO);
        facts.total = task.shards;
        // An instance's shards are a tick of their own, apart from their task's.
        let of = crate::shard::group_row(&task.name).to_owned();
        let taken = taken.entry((of.clone(), plan.scheduled_at)).or_default();
        if may_take(&facts, *taken) {
            *taken += 1;
            kept.push((task, plan));
        } else {
            if !facts.behind {
                let wait = crate::shard::SPREAD_GRACE.saturating_sub(facts.tick_age);
                outcome.spread_wait = Some(outcome.spread_wait.map_or(wait, |w| w.min(wait)));
                // Left out until the grace ends, or until the task's next tick if that comes
                // first (a task firing more often than the grace must not miss its next one).
                let next = match plan.next_run_at.start() {
                    Some(next) => (next - now).to_std().unwrap_or(Duration::ZERO),
                    None => wait,
                };
                let leave = wait.min(next);
                if facts.share_complete(*taken)
                    && !leave.is_zero()
                    && !outcome.spread_done.iter().any(|(t, _)| *t == of)
                {
                    outcome.spread_done.push((of, leave));
                }
            }
            outcome.held_back += 1;
            outcome.left.push(task.name);
        }
    }
    Ok(kept)
}

/// Keeps, of the planned runs that start at once (their start has come), the first
/// `request.slots` (each takes a free handler slot now); the others are left as they were for a
/// later claim (`outcome.no_slot`). Runs claimed ahead of their start are kept: they take a slot
/// on their tick.
fn slots(
    request: &ClaimRequest<'_>,
    runs: Vec<(DueTask, ClaimPlan)>,
    now: DateTime<Utc>,
    outcome: &mut ClaimOutcome,
) -> Vec<(DueTask, ClaimPlan)> {
    let mut free = request.slots;
    runs.into_iter()
        .filter(|(_, plan)| {
            if plan.starts_at > now {
                return true;
            }
            if free == 0 {
                outcome.no_slot += 1;
                return false;
            }
            free -= 1;
            true
        })
        .collect()
}

mod limits;
#[cfg(test)]
mod tests;
