//! The judge: pure functions from a finished scenario's history to a [`Verdict`].
//!
//! Inputs are the nodes' own records (what their handlers did, on the nodes' clocks), the rows
//! the engine left in the database (`scheduler_runs`, and `scheduler_skips` when it exists), the
//! harness's timeline (what it did, on its clock), and the schedules it configured. No I/O, no
//! database: everything the judge needs is passed in, so the detectors are unit-tested with
//! synthetic histories below.
//!
//! Invariants (each must be 0):
//!
//! - **finished twice**: two `end ok=true` for one (task, tick);
//! - **started again after success**: a `start` of (task, tick) after an `end ok=true` of it;
//! - **overlapping runs**: two runs of one task whose intervals `[start, end or last beat]`
//!   intersect, after correcting skewed clocks;
//! - **unaccounted ticks**: ticks due while some node had been up for [`Params::settle_ms`],
//!   outside the last [`Params::tail_ms`] before the harness stopped the nodes and outside every
//!   fault window (extended by a lock lifetime + [`Params::fault_slack_ms`]), that no `start`
//!   serves, no `scheduler_skips` row covers and no run's `ticks_collapsed` folds in;
//! - **node exits**: a node that exited on its own, or not with 0 (in time) after SIGTERM.
//!
//! Reported, not judged: the worst takeover time (from a SIGKILL or SIGSTOP to the next `start`
//! of a task whose run was in flight on the victim).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use chrono::{DateTime, TimeZone, Utc};

use crate::record::{Ev, Record};
use crate::timeline::{Event, EventKind, ExitCause};

/// One row of `scheduler_runs`, as the judge needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunRow {
    /// Run id.
    pub id: i64,
    /// Task name.
    pub task: String,
    /// The tick served.
    pub scheduled_at: DateTime<Utc>,
    /// `running`, `succeeded`, `failed`, `lost`, `cancelled`.
    pub status: String,
    /// The node that claimed it.
    pub node: String,
    /// Ticks folded into this run (the next n fire times after `scheduled_at`).
    pub ticks_collapsed: i64,
}

/// One row of `scheduler_skips` (a table an engine may keep to say which ticks it skipped on
/// purpose, and why).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkipRow {
    /// Task name.
    pub task: String,
    /// First skipped tick (inclusive).
    pub first_tick: DateTime<Utc>,
    /// Last skipped tick (inclusive).
    pub last_tick: DateTime<Utc>,
}

/// From `from_ms` on (until the task's next segment), `task` runs on `cron` (UTC), or not at
/// all (`None`: disabled or absent from the config).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    /// Task name.
    pub task: String,
    /// Harness time the schedule was written.
    pub from_ms: i64,
    /// The cron in effect, if the task is enabled.
    pub cron: Option<String>,
}

/// Tolerances of the judge.
#[derive(Debug, Clone, Copy)]
pub struct Params {
    /// The nodes' lock lifetime.
    pub lock_lifetime_ms: i64,
    /// A node counts as up this long after it was started (or resumed).
    pub settle_ms: i64,
    /// Ticks this close to the final stop are not judged.
    pub tail_ms: i64,
    /// Added to a lock lifetime after each fault window.
    pub fault_slack_ms: i64,
    /// Whether to compute takeover times.
    pub takeover: bool,
}

impl Default for Params {
    fn default() -> Self {
        Self {
            lock_lifetime_ms: 3_000,
            settle_ms: 3_000,
            tail_ms: 5_000,
            fault_slack_ms: 2_000,
            takeover: false,
        }
    }
}

/// Everything the judge looks at.
#[derive(Debug, Clone, Copy)]
pub struct History<'a> {
    /// The nodes' records, in any order.
    pub records: &'a [Record],
    /// `scheduler_runs`.
    pub runs: &'a [RunRow],
    /// `scheduler_skips`, when the table exists.
    pub skips: Option<&'a [SkipRow]>,
    /// The harness's timeline.
    pub timeline: &'a [Event],
    /// What the harness configured, per task, over time.
    pub schedules: &'a [Segment],
    /// Per node id: how far its clock is ahead of the harness's (ms; negative: behind).
    pub clock_offsets_ms: &'a HashMap<String, i64>,
    /// Tolerances.
    pub params: Params,
}

/// A (task, tick) pair.
pub type TaskTick = (String, DateTime<Utc>);

/// Two runs of one task that were alive at the same time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overlap {
    /// The task.
    pub task: String,
    /// The earlier run: (node, pid, run id, tick).
    pub first: (String, u32, i64, DateTime<Utc>),
    /// The later run.
    pub second: (String, u32, i64, DateTime<Utc>),
    /// How long both were alive (ms).
    pub overlap_ms: i64,
    /// Records the earlier run wrote after the later one had started (work done at the same
    /// time, as opposed to a frozen process merely holding its run open).
    pub records_after: usize,
}

/// Takeover after a kill or pause.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Takeover {
    /// Faults with at least one run in flight on the victim.
    pub faults: usize,
    /// Runs in flight on victims.
    pub in_flight: usize,
    /// Worst time from fault to the task's next start (ms).
    pub worst_ms: Option<i64>,
    /// Median of those times (ms).
    pub median_ms: Option<i64>,
    /// In-flight tasks never started again before the scenario ended.
    pub never: usize,
}

