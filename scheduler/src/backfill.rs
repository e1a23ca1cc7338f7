//! Backfill on demand: which past ticks of a task an operator's backfill runs, and the checks
//! every surface applies before anything is written (the command line, the admin API and the
//! dashboard all come through [`crate::operate::backfill`]).
//!
//! A backfill names a task and a range. Its ticks are the task's schedule's fire instants in
//! `[from, to]` (computed in the task's own zone, so a DST change or a zone's offset is honoured
//! as the schedule honours it, and with the task's calendar, if it has one), up to now (later ticks are the schedule's), by default only
//! those without a succeeded run (of any trigger), every one with [`BackfillRequest::all`].
//! Refused: an empty range, more runs than the cap ([`DEFAULT_MAX_RUNS`] unless raised; the cap
//! counts runs, not ticks: a tick of a task with N shards is N runs, [`RunCap`]), a
//! concurrency above 1 (a task never overlaps itself: its runs share one lock). This module
//! decides; the store records ([`crate::store::OperatorStore::create_backfill`]) and the engine
//! claims the ticks one at a time through the task's lock, paced, with trigger `backfill`.

use std::time::Duration;

use chrono::{DateTime, LocalResult, NaiveDate, NaiveDateTime, TimeZone, Utc};

use crate::schedule::ScheduleSpec;

/// The most runs one backfill makes unless the request raises it
/// ([`BackfillRequest::max_runs`]): runs, each shard's counted (see [`RunCap`]).
pub const DEFAULT_MAX_RUNS: u32 = 1_000;
/// The least time between the starts of two runs of one backfill unless the request says
/// otherwise ([`BackfillRequest::pace`]): a backfill never floods the task's downstream.
pub const DEFAULT_PACE: Duration = Duration::from_secs(1);
/// How many of a backfill's runs run at once: one (the only value allowed; a task never
/// overlaps itself).
pub const DEFAULT_CONCURRENCY: u32 = 1;
/// The most ticks of a range a plan walks (a range of every second over a year is refused
/// before it is walked in full).
pub const MAX_TICKS_WALKED: usize = 1_000_000;

/// What an operator asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct BackfillRequest {
    /// The task.
    pub task: String,
    /// The range's start (inclusive).
    pub from: DateTime<Utc>,
    /// The range's end (inclusive).
    pub to: DateTime<Utc>,
    /// Every tick of the range, not only those without a succeeded run.
    pub all: bool,
    /// List what would run; write nothing.
    pub dry_run: bool,
    /// Refuse a backfill of more runs than this: runs, not ticks (a tick of a task with N
    /// shards is N runs, one per shard).
    pub max_runs: u32,
    /// How many runs at once (only 1 is allowed).
    pub concurrency: u32,
    /// The least time between the starts of two of its runs.
    pub pace: Duration,
}

impl BackfillRequest {
    /// A backfill of `task`'s ticks in `[from, to]` without a succeeded run, with the default
    /// cap, concurrency and pace.
    ///
    /// ```
    /// use scheduler::testing::backfill::{BackfillRequest, DEFAULT_MAX_RUNS};
    ///
    /// let from = "2026-03-01T00:00:00Z".parse().unwrap();
    /// let to = "2026-03-02T00:00:00Z".parse().unwrap();
    /// let request = BackfillRequest::new("report", from, to).all(true).dry_run(true);
    /// assert!(request.all && request.dry_run);
    /// assert_eq!(request.max_runs, DEFAULT_MAX_RUNS);
    /// ```
    pub fn new(task: impl Into<String>, from: DateTime<Utc>, to: DateTime<Utc>) -> Self {
        Self {
            task: task.into(),
            from,
            to,
            all: false,
            dry_run: false,
            max_runs: DEFAULT_MAX_RUNS,
            concurrency: DEFAULT_CONCURRENCY,
            pace: DEFAULT_PACE,
        }
    }

    /// Every tick of the range (default: only those without a succeeded run).
    pub fn all(mut self, all: bool) -> Self {
        self.all = all;
        self
    }

    /// Lists what would run and writes nothing (default: false).
    pub fn dry_run(mut self, dry_run: bool) -> Self {
        self.dry_run = dry_run;
        self
    }

    /// The cap on runs, each shard's run counted (default [`DEFAULT_MAX_RUNS`]).
    pub fn max_runs(mut self, max_runs: u32) -> Self {
        self.max_runs = max_runs;
        self
    }

