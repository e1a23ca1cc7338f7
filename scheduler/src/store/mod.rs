//! Run-state storage behind one narrow interface.
//!
//! The engine and the reconciler talk to a [`Store`]; [`postgres::PgStore`] is the production
//! implementation for one or many nodes (all of its SQL lives in `store/postgres/queries/`), and
//! [`sqlite::SqliteStore`] keeps the same records in a local file for a single process (its SQL
//! in `store/sqlite/queries/`). Both pass one contract suite (`tests/tests/store_contract.rs`). This module owns the data
//! that crosses the boundary and the store's error type; it knows nothing about cron syntax,
//! handlers or config formats.
//!
//! **Decide in Rust, record in the store.** Whatever a store writes that carries a rule (what a
//! lost run means, whether a tick runs again, what a finished run does to its task row, whether
//! a config document is stale) is decided by the engine and handed to the store as data: a
//! [`ClaimPolicy`] answers inside the claim transaction, a [`RunFinish`] says what to write, a
//! [`ConfigPlanner`] plans a reconcile on rows locked for it. A store only applies decisions, so
//! every backend behaves alike and the rules are unit-tested without a database.

mod connect;
mod error;
pub mod postgres;
pub mod sqlite;

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

pub use crate::policy::Recovery;
pub use connect::{Backend, DEFAULT_SQLITE_PATH, StoreSettings, backend_of, connect};
pub use error::{BoxError, StoreError, StoreResult};
pub use postgres::PgStore;
pub use sqlite::{SqliteStore, SqliteStoreBuilder};

/// How a run ended, as stored in `scheduler_runs.status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RunStatus {
    /// The handler is running (or its node died and nobody has noticed yet).
    Running,
    /// The handler returned `Ok`.
    Succeeded,
    /// The handler returned an error or panicked, without having been asked to stop.
    Failed,
    /// The run exceeded its timeout: the handler was told, then stopped.
    TimedOut,
    /// The handler was asked to stop (shutdown, or its lock could not be kept) and did not
    /// finish: it returned an error after the request, or was stopped. Its tick is handed over
    /// and runs again at once.
    Interrupted,
    /// The run's outcome is unknown: its node stopped renewing the lock (killed, crashed, cut
    /// off) and another node released it. Whether its tick runs again is the task's
    /// [`Recovery`] rule.
    Lost,
    /// Written by versions before 0.2 for runs stopped at shutdown; read only.
    Cancelled,
}

impl RunStatus {
    /// The value stored in the database.
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Succeeded => "succeeded",
            RunStatus::Failed => "failed",
            RunStatus::TimedOut => "timed_out",
            RunStatus::Interrupted => "interrupted",
            RunStatus::Lost => "lost",
            RunStatus::Cancelled => "cancelled",
        }
    }

    /// Parses a stored value.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "running" => RunStatus::Running,
            "succeeded" => RunStatus::Succeeded,
            "failed" => RunStatus::Failed,
            "timed_out" => RunStatus::TimedOut,
            "interrupted" => RunStatus::Interrupted,
            "lost" => RunStatus::Lost,
            "cancelled" => RunStatus::Cancelled,
            _ => return None,
        })
    }
}

impl fmt::Display for RunStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why due ticks did not get a run of their own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum SkipReason {
    /// Due while the task's previous run was still running (a task never overlaps itself).
    Overlap,
    /// Due while no node ran the task (all down, busy or unreachable); folded into one run.
    Misfire,
    /// The stored schedule could not be read by the node that claimed the task.
    InvalidSchedule,
}

impl SkipReason {
    /// The value stored in the database.
    pub fn as_str(self) -> &'static str {
        match self {
            SkipReason::Overlap => "overlap",
            SkipReason::Misfire => "misfire",
            SkipReason::InvalidSchedule => "invalid_schedule",
        }
    }

    /// Parses a stored value.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "overlap" => SkipReason::Overlap,
            "misfire" => SkipReason::Misfire,
            "invalid_schedule" => SkipReason::InvalidSchedule,
            _ => return None,
        })
    }
}

