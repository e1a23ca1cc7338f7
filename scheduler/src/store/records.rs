//! The records a store keeps and returns: runs, skipped ticks, tasks, nodes, config state,
//! pauses, the audit trail and run logs.

use std::fmt;

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::Trigger;

/// How a run ended, as stored in `scheduler_runs.status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
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
    /// [`Recovery`](crate::Recovery) rule.
    Lost,
    /// An operator cancelled the run ([`Store::cancel_run`](super::Store::cancel_run)) and it
    /// did not finish: its handler returned an error after the request, was stopped by force
    /// after the cancel grace, or its node died after the request. Its tick is not run again
    /// (not handed over, not retried). (Versions before 0.2 also wrote it for runs stopped at
    /// shutdown.)
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum SkipReason {
    /// Due while the task's previous run was still running (a task never overlaps itself).
    Overlap,
    /// Due while no node ran the task (all down, busy or unreachable); folded into one run.
    Misfire,
    /// The stored schedule could not be read by the node that claimed the task.
    InvalidSchedule,
    /// Due while the config disabled the task (recorded when it is enabled again).
    Disabled,
    /// Due while an operator paused the task (recorded when the pause ends).
    Paused,
    /// A retry would have reached the next scheduled tick, so it gave way to it.
    RetryGaveWay,
}

impl SkipReason {
    /// The value stored in the database.
    pub fn as_str(self) -> &'static str {
        match self {
            SkipReason::Overlap => "overlap",
            SkipReason::Misfire => "misfire",
            SkipReason::InvalidSchedule => "invalid_schedule",
            SkipReason::Disabled => "disabled",
            SkipReason::Paused => "paused",
            SkipReason::RetryGaveWay => "retry_gave_way",
        }
    }

    /// Parses a stored value.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "overlap" => SkipReason::Overlap,
            "misfire" => SkipReason::Misfire,
            "invalid_schedule" => SkipReason::InvalidSchedule,
            "disabled" => SkipReason::Disabled,
            "paused" => SkipReason::Paused,
            "retry_gave_way" => SkipReason::RetryGaveWay,
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
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
    /// Enabled, unpaused tasks whose next run is more than a few seconds overdue and that have
    /// no missed-run incident open yet (a cheap hint to look closer).
    pub overdue: i64,
    /// Nodes that have not stopped and sent a heartbeat within the silent limit, this one
    /// included (at least 1): the engine's estimate of how many nodes share the due work.
    pub live: i64,
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
    /// Disabled since (the skip record of its ticks is written when it is enabled again).
    pub disabled_at: Option<DateTime<Utc>>,
    /// Paused by an operator (a reconcile never changes it).
    pub paused: bool,
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
            disabled_at: None,
            paused: false,
        }
    }
}

/// An operator's pause: no new runs of the task anywhere until it is resumed or `until`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Pause {
    /// When it began.
    pub at: DateTime<Utc>,
    /// Who paused it.
    pub by: String,
    /// Why.
    pub reason: String,
    /// When it ends by itself, if ever.
    pub until: Option<DateTime<Utc>>,
}

impl Pause {
    /// A pause by `by` for `reason`, from `at` until `until`.
    pub fn new(
        at: DateTime<Utc>,
        by: impl Into<String>,
        reason: impl Into<String>,
        until: Option<DateTime<Utc>>,
    ) -> Self {
        Self {
            at,
            by: by.into(),
            reason: reason.into(),
            until,
        }
    }

    /// Whether it is still in force at `now`.
    pub fn in_force(&self, now: DateTime<Utc>) -> bool {
        self.until.is_none_or(|until| until > now)
    }
}