    /// Runs at once (default and only allowed value: 1).
    pub fn concurrency(mut self, concurrency: u32) -> Self {
        self.concurrency = concurrency;
        self
    }

    /// The least time between the starts of two runs (default [`DEFAULT_PACE`]); from 0 s to
    /// one day (`docs/limits.md`): a longer pace is refused when the backfill is asked for
    /// ([`BackfillRefusal::OutOfRange`]).
    pub fn pace(mut self, pace: Duration) -> Self {
        self.pace = pace;
        self
    }

    /// Checks the values of the request against their ranges (`docs/limits.md`): the pace and
    /// the cap on runs. Every surface comes through it ([`crate::operate::backfill`]).
    ///
    /// ```
    /// use std::time::Duration;
    /// use scheduler::testing::backfill::{BackfillRefusal, BackfillRequest};
    ///
    /// let at = "2026-03-01T00:00:00Z".parse().unwrap();
    /// let request = BackfillRequest::new("report", at, at);
    /// assert!(request.clone().check_ranges().is_ok());
    /// let slow = request.pace(Duration::from_secs(300_000 * 31_557_600));
    /// let refusal = slow.check_ranges().unwrap_err();
    /// assert!(matches!(refusal, BackfillRefusal::OutOfRange(_)));
    /// assert!(refusal.to_string().contains("from 0s to 1day"), "{refusal}");
    /// ```
    pub fn check_ranges(&self) -> Result<(), BackfillRefusal> {
        crate::bounds::BACKFILL_PACE
            .check("pace", self.pace)
            .map_err(|e| BackfillRefusal::OutOfRange(e.to_string()))?;
        if self.max_runs == 0 {
            return Err(BackfillRefusal::ZeroCap);
        }
        crate::bounds::BACKFILL_MAX_RUNS
            .check("max_runs", self.max_runs)
            .map_err(|e| BackfillRefusal::OutOfRange(e.to_string()))?;
        Ok(())
    }
}

/// Why a backfill is refused. Each message says what to write instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BackfillRefusal {
    /// No such task.
    #[error("no task `{0}`")]
    UnknownTask(String),
    /// `from` is after `to`.
    #[error("the range is empty: --from {from} is after --to {to}")]
    EmptyRange {
        /// The start asked for.
        from: DateTime<Utc>,
        /// The end asked for.
        to: DateTime<Utc>,
    },
    /// The cap is zero.
    #[error("the cap on runs must be at least 1")]
    ZeroCap,
    /// More runs than the cap.
    #[error(
        "the backfill would make {runs}{more} runs, more than the cap of {max_runs}; narrow the range or raise the cap (--max-runs / max_runs)",
        more = if *walked_all { "" } else { " or more" }
    )]
    OverCap {
        /// Runs counted (at least).
        runs: usize,
        /// Whether every tick of the range was counted.
        walked_all: bool,
        /// The cap.
        max_runs: u32,
    },
    /// A value outside its range (`docs/limits.md`): the message names the field and the range.
    #[error("{0}")]
    OutOfRange(String),
    /// A concurrency other than 1.
    #[error(
        "concurrency {0} is not allowed: a task never overlaps itself (its runs, backfilled or not, share one lock), so a backfill runs one tick at a time (--concurrency 1)"
    )]
    Concurrency(u32),
    /// The range has more ticks than a plan walks.
    #[error("the range holds more than {MAX_TICKS_WALKED} ticks of the schedule; narrow it")]
    RangeTooLong,
    /// The task's stored schedule cannot be read by this binary.
    #[error("the stored schedule of `{task}` cannot be read: {error}")]
    Schedule {
        /// The task.
        task: String,
        /// Why.
        error: String,
    },
    /// Another backfill of the task still has ticks to run.
    #[error(
        "backfill {0} of this task still has ticks to run; wait for it or cancel it (scheduler backfill cancel {0})"
    )]
    Busy(i64),
}

/// What a backfill runs (or, for a dry run, would run).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct BackfillPlan {
    /// The task.
    pub task: String,
    /// Its zone (the ticks are its schedule's in it).
    pub timezone: String,
    /// The range's start.
    pub from: DateTime<Utc>,
    /// The range's end.
    pub to: DateTime<Utc>,
    /// Ticks of the schedule in the range (up to now).
    pub ticks_in_range: usize,
    /// Of those, ticks left out because they already have a succeeded run (0 with `all`).
    pub already_succeeded: usize,
    /// The ticks to run, in order.
    pub ticks: Vec<DateTime<Utc>>,
    /// The runs they make: each tick once per shard (a task with N shards, or an instance of
    /// one: N runs a tick; otherwise one). What the cap counts.
    pub runs: usize,
    /// Whether nothing was written.
    pub dry_run: bool,
    /// The backfill recorded (`None`: a dry run, or nothing to run).
    pub id: Option<i64>,
}