impl fmt::Display for SkipReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A range of due ticks of one task that did not get a run of their own, and why.
///
/// One record per incident, not per tick, so an every-second task down for a day costs one row.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SkipRecord {
    /// Task name.
    pub task_name: String,
    /// Why.
    pub reason: SkipReason,
    /// The first skipped tick.
    pub first_tick: DateTime<Utc>,
    /// The last skipped tick (or, when `exact` is false, the instant counting stopped at).
    pub last_tick: DateTime<Utc>,
    /// How many ticks (a lower bound when `exact` is false).
    pub ticks: i64,
    /// Whether `ticks` is the exact count.
    pub exact: bool,
    /// The run that followed and stands for these ticks, if any.
    pub run_id: Option<i64>,
}

impl SkipRecord {
    /// A record of `ticks` skipped ticks from `first_tick` to `last_tick`.
    pub fn new(
        task_name: impl Into<String>,
        reason: SkipReason,
        first_tick: DateTime<Utc>,
        last_tick: DateTime<Utc>,
        ticks: i64,
    ) -> Self {
        Self {
            task_name: task_name.into(),
            reason,
            first_tick,
            last_tick,
            ticks,
            exact: true,
            run_id: None,
        }
    }
}

/// A node's identity as recorded in the node table.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct NodeInfo {
    /// Unique node id (`SCHEDULER_NODE_ID`, default `hostname-pid`).
    pub node_id: String,
    /// Host name.
    pub hostname: String,
    /// Process id.
    pub pid: u32,
    /// The scheduler crate version.
    pub version: String,
    /// The task names this node's binary registers.
    pub tasks: Vec<String>,
}

impl NodeInfo {
    /// A node record.
    pub fn new(
        node_id: impl Into<String>,
        hostname: impl Into<String>,
        pid: u32,
        version: impl Into<String>,
        tasks: Vec<String>,
    ) -> Self {
        Self {
            node_id: node_id.into(),
            hostname: hostname.into(),
            pid,
            version: version.into(),
            tasks,
        }
    }
}

/// What a heartbeat learned about the cluster.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Heartbeat {
    /// Whether this node's row exists (false: it was pruned; register again).
    pub registered: bool,
    /// Other nodes that stopped sending heartbeats without stopping cleanly (crashed, killed,
    /// cut off). Their locks expire on their own; this is for visibility.
    pub silent: Vec<String>,
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

/// What a claim asks for.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct ClaimRequest<'a> {
    /// The claiming node.
    pub node_id: &'a str,
    /// The tasks it may claim (those its binary registers, less any it cannot schedule).
    pub tasks: &'a [String],
    /// At most this many runs (free handler slots).
    pub limit: usize,
    /// The lifetime of the locks taken.
    pub lock_lifetime: Duration,
}

impl<'a> ClaimRequest<'a> {
    /// A claim by `node_id` of at most `limit` runs among `tasks`, under locks of `lock_lifetime`.
    pub fn new(
        node_id: &'a str,
        tasks: &'a [String],
        limit: usize,
        lock_lifetime: Duration,
    ) -> Self {
        Self {
            node_id,
            tasks,
            limit,
            lock_lifetime,
        }
    }
}

/// A lock found past its expiry, offered to [`ClaimPolicy::rescue`].
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
}

/// The running run under an expired lock.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct LockedRun {
    /// Run id.
    pub run_id: i64,
    /// The tick it serves.
    pub scheduled_at: DateTime<Utc>,
    /// What to do when its outcome is unknown, as the claiming node's binary said.
    pub recovery: Recovery,
}

/// The end of a run, as decided by the engine (status, error) for the store to record.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RunEnd {
    /// Final status.
    pub status: RunStatus,
    /// Error message (already cleaned and bounded by the engine).
    pub error: Option<String>,
}

impl RunEnd {
    /// A run that ended with `status` and `error`.
    pub fn new(status: RunStatus, error: Option<String>) -> Self {
        Self { status, error }
    }
}

/// How a finished run changes the task's consecutive-failure count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FailureCount {
    /// Back to zero (the task succeeded).
    Reset,
    /// One more failure.
    Increment,
    /// Unchanged (an interruption says nothing about the task's health).
    Keep,
}