/// What the judge found.
#[derive(Debug, Clone, Default)]
pub struct Verdict {
    /// Start records.
    pub starts: usize,
    /// `end ok=true` records.
    pub successes: usize,
    /// Invariant: (task, tick) with two or more `end ok=true`.
    pub finished_twice: Vec<TaskTick>,
    /// Invariant: (task, tick) started again after an `end ok=true`.
    pub started_after_success: Vec<TaskTick>,
    /// Reported, not a violation: (task, tick) run again after a success whose outcome never
    /// reached the database because the harness SIGKILLed its node first (the run is recorded
    /// `lost`; with `recovery = "rerun"` an unknown outcome runs again: at least once).
    pub unknown_outcome_reruns: Vec<TaskTick>,
    /// Invariant: runs of one task alive at once.
    pub overlaps: Vec<Overlap>,
    /// Ticks the judge expected.
    pub expected_ticks: usize,
    /// Invariant: expected ticks with neither a run nor a reason.
    pub unaccounted: Vec<TaskTick>,
    /// Expected ticks accounted only by `ticks_collapsed` or a skip row.
    pub collapsed_or_skipped: usize,
    /// Worst lateness of a start (start time minus tick) among expected ticks (ms).
    pub worst_start_lag_ms: Option<i64>,
    /// Reported: starts serving a tick that is not a fire time of the task's configured
    /// schedule at that tick (a disabled task, a stale cron), outside fault windows.
    pub off_schedule: Vec<TaskTick>,
    /// Reported: takeover after kills and pauses.
    pub takeover: Option<Takeover>,
    /// Invariant: nodes that exited on their own, or badly after SIGTERM.
    pub bad_exits: Vec<String>,
    /// Exits the harness caused and that went as asked.
    pub expected_exits: usize,
    /// Invariant, set by scenarios that watch alerts: missed-run incidents opened for a task
    /// that was never late past its grace by the database's clock.
    pub false_alarms: Vec<String>,
    /// Invariant, set by the `instances` scenario: starts of an instance for a tick after its
    /// removal had been answered (and before it was made again).
    pub ran_after_removal: Vec<String>,
}

impl Verdict {
    /// How many invariant violations were found.
    pub fn violations(&self) -> usize {
        self.finished_twice.len()
            + self.started_after_success.len()
            + self.overlaps.len()
            + self.unaccounted.len()
            + self.bad_exits.len()
            + self.false_alarms.len()
            + self.ran_after_removal.len()
    }
}

/// The judge could not read its inputs (a schedule it cannot parse).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JudgeError(pub String);

impl std::fmt::Display for JudgeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for JudgeError {}

/// A record's time on the harness's clock.
fn corrected(r: &Record, offsets: &HashMap<String, i64>) -> i64 {
    r.t_ms - offsets.get(&r.node).copied().unwrap_or(0)
}

/// Judges a history.
pub fn judge(h: &History<'_>) -> Result<Verdict, JudgeError> {
    let mut v = Verdict {
        starts: h.records.iter().filter(|r| r.ev == Ev::Start).count(),
        successes: h
            .records
            .iter()
            .filter(|r| r.ev == Ev::End && r.ok == Some(true))
            .count(),
        finished_twice: finished_twice(h.records),
        started_after_success: started_after_success(h.records, h.clock_offsets_ms),
        overlaps: overlaps(h.records, h.clock_offsets_ms),
        ..Verdict::default()
    };
    let died = died_before_recording(h);
    let (excused, kept): (Vec<_>, Vec<_>) =
        v.finished_twice.drain(..).partition(|k| died.contains(k));
    v.finished_twice = kept;
    v.started_after_success.retain(|k| !died.contains(k));
    v.unknown_outcome_reruns = excused;
    let ticks = expected_ticks(h)?;
    v.expected_ticks = ticks.expected.len();
    v.unaccounted = ticks.unaccounted;
    v.collapsed_or_skipped = ticks.collapsed_or_skipped;
    v.worst_start_lag_ms = ticks.worst_lag_ms;
    v.off_schedule = ticks.off_schedule;
    if h.params.takeover {
        v.takeover = Some(takeover(h.records, h.timeline, h.clock_offsets_ms));
    }
    let (bad, ok) = exits(h.timeline);
    v.bad_exits = bad;
    v.expected_exits = ok;
    Ok(v)
}

/// (task, tick) pairs whose first successful run is recorded `lost` and whose process the
/// harness SIGKILLed after that run's `end`: its outcome died with its node.
pub fn died_before_recording(h: &History<'_>) -> BTreeSet<TaskTick> {
    let lost: BTreeSet<i64> = h
        .runs
        .iter()
        .filter(|r| r.status == "lost")
        .map(|r| r.id)
        .collect();
    let mut first_success: HashMap<TaskTick, &Record> = HashMap::new();
    for r in h
        .records
        .iter()
        .filter(|r| r.ev == Ev::End && r.ok == Some(true))
    {
        let t = corrected(r, h.clock_offsets_ms);
        first_success
            .entry((r.task.clone(), r.tick))
            .and_modify(|e| {
                if t < corrected(e, h.clock_offsets_ms) {
                    *e = r;
                }
            })
            .or_insert(r);
    }
    first_success
        .into_iter()
        .filter(|(_, end)| lost.contains(&end.run_id))
        .filter(|(_, end)| {
            let ended = corrected(end, h.clock_offsets_ms);
            h.timeline.iter().any(|e| {
                matches!(&e.kind, crate::timeline::EventKind::NodeKilled { pid, .. } if *pid == end.pid)
                    && e.t_ms >= ended
            })
        })
        .map(|(k, _)| k)
        .collect()
}

/// (task, tick) pairs with two or more `end ok=true`.
pub fn finished_twice(records: &[Record]) -> Vec<TaskTick> {
    let mut ends: BTreeMap<TaskTick, usize> = BTreeMap::new();
    for r in records
        .iter()
        .filter(|r| r.ev == Ev::End && r.ok == Some(true))
    {
        *ends.entry((r.task.clone(), r.tick)).or_default() += 1;
    }
    ends.into_iter()
        .filter(|(_, n)| *n > 1)
        .map(|(k, _)| k)
        .collect()
}