/// The cap on a backfill's runs and how many runs each of its ticks makes: the cap counts runs,
/// not ticks, so a backfill of a task with 4 shards under a cap of 1,000 makes at most 1,000
/// runs (250 ticks), never 4,000.
///
/// ```
/// use scheduler::testing::backfill::RunCap;
///
/// let cap = RunCap::new(1_000).per_tick(4);
/// assert_eq!(cap.runs(250), 1_000);
/// assert!(cap.runs(251) > 1_000);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunCap {
    /// The most runs.
    pub max_runs: u32,
    /// The runs each tick makes (a task with N shards, or an instance of one: N; at least 1).
    pub runs_per_tick: u32,
}

impl RunCap {
    /// At most `max_runs` runs, one a tick.
    pub fn new(max_runs: u32) -> Self {
        Self {
            max_runs,
            runs_per_tick: 1,
        }
    }

    /// Each tick makes `runs` runs (its shards; 0 is read as 1).
    pub fn per_tick(mut self, runs: u32) -> Self {
        self.runs_per_tick = runs.max(1);
        self
    }

    /// The runs `ticks` ticks make.
    pub fn runs(&self, ticks: usize) -> usize {
        ticks.saturating_mul(usize::try_from(self.runs_per_tick).unwrap_or(usize::MAX))
    }
}

/// The ticks a backfill of `spec` over `[from, min(to, now)]` runs: every fire instant, less
/// those in `succeeded` unless `all`. Refused when they would make more runs than `cap` allows
/// (each tick `cap.runs_per_tick` runs), or over [`MAX_TICKS_WALKED`] ticks walked. Returns
/// `(ticks in range, ticks to run)`.
///
/// ```
/// use scheduler::ScheduleSpec;
/// use scheduler::testing::backfill::{BackfillRefusal, RunCap, plan_ticks};
///
/// let spec = ScheduleSpec::parse("0 * * * *", "UTC").unwrap();
/// let at = |s: &str| s.parse().unwrap();
/// let done = [at("2026-03-01T01:00:00Z")];
/// let (from, to, now) = (at("2026-03-01T00:00:00Z"), at("2026-03-01T03:00:00Z"), at("2026-03-05T00:00:00Z"));
/// let (in_range, ticks) = plan_ticks(&spec, from, to, now, &done, false, RunCap::new(10)).unwrap();
/// assert_eq!(in_range, 4);
/// assert_eq!(ticks, [at("2026-03-01T00:00:00Z"), at("2026-03-01T02:00:00Z"), at("2026-03-01T03:00:00Z")]);
/// // 3 ticks of a task with 4 shards are 12 runs: over a cap of 10.
/// let sharded = plan_ticks(&spec, from, to, now, &done, false, RunCap::new(10).per_tick(4));
/// assert!(matches!(sharded, Err(BackfillRefusal::OverCap { runs: 12, .. })));
/// ```
pub fn plan_ticks(
    spec: &ScheduleSpec,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    now: DateTime<Utc>,
    succeeded: &[DateTime<Utc>],
    all: bool,
    cap: RunCap,
) -> Result<(usize, Vec<DateTime<Utc>>), BackfillRefusal> {
    let max_runs = cap.max_runs;
    if max_runs == 0 {
        return Err(BackfillRefusal::ZeroCap);
    }
    if from > to {
        return Err(BackfillRefusal::EmptyRange { from, to });
    }
    let end = to.min(now);
    let most = usize::try_from(max_runs).unwrap_or(usize::MAX);
    let mut in_range = 0;
    let mut ticks = Vec::new();
    let start = from - chrono::TimeDelta::microseconds(1);
    for tick in spec.iter_after(start).take_while(|t| *t <= end) {
        in_range += 1;
        if in_range > MAX_TICKS_WALKED {
            return Err(BackfillRefusal::RangeTooLong);
        }
        if all || succeeded.binary_search(&tick).is_err() {
            ticks.push(tick);
            if cap.runs(ticks.len()) > most {
                return Err(BackfillRefusal::OverCap {
                    runs: cap.runs(ticks.len()),
                    walked_all: false,
                    max_runs,
                });
            }
        }
    }
    Ok((in_range, ticks))
}

