//! Expected ticks: for every task, the ticks its schedule says should have fired lately and what
//! became of each (a run and its outcome, a skip record and its reason, waiting for its limit
//! shared by tasks, or nothing: missed).
//! Read here in one request for every task, so a dashboard can draw a strip per task without
//! asking per task; what became of each tick is the tick rules' to say ([`crate::ticks`]'s
//! `strip`).
//!
//! A strip is its last `count` ticks whatever the interval (a yearly task's reaches back 30
//! years, as far as its history goes), and its cost is bounded by the count, not by time: the
//! task states, then reads of runs and skip records per group of tasks (by retry policy and
//! by class of window length: at most a few reads), each task's latest `count x (retries + 2)`
//! runs (`RUNS_PER_TASK` at most) and `count + 10` skip records, whatever the number of tasks,
//! and each read reaching back only as far as its group's windows; and one read of the rows
//! waiting for their limits ([`super::tick_waits`]).

use std::collections::{BTreeMap, HashMap};

use axum::extract::State;
use chrono::{DateTime, TimeDelta, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::refusals::{ReadErrors, in_range};
use super::tick_waits::{WaitingView, Waits};
use crate::admin::auth::Reader;
use crate::admin::error::{ApiError, ErrorBody, Query};
use crate::admin::state::AdminState;
use crate::bounds;
use crate::schedule::ScheduleSpec;
use crate::store::{RunRecord, RunStatus, SkipRecord, TaskState};
use crate::ticks::strip::{self, Facts, Fate, Mark, Shards, window_start};

const DEFAULT_COUNT: u32 = 30;
/// Runs read per task at most; past them the oldest ticks are left out (`complete: false`).
const RUNS_PER_TASK: u32 = 400;
/// Runs read per sharded task at most (a tick is a run per shard: 50 ticks of 100 shards).
const RUNS_PER_SHARDED_TASK: u32 = 5_000;
/// Skip records read per task beyond its count of ticks (each record stands for one or more).
pub(super) const EXTRA_SKIPS: u32 = 10;

pub(super) fn router() -> OpenApiRouter<AdminState> {
    OpenApiRouter::new().routes(routes!(list_ticks))
}

/// Which strips.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct TicksQuery {
    /// Only this task's strip.
    task: Option<String>,
    /// Ticks per task, newest last, 1 to 200 (default 30).
    #[param(minimum = 1, maximum = 200)]
    count: Option<u32>,
}

/// One expected tick (or a manual run) and what became of it; fields that do not apply are
/// left out (a strip of 1,000 tasks is long enough).
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub(crate) struct TickView {
    /// The tick (for a manual run: the instant it was asked for).
    at: DateTime<Utc>,
    /// `succeeded`, `failed`, `timed_out`, `interrupted`, `lost`, `cancelled`, `running` (a
    /// run's status), `skipped` (see `reason`), `missed` (no run, no skip, later than its
    /// grace), `due` (not started yet, within its grace), or `waiting` (not started: its row
    /// waits for a share of its limit shared by tasks, see `waiting`; the tick it waits to run
    /// and those that came meanwhile).
    outcome: &'static str,
    /// Why it was skipped: `overlap`, `misfire`, `invalid_schedule`, `disabled`, `paused`,
    /// `retry_gave_way`, `calendar`.
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'static str>,
    /// The run that served it (the latest attempt).
    #[serde(skip_serializing_if = "Option::is_none")]
    run_id: Option<i64>,
    /// Attempts made at it.
    attempts: i32,
    /// `schedule`, `retry`, `manual` or `backfill` (of the latest attempt).
    #[serde(skip_serializing_if = "Option::is_none")]
    trigger: Option<&'static str>,
    /// How long the latest attempt took (so far, while running), in seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    duration_seconds: Option<f64>,
    /// How late the first attempt started, in seconds (of a sharded tick: its first shard),
    /// counted from the tick's start: the tick shifted by the task's jitter, if it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    late_seconds: Option<f64>,
    /// A sharded tick's shards (a task with `shards = N`, N > 1): how many are done, and each
    /// shard's latest run. The tick is one entry whatever its shards: `outcome` is `running`
    /// while a shard runs or has not started, `succeeded` when every shard did, else the worst
    /// ending among them (`failed`, `timed_out`, `lost`, `interrupted`, `cancelled`, in that
    /// order); `run_id` is a shard's run with that outcome; `duration_seconds` runs from the
    /// first shard's start to the last one's end. Left out for an ordinary task.
    ///
    /// A broadcast task's tick (`shards = "nodes"`, `broadcast: true`) has one run per node
    /// counted at the tick (`total`, even 1), each naming its node; once the tick is past its
    /// missed grace, a counted node with no run did not run it (`not_run`) and the tick is
    /// done without it (its outcome is then its runs' fold).
    #[serde(skip_serializing_if = "Option::is_none")]
    shards: Option<ShardsView>,
    /// A `waiting` tick: the limit its row waits for, since when, and the runs holding it.
    #[serde(skip_serializing_if = "Option::is_none")]
    waiting: Option<WaitingView>,
}

