//! The claim loop: sleeps until the earliest thing this node could claim is due, claims due ticks
//! in batches bounded by free handler slots (see [`super::slots`]) and by a fair share of the
//! tasks, releases expired locks per the takeover rule, and hands each run to the runner.
//!
//! Fair shares: every node wakes for the same tick, and the first claim transaction to run would
//! otherwise take as many due rows as its node has free slots (1,000 by default: a whole tick of
//! 1,000 tasks). So one claim takes at most the node's share, the registered tasks and the
//! instances in the store divided by the live nodes (as the heartbeat counts them), and a node that took a full share pauses about
//! as long as that claim took before claiming again, so the others' claims go first. A node
//! alone (or the last one awake) still gets everything, one share per claim.
//!
//! Claims ahead: a claim takes time (about 50 µs per due row on PostgreSQL, half a second for
//! 10,000), and runs claimed only once their tick has come start that much late. So the loop
//! claims a tick [`CLAIM_AHEAD_PER_TASK`] ahead of it per registered task or instance (twice the measured
//! cost; at most `max_claim_ahead` and a quarter of the lock lifetime), and each run claimed
//! ahead waits for its tick holding its lock (renewed), then takes its handler slot: a tick of
//! 10,000 rows is claimed ahead whole by a node with 1,000 free slots. Only scheduled ticks are
//! claimed ahead; retries, manual runs and pause ends when due. The lead comes from the task
//! count, not from this node's own claim times, so every node with the same tasks wakes at the
//! same moment and the fair shares hold (a lead learned per node let the node that claimed
//! last time claim first again, and take every tick). A node with 20 tasks claims 2 ms ahead.
//!
//! No busy polling: the loop sleeps until the store's next wake time (or until an expired lock
//! it watches has been watched long enough), wakes early on a change notification (another
//! node released a lock, a config was applied) or when one of its own handlers finishes, and
//! re-checks at least every poll interval as a safety net. A due row held by another
//! transaction is retried with a growing, jittered pause.

mod pacing;

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::rules::{Rules, Takeover, Unreadable};
use super::runner;
use super::shared::Shared;
use crate::store::{ClaimRequest, LockKey, SkipReason, SkipRecord, StoreError};
use crate::ticks::missed_by;

/// The smallest batch a fair share caps a claim to.
const MIN_FAIR_BATCH: usize = 32;
/// The most rows one claim takes; a tick of more is claimed in turns, at once one after the
/// other. The claim binds its rows' plans as parameters, and a connection keeps the largest
/// buffer it ever sent: a claim of 10,000 rows left 7 MB per connection that made one.
pub(crate) const MAX_CLAIM_ROWS: usize = 2_000;
/// How far ahead of a tick a node claims it, per row a tick may hold (a registered task or an
/// instance).
pub(crate) const CLAIM_AHEAD_PER_TASK: Duration = Duration::from_micros(100);

/// How far ahead of their ticks a node with `tasks` registered claims them, at most `bound`.
pub(crate) fn claim_ahead(tasks: usize, bound: Duration) -> Duration {
    CLAIM_AHEAD_PER_TASK
        .saturating_mul(u32::try_from(tasks).unwrap_or(u32::MAX))
        .min(bound)
}

/// The most due rows one claim may take: `tasks` (the rows a tick may hold: tasks registered
/// here and instances) divided among `live` nodes, rounded up, at least [`MIN_FAIR_BATCH`].
pub(crate) fn fair_cap(tasks: usize, live: usize) -> usize {
    tasks.div_ceil(live.max(1)).max(MIN_FAIR_BATCH)
}

/// A task whose stored schedule cannot be read is left out of claims this long, then looked at
/// again (the config may have fixed it, or a newer node claimed it meanwhile).
const UNREADABLE_RETRY: Duration = Duration::from_secs(300);