/// (task, tick) pairs with a `start` after an `end ok=true` of the same pair.
pub fn started_after_success(records: &[Record], offsets: &HashMap<String, i64>) -> Vec<TaskTick> {
    let mut first_success: HashMap<TaskTick, i64> = HashMap::new();
    for r in records
        .iter()
        .filter(|r| r.ev == Ev::End && r.ok == Some(true))
    {
        let t = corrected(r, offsets);
        first_success
            .entry((r.task.clone(), r.tick))
            .and_modify(|e| *e = (*e).min(t))
            .or_insert(t);
    }
    let mut found = BTreeSet::new();
    for r in records.iter().filter(|r| r.ev == Ev::Start) {
        let key = (r.task.clone(), r.tick);
        if let Some(done) = first_success.get(&key)
            && corrected(r, offsets) > *done
        {
            found.insert(key);
        }
    }
    found.into_iter().collect()
}

/// One run as seen in the records: its first and last record on the harness's clock.
#[derive(Debug, Clone)]
struct RunSpan {
    /// Every record time of the run, sorted.
    times: Vec<i64>,
    node: String,
    pid: u32,
    run_id: i64,
    tick: DateTime<Utc>,
    task: String,
    first: i64,
    last: i64,
    ended: Option<i64>,
}

fn run_spans(records: &[Record], offsets: &HashMap<String, i64>) -> Vec<RunSpan> {
    let mut spans: HashMap<(String, u32, i64), RunSpan> = HashMap::new();
    for r in records {
        let t = corrected(r, offsets);
        let span = spans
            .entry((r.node.clone(), r.pid, r.run_id))
            .or_insert_with(|| RunSpan {
                times: Vec::new(),
                node: r.node.clone(),
                pid: r.pid,
                run_id: r.run_id,
                tick: r.tick,
                task: r.task.clone(),
                first: t,
                last: t,
                ended: None,
            });
        span.times.push(t);
        span.first = span.first.min(t);
        span.last = span.last.max(t);
        if r.ev == Ev::End {
            span.ended = Some(span.ended.map_or(t, |e| e.min(t)));
        }
    }
    let mut spans: Vec<RunSpan> = spans.into_values().collect();
    for s in &mut spans {
        s.times.sort_unstable();
    }
    spans.sort_by(|a, b| {
        (&a.task, a.first, a.pid, a.run_id).cmp(&(&b.task, b.first, b.pid, b.run_id))
    });
    spans
}

/// Runs of one task alive at the same time: a run starting strictly before an earlier run's
/// last record.
pub fn overlaps(records: &[Record], offsets: &HashMap<String, i64>) -> Vec<Overlap> {
    let spans = run_spans(records, offsets);
    let mut found = Vec::new();
    let mut i = 0;
    while i < spans.len() {
        let task = &spans[i].task;
        let mut j = i;
        while j < spans.len() && &spans[j].task == task {
            j += 1;
        }
        // Within one task, sorted by first record: compare each run with the one alive longest
        // before it.
        let mut longest: Option<&RunSpan> = None;
        for s in &spans[i..j] {
            if let Some(prev) = longest
                && s.first < prev.last
            {
                found.push(Overlap {
                    task: task.clone(),
                    first: (prev.node.clone(), prev.pid, prev.run_id, prev.tick),
                    second: (s.node.clone(), s.pid, s.run_id, s.tick),
                    overlap_ms: prev.last.min(s.last) - s.first,
                    records_after: prev.times.iter().filter(|t| **t > s.first).count(),
                });
            }
            if longest.is_none_or(|p| s.last > p.last) {
                longest = Some(s);
            }
        }
        i = j;
    }
    found
}

/// Closed intervals `[from, to]` in ms.
type Windows = Vec<(i64, i64)>;

fn inside(windows: &Windows, t: i64) -> bool {
    windows.iter().any(|(a, b)| *a <= t && t <= *b)
}

/// When at least one node had been up for `settle_ms` (up: started or resumed, and not yet
/// paused, killed, told to stop or exited).
fn up_windows(timeline: &[Event], settle_ms: i64, end_ms: i64) -> Windows {
    let mut events: Vec<&Event> = timeline.iter().collect();
    events.sort_by_key(|e| e.t_ms);
    let mut up_since: HashMap<u32, i64> = HashMap::new();
    let mut windows = Vec::new();
    let close = |since: Option<i64>, t: i64, windows: &mut Windows| {
        if let Some(since) = since
            && since + settle_ms < t
        {
            windows.push((since + settle_ms, t));
        }
    };
    for e in events {
        match &e.kind {
            EventKind::NodeStarted { pid, .. } | EventKind::NodeResumed { pid, .. } => {
                up_since.insert(*pid, e.t_ms);
            }
            EventKind::NodeKilled { pid, .. }
            | EventKind::NodePaused { pid, .. }
            | EventKind::NodeTerminated { pid, .. }
            | EventKind::NodeExited { pid, .. } => {
                close(up_since.remove(pid), e.t_ms, &mut windows);
            }
            _ => {}
        }
    }
    for since in up_since.into_values() {
        close(Some(since), end_ms, &mut windows);
    }
    windows
}

/// A window in which the engine may collapse ticks: of every task, or of `tasks` only.
#[derive(Debug)]
struct FaultWindow {
    from: i64,
    to: i64,
    tasks: Option<HashSet<String>>,
}

impl FaultWindow {
    fn excuses(&self, task: &str, t: i64) -> bool {
        self.from <= t && t <= self.to && self.tasks.as_ref().is_none_or(|s| s.contains(task))
    }
}

