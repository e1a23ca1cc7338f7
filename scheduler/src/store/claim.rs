//! The data of a claim and of a run's end: what the engine offers and decides inside the claim
//! transaction ([`ClaimRules`]), and what a finished run records ([`RunFinish`]).

mod finish;
mod renewal;

use std::time::Duration;

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::{Pause, PendingBackfill, SkipRecord, Trigger};
use crate::policy::Recovery;
pub use finish::{FailureCount, FinishResult, LastRun, Requeue, RunEnd, RunFinish};
pub use renewal::Renewal;

/// A lock, named by its task and fencing token.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LockKey {
    /// Task name.
    pub task_name: String,
    /// Fencing token.
    pub token: Uuid,
}

impl LockKey {
    /// The lock of `task_name` with `token`.
    pub fn new(task_name: impl Into<String>, token: Uuid) -> Self {
        Self {
            task_name: task_name.into(),
            token,
        }
    }
}

/// When the engine should next look at the store.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct WakeInfo {
    /// The database's clock when asked.
    pub db_now: DateTime<Utc>,
    /// The earliest next run of an unlocked, enabled task this node may claim.
    pub due_at: Option<DateTime<Utc>>,
    /// The earliest expiry of any held lock (any node may rescue an expired lock).
    pub expiry_at: Option<DateTime<Utc>>,
}

/// A node is live while its last heartbeat is at most this old, unless the claim says
/// otherwise: three of the default heartbeat intervals.
const DEFAULT_LIVE_WINDOW: Duration = Duration::from_secs(30);

/// What a claim asks for.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct ClaimRequest<'a> {
    /// The claiming node.
    pub node_id: &'a str,
    /// The tasks it may claim (those its binary registers, less any it cannot schedule).
    pub tasks: &'a [String],
    /// At most this many runs (free handler slots, and the runs that may wait for one on their
    /// tick: see [`Self::starting_now`]).
    pub limit: usize,
    /// Of those, at most this many that start at once (each needs a free handler slot now; a
    /// run claimed ahead of its tick waits for one there). Rows due now beyond it are left for a
    /// later claim ([`ClaimOutcome::no_slot`]). `limit` unless set.
    pub slots: usize,
    /// Ticks due within this long from now may be claimed already (they start on their tick);
    /// retries, manual runs and the ends of pauses only when due.
    pub ahead: Duration,
    /// A node is live if it heartbeat within this long (the spread of a sharded task's shards
    /// counts the live nodes registering it; see [`crate::shard::may_take`]).
    pub live_window: Duration,
    /// Tasks left out of this claim (not in `tasks`): their rows, shards' rows included, are
    /// neither claimed nor locked, so another node's claim of them is not held up by this one.
    pub left_out: &'a [String],
}

impl<'a> ClaimRequest<'a> {
    /// A claim by `node_id` of at most `limit` runs among `tasks`, of what is due now.
    pub fn new(node_id: &'a str, tasks: &'a [String], limit: usize) -> Self {
        Self {
            node_id,
            tasks,
            limit,
            slots: limit,
            ahead: Duration::ZERO,
            live_window: DEFAULT_LIVE_WINDOW,
            left_out: &[],
        }
    }

    /// Leaves `tasks` (not among the claim's tasks) out of the claim: their rows, and their
    /// shards' rows, are not even locked while the claim looks at what is due.
    pub fn leaving_out(mut self, tasks: &'a [String]) -> Self {
        self.left_out = tasks;
        self
    }

    /// Counts a node live if it heartbeat within `window` (default 30 s).
    pub fn live_window(mut self, window: Duration) -> Self {
        self.live_window = window;
        self
    }

    /// Also claims ticks due within `ahead` from now.
    pub fn ahead(mut self, ahead: Duration) -> Self {
        self.ahead = ahead;
        self
    }

    /// Starts at most `slots` of the claimed runs at once (the node's free handler slots):
    /// the rest of `limit` are runs claimed ahead of their tick.
    pub fn starting_now(mut self, slots: usize) -> Self {
        self.slots = slots;
        self
    }
}

/// A lock found past its expiry, offered to [`ClaimRules::rescue`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ExpiredLock {
    /// The lock.
    pub key: LockKey,
    /// The node that holds it.
    pub owner: String,
    /// When it expired (database clock).
    pub expired_at: DateTime<Utc>,
    /// The run it protects, if one is recorded running.
    pub run: Option<LockedRun>,
    /// Another transaction holds the lock's row (a statement of its owner's, stuck or frozen
    /// mid-write: the owner may be alive, its renewals waiting behind that statement). Such a
    /// lock is never released by this claim, whatever the rules decide. Always `false` on
    /// SQLite, which has no row locks.
    pub busy: bool,
}