/// What one claim pass did.
#[derive(Debug, Default)]
pub(crate) struct ClaimPass {
    /// Locks released because their owner was gone.
    pub rescued: usize,
    /// Runs started.
    pub claimed: usize,
    /// No free handler slot: wait for a handler to finish.
    pub saturated: bool,
    /// Handlers claimed earlier have not started yet: look again shortly.
    pub late: bool,
    /// Something was due but nothing could be claimed.
    pub contended: bool,
    /// Every free slot was filled: more may be due.
    pub filled: bool,
    /// A fair share was taken with slots to spare: more may be due, after the others' turn.
    pub capped: bool,
    /// The most rows one claim takes ([`MAX_CLAIM_ROWS`]) were taken, short of the fair share
    /// and the slots: more is probably due, to claim at once.
    pub more: bool,
    /// How long the claim transaction took.
    pub took: Duration,
    /// How long until something may be due (`None`: nothing scheduled).
    pub wake_in: Option<Duration>,
    /// Shards were held back by the spread rule: how long until more of them may be taken
    /// here (zero: now, after the other nodes' turn). See [`crate::shard::may_take`].
    pub spread_wait: Option<Duration>,
    /// This node now holds its whole share of a sharded tick and leaves it out of its claims
    /// until the spread grace ends: look again at once at what else is due.
    pub share_held: bool,
}

pub(crate) struct ClaimLoop {
    shared: Arc<Shared>,
    takeover: Takeover,
    /// Tasks left out of claims, until when.
    unreadable: HashMap<String, Instant>,
    /// Sharded tasks whose tick this node holds its whole share of, until the spread grace
    /// ends (or the task's next tick, if sooner): left out of claims (their rows not even
    /// locked) so the other nodes take theirs.
    spread_held: HashMap<String, Instant>,
    /// Unreadable schedules already reported, so each is logged and recorded once.
    reported: BTreeSet<(String, String, String)>,
    /// The next pass may skip the wake-time query (it was computed before the pause).
    known_due: bool,
    /// The last pause ran until a due time.
    due_at_end: bool,
    /// Passes in a row that found due rows held by other transactions.
    contended: u32,
    /// The last claim found handlers that had not started in time.
    late: bool,
    /// When the earliest due time the store gave last comes (a pass ahead of it that claims
    /// nothing waits for it instead of retrying).
    due_instant: Option<Instant>,
    /// When, on the store's clock, the claim of the earliest due time the store gave last may
    /// run (that time less the lead): a timer wake on a test's clock is a known due time only
    /// once the clock has come this far (see `pacing::woke`).
    claim_from: Option<chrono::DateTime<chrono::Utc>>,
    /// Rows taken by the claims in a row that each took [`MAX_CLAIM_ROWS`]: they count against
    /// the fair share of the claim that follows them.
    taken_in_turn: usize,
}