/// Fault windows, each extended by a lock lifetime + slack. A SIGKILL or SIGSTOP only excuses
/// the tasks its victim held: runs in flight on it by its records, and runs its node id left
/// `lost`, `cancelled` or `running` for ticks up to a minute before the fault.
fn fault_windows(h: &History<'_>) -> Vec<FaultWindow> {
    let p = &h.params;
    let spans = run_spans(h.records, h.clock_offsets_ms);
    h.timeline
        .iter()
        .filter_map(|e| {
            let EventKind::Fault { until_ms, node, .. } = &e.kind else {
                return None;
            };
            let to = (*until_ms).max(e.t_ms) + p.lock_lifetime_ms + p.fault_slack_ms;
            let tasks = node.as_ref().map(|victim| {
                let mut tasks: HashSet<String> = spans
                    .iter()
                    .filter(|s| {
                        s.pid == victim.pid
                            && s.first <= e.t_ms
                            && s.ended.is_none_or(|end| end >= e.t_ms)
                    })
                    .map(|s| s.task.clone())
                    .collect();
                tasks.extend(
                    h.runs
                        .iter()
                        .filter(|r| {
                            let tick = r.scheduled_at.timestamp_millis();
                            r.node == victim.node
                                && matches!(r.status.as_str(), "lost" | "cancelled" | "running")
                                && tick >= e.t_ms - 60_000
                                && tick <= *until_ms + 1_000
                        })
                        .map(|r| r.task.clone()),
                );
                tasks
            });
            Some(FaultWindow {
                from: e.t_ms,
                to,
                tasks,
            })
        })
        .collect()
}

/// When the harness began stopping the nodes (else the last thing it did).
fn stop_time(timeline: &[Event]) -> i64 {
    timeline
        .iter()
        .find(|e| e.kind == EventKind::StoppingAll)
        .or(timeline.last())
        .map_or(0, |e| e.t_ms)
}

fn ms_to_time(ms: i64) -> DateTime<Utc> {
    Utc.timestamp_millis_opt(ms).single().unwrap_or_default()
}

/// Per task, its schedule segments as (from, until, spec).
struct Schedules {
    by_task: BTreeMap<String, Vec<(i64, i64, Option<scheduler::ScheduleSpec>)>>,
}

impl Schedules {
    fn new(segments: &[Segment], end_ms: i64) -> Result<Self, JudgeError> {
        let mut sorted: BTreeMap<String, Vec<&Segment>> = BTreeMap::new();
        for s in segments {
            sorted.entry(s.task.clone()).or_default().push(s);
        }
        let mut by_task = BTreeMap::new();
        for (task, mut segs) in sorted {
            segs.sort_by_key(|s| s.from_ms);
            let mut out = Vec::new();
            for (k, s) in segs.iter().enumerate() {
                let until = segs.get(k + 1).map_or(end_ms, |n| n.from_ms);
                let spec = match &s.cron {
                    Some(cron) => {
                        Some(scheduler::ScheduleSpec::parse(cron, "UTC").map_err(|e| {
                            JudgeError(format!("schedule of {task} (`{cron}`): {e}"))
                        })?)
                    }
                    None => None,
                };
                out.push((s.from_ms, until, spec));
            }
            by_task.insert(task, out);
        }
        Ok(Self { by_task })
    }

    /// The spec in effect for `task` at `t_ms`.
    fn at(&self, task: &str, t_ms: i64) -> Option<&scheduler::ScheduleSpec> {
        self.by_task
            .get(task)?
            .iter()
            .rev()
            .find(|(from, _, _)| *from <= t_ms)
            .and_then(|(_, _, spec)| spec.as_ref())
    }
}

struct TickAccount {
    off_schedule: Vec<TaskTick>,
    expected: Vec<TaskTick>,
    unaccounted: Vec<TaskTick>,
    collapsed_or_skipped: usize,
    worst_lag_ms: Option<i64>,
}

/// The ticks due while a node was up, and which of them nothing accounts for.
fn expected_ticks(h: &History<'_>) -> Result<TickAccount, JudgeError> {
    let p = &h.params;
    let stop = stop_time(h.timeline);
    let horizon = stop - p.tail_ms;
    let ups = up_windows(h.timeline, p.settle_ms, stop);
    let faults = fault_windows(h);
    let schedules = Schedules::new(h.schedules, stop)?;

    let mut first_start: HashMap<TaskTick, i64> = HashMap::new();
    for r in h.records.iter().filter(|r| r.ev == Ev::Start) {
        let t = corrected(r, h.clock_offsets_ms);
        first_start
            .entry((r.task.clone(), r.tick))
            .and_modify(|e| *e = (*e).min(t))
            .or_insert(t);
    }
    let mut folded: HashSet<TaskTick> = HashSet::new();
    for run in h.runs.iter().filter(|r| r.ticks_collapsed > 0) {
        let Some(spec) = schedules.at(&run.task, run.scheduled_at.timestamp_millis()) else {
            continue;
        };
        let n = usize::try_from(run.ticks_collapsed.min(100_000)).unwrap_or(0);
        for fire in spec.iter_after(run.scheduled_at).take(n) {
            folded.insert((run.task.clone(), fire));
        }
    }
    let skipped = |task: &str, tick: DateTime<Utc>| {
        h.skips.is_some_and(|rows| {
            rows.iter()
                .any(|s| s.task == task && s.first_tick <= tick && tick <= s.last_tick)
        })
    };

    let mut off_schedule = BTreeSet::new();
    for (task, tick) in first_start.keys() {
        let t = tick.timestamp_millis();
        if faults.iter().any(|f| f.from <= t && t <= f.to) {
            continue;
        }
        let due = schedules.at(task, t).is_some_and(|spec| {
            spec.next_after(*tick - chrono::Duration::milliseconds(1)) == Some(*tick)
        });
        if !due {
            off_schedule.insert((task.clone(), *tick));
        }
    }
    let mut acc = TickAccount {
        off_schedule: off_schedule.into_iter().collect(),
        expected: Vec::new(),
        unaccounted: Vec::new(),
        collapsed_or_skipped: 0,
        worst_lag_ms: None,
    };
    for (task, segs) in &schedules.by_task {
        for (from, until, spec) in segs {
            let Some(spec) = spec else { continue };
            let until = (*until).min(horizon);
            for fire in spec.iter_after(ms_to_time(*from)) {
                let t = fire.timestamp_millis();
                if t > until {
                    break;
                }
                if !inside(&ups, t) || faults.iter().any(|f| f.excuses(task, t)) {
                    continue;
                }
                let key = (task.clone(), fire);
                if let Some(started) = first_start.get(&key) {
                    let lag = started - t;
                    acc.worst_lag_ms = Some(acc.worst_lag_ms.map_or(lag, |w| w.max(lag)));
                } else if folded.contains(&key) || skipped(task, fire) {
                    acc.collapsed_or_skipped += 1;
                } else {
                    acc.unaccounted.push(key.clone());
                }
                acc.expected.push(key);
            }
        }
    }
    Ok(acc)
}

