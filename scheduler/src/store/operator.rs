//! What operator actions read and write through the store: a task's whole state, pauses and
//! their end, manual runs, cancel requests (asked and as the running node learns of them) and the
//! audit trail.

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::{RunRecord, RunStatus, SkipRecord};

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
    /// Stored calendar (`TaskCalendar`'s stored form), if the task has one.
    #[serde(skip)]
    pub calendar: Option<String>,
    /// Whether the config enables it.
    pub enabled: bool,
    /// The next scheduled run: when its tick starts (the tick, or shifted by the task's jitter).
    pub next_run_at: Option<DateTime<Utc>>,
    /// The tick the next scheduled run serves (`next_run_at` itself without jitter).
    pub next_tick: Option<DateTime<Utc>>,
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
    /// The task's shard count as last reconciled (1: not sharded, and for a broadcast); see
    /// [`crate::shard`].
    pub shards: u32,
    /// A broadcast task's row (`shards = "nodes"`: its own row, or one of its nodes' rows
    /// `name[@node]`), pinned to no node or to its node; see [`crate::shard`].
    pub broadcast: bool,
}

#[cfg(test)]
impl TaskState {
    /// Row `name` on `cron` in UTC, enabled, one shard, nothing else known: where a unit test's
    /// state starts (`TaskState { next_run_at, ..TaskState::for_tests(...) }`).
    pub(crate) fn for_tests(name: &str, cron: &str) -> Self {
        TaskState {
            name: name.into(),
            cron: cron.into(),
            timezone: "UTC".into(),
            calendar: None,
            enabled: true,
            next_run_at: None,
            next_tick: None,
            lock_owner: None,
            lock_expires_at: None,
            last_run_at: None,
            last_finished_at: None,
            last_status: None,
            last_error: None,
            consecutive_failures: 0,
            pause: None,
            retry_at: None,
            manual_at: None,
            missed_since: None,
            orphaned_since: None,
            disabled_at: None,
            shards: 1,
            broadcast: false,
        }
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

/// What asking to cancel a run did
/// ([`OperatorStore::cancel_run`](super::OperatorStore::cancel_run)).
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

#[cfg_attr(not(any(feature = "postgres", feature = "sqlite")), allow(dead_code))]
impl CancelRequest {
    /// What a cancel that recorded nothing answers, given the run as it is (`None`: no such
    /// run).
    pub(crate) fn unchanged(run: Option<RunRecord>) -> Self {
        match run {
            None => CancelRequest::NotFound,
            Some(run) if run.status != RunStatus::Running => CancelRequest::Ended(run),
            Some(run) => CancelRequest::AlreadyRequested(run),
        }
    }
}

/// A cancel request recorded for a running run, as the node holding it learns of it
/// ([`ClaimStore::cancel_requests`](super::ClaimStore::cancel_requests)).
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
    /// The next scheduled run: when its tick starts (the ticks missed while paused are not
    /// replayed).
    pub next_run_at: Option<DateTime<Utc>>,
    /// The tick that next run serves, when jitter shifted its start off it (`None`: the start is
    /// the tick; a next run kept keeps the tick it had).
    pub next_tick: Option<DateTime<Utc>>,
    /// The ticks skipped while paused.
    pub skips: Vec<SkipRecord>,
}

impl ResumePlan {
    /// Resume with the next run `next_run_at` (its own tick, or the one it had if kept),
    /// recording `skips`.
    pub fn new(next_run_at: Option<DateTime<Utc>>, skips: Vec<SkipRecord>) -> Self {
        Self {
            next_run_at,
            next_tick: None,
            skips,
        }
    }

    /// The same, the next run starting tick `tick` shifted by its jitter (`None`: not shifted).
    pub fn with_tick(mut self, tick: Option<DateTime<Utc>>) -> Self {
        self.next_tick = tick;
        self
    }
}

/// Plans the end of a pause inside
/// [`OperatorStore::resume_task`](super::OperatorStore::resume_task), given each row's state,
/// its jitter window (its own, else its task's as last reconciled; zero: none) and the store's
/// clock.
pub type ResumePlanner<'a> =
    dyn Fn(&TaskState, std::time::Duration, DateTime<Utc>) -> ResumePlan + Send + Sync + 'a;