/// Reads an instant of a backfill's range: RFC 3339 (`2026-03-01T00:00:00Z`, any offset), or a
/// date or date and time without an offset (`2026-03-01`, `2026-03-01T06:00`, `2026-03-01
/// 06:00:00`), read in the task's zone `zone` (a time the zone skips is refused; one it repeats
/// is its first).
///
/// ```
/// use scheduler::testing::backfill::parse_bound;
///
/// let tz: chrono_tz::Tz = "Europe/Paris".parse().unwrap();
/// assert_eq!(parse_bound("2026-03-01", tz).unwrap().to_rfc3339(), "2026-02-28T23:00:00+00:00");
/// assert_eq!(parse_bound("2026-03-01T12:00:00Z", tz).unwrap().to_rfc3339(), "2026-03-01T12:00:00+00:00");
/// assert!(parse_bound("2026-03-29T02:30", tz).is_err()); // skipped by the DST change
/// ```
pub fn parse_bound(text: &str, zone: chrono_tz::Tz) -> Result<DateTime<Utc>, String> {
    let text = text.trim();
    if let Ok(t) = DateTime::parse_from_rfc3339(text) {
        return Ok(t.with_timezone(&Utc));
    }
    let naive = ["%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M"]
        .iter()
        .find_map(|f| NaiveDateTime::parse_from_str(text, f).ok())
        .or_else(|| {
            NaiveDate::parse_from_str(text, "%Y-%m-%d")
                .ok()
                .and_then(|d| d.and_hms_opt(0, 0, 0))
        })
        .ok_or_else(|| {
            format!(
                "`{text}` is not an instant; write RFC 3339 (2026-03-01T00:00:00Z) or a date and time in the task's zone (2026-03-01, 2026-03-01T06:00)"
            )
        })?;
    match zone.from_local_datetime(&naive) {
        LocalResult::Single(t) | LocalResult::Ambiguous(t, _) => Ok(t.with_timezone(&Utc)),
        LocalResult::None => Err(format!(
            "`{text}` does not exist in {zone} (a clock change skips it); write an RFC 3339 instant"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    #[test]
    fn all_keeps_the_succeeded_ticks_and_the_future_is_left_to_the_schedule() {
        let spec = ScheduleSpec::parse("0 * * * *", "UTC").unwrap();
        let done = [at("2026-03-01T01:00:00Z")];
        let (in_range, ticks) = plan_ticks(
            &spec,
            at("2026-03-01T00:00:00Z"),
            at("2026-03-01T05:00:00Z"),
            at("2026-03-01T02:30:00Z"),
            &done,
            true,
            RunCap::new(10),
        )
        .unwrap();
        assert_eq!(in_range, 3);
        assert_eq!(ticks.len(), 3);
    }

    #[test]
    fn the_cap_and_the_range_are_checked() {
        let spec = ScheduleSpec::parse("* * * * *", "UTC").unwrap();
        let now = at("2026-04-01T00:00:00Z");
        let over = plan_ticks(
            &spec,
            at("2026-03-01T00:00:00Z"),
            at("2026-03-02T00:00:00Z"),
            now,
            &[],
            false,
            RunCap::new(100),
        );
        assert!(matches!(
            over,
            Err(BackfillRefusal::OverCap { max_runs: 100, .. })
        ));
        let empty = plan_ticks(
            &spec,
            at("2026-03-02T00:00:00Z"),
            at("2026-03-01T00:00:00Z"),
            now,
            &[],
            false,
            RunCap::new(100),
        );
        assert!(matches!(empty, Err(BackfillRefusal::EmptyRange { .. })));
    }

    #[test]
    fn ticks_follow_the_zone_across_a_dst_change() {
        // 02:30 every day in Paris: on 2026-03-29 the clock skips 02:00-03:00.
        let spec = ScheduleSpec::parse("30 2 * * *", "Europe/Paris").unwrap();
        let tz: chrono_tz::Tz = "Europe/Paris".parse().unwrap();
        let (_, ticks) = plan_ticks(
            &spec,
            parse_bound("2026-03-28", tz).unwrap(),
            parse_bound("2026-03-31", tz).unwrap(),
            at("2026-05-01T00:00:00Z"),
            &[],
            false,
            RunCap::new(10),
        )
        .unwrap();
        // 02:30 CET is 01:30Z; after the change 02:30 CEST is 00:30Z.
        assert_eq!(ticks[0], at("2026-03-28T01:30:00Z"));
        assert_eq!(ticks.last(), Some(&at("2026-03-30T00:30:00Z")));
    }
}