/// The shards of a sharded tick.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub(crate) struct ShardsView {
    /// How many shards the tick has (a broadcast's: the nodes counted at the tick, from its
    /// runs' `shard_total`).
    total: u32,
    /// A broadcast task's tick: one run per node, each index a node's own.
    broadcast: bool,
    /// Shards whose latest attempt has ended, whatever its ending.
    done: u32,
    /// Shards whose latest attempt succeeded.
    succeeded: u32,
    /// Shards whose latest attempt ended otherwise: failed, timed out, lost, interrupted or
    /// cancelled.
    failed: u32,
    /// Shards whose latest attempt is running.
    running: u32,
    /// Shards with no run of the tick yet (not claimed yet: waiting for a node, or behind a
    /// shard of an earlier tick; a broadcast's node within the tick's missed grace).
    pending: u32,
    /// A broadcast's nodes, counted at the tick, with no run of it by its missed grace: they
    /// did not run it (died before starting, or skipped it by their misfire policy). Always 0
    /// for fixed shards (a shard with no run is pending: another node takes it).
    not_run: u32,
    /// Each shard's latest run, by index (shards with no run yet are left out).
    runs: Vec<ShardRunView>,
}

/// One shard of a sharded tick: its latest attempt.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub(crate) struct ShardRunView {
    /// The shard, `0..total`.
    index: u32,
    /// Its latest attempt (see `GET /api/runs/{id}`).
    run_id: i64,
    /// That attempt's status: `running`, `succeeded`, `failed`, `timed_out`, `interrupted`,
    /// `lost` or `cancelled`.
    status: &'static str,
    /// The node that ran that attempt (a broadcast's: the node whose run it is).
    node_id: String,
    /// Attempts made at the shard.
    attempts: i32,
    /// How late its first attempt started, in seconds, from the tick's start (see the tick's).
    #[serde(skip_serializing_if = "Option::is_none")]
    late_seconds: Option<f64>,
}

impl From<&Shards> for ShardsView {
    fn from(shards: &Shards) -> Self {
        let done = shards.done();
        let succeeded = shards.count(|s| s == RunStatus::Succeeded);
        ShardsView {
            total: shards.total,
            broadcast: shards.broadcast,
            done,
            succeeded,
            failed: done - succeeded,
            running: shards.count(|s| s == RunStatus::Running),
            pending: shards.pending(),
            not_run: shards.not_run(),
            runs: shards
                .runs
                .iter()
                .map(|r| ShardRunView {
                    index: r.index,
                    run_id: r.run_id,
                    status: r.status.as_str(),
                    node_id: r.node.clone(),
                    attempts: r.attempts,
                    late_seconds: r.late.map(seconds),
                })
                .collect(),
        }
    }
}

impl From<&Mark> for TickView {
    fn from(mark: &Mark) -> Self {
        let view = TickView {
            at: mark.at,
            outcome: mark.fate.outcome(),
            reason: None,
            run_id: None,
            attempts: 0,
            trigger: None,
            duration_seconds: None,
            late_seconds: None,
            shards: None,
            waiting: None,
        };
        match &mark.fate {
            Fate::Ran {
                run_id,
                attempts,
                trigger,
                duration,
                late,
                shards,
                ..
            } => TickView {
                run_id: Some(*run_id),
                attempts: *attempts,
                trigger: Some(trigger.as_str()),
                duration_seconds: duration.map(seconds),
                late_seconds: late.map(seconds),
                shards: shards.as_ref().map(ShardsView::from),
                ..view
            },
            Fate::Skipped { reason, run_id } => TickView {
                reason: Some(reason.as_str()),
                run_id: *run_id,
                ..view
            },
            Fate::Due | Fate::Missed | Fate::Waiting => view,
        }
    }
}

/// A strip's marks as the API shows them, a waiting one with what its row (`wait`) waits for.
pub(super) fn tick_views(marks: &[Mark], wait: Option<&WaitingView>) -> Vec<TickView> {
    marks
        .iter()
        .map(|mark| TickView {
            waiting: (mark.fate == Fate::Waiting)
                .then(|| wait.cloned())
                .flatten(),
            ..TickView::from(mark)
        })
        .collect()
}