impl FailureCount {
    /// The value the store applies.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureCount::Reset => "reset",
            FailureCount::Increment => "increment",
            FailureCount::Keep => "keep",
        }
    }
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
        /// Make this tick due again (the run's tick, for a rerun).
        rerun_at: Option<DateTime<Utc>>,
        /// What the release does to the failure count.
        failures: FailureCount,
    },
}

/// A due task locked for claiming, offered to [`ClaimPolicy::plan`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct DueTask {
    /// Task name.
    pub name: String,
    /// Stored cron expression.
    pub cron: String,
    /// Stored IANA zone.
    pub timezone: String,
    /// The tick that is due (the row's next run).
    pub next_run_at: DateTime<Utc>,
    /// When the task's previous run ended (for telling overlap from misfire).
    pub last_finished_at: Option<DateTime<Utc>>,
}

/// What the engine decided for one due task, inside the claim transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DueDecision {
    /// Run it now.
    Run(ClaimPlan),
    /// Leave the row untouched (this node cannot schedule it; another may).
    Leave,
}

/// The plan for a claimed run.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClaimPlan {
    /// The tick this run serves.
    pub scheduled_at: DateTime<Utc>,
    /// The row's next run after this one (`None`: the schedule never fires again).
    pub next_run_at: Option<DateTime<Utc>>,
    /// What to do if this run's outcome becomes unknown.
    pub recovery: Recovery,
}

impl ClaimPlan {
    /// A plan to serve `scheduled_at` and schedule `next_run_at` after it.
    pub fn new(
        scheduled_at: DateTime<Utc>,
        next_run_at: Option<DateTime<Utc>>,
        recovery: Recovery,
    ) -> Self {
        Self {
            scheduled_at,
            next_run_at,
            recovery,
        }
    }
}

/// The engine's rules, consulted by [`Store::claim`] inside its transaction with the database
/// clock. Both methods must be quick and pure: no I/O, no waiting.
pub trait ClaimPolicy: Send + Sync {
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
    /// The fencing token of the lock.
    pub lock_token: Uuid,
    /// The tick served.
    pub scheduled_at: DateTime<Utc>,
    /// The database clock at the claim (ticks up to here are this run's to account for).
    pub claimed_at: DateTime<Utc>,
    /// When the task's previous run ended.
    pub previous_finished_at: Option<DateTime<Utc>>,
}

/// A lock released by [`Store::claim`] per a [`RescueDecision::Release`].
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
    /// The tick made due again, if any.
    pub rerun_at: Option<DateTime<Utc>>,
}

/// What one [`Store::claim`] did.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct ClaimOutcome {
    /// Expired locks released.
    pub rescued: Vec<RescuedLock>,
    /// Expired locks the policy chose to wait for.
    pub waiting: Vec<ExpiredLock>,
    /// Runs started.
    pub claimed: Vec<ClaimedRun>,
    /// Due tasks the policy left alone.
    pub left: Vec<String>,
}

/// The end of a run, as recorded by [`Store::finish_runs`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RunFinish {
    /// The run's id.
    pub run_id: i64,
    /// The run's lock.
    pub lock: LockKey,
    /// How it ended.
    pub end: RunEnd,
    /// Make this tick due again at once (an interrupted run is handed over).
    pub hand_over_at: Option<DateTime<Utc>>,
    /// What it does to the task's failure count.
    pub failures: FailureCount,
    /// Ticks this run accounts for without having run them.
    pub skips: Vec<SkipRecord>,
}

impl RunFinish {
    /// The record of `run_id`'s end under `lock`.
    pub fn new(run_id: i64, lock: LockKey, end: RunEnd, failures: FailureCount) -> Self {
        Self {
            run_id,
            lock,
            end,
            hand_over_at: None,
            failures,
            skips: Vec::new(),
        }
    }
}

/// What [`Store::finish_runs`] found for one run.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct FinishResult {
    /// The run.
    pub run_id: i64,
    /// Whether its lock was still held (and is now released). False: it had been taken over;
    /// the run row still got its real outcome.
    pub lock_held: bool,
}

