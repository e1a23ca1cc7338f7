//! A run's end as the store records it: how it ended, what it does to the task's failure count,
//! what runs again, and what [`ClaimStore::finish_runs`](crate::store::ClaimStore::finish_runs)
//! writes and finds.

use chrono::{DateTime, Utc};

use super::LockKey;
use crate::store::{RunStatus, SkipRecord};

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

/// Whether a finished run becomes its task row's last run: the status, error and end the row
/// shows (the overview, the API, an instance's summary) until the next run ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LastRun {
    /// It is the row's last run now.
    Record,
    /// The row's last run stays as it was: no handler ran (a run handed back before it
    /// started, whose tick runs again elsewhere). The run's own history row is written all
    /// the same.
    Keep,
}

/// Something to run again, decided by the engine when a run ends (or is found lost).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Requeue {
    /// A scheduled tick is due again: the task's next run becomes the earlier of it and the next
    /// run it has.
    Tick(DateTime<Utc>),
    /// A retry of `tick`, as attempt `attempt`, due at `at` (replaces any pending retry).
    Retry {
        /// The tick retried.
        tick: DateTime<Utc>,
        /// The attempt it will be.
        attempt: i32,
        /// When it is due.
        at: DateTime<Utc>,
    },
    /// A manual run is due again at `at` (it was interrupted before finishing).
    Manual {
        /// When it was first asked for.
        at: DateTime<Utc>,
        /// Who asked.
        by: Option<String>,
    },
    /// A backfill's tick, served by the run that ended, is pending again: the run was handed
    /// back before it started. The row's backfill is due again at once, unless the backfill
    /// was cancelled (the tick is then left unrun) or the row waits for another backfill by now
    /// (the tick then stays served by the run, as ended).
    Backfill(DateTime<Utc>),
}

/// The end of a run, as recorded by
/// [`ClaimStore::finish_runs`](crate::store::ClaimStore::finish_runs).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RunFinish {
    /// The run's id.
    pub run_id: i64,
    /// The run's lock.
    pub lock: LockKey,
    /// When its handler started, by the store's clock; `None`: it never started (handed over
    /// or cancelled before its tick). Replaces the start its claim planned.
    pub started_at: Option<DateTime<Utc>>,
    /// How it ended.
    pub end: RunEnd,
    /// What runs again (an interrupted run handed over, a retry).
    pub requeue: Option<Requeue>,
    /// What it does to the task's failure count.
    pub failures: FailureCount,
    /// Whether it becomes the task row's last run ([`LastRun::Record`] unless set).
    pub last_run: LastRun,
    /// Ticks this run accounts for without having run them.
    pub skips: Vec<SkipRecord>,
}

impl RunFinish {
    /// The ticks this run accounts for without having run them, as the runs table counts them
    /// (an `int4` on PostgreSQL): never negative, saturating.
    #[cfg_attr(not(any(feature = "postgres", feature = "sqlite")), allow(dead_code))]
    pub(crate) fn collapsed_ticks(&self) -> i32 {
        let n: i64 = self.skips.iter().map(|s| s.ticks).sum();
        i32::try_from(n.max(0)).unwrap_or(i32::MAX)
    }

    /// The record of `run_id`'s end under `lock`; its handler started at `started_at` (`None`:
    /// never).
    pub fn new(
        run_id: i64,
        lock: LockKey,
        started_at: Option<DateTime<Utc>>,
        end: RunEnd,
        failures: FailureCount,
    ) -> Self {
        Self {
            run_id,
            lock,
            started_at,
            end,
            requeue: None,
            failures,
            last_run: LastRun::Record,
            skips: Vec::new(),
        }
    }
}

/// What [`ClaimStore::finish_runs`](crate::store::ClaimStore::finish_runs) found for one run.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct FinishResult {
    /// The run.
    pub run_id: i64,
    /// Whether its lock was still held (and is now released). False: it had been taken over;
    /// the run row still got its real outcome, and nothing was requeued.
    pub lock_held: bool,
}