/// Time from each SIGKILL / SIGSTOP to the next start of every task in flight on the victim.
pub fn takeover(
    records: &[Record],
    timeline: &[Event],
    offsets: &HashMap<String, i64>,
) -> Takeover {
    let spans = run_spans(records, offsets);
    let mut starts: BTreeMap<&str, Vec<i64>> = BTreeMap::new();
    for r in records.iter().filter(|r| r.ev == Ev::Start) {
        starts
            .entry(&r.task)
            .or_default()
            .push(corrected(r, offsets));
    }
    for v in starts.values_mut() {
        v.sort_unstable();
    }
    let mut out = Takeover::default();
    let mut times = Vec::new();
    for e in timeline {
        let (EventKind::NodeKilled { pid, .. } | EventKind::NodePaused { pid, .. }) = &e.kind
        else {
            continue;
        };
        let in_flight: Vec<&RunSpan> = spans
            .iter()
            .filter(|s| {
                s.pid == *pid && s.first <= e.t_ms && s.ended.is_none_or(|end| end > e.t_ms)
            })
            .collect();
        if in_flight.is_empty() {
            continue;
        }
        out.faults += 1;
        for s in in_flight {
            out.in_flight += 1;
            let next = starts
                .get(s.task.as_str())
                .and_then(|v| v.iter().find(|t| **t > e.t_ms));
            match next {
                Some(t) => times.push(t - e.t_ms),
                None => out.never += 1,
            }
        }
    }
    times.sort_unstable();
    out.worst_ms = times.last().copied();
    out.median_ms = times.get(times.len() / 2).copied();
    out
}