/// A task's strip.
#[derive(Debug, Serialize, ToSchema)]
struct TaskTicks {
    /// The task.
    task: String,
    /// Its latest expected ticks and manual runs, oldest first.
    ticks: Vec<TickView>,
    /// False when older ticks are left out because the runs read did not reach back so far
    /// (or the schedule cannot be read).
    complete: bool,
}

/// Every task's strip.
#[derive(Debug, Serialize, ToSchema)]
struct TickList {
    /// When it was computed.
    at: DateTime<Utc>,
    /// The strips, by task name.
    tasks: Vec<TaskTicks>,
}

/// Every task's latest expected ticks (from its schedule) and what became of each: the run's
/// outcome, the skip and its reason, or missed.
#[utoipa::path(get, path = "/api/ticks", tag = "tasks",
    security((), ("bearer" = [])),
    params(TicksQuery),
    responses(
        (status = 200, description = "Expected ticks per task", body = TickList),
        (status = 404, description = "No such task (with `task`)", body = ErrorBody),
        ReadErrors,
    ))]
async fn list_ticks(
    _: Reader,
    State(state): State<AdminState>,
    Query(q): Query<TicksQuery>,
) -> Result<axum::Json<TickList>, ApiError> {
    let count = in_range(bounds::API_TICKS_COUNT, "count", q.count, DEFAULT_COUNT)? as usize;
    let store = state.engine.store();
    let mut states = store.task_states(q.task.as_deref()).await?;
    if let Some(task) = &q.task
        && states.is_empty()
    {
        return Err(ApiError::no_task(task));
    }
    // A sharded task's other rows (`name[i]`, a broadcast's `name[@node]`, see `crate::shard`)
    // are not tasks: their runs are recorded under the task's name and drawn on its strip.
    if q.task.is_none() {
        states.retain(|s| crate::shard::is_task_row(&s.name));
    }
    states.sort_by(|a, b| a.name.cmp(&b.name));
    let now = state.engine.now();
    let grace = state.engine.missed_grace();
    // Walking schedules (a dense cron over a long window is many thousands of steps per task)
    // happens on a blocking thread, never on the async threads the engine's timers share.
    let engine = state.engine.clone();
    let plans = off_the_runtime(move || plan(&engine, states, now, count)).await?;
    if plans.is_empty() {
        return Ok(axum::Json(TickList {
            at: now,
            tasks: vec![],
        }));
    }
    // One read of runs per group of tasks with the same need (each tick's attempts, with
    // manual runs among them) and windows of the same class of length, reaching back as far as
    // the longest window of the group: so a yearly task does not make every every-second
    // task's read reach back 30 years (SQLite reads every row of the window it is given).
    let mut runs_groups: BTreeMap<(usize, u32), (Vec<String>, DateTime<Utc>)> = BTreeMap::new();
    let mut skips_groups: BTreeMap<usize, (Vec<String>, DateTime<Utc>)> = BTreeMap::new();
    for (s, _, since, _) in &plans {
        let retries = state
            .engine
            .task_settings(&s.name)
            .map_or(0, |(t, _)| t.retries);
        let need = (count as u32)
            .saturating_mul(retries.saturating_add(2))
            .min(RUNS_PER_TASK);
        let class = window_class(now - *since);
        for (names, from) in [
            runs_groups
                .entry((class, need))
                .or_insert_with(|| (Vec::new(), *since)),
            skips_groups
                .entry(class)
                .or_insert_with(|| (Vec::new(), *since)),
        ] {
            names.push(s.name.clone());
            *from = (*from).min(*since);
        }
    }
    let mut runs = Vec::new();
    let mut per_task = HashMap::new();
    for ((_, need), (names, since)) in runs_groups {
        runs.extend(store.latest_runs_per_task(&names, need, since).await?);
        per_task.extend(names.into_iter().map(|n| (n, need)));
    }
    read_sharded_further(store.as_ref(), &plans, &mut runs, &mut per_task).await?;
    let mut skips = Vec::new();
    for (names, since) in skips_groups.into_values() {
        skips.extend(
            store
                .latest_skips_per_task(&names, count as u32 + EXTRA_SKIPS, since)
                .await?,
        );
    }
    let waits = Waits::read(store.as_ref()).await?;
    let tasks = off_the_runtime(move || {
        strips(&plans, &runs, &skips, &waits, &per_task, now, grace, count)
    })
    .await?;
    Ok(axum::Json(TickList { at: now, tasks }))
}