/// A task row as the reconciler sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TaskRow {
    /// Task name.
    pub name: String,
    /// Stored cron expression.
    pub cron: String,
    /// Stored zone.
    pub timezone: String,
    /// Whether enabled.
    pub enabled: bool,
    /// Next run.
    pub next_run_at: Option<DateTime<Utc>>,
    /// The tick most recently claimed: a reconcile never schedules the next run at or before it.
    pub last_scheduled_at: Option<DateTime<Utc>>,
    /// Flagged as known to neither config nor code since.
    pub orphaned_since: Option<DateTime<Utc>>,
}

impl TaskRow {
    /// A row with nothing scheduled, claimed or flagged yet.
    pub fn new(name: &str, cron: &str, timezone: &str, enabled: bool) -> Self {
        Self {
            name: name.to_owned(),
            cron: cron.to_owned(),
            timezone: timezone.to_owned(),
            enabled,
            next_run_at: None,
            last_scheduled_at: None,
            orphaned_since: None,
        }
    }
}

/// One change the reconciler writes. Lock columns are never part of a change.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TaskChange {
    /// Insert a new row.
    Create {
        /// Task name.
        name: String,
        /// Cron expression.
        cron: String,
        /// Zone.
        timezone: String,
        /// Enabled.
        enabled: bool,
        /// First run.
        next_run_at: Option<DateTime<Utc>>,
    },
    /// Update schedule / enabled flag of an existing row in place.
    Update {
        /// Task name.
        name: String,
        /// Cron expression.
        cron: String,
        /// Zone.
        timezone: String,
        /// Enabled.
        enabled: bool,
        /// Recomputed next run (`None`: keep the stored one).
        next_run_at: Option<DateTime<Utc>>,
    },
    /// Mark or clear the orphan flag of a row.
    Orphaned {
        /// Task name.
        name: String,
        /// Set (true) or clear (false).
        orphaned: bool,
    },
}

/// The last config applied by any node.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConfigState {
    /// The document's version, if it carried one.
    pub version: Option<i64>,
    /// Content digest of the document.
    pub digest: String,
    /// The node that applied it.
    pub applied_by: String,
}

impl ConfigState {
    /// The state recording a document.
    pub fn new(
        version: Option<i64>,
        digest: impl Into<String>,
        applied_by: impl Into<String>,
    ) -> Self {
        Self {
            version,
            digest: digest.into(),
            applied_by: applied_by.into(),
        }
    }
}

/// What the store holds when a reconcile is planned inside its transaction: the rows are
/// locked for it, and no claim can interleave.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ConfigSnapshot {
    /// The database clock (the statement's, not the transaction's start).
    pub db_now: DateTime<Utc>,
    /// The config applied last, if any.
    pub applied: Option<ConfigState>,
    /// Every task row.
    pub rows: Vec<TaskRow>,
}

/// What a reconcile writes, decided on a [`ConfigSnapshot`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigPlan {
    /// Write `changes` and record `state`.
    Apply {
        /// The changes.
        changes: Vec<TaskChange>,
        /// The document applied.
        state: ConfigState,
    },
    /// Write nothing: the document is older than the applied one.
    Stale {
        /// The applied version.
        current: i64,
    },
    /// Write nothing: the rows already match.
    Nothing,
}

/// Plans a reconcile inside [`Store::apply_config`]'s transaction.
pub type ConfigPlanner<'a> = dyn Fn(&ConfigSnapshot) -> ConfigPlan + Send + Sync + 'a;

/// A recorded run, as listed by [`Store::recent_runs`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RunRecord {
    /// Run id.
    pub id: i64,
    /// Task name.
    pub task_name: String,
    /// Tick served.
    pub scheduled_at: DateTime<Utc>,
    /// Start.
    pub started_at: DateTime<Utc>,
    /// End.
    pub finished_at: Option<DateTime<Utc>>,
    /// Status.
    pub status: RunStatus,
    /// Node.
    pub node_id: String,
    /// Missed ticks folded in (see the skip records for their instants).
    pub ticks_collapsed: i64,
    /// Error message.
    pub error: Option<String>,
}