/// Everything known about a task's row, for operators (API, CLI, dashboard).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct TaskState {
    /// Task name.
    pub name: String,
    /// Stored cron expression.
    pub cron: String,
    /// Stored zone.
    pub timezone: String,
    /// Whether the config enables it.
    pub enabled: bool,
    /// The next scheduled run.
    pub next_run_at: Option<DateTime<Utc>>,
    /// The node holding its lock (a run is going, or its outcome is being written).
    pub lock_owner: Option<String>,
    /// When that lock expires unless renewed.
    pub lock_expires_at: Option<DateTime<Utc>>,
    /// When a run last started.
    pub last_run_at: Option<DateTime<Utc>>,
    /// When a run last ended.
    pub last_finished_at: Option<DateTime<Utc>>,
    /// How it ended.
    pub last_status: Option<RunStatus>,
    /// Its error, if any.
    pub last_error: Option<String>,
    /// Failed, timed-out or lost runs in a row.
    pub consecutive_failures: i32,
    /// The operator's pause, if any.
    pub pause: Option<Pause>,
    /// A retry waiting, if any: when.
    pub retry_at: Option<DateTime<Utc>>,
    /// A manual run asked for and not started yet: when.
    pub manual_at: Option<DateTime<Utc>>,
    /// The open missed-run incident: since when.
    pub missed_since: Option<DateTime<Utc>>,
    /// Known to neither config nor code since.
    pub orphaned_since: Option<DateTime<Utc>>,
    /// Disabled since.
    pub disabled_at: Option<DateTime<Utc>>,
}

/// Which runs [`Store::runs`](super::Store::runs) lists: newest first, at most `limit`, those
/// older than `before_id` (the cursor of the previous page).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RunQuery {
    /// Only this task's.
    pub task: Option<String>,
    /// Only runs with this status.
    pub status: Option<RunStatus>,
    /// Only runs started so.
    pub trigger: Option<Trigger>,
    /// Only runs started at or after this.
    pub since: Option<DateTime<Utc>>,
    /// Only runs started before this.
    pub until: Option<DateTime<Utc>>,
    /// Only runs with an id below this (the next page).
    pub before_id: Option<i64>,
    /// At most this many (1 to 1,000).
    pub limit: u32,
}

impl RunQuery {
    /// The newest `limit` runs of every task.
    pub fn latest(limit: u32) -> Self {
        Self {
            limit,
            ..Self::default()
        }
    }

    /// Only `task`'s runs.
    pub fn task(mut self, task: impl Into<String>) -> Self {
        self.task = Some(task.into());
        self
    }

    /// Only runs that ended with `status` (or are running).
    pub fn status(mut self, status: RunStatus) -> Self {
        self.status = Some(status);
        self
    }

    /// Only runs started so.
    pub fn trigger(mut self, trigger: Trigger) -> Self {
        self.trigger = Some(trigger);
        self
    }

    /// Only runs started in `[since, until)`.
    pub fn between(mut self, since: Option<DateTime<Utc>>, until: Option<DateTime<Utc>>) -> Self {
        self.since = since;
        self.until = until;
        self
    }

    /// Only runs older than `id` (the next page after a run with that id).
    pub fn before(mut self, id: i64) -> Self {
        self.before_id = Some(id);
        self
    }
}

/// What asking for a manual run did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RunRequest {
    /// Queued; the next node with a free slot that runs the task takes it.
    Queued,
    /// A manual run of it was already queued; nothing changed.
    AlreadyQueued,
    /// No such task.
    NotFound,
    /// The task is paused; resume it first.
    Paused(Pause),
}

/// One line of the audit trail: who changed what, when, from where.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct AuditEntry {
    /// Its id (0 before it is recorded).
    pub id: i64,
    /// When.
    pub at: DateTime<Utc>,
    /// Who (the token's name, an OS user).
    pub actor: String,
    /// What (`trigger`, `pause`, `resume`, `cancel`).
    pub action: String,
    /// Which task.
    pub task: String,
    /// Details (the reason, the pause's end).
    pub detail: String,
    /// From where (a peer address, `cli@host`).
    pub source: String,
}

impl AuditEntry {
    /// An entry to record.
    pub fn new(
        actor: impl Into<String>,
        action: impl Into<String>,
        task: impl Into<String>,
        detail: impl Into<String>,
        source: impl Into<String>,
    ) -> Self {
        Self {
            id: 0,
            at: Utc::now(),
            actor: actor.into(),
            action: action.into(),
            task: task.into(),
            detail: detail.into(),
            source: source.into(),
        }
    }
}

