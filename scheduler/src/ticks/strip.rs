//! What became of each expected tick, as the dashboard draws it (a strip per task): for every
//! tick the schedule says should have fired lately, the run that served it and its outcome, the
//! skip record and its reason, or nothing (missed, or due within its grace).
//!
//! Pure: the admin API reads the runs and skip records of every task at once and hands each
//! task's share here ([`Facts`]); [`strip`] says what became of each tick.
//!
//! A sharded task's tick (see [`crate::shard`]) is one mark, folded from its shards' runs
//! ([`fold_shards`]): running while a shard runs or has not started, succeeded when every shard
//! did, else the worst of its shards' endings; the mark keeps each shard's latest attempt
//! ([`Shards`]).
//!
//! A broadcast task's tick (`shards = "nodes"`) folds the same way, its runs being the nodes
//! counted at the tick (`shard_total`), with one difference: an index with no run is not
//! taken over by another node, so once the tick is past its **missed grace** (the grace after
//! which an ordinary tick not started is `missed`, [`missed_grace`]) a node with no run of it
//! did not run it (it died before starting, or its misfire policy skipped the tick on its
//! row), and the tick is done without it ([`Shards::not_run`]). The missed grace is the
//! engine's own answer to "how long may a tick take to start": a live node with a free slot
//! claims its row within milliseconds of the tick. A node that starts the tick later still (a
//! busy node running it late under `misfire = "once"`) turns the index back into a run.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};

use super::missed_grace;
use crate::schedule::ScheduleSpec;
use crate::store::{RunRecord, RunStatus, SkipReason, SkipRecord, TaskState, Trigger};

/// How far back a strip looks at most, whatever its count: far enough for 30 ticks of a yearly
/// schedule (or of one firing on leap days only), so a strip is bounded by its count of ticks,
/// not by time. Ticks before a task's first known event are left out anyway (see [`strip`]).
pub(crate) const MAX_LOOKBACK: TimeDelta = TimeDelta::days(366 * 150);

/// One expected tick, or a manual run, and what became of it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Mark {
    /// The tick (for a manual run: the instant it was asked for).
    pub at: DateTime<Utc>,
    /// What became of it.
    pub fate: Fate,
}

/// What became of a tick.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Fate {
    /// A run served it (retries included).
    Ran {
        /// The latest attempt's status.
        status: RunStatus,
        /// The latest attempt.
        run_id: i64,
        /// Attempts made at it.
        attempts: i32,
        /// What started the latest attempt.
        trigger: Trigger,
        /// How long the latest attempt took (so far, while running; none if it never started).
        duration: Option<TimeDelta>,
        /// How late the first attempt that started did (none for a manual run: never late;
        /// none if no attempt started).
        late: Option<TimeDelta>,
        /// A sharded tick's shards (none for an ordinary task's tick).
        shards: Option<Shards>,
    },
    /// It got no run of its own: recorded as skipped, or about to be (a pause or a disable
    /// records its ticks when it ends, an overlap when the run that overlapped ends).
    Skipped {
        /// Why.
        reason: SkipReason,
        /// The run that stands for it, if the record names one.
        run_id: Option<i64>,
    },
    /// Not started, no later than its missed grace.
    Due,
    /// Not started, and later than its missed grace.
    Missed,
}

impl Fate {
    /// The outcome as the admin API names it: a run's status, `skipped`, `due` or `missed`.
    pub(crate) fn outcome(&self) -> &'static str {
        match self {
            Fate::Ran { status, .. } => status.as_str(),
            Fate::Skipped { .. } => "skipped",
            Fate::Due => "due",
            Fate::Missed => "missed",
        }
    }
}

/// The shards of a sharded tick (or the nodes of a broadcast's): each shard's latest attempt.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Shards {
    /// How many shards the tick has (a broadcast's: the nodes counted at the tick).
    pub total: u32,
    /// The latest attempt of each shard that has a run of the tick, by index.
    pub runs: Vec<ShardRun>,
    /// A broadcast task's tick: each index is a node's, never run by another.
    pub broadcast: bool,
    /// A broadcast tick past its missed grace: an index with no run will not get one.
    pub settled: bool,
}

impl Shards {
    /// Shards whose latest attempt has ended (any ending).
    pub(crate) fn done(&self) -> u32 {
        self.count(|s| s != RunStatus::Running)
    }

    /// Shards whose latest attempt has this status.
    pub(crate) fn count(&self, matches: impl Fn(RunStatus) -> bool) -> u32 {
        self.runs.iter().filter(|r| matches(r.status)).count() as u32
    }

    /// Shards with no run of the tick yet, that may still get one.
    pub(crate) fn pending(&self) -> u32 {
        if self.settled { 0 } else { self.missing() }
    }