/// The running run under an expired lock.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct LockedRun {
    /// Run id.
    pub run_id: i64,
    /// The tick it serves (for a manual run, when it was asked for).
    pub scheduled_at: DateTime<Utc>,
    /// What to do when its outcome is unknown, as the claiming node's binary said.
    pub recovery: Recovery,
    /// Its attempt at the tick.
    pub attempt: i32,
    /// What started it.
    pub trigger: Trigger,
    /// Who asked for it (manual runs).
    pub triggered_by: Option<String>,
    /// Who asked to cancel it, if anyone did before its node went silent.
    pub cancel_requested_by: Option<String>,
}

/// What to do with an expired lock, decided by the engine inside the claim transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RescueDecision {
    /// Leave it alone for now (its owner may still renew it or record its outcome).
    Wait,
    /// Release it, fenced by its token and expiry.
    Release {
        /// How the run under it ends, if there is one.
        run_end: Option<RunEnd>,
        /// What runs again.
        requeue: Option<Requeue>,
        /// What the release does to the failure count.
        failures: FailureCount,
    },
}

/// A retry waiting for its time, as stored on the task row.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PendingRetry {
    /// The tick retried.
    pub tick: DateTime<Utc>,
    /// The attempt it will be.
    pub attempt: i32,
    /// When it is due.
    pub at: DateTime<Utc>,
}

/// A manual run asked for and not started yet.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PendingManual {
    /// When it was asked for.
    pub at: DateTime<Utc>,
    /// Who asked.
    pub by: Option<String>,
}

/// A task with something due (a tick, a retry, a manual run, or the end of a pause), locked
/// for the claim and offered to [`ClaimRules::plan`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct DueTask {
    /// Task name.
    pub name: String,
    /// Stored cron expression.
    pub cron: String,
    /// Stored IANA zone.
    pub timezone: String,
    /// Stored calendar (`TaskCalendar`'s stored form), if the task has one.
    pub calendar: Option<String>,
    /// Whether the config enables it.
    pub enabled: bool,
    /// When the next scheduled tick starts: the tick itself, or its start shifted by the task's
    /// jitter (then [`next_tick`](Self::next_tick) is the tick).
    pub next_run_at: Option<DateTime<Utc>>,
    /// The next scheduled tick, when jitter shifted its start (`next_run_at`) off it; `None`:
    /// `next_run_at` is the tick.
    pub next_tick: Option<DateTime<Utc>>,
    /// The row's own jitter window (an instance's, see `crate::ticks::jitter`); `None`: its
    /// task's.
    pub jitter: Option<Duration>,
    /// The tick most recently claimed by a scheduled run (the calendar's skipped ticks are
    /// counted from it).
    pub last_scheduled_at: Option<DateTime<Utc>>,
    /// When the task's previous run ended (for telling overlap from misfire).
    pub last_finished_at: Option<DateTime<Utc>>,
    /// A retry waiting, if any.
    pub retry: Option<PendingRetry>,
    /// A manual run asked for, if any.
    pub manual: Option<PendingManual>,
    /// The operator's pause, if any (only an expired one is offered, to end it).
    pub pause: Option<Pause>,
    /// The open missed-run incident, if any.
    pub missed_since: Option<DateTime<Utc>>,
    /// A backfill tick due, if any (the earliest not yet run of the task's backfill).
    pub backfill: Option<PendingBackfill>,
    /// The task's shard count (1: not sharded); the row's shard index is in its name
    /// ([`crate::shard::split_row`]).
    pub shards: u32,
    /// The node the row is pinned to ([`TaskRow::node_pin`](super::TaskRow::node_pin)): a
    /// broadcast task's rows.
    pub node_pin: Option<String>,
    /// A broadcast run's shard, decided by the claim from the nodes alive at the tick.
    pub broadcast: Option<crate::Shard>,
    /// An instance's arguments as JSON text (the row is `task/key`, see `crate::instance`).
    pub args: Option<String>,
    /// The arguments the pending manual run was asked with, in place of the row's own (JSON
    /// text; `None`: the row's own).
    pub manual_args: Option<String>,
    /// An instance's own owners and labels (empty: its task's), for its events' tags.
    pub tags: super::InstanceTags,
    /// The limit shared by tasks its runs hold (see `crate::limits`): the row's own, else
    /// (an instance) its task's.
    pub limit: Option<String>,
    /// Since when its due tick waits for a share of its limit, if it does.
    pub limit_waiting_since: Option<DateTime<Utc>>,
}

impl DueTask {
    /// The arguments a run of this row started by `trigger` gets, and the override it records
    /// with the run: a manual run asked with arguments runs with them, for that run only;
    /// every other run with the row's own.
    pub fn run_args(&self, trigger: Trigger) -> (Option<String>, Option<String>) {
        match (&self.manual_args, trigger) {
            (Some(manual), Trigger::Manual) => (Some(manual.clone()), Some(manual.clone())),
            _ => (self.args.clone(), None),
        }
    }

