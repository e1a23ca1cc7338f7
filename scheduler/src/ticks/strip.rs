//! What became of each expected tick, as the dashboard draws it (a strip per task): for every
//! tick the schedule says should have fired lately, the run that served it and its outcome, the
//! skip record and its reason, or nothing (missed, or due within its grace), or waiting: the
//! row's due tick, and the ticks after it, while the row waits for a share of its limit shared
//! by tasks ([`crate::limits`]).
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
    /// Not started: its row waits for a share of its limit shared by tasks (the tick it waits
    /// to run, or one that came while it waits).
    Waiting,
}

impl Fate {
    /// The outcome as the admin API names it: a run's status, `skipped`, `due`, `missed` or
    /// `waiting`.
    pub(crate) fn outcome(&self) -> &'static str {
        match self {
            Fate::Ran { status, .. } => status.as_str(),
            Fate::Skipped { .. } => "skipped",
            Fate::Due => "due",
            Fate::Missed => "missed",
            Fate::Waiting => "waiting",
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
/// `broadcast`'s (then `settled` when it is past its missed grace); each shard is as late as its
/// first attempt started after the tick's `start` (the tick shifted by its jitter).
fn shards_of(
    start: DateTime<Utc>,
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
                    .map(|s| s - start),
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
    /// The task's jitter window: a tick's lateness and its missed grace count from its start
    /// (see `crate::ticks::jitter`), not from the tick.
    pub jitter: Duration,
    /// The row waits for a share of its limit shared by tasks: the tick it waits to run (its
    /// due tick). That tick and the later ones with nothing else to show are waiting.
    pub waiting: Option<DateTime<Utc>>,
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
        .chain(f.waiting)
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
    // When a tick starts: shifted by the task's jitter, as the metrics count lateness.
    let start = |at| {
        spec.map_or(at, |spec| {
            super::jitter::start_of(&f.state.name, spec, at, f.jitter)
        })
    };
    let broadcast = f.state.broadcast;
    by_tick
        .into_iter()
        .filter_map(|(at, runs)| {
            let settled = broadcast && f.now - start(at) >= grace(at);
            if let Some(shards) = shards_of(start(at), &runs, broadcast, settled) {
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
                        .map(|s| s - start(at)),
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
            } else if f.waiting.is_some_and(|w| w <= at) {
                // Not missed: it starts late, or is skipped by its misfire rule, once a share
                // of its limit is free.
                Fate::Waiting
            } else if first_known.is_none_or(|first| at < first) {
                return None;
            } else if f.now - start(at) < grace(at) {
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
mod tests;