/// Wakes a waiting engine when another node changed something (a lock released, a config applied).
#[async_trait]
pub trait ChangeListener: Send {
    /// Waits for the next change notification. Errors mean the listener lost its connection; it
    /// reconnects on the next call.
    async fn recv(&mut self) -> StoreResult<()>;
}

/// Everything the engine and the reconciler need from persistent storage.
///
/// Every lock write is fenced by the lock token; the store's clock decides what is due and what
/// has expired; every rule is decided by the caller (see the module docs).
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// What this store is, for logs: backend and location, never a password.
    fn describe(&self) -> String;
    /// Creates or upgrades the schema. Safe when several nodes start at once.
    async fn migrate(&self) -> StoreResult<()>;
    /// Records this node as a member of the cluster (upsert).
    async fn register_node(&self, node: &NodeInfo) -> StoreResult<()>;
    /// Refreshes this node's heartbeat and reports the cluster's health.
    async fn heartbeat(&self, node_id: &str, silent_after: Duration) -> StoreResult<Heartbeat>;
    /// Marks this node stopped.
    async fn deregister_node(&self, node_id: &str) -> StoreResult<()>;
    /// When anything claimable by a node registering `tasks` becomes due, or any lock expires.
    async fn next_wake(&self, tasks: &[String]) -> StoreResult<WakeInfo>;
    /// In one transaction: offers every expired lock to `policy.rescue` and applies its
    /// decisions; then locks up to `limit` due, unlocked, enabled tasks among `tasks` (skipping
    /// rows other transactions hold), offers each to `policy.plan`, and takes the lock,
    /// advances the next run and records a running run for each task it says to run.
    async fn claim(
        &self,
        request: ClaimRequest<'_>,
        policy: &dyn ClaimPolicy,
    ) -> StoreResult<ClaimOutcome>;
    /// Extends the locks `node_id` holds, in one write. Fenced by owner and token, not by
    /// expiry: an expired lock nobody released is extended again. Returns the locks extended;
    /// any other was taken over.
    async fn renew_locks(
        &self,
        node_id: &str,
        held: &[LockKey],
        lock_lifetime: Duration,
    ) -> StoreResult<Vec<LockKey>>;
    /// Records the end of a batch of runs (also over a run another node marked `lost`), writes
    /// their skip records, and releases each lock still held under its token.
    async fn finish_runs(&self, finishes: &[RunFinish]) -> StoreResult<Vec<FinishResult>>;
    /// Gives each named enabled, unlocked task that has no next run the next run decided for it;
    /// returns the tasks changed (others got a next run or a lock meanwhile).
    async fn reschedule(&self, next_runs: &[(String, DateTime<Utc>)]) -> StoreResult<Vec<String>>;
    /// Records ranges of ticks that did not get a run of their own (outside any run's finish).
    async fn record_skips(&self, skips: &[SkipRecord]) -> StoreResult<()>;
    /// Deletes finished runs and skip records older than `retention`, in batches of at most
    /// `batch` rows per statement; returns how many runs.
    async fn prune_history(&self, retention: Duration, batch: u32) -> StoreResult<u64>;
    /// Reads all task rows and the database clock.
    async fn load_tasks(&self) -> StoreResult<(DateTime<Utc>, Vec<TaskRow>)>;
    /// The last applied config.
    async fn config_state(&self) -> StoreResult<Option<ConfigState>>;
    /// In one transaction serialised across nodes: reads the applied config and every task row
    /// (locked), asks `planner` what to write, and writes it.
    async fn apply_config(&self, planner: &ConfigPlanner<'_>) -> StoreResult<ConfigPlan>;
    /// The latest runs of a task, newest first (or of all tasks with `None`).
    async fn recent_runs(&self, task_name: Option<&str>, limit: i64)
    -> StoreResult<Vec<RunRecord>>;
    /// Skip records of a task whose ranges end at or after `since`, oldest first.
    async fn skips(&self, task_name: &str, since: DateTime<Utc>) -> StoreResult<Vec<SkipRecord>>;
    /// A listener for change notifications from other nodes.
    async fn listener(&self) -> StoreResult<Box<dyn ChangeListener>>;
}