    /// The next scheduled tick (not its jittered start).
    pub fn tick(&self) -> Option<DateTime<Utc>> {
        self.next_tick.or(self.next_run_at)
    }

    /// The shard this row runs.
    pub fn shard(&self) -> crate::Shard {
        self.broadcast.unwrap_or(crate::Shard {
            index: crate::shard::split_row(&self.name).1,
            total: self.shards.max(1),
        })
    }

    /// The own row of a broadcast task, pinned to no node: never run, only moved on.
    pub fn is_broadcast_task_row(&self) -> bool {
        self.node_pin.as_deref() == Some("")
    }
}

/// The next scheduled run a claim leaves on the row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum NextRun {
    /// Unchanged (a retry or a manual run does not move the schedule).
    Keep,
    /// This one (`None`: the schedule never fires again).
    Set(Option<DateTime<Utc>>),
    /// The tick `tick`, starting at `start` (after it, by the task's jitter).
    Shifted {
        /// The tick: what the run will serve.
        tick: DateTime<Utc>,
        /// When it starts: what the claim waits for.
        start: DateTime<Utc>,
    },
}

/// A row's next run as its columns hold it: `(next_run_at, next_tick)`, the start and, when
/// jitter shifted the start off it, the tick.
pub type NextColumns = (Option<DateTime<Utc>>, Option<DateTime<Utc>>);

impl NextRun {
    /// The row's columns this sets, `(next_run_at, next_tick)`; `None`: unchanged.
    pub fn columns(self) -> Option<NextColumns> {
        match self {
            NextRun::Keep => None,
            NextRun::Set(next) => Some((next, None)),
            NextRun::Shifted { tick, start } => Some((Some(start), Some(tick))),
        }
    }

    /// When the next run starts, if this sets one.
    pub fn start(self) -> Option<DateTime<Utc>> {
        self.columns().and_then(|(start, _)| start)
    }
}

/// What the engine decided for one due task, inside the claim transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DueDecision {
    /// Run it now.
    Run(ClaimPlan),
    /// Do not run it: move its schedule on and record why (misfire = skip, a pause that
    /// ended, a retry that gave way).
    Skip {
        /// The next scheduled run.
        next_run_at: NextRun,
        /// Drop the pending retry.
        clear_retry: bool,
        /// End the (expired) pause.
        clear_pause: bool,
        /// The ticks skipped.
        skips: Vec<SkipRecord>,
    },
    /// Leave the row untouched (this node cannot schedule it; another may).
    Leave,
}

/// The plan for a claimed run.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClaimPlan {
    /// The tick this run serves (for a manual run, when it was asked for).
    pub scheduled_at: DateTime<Utc>,
    /// When it is due to start: `scheduled_at`, or a scheduled tick's start shifted by the
    /// task's jitter (a run claimed ahead starts then).
    pub starts_at: DateTime<Utc>,
    /// What starts it.
    pub trigger: Trigger,
    /// Its attempt at the tick (1 unless a retry).
    pub attempt: i32,
    /// Who asked (manual runs).
    pub triggered_by: Option<String>,
    /// What to do if this run's outcome becomes unknown.
    pub recovery: Recovery,
    /// The lifetime of the lock taken.
    pub lock_lifetime: Duration,
    /// The row's next scheduled run after this claim.
    pub next_run_at: NextRun,
    /// Drop the pending retry (it is this run, or it gave way to this one).
    pub clear_retry: bool,
    /// Ticks recorded as skipped by this claim (a retry that gave way).
    pub skips: Vec<SkipRecord>,
    /// The backfill whose tick this run serves (trigger `backfill`).
    pub backfill_id: Option<i64>,
}

impl ClaimPlan {
    /// A plan to serve the scheduled tick `scheduled_at` and schedule `next_run_at` after it.
    pub fn scheduled(
        scheduled_at: DateTime<Utc>,
        next_run_at: Option<DateTime<Utc>>,
        recovery: Recovery,
        lock_lifetime: Duration,
    ) -> Self {
        Self {
            scheduled_at,
            starts_at: scheduled_at,
            trigger: Trigger::Schedule,
            attempt: 1,
            triggered_by: None,
            recovery,
            lock_lifetime,
            next_run_at: NextRun::Set(next_run_at),
            clear_retry: false,
            skips: Vec::new(),
            backfill_id: None,
        }
    }
}

/// The engine's rules, consulted by [`ClaimStore::claim`](super::ClaimStore::claim) inside its
/// transaction with the database clock. Both methods must be quick and pure: no I/O, no waiting.
pub trait ClaimRules: Send + Sync {
    /// What to do with a lock past its expiry.
    fn rescue(&self, lock: &ExpiredLock, db_now: DateTime<Utc>) -> RescueDecision;
    /// What to do with a due task.
    fn plan(&self, task: &DueTask, db_now: DateTime<Utc>) -> DueDecision;
}

