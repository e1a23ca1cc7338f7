//! Run-state storage behind one narrow interface.
//!
//! The engine and the reconciler talk to a [`Store`]; [`postgres::PgStore`] is the production
//! implementation (all of its SQL lives in `store/postgres/queries/`). An embedded store for
//! single-node teams can implement the same trait. This module owns the data that crosses the
//! boundary; it knows nothing about cron syntax, handlers or config formats.

pub mod postgres;

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

pub use postgres::PgStore;

/// Store operations fail with a database error.
pub type StoreResult<T> = Result<T, sqlx::Error>;

/// How a run ended, as stored in `scheduler_runs.status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RunStatus {
    /// The handler is running (or its node died and nobody has noticed yet).
    Running,
    /// The handler returned `Ok`.
    Succeeded,
    /// The handler returned an error or panicked.
    Failed,
    /// The lock was lost (taken over after expiry, or not renewable) and the handler was stopped.
    Lost,
    /// The node shut down before the handler finished; the tick is handed to another node.
    Cancelled,
}

impl RunStatus {
    /// The value stored in the database.
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Succeeded => "succeeded",
            RunStatus::Failed => "failed",
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

/// A node's identity as recorded in the node table.
#[derive(Debug, Clone)]
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

/// What a heartbeat learned about the cluster.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Heartbeat {
    /// Whether this node's row exists (false: it was pruned; register again).
    pub registered: bool,
    /// Other nodes that stopped sending heartbeats without stopping cleanly (crashed, killed,
    /// cut off). Their locks expire on their own; this is for visibility.
    pub silent: Vec<String>,
}

/// When the engine should next look at the store.
#[derive(Debug, Clone, Copy)]
pub struct WakeInfo {
    /// The database's clock when asked.
    pub db_now: DateTime<Utc>,
    /// The earliest instant at which a task this node may claim becomes due, or a lock expires.
    pub wake_at: Option<DateTime<Utc>>,
}

/// A due task locked for claiming, before its run is recorded.
#[derive(Debug, Clone)]
pub struct DueTask {
    /// Task name.
    pub name: String,
    /// Stored cron expression.
    pub cron: String,
    /// Stored IANA zone.
    pub timezone: String,
    /// The tick that is due (the row's next run).
    pub next_run_at: DateTime<Utc>,
}

/// What the engine decided for one due task, inside the claim transaction.
#[derive(Debug, Clone)]
pub struct ClaimPlan {
    /// The tick this run serves.
    pub scheduled_at: DateTime<Utc>,
    /// The row's next run after this one (`None`: the schedule never fires again).
    pub next_run_at: Option<DateTime<Utc>>,
    /// How many further missed ticks this run stands for.
    pub ticks_collapsed: i32,
}

/// Decides the plan of each due task; called inside the claim transaction with the DB clock.
pub type Planner<'a> = dyn Fn(&DueTask, DateTime<Utc>) -> ClaimPlan + Send + Sync + 'a;

/// A claimed run, locked by this node.
#[derive(Debug, Clone)]
pub struct ClaimedRun {
    /// The run's id in `scheduler_runs`.
    pub run_id: i64,
    /// Task name.
    pub task_name: String,
    /// The fencing token of the lock.
    pub lock_token: Uuid,
    /// The tick served.
    pub scheduled_at: DateTime<Utc>,
    /// Missed ticks folded into this run.
    pub ticks_collapsed: i32,
}

/// A lock found expired and released by [`Store::claim_due`].
#[derive(Debug, Clone)]
pub struct RescuedLock {
    /// Task name.
    pub task_name: String,
    /// The node that held the lock.
    pub previous_owner: String,
    /// The run marked `lost`, if one was running.
    pub lost_run_id: Option<i64>,
}

/// The end of a run, as recorded by [`Store::finish_runs`].
#[derive(Debug, Clone)]
pub struct RunOutcome {
    /// The run's id.
    pub run_id: i64,
    /// Task name.
    pub task_name: String,
    /// The lock's fencing token.
    pub lock_token: Uuid,
    /// Final status.
    pub status: RunStatus,
    /// Error message, for failures.
    pub error: Option<String>,
    /// Make the served tick due again at once (a run interrupted by shutdown is handed over).
    pub hand_over: Option<DateTime<Utc>>,
}

/// A task row as the reconciler sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
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
    /// Flagged as known to neither config nor code since.
    pub orphaned_since: Option<DateTime<Utc>>,
}

/// One change the reconciler writes. Lock columns are never part of a change.
#[derive(Debug, Clone, PartialEq, Eq)]
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
pub struct ConfigState {
    /// The document's version, if it carried one.
    pub version: Option<i64>,
    /// Content digest of the document.
    pub digest: String,
    /// The node that applied it.
    pub applied_by: String,
}

/// Result of [`Store::apply_config`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApplyOutcome {
    /// Changes written.
    Applied,
    /// Refused: a newer document version is already applied.
    Stale {
        /// The stored version.
        current: i64,
    },
}

/// A recorded run, as listed by [`Store::recent_runs`].
#[derive(Debug, Clone)]
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
    pub status: String,
    /// Node.
    pub node_id: String,
    /// Missed ticks folded in.
    pub ticks_collapsed: i32,
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
/// Every lock write is fenced by the lock token; the store's clock decides what is due.
#[async_trait]
pub trait Store: Send + Sync + 'static {
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
    /// Releases expired locks (marking their running runs `lost` and making the tick due again),
    /// then claims up to `limit` due tasks among `tasks` for `node_id`, advancing each row's next
    /// run per `planner` in the same transaction.
    async fn claim_due(
        &self,
        node_id: &str,
        tasks: &[String],
        limit: usize,
        lock_lifetime: Duration,
        planner: &Planner<'_>,
    ) -> StoreResult<(Vec<RescuedLock>, Vec<ClaimedRun>)>;
    /// Extends the locks `node_id` holds (task name and token of each), in one write. Fenced by
    /// owner and token. Returns the locks that were extended; any other was taken over.
    async fn renew_locks(
        &self,
        node_id: &str,
        held: &[(String, Uuid)],
        lock_lifetime: Duration,
    ) -> StoreResult<Vec<(String, Uuid)>>;
    /// Records the end of a batch of runs and releases each lock that is still ours. Returns the
    /// names of the tasks whose lock was still held.
    async fn finish_runs(&self, outcomes: &[RunOutcome]) -> StoreResult<Vec<String>>;
    /// Deletes finished runs older than `retention`; returns how many.
    async fn prune_runs(&self, retention: Duration) -> StoreResult<u64>;
    /// Reads all task rows and the database clock.
    async fn load_tasks(&self) -> StoreResult<(DateTime<Utc>, Vec<TaskRow>)>;
    /// The last applied config.
    async fn config_state(&self) -> StoreResult<Option<ConfigState>>;
    /// Writes reconciler changes atomically, unless a newer document version was applied.
    async fn apply_config(
        &self,
        state: &ConfigState,
        changes: &[TaskChange],
    ) -> StoreResult<ApplyOutcome>;
    /// The latest runs of a task, newest first (or of all tasks with `None`).
    async fn recent_runs(&self, task_name: Option<&str>, limit: i64)
    -> StoreResult<Vec<RunRecord>>;
    /// A listener for change notifications from other nodes.
    async fn listener(&self) -> StoreResult<Box<dyn ChangeListener>>;
}