    /// A broadcast's nodes, counted at the tick, that did not run it: no run of it by its
    /// missed grace (see the module doc).
    pub(crate) fn not_run(&self) -> u32 {
        if self.settled { self.missing() } else { 0 }
    }

    fn missing(&self) -> u32 {
        self.total.saturating_sub(self.runs.len() as u32)
    }
}

/// One shard of a sharded tick: its latest attempt.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ShardRun {
    /// The shard, `0..total`.
    pub index: u32,
    /// Its latest attempt.
    pub run_id: i64,
    /// That attempt's status.
    pub status: RunStatus,
    /// The node that ran that attempt.
    pub node: String,
    /// Attempts made at the shard.
    pub attempts: i32,
    /// How late its first attempt that started did (none if none started yet).
    pub late: Option<TimeDelta>,
}

/// The endings of a tick's shards, worst first: a tick whose shards all ended, not all
/// successfully, is shown with the worst of them.
const WORST_FIRST: [RunStatus; 5] = [
    RunStatus::Failed,
    RunStatus::TimedOut,
    RunStatus::Lost,
    RunStatus::Interrupted,
    RunStatus::Cancelled,
];

/// A sharded tick's status, folded from its shards (the tick is done when every shard's run
/// has ended): `running` while a shard runs or has no run yet ([`Shards::pending`]),
/// `succeeded` when every shard that ran did, else the worst ending among them
/// ([`WORST_FIRST`]). A broadcast's node that did not run the tick ([`Shards::not_run`]) adds
/// no ending: the mark counts it, its run would have been that node's own.
pub(crate) fn fold_shards(shards: &Shards) -> RunStatus {
    if shards.pending() > 0 || shards.count(|s| s == RunStatus::Running) > 0 {
        return RunStatus::Running;
    }
    WORST_FIRST
        .into_iter()
        .find(|worst| shards.count(|s| s == *worst) > 0)
        .unwrap_or(RunStatus::Succeeded)
}

/// The shards of a tick from its runs (any shard, any attempt), if the tick is sharded or a
/// `broadcast`'s (then `settled` when it is past its missed grace).
fn shards_of(
    at: DateTime<Utc>,
    runs: &[&RunRecord],
    broadcast: bool,
    settled: bool,
) -> Option<Shards> {
    let total = runs.iter().map(|r| r.shard_total).max()?;
    if total <= 1 && !broadcast {
        return None;
    }
    let mut by_index: BTreeMap<u32, Vec<&RunRecord>> = BTreeMap::new();
    for run in runs {
        by_index.entry(run.shard_index).or_default().push(run);
    }
    let runs = by_index
        .into_iter()
        .filter_map(|(index, attempts)| {
            let latest = attempts.iter().max_by_key(|r| (r.attempt, r.id))?;
            let first = attempts
                .iter()
                .filter(|r| r.started_at.is_some())
                .min_by_key(|r| (r.attempt, r.id));
            Some(ShardRun {
                index,
                run_id: latest.id,
                status: latest.status,
                node: latest.node_id.clone(),
                attempts: latest.attempt.max(attempts.len() as i32),
                late: first
                    .filter(|r| r.trigger != Trigger::Manual)
                    .and_then(|r| r.started_at)
                    .map(|s| s - at),
            })
        })
        .collect();
    Some(Shards {
        total,
        runs,
        broadcast,
        settled: broadcast && settled,
    })
}

/// A task's strip: its latest expected ticks and manual runs, oldest first.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Strip {
    /// The ticks, oldest first, at most the count asked for.
    pub marks: Vec<Mark>,
    /// False when older ticks are left out because the runs read did not reach back so far (or
    /// the schedule cannot be read).
    pub complete: bool,
}

/// What a task's strip is made from.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Facts<'a> {
    /// The task's row.
    pub state: &'a TaskState,
    /// Its runs in the window, newest first.
    pub runs: &'a [&'a RunRecord],
    /// The read of runs was cut at its limit: older runs may exist.
    pub more_runs: bool,
    /// Its skip records overlapping the window.
    pub skips: &'a [&'a SkipRecord],
    /// When the strip is drawn.
    pub now: DateTime<Utc>,
    /// The strip starts after this (see [`window_start`]).
    pub since: DateTime<Utc>,
    /// The node's fixed missed grace, if it sets one (see [`missed_grace`]).
    pub missed_grace: Option<Duration>,
}

