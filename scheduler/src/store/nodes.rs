//! The cluster as the store records it: a node's identity, what a heartbeat learns, a node as
//! operators see it, and the overdue tasks the engine's missed-run check is offered.

use chrono::{DateTime, Utc};
use serde::Serialize;

/// A task is counted overdue by the heartbeat (`Heartbeat::overdue`) when its next run is this
/// late, on either backend.
#[cfg_attr(not(any(feature = "postgres", feature = "sqlite")), allow(dead_code))]
pub(crate) const OVERDUE_HINT: std::time::Duration = std::time::Duration::from_secs(2);

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
    /// Enabled, unpaused tasks whose next run is more than a few seconds overdue and that have
    /// no missed-run incident open yet (a cheap hint to look closer).
    pub overdue: i64,
    /// Nodes that have not stopped and sent a heartbeat within the silent limit, this one
    /// included (at least 1): the engine's estimate of how many nodes share the due work.
    pub live: i64,
    /// Instances in the store (rows `task/key` made at run time, enabled or not): with the
    /// tasks a node registers, the rows the nodes share the claiming of. Counted cluster-wide,
    /// so every node sizes its claims alike.
    pub instances: i64,
}

/// A task found overdue, offered to the missed-run check.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct OverdueTask {
    /// Task name.
    pub name: String,
    /// Stored cron expression.
    pub cron: String,
    /// Stored zone.
    pub timezone: String,
    /// Stored calendar (`TaskCalendar`'s stored form), if the task has one.
    pub calendar: Option<String>,
    /// The tick that has not run.
    pub next_run_at: DateTime<Utc>,
    /// When a run of it last started.
    pub last_run_at: Option<DateTime<Utc>>,
    /// The store's clock when it found the task overdue: how late the tick is, is measured
    /// against this, never against a node's own wall clock.
    pub checked_at: DateTime<Utc>,
    /// An instance's own owners and labels (empty: its task's), for its `task.missed`'s tags.
    pub tags: super::InstanceTags,
}

/// A node as recorded in the node table, for operators.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct NodeRecord {
    /// Node id.
    pub node_id: String,
    /// Host name.
    pub hostname: String,
    /// Process id.
    pub pid: i32,
    /// Scheduler version.
    pub version: String,
    /// The tasks its binary registers.
    pub tasks: Vec<String>,
    /// When it started.
    pub started_at: DateTime<Utc>,
    /// Its last heartbeat.
    pub heartbeat_at: DateTime<Utc>,
    /// When it stopped cleanly, if it did.
    pub stopped_at: Option<DateTime<Utc>>,
    /// Runs it holds the lock of now.
    pub running: i64,
    /// Its background services that are not running (restarting after a panic, or stopping),
    /// as it last reported them; empty while every one runs.
    pub services_down: Vec<String>,
    /// `host:port` of the database server its connections go to, as it last reported it
    /// (see [`Store::database_server`](super::Store::database_server)); `None` on SQLite,
    /// which has no server, and until the node reported one.
    pub database_server: Option<String>,
}

/// The stored list of services down (comma-separated) as names.
#[cfg_attr(not(any(feature = "postgres", feature = "sqlite")), allow(dead_code))]
pub(crate) fn split_services(stored: &str) -> Vec<String> {
    stored
        .split(',')
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}