/// A run's captured log, in chunks written as the run went.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct LogChunk {
    /// The run.
    pub run_id: i64,
    /// Its order among the run's chunks (from 0).
    pub seq: i32,
    /// The lines, each ending in a newline.
    pub text: String,
    /// How many lines.
    pub lines: i32,
    /// Set on the last chunk when the log was cut at its bound.
    pub truncated: bool,
}

impl LogChunk {
    /// Chunk `seq` of run `run_id`: `text`, `lines` lines of it, not cut.
    pub fn new(run_id: i64, seq: i32, text: impl Into<String>, lines: i32) -> Self {
        Self {
            run_id,
            seq,
            text: text.into(),
            lines,
            truncated: false,
        }
    }
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
    /// The tick that has not run.
    pub next_run_at: DateTime<Utc>,
    /// When a run of it last started.
    pub last_run_at: Option<DateTime<Utc>>,
    /// The store's clock when it found the task overdue: how late the tick is, is measured
    /// against this, never against a node's own wall clock.
    pub checked_at: DateTime<Utc>,
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
        /// Ticks recorded as skipped (those of tasks enabled again, due while disabled).
        skips: Vec<SkipRecord>,
    },
    /// Write nothing: the document is older than the applied one.
    Stale {
        /// The applied version.
        current: i64,
    },
    /// Write nothing: the rows already match.
    Nothing,
}

/// Plans a reconcile inside [`Store::apply_config`](super::Store::apply_config)'s transaction.
pub type ConfigPlanner<'a> = dyn Fn(&ConfigSnapshot) -> ConfigPlan + Send + Sync + 'a;

/// A recorded run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
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
    /// Its attempt at the tick.
    pub attempt: i32,
    /// What started it.
    pub trigger: Trigger,
    /// Who asked (manual runs).
    pub triggered_by: Option<String>,
    /// When an operator asked to cancel it, if anyone did.
    pub cancel_requested_at: Option<DateTime<Utc>>,
    /// Who asked to cancel it.
    pub cancel_requested_by: Option<String>,
}

/// What asking to cancel a run did ([`Store::cancel_run`](super::Store::cancel_run)).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CancelRequest {
    /// Recorded; the node running it is woken. The run as it is now.
    Requested(RunRecord),
    /// Somebody asked before (the run says who and when); nothing changed.
    AlreadyRequested(RunRecord),
    /// The run has ended already (its status says how); nothing changed.
    Ended(RunRecord),
    /// No such run (or it was pruned).
    NotFound,
}

/// A cancel request recorded for a running run, as the node holding it learns of it
/// ([`Store::cancel_requests`](super::Store::cancel_requests)).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Cancellation {
    /// The run.
    pub run_id: i64,
    /// Who asked.
    pub by: String,
    /// When (the store's clock).
    pub at: DateTime<Utc>,
}

impl Cancellation {
    /// A request by `by` at `at` to cancel run `run_id`.
    pub fn new(run_id: i64, by: impl Into<String>, at: DateTime<Utc>) -> Self {
        Self {
            run_id,
            by: by.into(),
            at,
        }
    }
}

/// What ending a pause writes, decided on the task's row (locked for it) and the store clock.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ResumePlan {
    /// The next scheduled run (the ticks missed while paused are not replayed).
    pub next_run_at: Option<DateTime<Utc>>,
    /// The ticks skipped while paused.
    pub skips: Vec<SkipRecord>,
}

impl ResumePlan {
    /// Resume with the next run `next_run_at`, recording `skips`.
    pub fn new(next_run_at: Option<DateTime<Utc>>, skips: Vec<SkipRecord>) -> Self {
        Self { next_run_at, skips }
    }
}

/// Plans the end of a pause inside [`Store::resume_task`](super::Store::resume_task).
pub type ResumePlanner<'a> = dyn Fn(&TaskState, DateTime<Utc>) -> ResumePlan + Send + Sync + 'a;