/// Where a strip of `count` ticks ending at `now` starts: a little before the `count`-th last
/// tick, estimated from the interval of the coming ticks and widened while it holds too few
/// (weekday schedules), never more than [`MAX_LOOKBACK`] back.
pub(crate) fn window_start(spec: &ScheduleSpec, now: DateTime<Utc>, count: usize) -> DateTime<Utc> {
    let earliest = now - MAX_LOOKBACK;
    let interval = spec
        .next_after(now)
        .and_then(|a| spec.next_after(a).map(|b| b - a))
        .unwrap_or(TimeDelta::hours(1))
        .max(TimeDelta::seconds(1));
    let mut span = interval * (count as i32 + 1);
    loop {
        let start = (now - span).max(earliest);
        if start == earliest || spec.count_fires(start, now, count) >= count {
            return start;
        }
        span = span * 4;
    }
}

/// The strip of the latest `count` ticks: every expected tick (by `spec`) after the window's
/// start up to now and every run in the window, each with what became of it. Without a
/// schedule it can read, a task's strip holds its runs only.
pub(crate) fn strip(spec: Option<&ScheduleSpec>, facts: &Facts<'_>, count: usize) -> Strip {
    // A read cut at its limit may have left older runs out: before the oldest read, what
    // happened is not known here.
    let horizon = facts
        .more_runs
        .then(|| facts.runs.iter().map(|r| r.scheduled_at).min())
        .flatten();
    // A sharded tick's runs are many: the oldest tick read may be missing some of its shards,
    // so a cut read leaves it out rather than show it partly.
    let sharded = facts.state.broadcast || facts.runs.iter().any(|r| r.shard_total > 1);
    let since = horizon.map_or(facts.since, |h| {
        let before = if sharded {
            h
        } else {
            h - TimeDelta::milliseconds(1)
        };
        before.max(facts.since)
    });
    let mut marks = marks(spec, facts, since);
    let complete =
        spec.is_some() && (horizon.is_none_or(|h| h <= facts.since) || marks.len() >= count);
    let drop = marks.len().saturating_sub(count);
    marks.drain(..drop);
    Strip { marks, complete }
}

/// Every expected tick after `since` up to now, and every run in the window, each with what
/// became of it, oldest first.
fn marks(spec: Option<&ScheduleSpec>, f: &Facts<'_>, since: DateTime<Utc>) -> Vec<Mark> {
    // The runs of each tick, by tick; a manual run is its own mark.
    let mut by_tick: BTreeMap<DateTime<Utc>, Vec<&RunRecord>> = BTreeMap::new();
    for run in f.runs.iter().filter(|r| r.scheduled_at > since) {
        by_tick.entry(run.scheduled_at).or_default().push(run);
    }
    if let Some(spec) = spec {
        for tick in spec.iter_after(since).take_while(|t| *t <= f.now) {
            by_tick.entry(tick).or_default();
        }
    }
    // Ticks before the task's first known event (a run, a skip, a missed incident) predate
    // it, or at least anything this store can tell.
    let first_known = f
        .runs
        .iter()
        .map(|r| r.scheduled_at)
        .chain(f.skips.iter().map(|s| s.first_tick))
        .chain(f.state.missed_since)
        .chain(f.state.pause.as_ref().map(|p| p.at))
        .chain(f.state.disabled_at)
        .min();
    let running = f
        .runs
        .iter()
        .find(|r| r.status == RunStatus::Running)
        .map(|r| r.scheduled_at);
    let pause = f
        .state
        .pause
        .as_ref()
        .filter(|p| p.in_force(f.now))
        .map(|p| p.at);
    let skipped = |reason| Fate::Skipped {
        reason,
        run_id: None,
    };
    let grace = |at| {
        spec.map_or(TimeDelta::seconds(5), |spec| {
            missed_grace(spec, at, f.missed_grace)
        })
    };
    let broadcast = f.state.broadcast;
    by_tick
        .into_iter()
        .filter_map(|(at, runs)| {
            let settled = broadcast && f.now - at >= grace(at);
            if let Some(shards) = shards_of(at, &runs, broadcast, settled) {
                return Some(Mark {
                    at,
                    fate: sharded_fate(&runs, shards, f.now),
                });
            }
            if let Some(latest) = runs.iter().max_by_key(|r| (r.attempt, r.id)) {
                // A run handed over before it started has no start: the tick's lateness is
                // that of the run that took it over.
                let first = runs
                    .iter()
                    .filter(|r| r.started_at.is_some())
                    .min_by_key(|r| (r.attempt, r.id));
                let end = latest.finished_at.unwrap_or(f.now);
                let fate = Fate::Ran {
                    status: latest.status,
                    run_id: latest.id,
                    attempts: latest.attempt.max(runs.len() as i32),
                    trigger: latest.trigger,
                    duration: latest.started_at.map(|s| end - s),
                    late: first
                        .filter(|r| r.trigger != Trigger::Manual)
                        .and_then(|r| r.started_at)
                        .map(|s| s - at),
                    shards: None,
                };
                return Some(Mark { at, fate });
            }
            let fate = if let Some(skip) = f
                .skips
                .iter()
                .find(|s| s.first_tick <= at && at <= s.last_tick)
            {
                Fate::Skipped {
                    reason: skip.reason,
                    run_id: skip.run_id,
                }
            } else if pause.is_some_and(|p| p <= at) {
                // Not recorded yet: a pause or a disable records its ticks when it ends, an
                // overlap when the run that overlapped ends.
                skipped(SkipReason::Paused)
            } else if !f.state.enabled && f.state.disabled_at.is_some_and(|d| d <= at) {
                skipped(SkipReason::Disabled)
            } else if running.is_some_and(|r| r < at) {
                // Due while a run of an earlier tick runs: that run will stand for it.
                skipped(SkipReason::Overlap)
            } else if first_known.is_none_or(|first| at < first) {
                return None;
            } else if f.now - at < grace(at) {
                Fate::Due
            } else {
                Fate::Missed
            };
            Some(Mark { at, fate })
        })
        .collect()
}

