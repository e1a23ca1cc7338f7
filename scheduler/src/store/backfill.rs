//! What a backfill records: an operator's request to run a task's past ticks again
//! ([`NewBackfill`]), kept with its ticks so that any node claims them and none is lost to a
//! restart, and what is read back about it ([`BackfillRecord`], its [`BackfillProgress`] and its
//! [`BackfillTick`]s). Which ticks a backfill runs is decided by the caller
//! ([`crate::operate::backfill`]); the store records and claims them.

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::RunStatus;

/// A backfill to record: the ticks to run, decided by the caller, and the request's options.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct NewBackfill {
    /// The task.
    pub task_name: String,
    /// The start of the range asked for.
    pub from: DateTime<Utc>,
    /// The end of the range asked for.
    pub to: DateTime<Utc>,
    /// Every tick of the range (`--all`), not only those without a successful run.
    pub all_ticks: bool,
    /// The cap on runs it was checked against.
    pub max_runs: u32,
    /// How many of its runs at once.
    pub concurrency: u32,
    /// The least time between the starts of two of its runs.
    pub pace: std::time::Duration,
    /// Who asked.
    pub requested_by: String,
    /// The ticks to run, in order (at least one).
    pub ticks: Vec<DateTime<Utc>>,
    /// The rows that run each tick, once each: the task's (or instance's) own row and, for a
    /// task with shards, each of its shard rows (`task[i]`, `task/key[i]`; see
    /// [`crate::shard`]); those that exist take part. Empty: the task's own row alone.
    pub rows: Vec<String>,
}

impl NewBackfill {
    /// The rows that run each tick ([`NewBackfill::rows`], else the task's own row).
    #[cfg_attr(not(any(feature = "postgres", feature = "sqlite")), allow(dead_code))]
    pub(crate) fn run_rows(&self) -> Vec<String> {
        if self.rows.is_empty() {
            vec![self.task_name.clone()]
        } else {
            self.rows.clone()
        }
    }
}

/// A pending backfill tick offered with a due task (see
/// [`DueTask::backfill`](super::DueTask::backfill)).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PendingBackfill {
    /// The backfill.
    pub id: i64,
    /// Its earliest tick not yet run.
    pub tick: DateTime<Utc>,
    /// When it may start (the backfill's pace after the previous one's start).
    pub at: DateTime<Utc>,
    /// Who asked for it.
    pub by: String,
}

/// What recording a backfill did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum BackfillCreate {
    /// Recorded with this id; the nodes are woken.
    Created(i64),
    /// No such task.
    NotFound,
    /// Another backfill of the task still has ticks to run (its id): cancel it or wait.
    Busy(i64),
}

/// How far a backfill got, counted over its ticks by their runs' statuses (a task with N
/// shards: each tick counted once per shard, as it runs once on each).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct BackfillProgress {
    /// Ticks in the backfill.
    pub total: i64,
    /// Not claimed yet (and the backfill not cancelled).
    pub pending: i64,
    /// Running now.
    pub running: i64,
    /// Succeeded.
    pub succeeded: i64,
    /// Ended otherwise (failed, timed out, lost, interrupted, cancelled run).
    pub failed: i64,
    /// Never run: the backfill was cancelled first.
    pub cancelled: i64,
}

/// A backfill as recorded, with its progress.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct BackfillRecord {
    /// Its id.
    pub id: i64,
    /// The task.
    pub task_name: String,
    /// The start of the range asked for.
    pub from: DateTime<Utc>,
    /// The end of the range asked for.
    pub to: DateTime<Utc>,
    /// Every tick of the range, not only those without a successful run.
    pub all_ticks: bool,
    /// The cap on runs it was checked against.
    pub max_runs: i64,
    /// How many of its runs at once.
    pub concurrency: i64,
    /// The least time between the starts of two of its runs, in milliseconds.
    pub pace_ms: i64,
    /// Who asked.
    pub requested_by: String,
    /// When.
    pub requested_at: DateTime<Utc>,
    /// When it was cancelled, if it was.
    pub cancelled_at: Option<DateTime<Utc>>,
    /// Who cancelled it.
    pub cancelled_by: Option<String>,
    /// Its ticks, counted by state.
    pub progress: BackfillProgress,
}

impl BackfillRecord {
    /// `cancelled`, `done` (no tick pending or running) or `running`.
    pub fn state(&self) -> &'static str {
        if self.cancelled_at.is_some() {
            "cancelled"
        } else if self.progress.pending == 0 && self.progress.running == 0 {
            "done"
        } else {
            "running"
        }
    }
}

/// One tick of a backfill and the run that served it, if one did (a task with N shards: N
/// entries per tick, one per shard, by shard).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct BackfillTick {
    /// The tick (what the handler's `ctx.scheduled_at()` says).
    pub tick: DateTime<Utc>,
    /// The shard of the tick this entry runs, `0..shard_total` (what the handler's
    /// `ctx.shard().index` says; 0 for a task without shards).
    pub shard_index: u32,
    /// How many runs each tick of the backfill makes: the task's shards (1 without shards,
    /// and for a broadcast task, whose backfill runs each tick once).
    pub shard_total: u32,
    /// The run that served it.
    pub run_id: Option<i64>,
    /// That run's status (`None`: not run).
    pub run_status: Option<RunStatus>,
}

/// What cancelling a backfill did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum BackfillCancel {
    /// Cancelled now: its pending ticks will not run. The runs still running (their ids) go
    /// on; cancel each with [`crate::operate::cancel`] if they must stop.
    Cancelled {
        /// Ticks that will not run.
        dropped: i64,
        /// Its runs still running.
        running: Vec<i64>,
    },
    /// It had been cancelled before, or had no tick left: nothing changed.
    AlreadyOver,
    /// No such backfill.
    NotFound,
}