impl ClaimLoop {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        Self {
            shared,
            takeover: Takeover::default(),
            unreadable: HashMap::new(),
            spread_held: HashMap::new(),
            reported: BTreeSet::new(),
            known_due: false,
            due_at_end: false,
            contended: 0,
            late: false,
            due_instant: None,
            claim_from: None,
            taken_in_turn: 0,
        }
    }

    /// The rows a tick may hold: the registered tasks and the instances in the store (10,000
    /// instances of one task are 10,000 claims, not one).
    fn rows(&self) -> usize {
        let instances = self
            .shared
            .instances
            .load(std::sync::atomic::Ordering::Relaxed);
        self.shared.names.len().saturating_add(instances)
    }

    /// How far ahead of their ticks claims run.
    fn ahead(&self) -> Duration {
        claim_ahead(self.rows(), self.shared.settings.claim_ahead_bound())
    }

    /// The names this node may claim: shared, not copied (10,000 names per pass), unless some
    /// are left out for a while; and those left out.
    fn claimable(&mut self) -> (Arc<[String]>, Vec<String>) {
        let now = Instant::now();
        self.unreadable.retain(|_, until| *until > now);
        self.spread_held.retain(|_, until| *until > now);
        if self.unreadable.is_empty() && self.spread_held.is_empty() {
            return (Arc::clone(&self.shared.names), Vec::new());
        }
        let (out, names): (Vec<String>, Vec<String>) = self
            .shared
            .names
            .iter()
            .cloned()
            .partition(|n| self.unreadable.contains_key(n) || self.spread_held.contains_key(n));
        (names.into(), out)
    }

    /// One pass: claim everything due now that fits in the free handler slots. With
    /// `known_due` (the loop slept until a due time the store gave it) the wake-time query is
    /// skipped and the claim runs at once.
    pub(crate) async fn claim_once(&mut self, known_due: bool) -> Result<ClaimPass, StoreError> {
        let shared = Arc::clone(&self.shared);
        let settings = &shared.settings;
        let (names, left_out) = self.claimable();
        let wait = settings.takeover_wait;
        let ahead = self.ahead();
        if !known_due {
            let info = shared.store.next_wake(&shared.node_id, &names).await?;
            let until = |at: chrono::DateTime<chrono::Utc>| {
                (at - info.db_now).to_std().unwrap_or(Duration::ZERO)
            };
            self.due_instant = info.due_at.map(|d| Instant::now() + until(d));
            let lead = chrono::TimeDelta::from_std(ahead).unwrap_or_default();
            self.claim_from = info.due_at.and_then(|d| d.checked_sub_signed(lead));
            let due = info.due_at.filter(|d| *d <= info.db_now + lead).is_some();
            let expired = info.expiry_at.filter(|e| *e <= info.db_now).is_some();
            let watched = self.takeover.next_decision(wait);
            // An expired lock is worth a claim if nobody watches it yet or a watch has run out.
            let rescue_due = expired && watched.is_none_or(|m| m <= Instant::now());
            if !due && !rescue_due {
                // Nothing due: a handler's end changes nothing here.
                shared.slots.want(false);
                let mut wake_in = [
                    info.due_at.map(|d| until(d).saturating_sub(ahead)),
                    info.expiry_at.filter(|e| *e > info.db_now).map(until),
                    watched.map(|m| m.saturating_duration_since(Instant::now())),
                    // A sharded tick left out until its spread grace ends: claim what is left.
                    self.spread_held
                        .values()
                        .min()
                        .map(|m| m.saturating_duration_since(Instant::now())),
                ]
                .into_iter()
                .flatten()
                .min();
                if expired && wake_in.is_none() {
                    wake_in = Some(wait);
                }
                self.taken_in_turn = 0;
                return Ok(ClaimPass {
                    wake_in,
                    ..ClaimPass::default()
                });
            }
        }
        // A node that cannot start what it claimed (its CPUs taken by spinning handlers, no
        // thread to be had) claims nothing new until it can: other nodes take the work.
        let late = shared.handlers().late_start();
        if late && !self.late {
            tracing::warn!(
                "a handler claimed more than {:?} ago still waits for a thread: claiming nothing new until handlers start promptly again",
                super::runtime::LATE_START
            );
        }
        self.late = late;
        let free = if late { 0 } else { shared.slots.free() };
        let room = shared.slots.room(free, !ahead.is_zero());
        let live = shared.live_nodes.load(std::sync::atomic::Ordering::Relaxed);
        // A fair share taken in several claims (each of at most MAX_CLAIM_ROWS) is one share.
        let fair = fair_cap(self.rows(), live).saturating_sub(self.taken_in_turn);
        let share = room.all.min(fair);
        let limit = share.min(MAX_CLAIM_ROWS);
        let rules = Rules::new(
            &shared.registry,
            &shared.specs,
            &shared.watchdog,
            &self.takeover,
            wait,
            settings,
        )
        .claiming_ahead(ahead)
        .jitter_windows(super::config_sync::jitter_windows(&shared.config_view));
        let sent = Instant::now();
        let outcome = shared
            .store
            .claim(
                ClaimRequest::new(&shared.node_id, &names, limit)
                    .starting_now(room.now)
                    .ahead(ahead)
                    .leaving_out(&left_out)
                    .live_window(
                        settings.heartbeat_interval * super::maintenance::SILENT_AFTER_HEARTBEATS,
                    ),
                &rules,
            )
            .await;
        let mut outcome = outcome?;
        let returned = Instant::now();
        let maturity = self.takeover.retain_waiting(&outcome.waiting, wait);
        let held_full = !outcome.spread_done.is_empty();
        for (task, wait) in outcome.spread_done.drain(..) {
            self.spread_held.insert(task, returned + wait);
        }
        for lock in &outcome.rescued {
            if let (Some(run_id), Some(scheduled_at)) = (lock.run_id, lock.run_scheduled_at) {
                shared.events.emit(crate::events::SchedulerEvent::RunLost {
                    task: lock.task_name.clone(),
                    run_id,
                    scheduled_at,
                    previous_owner: lock.previous_owner.clone(),
                    rerun: lock.requeue.is_some(),
                });
            }
            match &lock.run_end {
                Some(end) => tracing::warn!(
                    task = %lock.task_name,
                    previous_owner = %lock.previous_owner,
                    run_id = lock.run_id,
                    rerun = lock.requeue.is_some(),
                    "released an expired lock whose owner stopped renewing it: {}",
                    end.error.as_deref().unwrap_or("run lost")
                ),
                None => {
                    tracing::info!(task = %lock.task_name, previous_owner = %lock.previous_owner, "released an expired lock that protected no running run")
                }
            }
        }
        let unreadable =
            std::mem::take(&mut *rules.unreadable.lock().unwrap_or_else(|p| p.into_inner()));
        let mut planned =
            std::mem::take(&mut *rules.planned.lock().unwrap_or_else(|p| p.into_inner()));
        drop(rules);
        self.leave_unreadable(unreadable).await;
        for skip in &outcome.skipped {
            shared.report_skip(skip, false);
        }

        let n = outcome.claimed.len();
        if n > 0 {
            tracing::debug!(claimed = n, limit, held_back = outcome.held_back, share_held = held_full, elapsed = ?sent.elapsed(), "claimed due runs");
        } else {
            tracing::trace!(limit, held_back = outcome.held_back, share_held = held_full, left_out = left_out.len(), elapsed = ?sent.elapsed(), "claimed nothing");
        }
        let mut started_now = 0;
        for run in outcome.claimed {
            // Its events carry its row's tags as the claim read them (an instance's own).
            shared
                .events
                .note_row(&run.task_name, &run.tags, &run.timezone);
            // Its service levels too (an instance's own, else its task's).
            super::config_sync::note_row_levels(
                &shared.config_view,
                &run.task_name,
                run.tags.sla.as_deref(),
                &run.timezone,
                true,
            );
            // A run whose start has come takes a free slot now (the claim took no more of them
            // than were free, but a run claimed ahead may have taken one since: then it waits
            // for one, as runs claimed ahead of their tick do).
            let slot = shared.slots.claim(run.starts_in.is_zero());
            started_now += usize::from(slot.is_held());
            let lifetime = shared
                .registry
                .get(&run.task_name)
                .map_or(settings.lock_lifetime, |d| {
                    settings.task_settings(&d.options).lock_lifetime
                });
            let lease = shared.watchdog.hold(
                run.run_id,
                LockKey::new(run.task_name.clone(), run.lock_token),
                lifetime,
                sent,
            );
            // Claimed so late that nobody ran it in time (every node was down, say): the
            // incident opened and ends with this run, raised by the one node that claimed it.
            if run.missed_since.is_none()
                && run.trigger == crate::store::Trigger::Schedule
                && let Some((spec, _)) = planned.get(&run.task_name)
                && let Some(grace) = missed_by(
                    spec,
                    run.scheduled_at,
                    // Late from its start: a jittered tick's offset is not lateness.
                    run.claimed_at - (run.due_at - run.scheduled_at),
                    settings.missed_grace,
                )
            {
                tracing::error!(task = %run.task_name, expected_at = %run.scheduled_at, "task missed a run: its tick is served late");
                shared.events.emit(crate::events::SchedulerEvent::Missed {
                    task: run.task_name.clone(),
                    expected_at: run.scheduled_at,
                    grace_ms: u64::try_from(grace.num_milliseconds()).unwrap_or(0),
                });
                shared
                    .events
                    .emit(crate::events::SchedulerEvent::Recovered {
                        task: run.task_name.clone(),
                        missed_since: run.scheduled_at,
                        run_id: run.run_id,
                    });
            }
            if let Some(since) = run.missed_since {
                tracing::info!(task = %run.task_name, missed_since = %since, "task recovered: it runs again");
                shared.metrics.missed(&run.task_name, false);
                shared
                    .events
                    .emit(crate::events::SchedulerEvent::Recovered {
                        task: run.task_name.clone(),
                        missed_since: since,
                        run_id: run.run_id,
                    });
            }
            let spec = planned.remove(&run.task_name).map(|(spec, next)| {
                shared.metrics.next_run(&run.task_name, next);
                spec
            });
            let start_at = returned + run.starts_in;
            shared.tracker.spawn(runner::run(
                Arc::clone(&shared),
                run,
                spec,
                lease,
                slot,
                sent,
                start_at,
            ));
        }
        let quiet = n == 0
            && outcome.rescued.is_empty()
            && free > 0
            && outcome.left.is_empty()
            && outcome.waiting.is_empty();
        // Nothing claimed ahead of the due time (a retry, say, is not claimed ahead): wait for
        // it rather than retry as if another node held the rows.
        let early = self
            .due_instant
            .map(|d| d.saturating_duration_since(Instant::now()))
            .filter(|d| quiet && !d.is_zero());
        // Shards held back (an earlier tick still runs, or other nodes' shares within the
        // spread grace, see crate::shard::may_take): look again shortly, as when rows are held
        // by another transaction. A node that now holds its whole share of a tick leaves the
        // tick out instead, and looks again at once at what else is due.
        // Rows waiting for a share of their limit (crate::limits) are retried the same way (and
        // at once when a handler of this node ends).
        let waiting = outcome.held_back + outcome.limit_waiting.len();
        // Short of slots, or rows waiting for a share of a limit: a handler's end may let more
        // be claimed, so it wakes this loop.
        shared.slots.want(
            free == 0 || outcome.no_slot > 0 || n >= share || !outcome.limit_waiting.is_empty(),
        );
        let contended = !held_full && ((quiet && early.is_none()) || (n == 0 && waiting > 0));
        self.taken_in_turn = if n == limit && limit < share {
            self.taken_in_turn + n
        } else {
            0
        };
        Ok(ClaimPass {
            spread_wait: outcome.spread_wait,
            share_held: held_full,
            claimed: n,
            rescued: outcome.rescued.len(),
            filled: outcome.no_slot > 0 || (started_now == free && free > 0),
            capped: n == limit && limit == share && share == fair && limit > 0 && fair < room.all,
            more: n == limit && limit < share,
            took: sent.elapsed(),
            saturated: free == 0,
            late,
            contended,
            wake_in: Some(
                maturity
                    .map(|m| m.saturating_duration_since(Instant::now()))
                    .into_iter()
                    .chain(early)
                    .min()
                    .unwrap_or(Duration::ZERO),
            ),
        })
    }

    /// Leaves tasks with an unreadable stored schedule out of claims for a while; reports each
    /// (task, schedule) once, in the log and as a skip record of the tick it could not run.
    async fn leave_unreadable(&mut self, unreadable: Vec<Unreadable>) {
        for u in unreadable {
            self.unreadable
                .insert(u.name.clone(), Instant::now() + UNREADABLE_RETRY);
            if !self
                .reported
                .insert((u.name.clone(), u.cron.clone(), u.timezone.clone()))
            {
                continue;
            }
            tracing::error!(task = %u.name, cron = %u.cron, timezone = %u.timezone, error = %u.error, "stored schedule cannot be read by this node: not running it here (a node that can read it will; fix the config otherwise)");
            let skip = SkipRecord::new(&u.name, SkipReason::InvalidSchedule, u.due, u.due, 1);
            self.shared.report_skip(&skip, false);
            if let Err(e) = self.shared.store.record_skips(&[skip]).await {
                tracing::warn!(error = %e, task = %u.name, "could not record the skipped tick");
            }
        }
    }
}

#[cfg(test)]
mod tests;