/// A sharded tick's fate: its folded status ([`fold_shards`]); the run shown for it is a
/// shard's that went worst, else the latest; it took from its first shard's start to its last
/// shard's end (so far, while one runs); it was as late as its first shard to start.
fn sharded_fate(runs: &[&RunRecord], shards: Shards, now: DateTime<Utc>) -> Fate {
    let status = fold_shards(&shards);
    let shown = shards
        .runs
        .iter()
        .filter(|s| s.status == status)
        .max_by_key(|s| s.run_id)
        .map(|s| s.run_id);
    let latest = runs.iter().max_by_key(|r| r.id).copied();
    let run_id = shown.or(latest.map(|r| r.id)).unwrap_or_default();
    let trigger = runs
        .iter()
        .find(|r| r.id == run_id)
        .map_or(Trigger::Schedule, |r| r.trigger);
    let started = runs.iter().filter_map(|r| r.started_at).min();
    let ended = if status == RunStatus::Running {
        Some(now)
    } else {
        runs.iter().filter_map(|r| r.finished_at).max()
    };
    Fate::Ran {
        status,
        run_id,
        attempts: shards.runs.iter().map(|s| s.attempts).max().unwrap_or(0),
        trigger,
        duration: started.zip(ended).map(|(s, e)| e - s),
        late: shards.runs.iter().filter_map(|s| s.late).min(),
        shards: Some(shards),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Pause;

    fn at(s: u32) -> DateTime<Utc> {
        "2026-03-02T12:00:00Z".parse::<DateTime<Utc>>().unwrap() + TimeDelta::seconds(s.into())
    }

    fn state() -> TaskState {
        TaskState {
            name: "t".into(),
            cron: "*/10 * * * * *".into(),
            timezone: "UTC".into(),
            calendar: None,
            enabled: true,
            next_run_at: None,
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

    fn run(id: i64, tick: u32, started: u32, took: Option<u32>, status: RunStatus) -> RunRecord {
        RunRecord {
            id,
            task_name: "t".into(),
            scheduled_at: at(tick),
            started_at: Some(at(started)),
            finished_at: took.map(|t| at(started + t)),
            status,
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
        }
    }

    /// Facts of a strip from the start of the test's minute, with the grace of its schedule.
    fn facts<'a>(
        state: &'a TaskState,
        runs: &'a [&'a RunRecord],
        skips: &'a [&'a SkipRecord],
        now: u32,
    ) -> Facts<'a> {
        Facts {
            state,
            runs,
            more_runs: false,
            skips,
            now: at(now),
            since: at(0),
            missed_grace: None,
        }
    }

    fn outcomes(marks: &[Mark]) -> Vec<(u32, &'static str, Option<&'static str>)> {
        marks
            .iter()
            .map(|m| {
                let reason = match &m.fate {
                    Fate::Skipped { reason, .. } => Some(reason.as_str()),
                    _ => None,
                };
                (
                    (m.at - at(0)).num_seconds() as u32,
                    m.fate.outcome(),
                    reason,
                )
            })
            .collect()
    }

    fn every_ten_seconds() -> ScheduleSpec {
        ScheduleSpec::parse("*/10 * * * * *", "UTC").unwrap()
    }

    #[test]
    fn each_tick_gets_its_run_its_skip_or_missed() {
        let spec = every_ten_seconds();
        let mut retried = run(3, 20, 21, Some(1), RunStatus::Succeeded);
        retried.attempt = 2;
        retried.trigger = Trigger::Retry;
        let mut manual = run(4, 25, 25, Some(2), RunStatus::Failed);
        manual.trigger = Trigger::Manual;
        let runs = [
            run(1, 10, 11, Some(3), RunStatus::Succeeded),
            run(2, 20, 20, Some(1), RunStatus::Failed),
            retried,
            manual,
        ];
        let runs: Vec<&RunRecord> = runs.iter().collect();
        let overlap = SkipRecord::new("t", SkipReason::Overlap, at(30), at(40), 2);
        let skips = [&overlap];
        let state = state();
        let strip = strip(Some(&spec), &facts(&state, &runs, &skips, 72), 100);
        let marks = &strip.marks;
        assert_eq!(
            outcomes(marks),
            [
                (10, "succeeded", None),
                (20, "succeeded", None),
                (25, "failed", None),
                (30, "skipped", Some("overlap")),
                (40, "skipped", Some("overlap")),
                (50, "missed", None),
                (60, "missed", None),
                (70, "due", None),
            ],
            "the tick at 0 predates anything known and is left out"
        );
        let Fate::Ran { late, duration, .. } = &marks[0].fate else {
            panic!("{:?}", marks[0])
        };
        assert_eq!(
            (*late, *duration),
            (Some(TimeDelta::seconds(1)), Some(TimeDelta::seconds(3)))
        );
        let Fate::Ran {
            attempts,
            run_id,
            trigger,
            ..
        } = &marks[1].fate
        else {
            panic!("{:?}", marks[1])
        };
        assert_eq!((*attempts, *run_id, *trigger), (2, 3, Trigger::Retry));
        let Fate::Ran { late, trigger, .. } = &marks[2].fate else {
            panic!("{:?}", marks[2])
        };
        assert_eq!(*trigger, Trigger::Manual);
        assert_eq!(*late, None, "a manual run is never late");
        assert!(strip.complete);
    }

    /// A run handed over before it started has no start; the tick's lateness is that of the run
    /// that took it over, and a tick no run started has neither lateness nor duration.
    #[test]
    fn a_run_that_never_started_neither_times_nor_delays_its_tick() {
        let spec = every_ten_seconds();
        let mut handed_over = run(1, 10, 10, Some(0), RunStatus::Interrupted);
        handed_over.started_at = None;
        let took_over = run(2, 10, 13, Some(1), RunStatus::Succeeded);
        let mut never = run(3, 20, 20, Some(0), RunStatus::Interrupted);
        never.started_at = None;
        let runs = [handed_over, took_over, never];
        let runs: Vec<&RunRecord> = runs.iter().collect();
        let state = state();
        let marks = strip(Some(&spec), &facts(&state, &runs, &[], 25), 100).marks;
        let Fate::Ran { late, duration, .. } = &marks[0].fate else {
            panic!("{:?}", marks[0])
        };
        assert_eq!(
            (*late, *duration),
            (Some(TimeDelta::seconds(3)), Some(TimeDelta::seconds(1)))
        );
        let Fate::Ran { late, duration, .. } = &marks[1].fate else {
            panic!("{:?}", marks[1])
        };
        assert_eq!((*late, *duration), (None, None));
    }

    #[test]
    fn ticks_not_recorded_yet_are_skipped_while_paused_or_overlapped() {
        let spec = every_ten_seconds();
        let runs = [run(1, 10, 10, None, RunStatus::Running)];
        let runs: Vec<&RunRecord> = runs.iter().collect();
        let state = state();
        let marks = strip(Some(&spec), &facts(&state, &runs, &[], 31), 100).marks;
        assert_eq!(
            outcomes(&marks),
            [
                (10, "running", None),
                (20, "skipped", Some("overlap")),
                (30, "skipped", Some("overlap")),
            ]
        );
        let Fate::Ran { duration, .. } = &marks[0].fate else {
            panic!("{:?}", marks[0])
        };
        assert_eq!(*duration, Some(TimeDelta::seconds(21)), "so far");

        let mut paused = state;
        paused.pause = Some(Pause::new(at(15), "ops", "checking", None));
        assert_eq!(
            outcomes(&strip(Some(&spec), &facts(&paused, &[], &[], 41), 100).marks),
            [
                (20, "skipped", Some("paused")),
                (30, "skipped", Some("paused")),
                (40, "skipped", Some("paused")),
            ]
        );
    }

    #[test]
    fn ticks_of_a_disabled_task_are_skipped_from_when_it_was_disabled() {
        let spec = every_ten_seconds();
        let runs = [run(1, 10, 10, Some(1), RunStatus::Succeeded)];
        let runs: Vec<&RunRecord> = runs.iter().collect();
        let mut disabled = state();
        disabled.enabled = false;
        disabled.disabled_at = Some(at(25));
        assert_eq!(
            outcomes(&strip(Some(&spec), &facts(&disabled, &runs, &[], 41), 100).marks),
            [
                (10, "succeeded", None),
                (20, "missed", None),
                (30, "skipped", Some("disabled")),
                (40, "skipped", Some("disabled")),
            ]
        );
    }

    #[test]
    fn a_tick_is_due_within_its_missed_grace_and_missed_after_it() {
        let spec = every_ten_seconds();
        let mut state = state();
        state.missed_since = Some(at(10));
        let strip_at = |now, fixed| {
            let facts = Facts {
                missed_grace: fixed,
                ..facts(&state, &[], &[], now)
            };
            outcomes(&strip(Some(&spec), &facts, 100).marks)
        };
        // The schedule's grace: half of 10 s, at least 5 s.
        assert_eq!(strip_at(14, None), [(10, "due", None)]);
        assert_eq!(strip_at(15, None), [(10, "missed", None)]);
        // A fixed grace, the node's setting.
        let minute = Some(Duration::from_secs(60));
        assert_eq!(strip_at(15, minute), [(10, "due", None)]);
        assert_eq!(strip_at(71, minute).first(), Some(&(10, "missed", None)));
    }

    #[test]
    fn a_skip_record_names_the_run_that_stands_for_its_ticks() {
        let spec = every_ten_seconds();
        let runs = [run(7, 10, 45, Some(1), RunStatus::Succeeded)];
        let runs: Vec<&RunRecord> = runs.iter().collect();
        let mut misfire = SkipRecord::new("t", SkipReason::Misfire, at(20), at(40), 3);
        misfire.run_id = Some(7);
        let state = state();
        let marks = strip(Some(&spec), &facts(&state, &runs, &[&misfire], 46), 100).marks;
        assert_eq!(marks.len(), 4);
        for mark in &marks[1..] {
            assert_eq!(
                mark.fate,
                Fate::Skipped {
                    reason: SkipReason::Misfire,
                    run_id: Some(7)
                }
            );
        }
    }

    #[test]
    fn a_strip_keeps_the_latest_ticks_and_says_when_older_ones_are_unknown() {
        let spec = every_ten_seconds();
        let state = state();
        // Newest first, as read: the read stopped at its limit, at the run of the tick at 30.
        let runs = [
            run(3, 50, 50, Some(1), RunStatus::Succeeded),
            run(2, 40, 40, Some(1), RunStatus::Succeeded),
            run(1, 30, 30, Some(1), RunStatus::Succeeded),
        ];
        let runs: Vec<&RunRecord> = runs.iter().collect();
        let cut = Facts {
            more_runs: true,
            ..facts(&state, &runs, &[], 51)
        };
        let strip_of = |facts: &Facts<'_>, count| strip(Some(&spec), facts, count);
        let all = strip_of(&cut, 100);
        assert_eq!(
            outcomes(&all.marks),
            [
                (30, "succeeded", None),
                (40, "succeeded", None),
                (50, "succeeded", None),
            ],
            "ticks before the oldest run read are not guessed at"
        );
        assert!(!all.complete, "the ticks at 10 and 20 are not known");
        let latest = strip_of(&cut, 2);
        assert_eq!(latest.marks, &all.marks[1..]);
        assert!(latest.complete, "the count is full");
        let whole = strip_of(&facts(&state, &runs, &[], 51), 100);
        assert!(whole.complete);
        assert!(
            !strip(None, &facts(&state, &runs, &[], 51), 100).complete,
            "without a schedule, missing ticks cannot be told"
        );
    }

    /// A run of shard `index` of 4 of the tick at `tick`.
    fn shard(id: i64, tick: u32, index: u32, took: Option<u32>, status: RunStatus) -> RunRecord {
        RunRecord {
            shard_index: index,
            shard_total: 4,
            node_id: format!("n{}", index % 2),
            ..run(id, tick, tick + 1 + index, took, status)
        }
    }

    #[test]
    fn a_sharded_tick_is_one_mark_folded_from_its_shards() {
        let spec = every_ten_seconds();
        let mut retried = shard(5, 10, 2, Some(1), RunStatus::Succeeded);
        retried.attempt = 2;
        let runs = [
            // Tick 10: shards 0, 1 succeeded, 2 failed then succeeded on retry, 3 runs.
            shard(1, 10, 0, Some(1), RunStatus::Succeeded),
            shard(2, 10, 1, Some(1), RunStatus::Succeeded),
            shard(3, 10, 2, Some(1), RunStatus::Failed),
            shard(4, 10, 3, None, RunStatus::Running),
            retried,
            // Tick 20: every shard ended, one lost and one failed: the worst is shown.
            shard(6, 20, 0, Some(1), RunStatus::Succeeded),
            shard(7, 20, 1, Some(1), RunStatus::Lost),
            shard(8, 20, 2, Some(1), RunStatus::Failed),
            shard(9, 20, 3, Some(1), RunStatus::Succeeded),
            // Tick 30: two shards ended, two not started yet.
            shard(10, 30, 0, Some(1), RunStatus::Succeeded),
            shard(11, 30, 1, Some(1), RunStatus::Succeeded),
            // Tick 40: whole.
            shard(12, 40, 0, Some(2), RunStatus::Succeeded),
            shard(13, 40, 1, Some(1), RunStatus::Succeeded),
            shard(14, 40, 2, Some(1), RunStatus::Succeeded),
            shard(15, 40, 3, Some(1), RunStatus::Succeeded),
        ];
        let runs: Vec<&RunRecord> = runs.iter().rev().collect();
        let state = state();
        let marks = strip(Some(&spec), &facts(&state, &runs, &[], 49), 100).marks;
        assert_eq!(
            outcomes(&marks),
            [
                (10, "running", None),
                (20, "failed", None),
                (30, "running", None),
                (40, "succeeded", None),
            ],
            "one mark per tick, not per shard"
        );
        let shards_of = |m: &Mark| match &m.fate {
            Fate::Ran {
                shards: Some(s), ..
            } => s.clone(),
            other => panic!("{other:?}"),
        };
        let first = shards_of(&marks[0]);
        assert_eq!((first.total, first.done(), first.pending()), (4, 3, 0));
        let retried = &first.runs[2];
        assert_eq!(
            (retried.run_id, retried.status, retried.attempts),
            (5, RunStatus::Succeeded, 2),
            "a shard shows its latest attempt"
        );
        assert_eq!(first.runs[3].node, "n1");
        let Fate::Ran {
            run_id,
            late,
            attempts,
            ..
        } = &marks[1].fate
        else {
            panic!("{:?}", marks[1])
        };
        assert_eq!(*run_id, 8, "the run shown is a failed shard's");
        assert_eq!(
            *late,
            Some(TimeDelta::seconds(1)),
            "its first shard's start"
        );
        assert_eq!(*attempts, 1);
        let third = shards_of(&marks[2]);
        assert_eq!((third.done(), third.pending()), (2, 2));
        let Fate::Ran { duration, .. } = &marks[3].fate else {
            panic!("{:?}", marks[3])
        };
        assert_eq!(
            *duration,
            Some(TimeDelta::seconds(4)),
            "from the first shard's start (41) to the last one's end (45)"
        );

        // A read cut at its limit inside tick 20's shards: tick 20 is left out, not shown
        // with the shards that happened to be read.
        let cut: Vec<&RunRecord> = runs[..runs.len() - 7].to_vec();
        let facts = Facts {
            more_runs: true,
            ..facts(&state, &cut, &[], 49)
        };
        assert_eq!(
            outcomes(&strip(Some(&spec), &facts, 100).marks),
            [(30, "running", None), (40, "succeeded", None)]
        );
    }

    /// A run of node `node`'s index of 3 counted at the tick at `tick` (a broadcast's).
    fn on_node(id: i64, tick: u32, node: &str, status: RunStatus) -> RunRecord {
        let index = ["a", "b", "c"].iter().position(|n| *n == node).unwrap() as u32;
        let took = (status != RunStatus::Running).then_some(1);
        RunRecord {
            shard_index: index,
            shard_total: 3,
            node_id: node.into(),
            ..run(id, tick, tick + 1, took, status)
        }
    }

    #[test]
    fn a_broadcast_tick_is_done_when_each_counted_node_ran_or_its_grace_passed() {
        let spec = every_ten_seconds();
        let runs = [
            // Tick 10: all three nodes ran.
            on_node(1, 10, "a", RunStatus::Succeeded),
            on_node(2, 10, "b", RunStatus::Succeeded),
            on_node(3, 10, "c", RunStatus::Succeeded),
            // Tick 20: node b was killed mid-run (lost, never run elsewhere).
            on_node(4, 20, "a", RunStatus::Succeeded),
            on_node(5, 20, "b", RunStatus::Lost),
            on_node(6, 20, "c", RunStatus::Succeeded),
            // Tick 30: node c, counted at the tick, never started it; 13 s on, past the
            // grace (5 s for a tick every 10 s): not run on c, and the tick is done.
            on_node(7, 30, "a", RunStatus::Succeeded),
            on_node(8, 30, "b", RunStatus::Succeeded),
            // Tick 40: node c has not started it 3 s on, within the grace: pending.
            on_node(9, 40, "a", RunStatus::Succeeded),
            on_node(10, 40, "b", RunStatus::Running),
        ];
        let runs: Vec<&RunRecord> = runs.iter().rev().collect();
        let mut state = state();
        state.broadcast = true;
        let marks = strip(Some(&spec), &facts(&state, &runs, &[], 43), 100).marks;
        assert_eq!(
            outcomes(&marks),
            [
                (10, "succeeded", None),
                (20, "lost", None),
                (30, "succeeded", None),
                (40, "running", None),
            ],
        );
        let shards: Vec<Shards> = marks
            .iter()
            .map(|m| match &m.fate {
                Fate::Ran {
                    shards: Some(s), ..
                } => s.clone(),
                other => panic!("{other:?}"),
            })
            .collect();
        let counts = |s: &Shards| (s.total, s.runs.len(), s.done(), s.pending(), s.not_run());
        assert!(shards.iter().all(|s| s.broadcast));
        assert_eq!(counts(&shards[0]), (3, 3, 3, 0, 0));
        let nodes: Vec<&str> = shards[0].runs.iter().map(|r| r.node.as_str()).collect();
        assert_eq!(nodes, ["a", "b", "c"], "each run names its node");
        assert_eq!(counts(&shards[1]), (3, 3, 3, 0, 0));
        assert_eq!(fold_shards(&shards[1]), RunStatus::Lost);
        assert_eq!(
            counts(&shards[2]),
            (3, 2, 2, 0, 1),
            "past its grace, a counted node with no run did not run it"
        );
        assert_eq!(counts(&shards[3]), (3, 2, 1, 1, 0), "within it, pending");

        // The same runs of fixed shards: a shard with no run is pending whatever the time
        // (a live node takes it over).
        state.broadcast = false;
        let marks = strip(Some(&spec), &facts(&state, &runs, &[], 43), 100).marks;
        assert_eq!(marks[2].fate.outcome(), "running");

        // A broadcast tick of one node is still a broadcast's: the run names its node.
        let lone = [RunRecord {
            node_id: "a".into(),
            ..run(1, 10, 11, Some(1), RunStatus::Succeeded)
        }];
        let lone: Vec<&RunRecord> = lone.iter().collect();
        state.broadcast = true;
        let marks = strip(Some(&spec), &facts(&state, &lone, &[], 13), 100).marks;
        let Fate::Ran {
            shards: Some(s), ..
        } = &marks[0].fate
        else {
            panic!("{:?}", marks[0])
        };
        assert_eq!((s.total, s.runs[0].node.as_str()), (1, "a"));
    }

    #[test]
    fn a_window_holds_its_count_of_ticks_whatever_the_interval() {
        let now = at(0);
        let weekdays = ScheduleSpec::parse("0 9 * * MON-FRI", "UTC").unwrap();
        let start = window_start(&weekdays, now, 10);
        assert!(weekdays.count_fires(start, now, 100) >= 10);
        let secondly = ScheduleSpec::parse("* * * * * *", "UTC").unwrap();
        let start = window_start(&secondly, now, 30);
        assert_eq!(secondly.count_fires(start, now, 100), 31);
        // Nightly, monthly, yearly, and a schedule of leap days only: 30 ticks back, and not
        // much more (the window is what bounds the walk over the ticks).
        for cron in ["0 3 * * *", "0 0 1 * *", "0 0 1 1 *", "0 0 29 2 *"] {
            let spec = ScheduleSpec::parse(cron, "UTC").unwrap();
            let start = window_start(&spec, now, 30);
            let fires = spec.count_fires(start, now, 1_000);
            assert!(
                (30..=130).contains(&fires),
                "{cron}: {fires} ticks from {start}"
            );
        }
    }

    #[test]
    fn a_daily_strip_shows_its_last_30_ticks_from_the_stored_history() {
        // A nightly task with 40 nights of runs: the strip holds the latest 30, none missed.
        let spec = ScheduleSpec::parse("0 3 * * *", "UTC").unwrap();
        let now = "2026-03-02T12:00:00Z".parse::<DateTime<Utc>>().unwrap();
        let nights: Vec<RunRecord> = (0..40)
            .map(|d| {
                let tick =
                    "2026-03-02T03:00:00Z".parse::<DateTime<Utc>>().unwrap() - TimeDelta::days(d);
                RunRecord {
                    scheduled_at: tick,
                    started_at: Some(tick),
                    finished_at: Some(tick + TimeDelta::seconds(5)),
                    ..run(100 - d, 0, 0, Some(5), RunStatus::Succeeded)
                }
            })
            .collect();
        let runs: Vec<&RunRecord> = nights.iter().collect();
        let mut state = state();
        state.cron = "0 3 * * *".into();
        let facts = Facts {
            state: &state,
            runs: &runs,
            more_runs: false,
            skips: &[],
            now,
            since: window_start(&spec, now, 30),
            missed_grace: None,
        };
        let strip = strip(Some(&spec), &facts, 30);
        assert_eq!(strip.marks.len(), 30);
        assert!(strip.marks.iter().all(|m| m.fate.outcome() == "succeeded"));
        assert!(strip.complete);
    }
}