/// A sharded task's tick is a run per shard, which the first read does not know: a task whose
/// runs say it is sharded and whose read stopped at its limit is read again, its limit times
/// its shard count (at most [`RUNS_PER_SHARDED_TASK`]), one read per new limit.
async fn read_sharded_further(
    store: &dyn crate::store::Store,
    plans: &[Plan],
    runs: &mut Vec<RunRecord>,
    per_task: &mut HashMap<String, u32>,
) -> Result<(), ApiError> {
    let mut read: HashMap<&str, (u32, u32)> = HashMap::new();
    for run in runs.iter() {
        let (count, shards) = read.entry(run.task_name.as_str()).or_default();
        *count += 1;
        *shards = (*shards).max(run.shard_total);
    }
    let mut again: BTreeMap<u32, (Vec<String>, DateTime<Utc>)> = BTreeMap::new();
    for (s, _, since, _) in plans {
        let need = per_task.get(&s.name).copied().unwrap_or(0);
        let Some(&(count, shards)) = read.get(s.name.as_str()) else {
            continue;
        };
        let more = need.saturating_mul(shards).min(RUNS_PER_SHARDED_TASK);
        if shards > 1 && count == need && more > need {
            let (names, from) = again.entry(more).or_insert_with(|| (Vec::new(), *since));
            names.push(s.name.clone());
            *from = (*from).min(*since);
        }
    }
    for (need, (names, since)) in again {
        runs.retain(|r| !names.contains(&r.task_name));
        runs.extend(store.latest_runs_per_task(&names, need, since).await?);
        per_task.extend(names.into_iter().map(|n| (n, need)));
    }
    Ok(())
}

/// A window's class of length (up to an hour, a day, a month, a year, longer): windows of one
/// class share a read.
pub(super) fn window_class(span: TimeDelta) -> usize {
    [
        TimeDelta::hours(1),
        TimeDelta::days(1),
        TimeDelta::days(31),
        TimeDelta::days(366),
    ]
    .iter()
    .take_while(|bound| span > **bound)
    .count()
}

/// Runs `work` on tokio's blocking threads.
pub(super) async fn off_the_runtime<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|_| ApiError::unavailable("computing the ticks failed; try again"))
}

type Plan = (
    TaskState,
    Option<ScheduleSpec>,
    DateTime<Utc>,
    std::time::Duration,
);

/// Each task with its schedule, where its window starts (a walk back over `count` ticks) and its
/// jitter window (its ticks' lateness counts from their start).
fn plan(
    engine: &crate::engine::EngineView,
    states: Vec<TaskState>,
    now: DateTime<Utc>,
    count: usize,
) -> Vec<Plan> {
    states
        .into_iter()
        .map(|s| {
            let spec = engine
                .schedule(&s.cron, &s.timezone, s.calendar.as_deref())
                .ok();
            let since = spec.as_ref().map_or(now - TimeDelta::hours(1), |spec| {
                window_start(spec, now, count)
            });
            let jitter = engine.task_jitter(&s.name);
            (s, spec, since, jitter)
        })
        .collect()
}

/// Every task's strip from the runs, skips and waiting rows read.
#[allow(clippy::too_many_arguments)]
fn strips(
    plans: &[Plan],
    runs: &[RunRecord],
    skips: &[SkipRecord],
    waits: &Waits,
    per_task: &HashMap<String, u32>,
    now: DateTime<Utc>,
    grace: Option<std::time::Duration>,
    count: usize,
) -> Vec<TaskTicks> {
    let mut runs_of: HashMap<&str, Vec<&RunRecord>> = HashMap::new();
    for run in runs {
        runs_of.entry(&run.task_name).or_default().push(run);
    }
    let mut skips_of: HashMap<&str, Vec<&SkipRecord>> = HashMap::new();
    for skip in skips {
        skips_of.entry(&skip.task_name).or_default().push(skip);
    }
    plans
        .iter()
        .map(|(s, spec, since, jitter)| {
            let runs = runs_of.get(s.name.as_str()).map_or(&[][..], |v| v);
            let facts = Facts {
                state: s,
                runs,
                more_runs: per_task
                    .get(&s.name)
                    .is_some_and(|&n| runs.len() == n as usize),
                skips: skips_of.get(s.name.as_str()).map_or(&[][..], |v| v),
                now,
                since: *since,
                missed_grace: grace,
                jitter: *jitter,
                waiting: waits.tick(s),
            };
            let strip = strip::strip(spec.as_ref(), &facts, count);
            TaskTicks {
                task: s.name.clone(),
                ticks: tick_views(&strip.marks, waits.view(&s.name)),
                complete: strip.complete,
            }
        })
        .collect()
}

fn seconds(d: TimeDelta) -> f64 {
    d.num_milliseconds().max(0) as f64 / 1000.0
}
