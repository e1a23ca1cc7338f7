//! The run history a store keeps and returns: runs and how they ended, ranges of ticks that got
//! no run of their own and why, runs' logs, and the query that lists runs. Written by the engine
//! (claims, finishes, skips, logs), read by operators (the admin API, the dashboard, the CLI).

use std::fmt;

use chrono::{DateTime, Utc};
use serde::Serialize;

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
    /// An operator cancelled the run
    /// ([`OperatorStore::cancel_run`](super::OperatorStore::cancel_run)) and it did not finish:
    /// its handler returned an error after the request, was stopped by force after the cancel
    /// grace, or its node died after the request. Its tick is not run again (not handed over,
    /// not retried). (Versions before 0.2 also wrote it for runs stopped at
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
    /// The task's calendar blocked the tick (`on_blocked: skip`), or moved it onto a later
    /// tick's run (`on_blocked: next_allowed`, ticks folded into one run).
    Calendar,
    /// Due while the limit it shares with other tasks had no room, and then later than its
    /// misfire grace (`misfire = "skip"`); see `docs/shared-limits.md`.
    Limit,
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
            SkipReason::Calendar => "calendar",
            SkipReason::Limit => "limit",
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
            "calendar" => SkipReason::Calendar,
            "limit" => SkipReason::Limit,
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

/// Which runs [`HistoryStore::runs`](super::HistoryStore::runs) lists: newest first, at most
/// `limit`, those older than `before_id` (the cursor of the previous page).
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
    /// Only the runs of the task's instance with this key (see `crate::instance`).
    pub key: Option<String>,
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

    /// Only the runs of the instance `key` (of the task: use with [`task`](Self::task)).
    pub fn key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(key.into());
        self
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
    /// When its handler started (the node's measured start, on the store's clock). `None`: it
    /// never started (handed over or cancelled before its tick). While it runs, and for a run
    /// recorded `lost` (its node vanished), the start its claim planned: its tick, if claimed
    /// ahead of it, else the claim's time.
    pub started_at: Option<DateTime<Utc>>,
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
    /// Which shard of its tick it ran, `0..shard_total` (see [`crate::shard`]).
    pub shard_index: u32,
    /// How many shards its tick has (1: the task is not sharded).
    pub shard_total: u32,
    /// The key of the instance it ran (see `crate::instance`); `None`: the task's own run.
    pub instance_key: Option<String>,
    /// The arguments a manual run was given in place of its row's own, as JSON text (`None`:
    /// it ran with its row's own). Unredacted: every view shows it through
    /// `crate::redact::redact_args_text` (and serializes redacted).
    #[serde(serialize_with = "crate::redact::serialize_args_text")]
    pub args_override: Option<String>,
}

impl RunRecord {
    /// Decodes a run from a row of `queries/run_columns.sql` (every runs SELECT includes it):
    /// with the struct above and that column list, the places a new runs column is named.
    #[cfg_attr(not(any(feature = "postgres", feature = "sqlite")), allow(dead_code))]
    pub(crate) fn read(row: &impl super::row::ReadRow) -> Result<Self, sqlx::Error> {
        use super::row::unknown;
        let status = row.text("status")?;
        let trigger = row.text("trigger")?;
        Ok(RunRecord {
            id: row.int("id")?,
            task_name: row.text("task_name")?,
            scheduled_at: row.time("scheduled_at")?,
            started_at: row.time_opt("started_at")?,
            finished_at: row.time_opt("finished_at")?,
            status: RunStatus::parse(&status).ok_or_else(|| unknown("run status", &status))?,
            node_id: row.text("node_id")?,
            ticks_collapsed: row.int("ticks_collapsed")?,
            error: row.text_opt("error")?,
            attempt: row.int32("attempt")?,
            trigger: Trigger::parse(&trigger).ok_or_else(|| unknown("trigger", &trigger))?,
            triggered_by: row.text_opt("triggered_by")?,
            cancel_requested_at: row.time_opt("cancel_requested_at")?,
            cancel_requested_by: row.text_opt("cancel_requested_by")?,
            shard_index: u32::try_from(row.int("shard_index")?).unwrap_or(0),
            shard_total: u32::try_from(row.int("shard_total")?).unwrap_or(1),
            instance_key: row.text_opt("instance_key")?,
            args_override: row.text_opt("args_override")?,
        })
    }

    /// A run of `task_name`'s tick `tick` for unit tests: attempt 1 of a scheduled tick, started
    /// on it and succeeded a second later on node `n`, shard 0 of 1; tests change what they look
    /// at with `RunRecord { field, ..RunRecord::example(..) }`, so a new field is set here only.
    #[cfg(all(test, feature = "admin"))] // the dashboard's and the API's tests
    pub(crate) fn example(id: i64, task_name: &str, tick: DateTime<Utc>) -> Self {
        RunRecord {
            id,
            task_name: task_name.into(),
            scheduled_at: tick,
            started_at: Some(tick),
            finished_at: Some(tick + chrono::TimeDelta::seconds(1)),
            status: RunStatus::Succeeded,
            node_id: "n".into(),
            ticks_collapsed: 1,
            error: None,
            attempt: 1,
            trigger: Trigger::Schedule,
            triggered_by: None,
            cancel_requested_at: None,
            cancel_requested_by: None,
            shard_index: 0,
            shard_total: 1,
            instance_key: None,
            args_override: None,
        }
    }
}

/// What started a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Trigger {
    /// A tick of the task's schedule.
    #[default]
    Schedule,
    /// A retry of a failed or timed-out run of a tick.
    Retry,
    /// Somebody asked for a run now.
    Manual,
    /// A past tick run again by an operator's backfill (see [`crate::operate::backfill`]).
    Backfill,
}

impl Trigger {
    /// The value stored in the database.
    pub fn as_str(self) -> &'static str {
        match self {
            Trigger::Schedule => "schedule",
            Trigger::Retry => "retry",
            Trigger::Manual => "manual",
            Trigger::Backfill => "backfill",
        }
    }

    /// Parses a stored value.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "schedule" => Trigger::Schedule,
            "retry" => Trigger::Retry,
            "manual" => Trigger::Manual,
            "backfill" => Trigger::Backfill,
            _ => return None,
        })
    }
}

impl fmt::Display for Trigger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