/// A claimed run, locked by this node.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ClaimedRun {
    /// The run's id in `scheduler_runs`.
    pub run_id: i64,
    /// Task name.
    pub task_name: String,
    /// The lock's token (the run holds the lock while the task's row carries it).
    pub lock_token: Uuid,
    /// The run's fencing token: the task's claim count, one more than the previous claim's on
    /// any node (see [`TaskContext::fencing_token`](crate::TaskContext::fencing_token)).
    pub fencing_token: i64,
    /// The tick served.
    pub scheduled_at: DateTime<Utc>,
    /// When it was due to start: `scheduled_at`, shifted by the task's jitter for a scheduled
    /// tick of a task with one. Its lateness counts from here.
    pub due_at: DateTime<Utc>,
    /// The database clock at the claim (ticks up to here are this run's to account for).
    pub claimed_at: DateTime<Utc>,
    /// How long after the claim returned the run is due to start: zero, unless its tick was
    /// claimed ahead (see [`ClaimRequest::ahead`]). Measured from the store's clock at the end
    /// of the claim, so a run never starts before its tick by the store's clock.
    pub starts_in: Duration,
    /// When the task's previous run ended.
    pub previous_finished_at: Option<DateTime<Utc>>,
    /// Its attempt at the tick.
    pub attempt: i32,
    /// What started it.
    pub trigger: Trigger,
    /// Who asked (manual runs).
    pub triggered_by: Option<String>,
    /// The missed-run incident this run ends, if one was open.
    pub missed_since: Option<DateTime<Utc>>,
    /// The shard of its tick it runs (`task_name` is the shard's row: `name[i]` for `i >= 1`).
    pub shard: crate::Shard,
    /// The arguments its handler reads as JSON text: an instance's own, or those a manual run
    /// was asked with in place of its row's own.
    pub args: Option<String>,
    /// An instance's own owners and labels as its row holds them at the claim (empty: its
    /// task's): the tags of its run's events, on whichever node runs it.
    pub tags: super::InstanceTags,
    /// Its row's zone (an instance's own), which its events carry.
    pub timezone: String,
}

/// A lock released by [`ClaimStore::claim`](super::ClaimStore::claim) per a
/// [`RescueDecision::Release`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RescuedLock {
    /// Task name.
    pub task_name: String,
    /// The node that held the lock.
    pub previous_owner: String,
    /// The run ended under it, if one was running.
    pub run_id: Option<i64>,
    /// That run's tick.
    pub run_scheduled_at: Option<DateTime<Utc>>,
    /// How that run was recorded.
    pub run_end: Option<RunEnd>,
    /// What runs again, if anything.
    pub requeue: Option<Requeue>,
}

/// What one [`ClaimStore::claim`](super::ClaimStore::claim) did.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct ClaimOutcome {
    /// Expired locks released.
    pub rescued: Vec<RescuedLock>,
    /// Expired locks the rules chose to wait for.
    pub waiting: Vec<ExpiredLock>,
    /// Runs started.
    pub claimed: Vec<ClaimedRun>,
    /// Due tasks the rules left alone.
    pub left: Vec<String>,
    /// Due tasks whose ticks the rules skipped, with the records written.
    pub skipped: Vec<SkipRecord>,
    /// Due shards held back by the spread or overlap rule ([`crate::shard::may_take`]): another
    /// node's turn first, or an earlier tick still going (also listed in `left`).
    pub held_back: usize,
    /// When the spread rule (not the overlap rule) held shards back: how long until more of
    /// them may be taken by this node, by the store's clock. Zero: past the spread grace, this
    /// claim took its share of what is left and more may be taken now (after the other nodes'
    /// claims); otherwise until the earliest held-back tick's grace ends.
    pub spread_wait: Option<Duration>,
    /// Sharded tasks whose tick this node now holds its whole share of within the spread
    /// grace ([`crate::shard::ShardFacts::share_complete`]), with how long until the grace
    /// ends or the task's next tick, whichever is sooner: the node claims nothing more of them
    /// until then, and leaves their rows out of its claims ([`ClaimRequest::leaving_out`]) so
    /// the other nodes can take theirs.
    pub spread_done: Vec<(String, Duration)>,
    /// Due rows left waiting for a share of their limit (`crate::limits`), with the limit
    /// (also listed in `left`): their ticks keep their time and are claimed again later.
    pub limit_waiting: Vec<(String, String)>,
    /// Due rows that would have started at once but found no free handler slot
    /// ([`ClaimRequest::starting_now`]): left as they were, claimed again when slots free up.
    pub no_slot: usize,
}