/// (bad exits described, exits that went as the harness asked).
pub fn exits(timeline: &[Event]) -> (Vec<String>, usize) {
    let mut bad = Vec::new();
    let mut ok = 0;
    for e in timeline {
        let EventKind::NodeExited {
            node,
            pid,
            status,
            success,
            cause,
        } = &e.kind
        else {
            continue;
        };
        match cause {
            ExitCause::OnItsOwn => {
                bad.push(format!("{node} (pid {pid}) exited on its own: {status}"))
            }
            ExitCause::Killed => ok += 1,
            ExitCause::Terminated { after_ms, forced } => {
                if *forced {
                    bad.push(format!(
                        "{node} (pid {pid}) did not exit within {:.1} s of SIGTERM; killed",
                        *after_ms as f64 / 1000.0
                    ));
                } else if !success {
                    bad.push(format!(
                        "{node} (pid {pid}) exited after SIGTERM with {status}"
                    ));
                } else {
                    ok += 1;
                }
            }
        }
    }
    (bad, ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: i64 = 1_767_225_600_000; // 2026-01-01T00:00:00Z

    fn tick(s: i64) -> DateTime<Utc> {
        ms_to_time(T0 + s * 1000)
    }

    fn rec(
        ev: Ev,
        task: &str,
        tick_s: i64,
        run_id: i64,
        node: &str,
        pid: u32,
        t_ms: i64,
    ) -> Record {
        Record {
            ev,
            task: task.into(),
            tick: tick(tick_s),
            run_id,
            node: node.into(),
            pid,
            t_ms,
            ok: (ev == Ev::End).then_some(true),
            cancelled: (ev == Ev::End).then_some(false),
        }
    }

    /// A clean run of `task` serving tick `s`: start 20 ms after the tick, end 100 ms later.
    fn clean_run(task: &str, s: i64, run_id: i64, node: &str, pid: u32) -> Vec<Record> {
        let t = T0 + s * 1000 + 20;
        vec![
            rec(Ev::Start, task, s, run_id, node, pid, t),
            rec(Ev::End, task, s, run_id, node, pid, t + 100),
        ]
    }

    struct Fixture {
        records: Vec<Record>,
        runs: Vec<RunRow>,
        skips: Option<Vec<SkipRow>>,
        timeline: Vec<Event>,
        schedules: Vec<Segment>,
        offsets: HashMap<String, i64>,
        params: Params,
    }

    impl Fixture {
        /// Two nodes up from T0 - 3 s (settled at T0); `f.tick.00` every second; runs for every tick 0..=30,
        /// alternating nodes; the harness stops them at T0 + 40 s.
        fn clean() -> Self {
            let mut records = Vec::new();
            let mut runs = Vec::new();
            for s in 0..=40 {
                let (node, pid) = if s % 2 == 0 { ("a", 100) } else { ("b", 200) };
                records.extend(clean_run("f.tick.00", s, s + 1, node, pid));
                runs.push(RunRow {
                    id: s + 1,
                    task: "f.tick.00".into(),
                    scheduled_at: tick(s),
                    status: "succeeded".into(),
                    node: node.into(),
                    ticks_collapsed: 0,
                });
            }
            let ev = |t_ms, kind| Event { t_ms, kind };
            let timeline = vec![
                ev(
                    T0 - 3_000,
                    EventKind::NodeStarted {
                        node: "a".into(),
                        pid: 100,
                    },
                ),
                ev(
                    T0 - 3_000,
                    EventKind::NodeStarted {
                        node: "b".into(),
                        pid: 200,
                    },
                ),
                ev(T0 + 40_500, EventKind::StoppingAll),
                ev(
                    T0 + 41_000,
                    EventKind::NodeExited {
                        node: "a".into(),
                        pid: 100,
                        status: "exit 0".into(),
                        success: true,
                        cause: ExitCause::Terminated {
                            after_ms: 500,
                            forced: false,
                        },
                    },
                ),
            ];
            Self {
                records,
                runs,
                skips: None,
                timeline,
                schedules: vec![Segment {
                    task: "f.tick.00".into(),
                    from_ms: T0 - 10_000,
                    cron: Some("* * * * * *".into()),
                }],
                offsets: HashMap::new(),
                params: Params {
                    takeover: true,
                    ..Params::default()
                },
            }
        }

        fn verdict(&self) -> Verdict {
            judge(&History {
                records: &self.records,
                runs: &self.runs,
                skips: self.skips.as_deref(),
                timeline: &self.timeline,
                schedules: &self.schedules,
                clock_offsets_ms: &self.offsets,
                params: self.params,
            })
            .unwrap()
        }

        fn drop_tick(&mut self, s: i64) {
            self.records.retain(|r| r.tick != tick(s));
            self.runs.retain(|r| r.scheduled_at != tick(s));
        }
    }

    #[test]
    fn a_clean_history_is_quiet() {
        let v = Fixture::clean().verdict();
        assert_eq!(v.violations(), 0, "{v:#?}");
        // Ticks 0..=35 (the tail is the last 5 s before the stop at 40.5 s).
        assert_eq!(v.expected_ticks, 36);
        assert_eq!(v.starts, 41);
        assert_eq!(v.expected_exits, 1);
        assert_eq!(v.worst_start_lag_ms, Some(20));
        assert_eq!(v.takeover, Some(Takeover::default()));
    }

    #[test]
    fn two_successful_ends_of_one_tick_are_finished_twice() {
        let mut f = Fixture::clean();
        // Node b also ran tick 4, after a's run ended: a duplicate, not an overlap.
        f.records.extend(
            clean_run("f.tick.00", 4, 99, "b", 200)
                .into_iter()
                .map(|mut r| {
                    r.t_ms += 300;
                    r
                }),
        );
        let v = f.verdict();
        assert_eq!(v.finished_twice, vec![("f.tick.00".to_owned(), tick(4))]);
        assert_eq!(
            v.started_after_success,
            vec![("f.tick.00".to_owned(), tick(4))]
        );
        assert!(v.overlaps.is_empty(), "{:?}", v.overlaps);
    }

    #[test]
    fn a_success_that_died_with_its_killed_node_is_an_unknown_outcome_not_a_violation() {
        let mut f = Fixture::clean();
        // Tick 4 ran on a (run 5), which was SIGKILLed 1 ms after the handler's end, before the
        // outcome was written: the run is recorded lost and b runs the tick again.
        f.runs[4].status = "lost".into();
        let killed_at = T0 + 4 * 1000 + 20 + 101;
        f.timeline.push(Event {
            t_ms: killed_at,
            kind: EventKind::NodeKilled {
                node: "a".into(),
                pid: 100,
            },
        });
        f.records.extend(
            clean_run("f.tick.00", 4, 99, "b", 200)
                .into_iter()
                .map(|mut r| {
                    r.t_ms += 300;
                    r
                }),
        );
        let v = f.verdict();
        assert!(v.finished_twice.is_empty(), "{:?}", v.finished_twice);
        assert!(v.started_after_success.is_empty());
        assert_eq!(
            v.unknown_outcome_reruns,
            vec![("f.tick.00".to_owned(), tick(4))]
        );

        // The same rerun without the kill (the outcome was recorded lost, the node lived): a
        // violation.
        f.timeline
            .retain(|e| !matches!(e.kind, EventKind::NodeKilled { .. }));
        let v = f.verdict();
        assert_eq!(v.finished_twice, vec![("f.tick.00".to_owned(), tick(4))]);
    }

    #[test]
    fn a_start_after_a_successful_end_is_flagged_even_if_the_rerun_fails() {
        let mut f = Fixture::clean();
        let t = T0 + 6 * 1000 + 500;
        f.records
            .push(rec(Ev::Start, "f.tick.00", 6, 77, "b", 200, t));
        let mut end = rec(Ev::End, "f.tick.00", 6, 77, "b", 200, t + 50);
        end.ok = Some(false);
        f.records.push(end);
        let v = f.verdict();
        assert!(v.finished_twice.is_empty());
        assert_eq!(
            v.started_after_success,
            vec![("f.tick.00".to_owned(), tick(6))]
        );
        // A failed run before the success is fine: retrying a failure is not a duplicate.
        let mut g = Fixture::clean();
        let t = T0 + 8 * 1000 + 5;
        g.records
            .push(rec(Ev::Start, "f.tick.00", 8, 78, "b", 200, t - 3));
        let mut end = rec(Ev::End, "f.tick.00", 8, 78, "b", 200, t);
        end.ok = Some(false);
        g.records.push(end);
        assert_eq!(g.verdict().violations(), 0);
    }

    #[test]
    fn runs_alive_at_once_overlap_and_beats_count() {
        let mut f = Fixture::clean();
        // A long run of tick 10 on a, beating until 12.5 s, and tick 11's run on b starts at
        // 11.02 s while it is still beating (no end: it was killed).
        f.records
            .retain(|r| !(r.tick == tick(10) && r.ev == Ev::End));
        for k in 1..=24 {
            f.records.push(rec(
                Ev::Beat,
                "f.tick.00",
                10,
                11,
                "a",
                100,
                T0 + 10_020 + k * 100,
            ));
        }
        let v = f.verdict();
        assert_eq!(
            v.overlaps.len(),
            2,
            "tick 11 and 12 both start under it: {:?}",
            v.overlaps
        );
        assert_eq!(v.overlaps[0].first.2, 11);
        assert_eq!(v.overlaps[0].second.3, tick(11));
        assert_eq!(v.overlaps[0].records_after, 14, "beats at 11.12 .. 12.42 s");
        // Other tasks never overlap each other.
        let mut g = Fixture::clean();
        g.records.extend(clean_run("f.tick.01", 3, 500, "b", 200));
        g.schedules.push(Segment {
            task: "f.tick.01".into(),
            from_ms: T0 + 3_000,
            cron: None,
        });
        assert!(g.verdict().overlaps.is_empty());
    }

    #[test]
    fn skewed_clocks_are_corrected_before_judging() {
        // Node b's clock runs 1 s ahead: uncorrected, its run of tick s seems to share a's
        // run of tick s + 1 (a false overlap).
        let mut f = Fixture::clean();
        for r in f.records.iter_mut().filter(|r| r.node == "b") {
            r.t_ms += 1_000;
        }
        assert!(!f.verdict().overlaps.is_empty());
        f.offsets.insert("b".into(), 1_000);
        let v = f.verdict();
        assert_eq!(v.violations(), 0, "{v:#?}");
        // Node b 5 minutes ahead runs tick 11 while a's run of tick 10 is still beating: the
        // overlap is only visible once b's clock is corrected.
        let mut h = Fixture::clean();
        h.records
            .retain(|r| !(r.tick == tick(10) && r.ev == Ev::End));
        h.records
            .push(rec(Ev::Beat, "f.tick.00", 10, 11, "a", 100, T0 + 11_500));
        for r in h.records.iter_mut().filter(|r| r.node == "b") {
            r.t_ms += 300_000;
        }
        assert!(h.verdict().overlaps.is_empty());
        h.offsets.insert("b".into(), 300_000);
        assert_eq!(h.verdict().overlaps.len(), 1);
        // And a node 3 minutes behind whose rerun only *looks* earlier than the success.
        let mut g = Fixture::clean();
        g.records.push(rec(
            Ev::Start,
            "f.tick.00",
            4,
            99,
            "c",
            300,
            T0 + 4_500 - 180_000,
        ));
        assert!(g.verdict().started_after_success.is_empty());
        g.offsets.insert("c".into(), -180_000);
        assert_eq!(g.verdict().started_after_success.len(), 1);
    }

    #[test]
    fn a_missing_tick_is_unaccounted_unless_something_explains_it() {
        let mut f = Fixture::clean();
        f.drop_tick(12);
        assert_eq!(
            f.verdict().unaccounted,
            vec![("f.tick.00".to_owned(), tick(12))]
        );

        // Folded into the run of tick 11 (ticks_collapsed = 1 covers the next fire, 12).
        let mut g = Fixture::clean();
        g.drop_tick(12);
        g.runs
            .iter_mut()
            .find(|r| r.scheduled_at == tick(11))
            .unwrap()
            .ticks_collapsed = 1;
        let v = g.verdict();
        assert!(v.unaccounted.is_empty(), "{:?}", v.unaccounted);
        assert_eq!(v.collapsed_or_skipped, 1);

        // Covered by a skip row.
        let mut s = Fixture::clean();
        s.drop_tick(12);
        s.skips = Some(vec![SkipRow {
            task: "f.tick.00".into(),
            first_tick: tick(12),
            last_tick: tick(12),
        }]);
        assert!(s.verdict().unaccounted.is_empty());

        // Within a fault window (+ lock lifetime + 2 s).
        let mut w = Fixture::clean();
        w.drop_tick(12);
        w.timeline.push(Event {
            t_ms: T0 + 7_500,
            kind: EventKind::Fault {
                what: "db stop".into(),
                until_ms: T0 + 8_000,
                node: None,
            },
        });
        assert!(
            w.verdict().unaccounted.is_empty(),
            "8 + 3 + 2 = 13 covers 12"
        );
        w.drop_tick(14);
        assert_eq!(w.verdict().unaccounted.len(), 1, "14 is outside the window");

        // In the tail, or while no node had settled, nothing is expected.
        let mut t = Fixture::clean();
        t.drop_tick(37);
        assert!(t.verdict().unaccounted.is_empty());
        let mut n = Fixture::clean();
        n.timeline[0].t_ms = T0 + 20_000;
        n.timeline[1].t_ms = T0 + 20_000;
        n.drop_tick(21);
        assert!(
            n.verdict().unaccounted.is_empty(),
            "up at 20 s, settled at 23 s"
        );
        n.drop_tick(23);
        assert_eq!(n.verdict().unaccounted.len(), 1);
    }

    #[test]
    fn schedule_changes_are_followed() {
        // From 20 s on, the task runs every 5 s: ticks 21..24 are no longer expected.
        let mut f = Fixture::clean();
        f.schedules.push(Segment {
            task: "f.tick.00".into(),
            from_ms: T0 + 20_000,
            cron: Some("*/5 * * * * *".into()),
        });
        for s in [21, 22, 23, 24] {
            f.drop_tick(s);
        }
        assert!(f.verdict().unaccounted.is_empty());
        // Runs of ticks 21..24 under the old cron would be off the new schedule.
        let mut h = Fixture::clean();
        h.schedules = f.schedules.clone();
        let v = h.verdict();
        assert_eq!(v.off_schedule.len(), 16, "{:?}", v.off_schedule);
        assert_eq!(v.off_schedule[0], ("f.tick.00".to_owned(), tick(21)));
        assert!(Fixture::clean().verdict().off_schedule.is_empty());
        f.drop_tick(25);
        assert_eq!(
            f.verdict().unaccounted,
            vec![("f.tick.00".to_owned(), tick(25))]
        );
        // Disabled from 30 s: nothing expected after.
        let mut g = Fixture::clean();
        g.schedules.push(Segment {
            task: "f.tick.00".into(),
            from_ms: T0 + 30_000,
            cron: None,
        });
        for s in 31..=40 {
            g.drop_tick(s);
        }
        assert!(g.verdict().unaccounted.is_empty());
    }

    #[test]
    fn a_kill_only_excuses_the_tasks_its_victim_held() {
        let mut f = Fixture::clean();
        // A second task, every second, always on node b.
        f.schedules.push(Segment {
            task: "f.tick.01".into(),
            from_ms: T0 - 3_000,
            cron: Some("* * * * * *".into()),
        });
        for s in 0..=40 {
            f.records
                .extend(clean_run("f.tick.01", s, 1_000 + s, "b", 200));
        }
        // Node a is killed at 10.05 s mid-run of f.tick.00 (tick 10, no end).
        f.records
            .retain(|r| !(r.task == "f.tick.00" && r.tick == tick(10) && r.ev == Ev::End));
        f.timeline.push(Event {
            t_ms: T0 + 10_050,
            kind: EventKind::Fault {
                what: "SIGKILL a".into(),
                until_ms: T0 + 10_050,
                node: Some(crate::timeline::Victim {
                    node: "a".into(),
                    pid: 100,
                }),
            },
        });
        f.drop_tick(12); // both tasks miss tick 12
        let v = f.verdict();
        assert_eq!(
            v.unaccounted,
            vec![("f.tick.01".to_owned(), tick(12))],
            "f.tick.00 was held by the victim, f.tick.01 was not"
        );
        // A task the victim's node left `lost` in the database is excused too.
        let mut g = Fixture::clean();
        g.schedules = f.schedules.clone();
        g.records = f.records.clone();
        // Here a's run of f.tick.00 had ended just before the kill.
        g.records
            .push(rec(Ev::End, "f.tick.00", 10, 11, "a", 100, T0 + 10_040));
        g.timeline = f.timeline.clone();
        g.runs.push(RunRow {
            id: 900,
            task: "f.tick.01".into(),
            scheduled_at: tick(10),
            status: "lost".into(),
            node: "a".into(),
            ticks_collapsed: 0,
        });
        let v = g.verdict();
        assert_eq!(
            v.unaccounted,
            vec![("f.tick.00".to_owned(), tick(12))],
            "{v:#?}"
        );
    }

    #[test]
    fn paused_nodes_are_not_up() {
        let mut f = Fixture::clean();
        let ev = |t_ms, kind| Event { t_ms, kind };
        // Only node a exists; it is paused from 10 s to 17 s.
        f.timeline.remove(1);
        f.timeline.push(ev(
            T0 + 10_000,
            EventKind::NodePaused {
                node: "a".into(),
                pid: 100,
            },
        ));
        f.timeline.push(ev(
            T0 + 17_000,
            EventKind::NodeResumed {
                node: "a".into(),
                pid: 100,
            },
        ));
        f.timeline.sort_by_key(|e| e.t_ms);
        for s in 11..=19 {
            f.drop_tick(s);
        }
        // 10 s < 11..=19 < 20 s (resumed at 17 s, settled at 20 s): none expected.
        assert!(f.verdict().unaccounted.is_empty());
    }

    #[test]
    fn takeover_is_measured_from_the_fault_to_the_next_start() {
        let mut f = Fixture::clean();
        // Node a is killed at 10.05 s while running tick 10 (no end); b reruns it at 13.3 s.
        f.records
            .retain(|r| !(r.tick == tick(10) && r.ev == Ev::End));
        f.records
            .push(rec(Ev::Start, "f.tick.00", 10, 90, "b", 200, T0 + 13_300));
        f.timeline.push(Event {
            t_ms: T0 + 10_050,
            kind: EventKind::NodeKilled {
                node: "a".into(),
                pid: 100,
            },
        });
        let t = f.verdict().takeover.unwrap();
        assert_eq!(t.faults, 1);
        assert_eq!(t.in_flight, 1);
        assert_eq!(t.worst_ms, Some(970), "tick 11 started on b at 11.02 s");
        // Killing a node with nothing in flight measures nothing.
        let mut g = Fixture::clean();
        g.timeline.push(Event {
            t_ms: T0 + 10_500,
            kind: EventKind::NodeKilled {
                node: "a".into(),
                pid: 100,
            },
        });
        assert_eq!(g.verdict().takeover.unwrap().faults, 0);
    }

    #[test]
    fn only_exits_the_harness_did_not_ask_for_are_bad() {
        let mut f = Fixture::clean();
        let exited = |cause, status: &str, success| Event {
            t_ms: T0 + 5_000,
            kind: EventKind::NodeExited {
                node: "b".into(),
                pid: 200,
                status: status.into(),
                success,
                cause,
            },
        };
        f.timeline
            .push(exited(ExitCause::Killed, "signal 9", false));
        assert!(f.verdict().bad_exits.is_empty());
        f.timeline
            .push(exited(ExitCause::OnItsOwn, "exit 1", false));
        f.timeline.push(exited(
            ExitCause::Terminated {
                after_ms: 900,
                forced: false,
            },
            "exit 1",
            false,
        ));
        f.timeline.push(exited(
            ExitCause::Terminated {
                after_ms: 20_000,
                forced: true,
            },
            "signal 9",
            false,
        ));
        let bad = f.verdict().bad_exits;
        assert_eq!(bad.len(), 3, "{bad:?}");
        assert!(bad[0].contains("on its own"));
    }
}
