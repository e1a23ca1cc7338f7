//! The strips of instances (`?ticks=` on the routes that read them, the dashboard's strip of
//! each instance): an instance's latest expected ticks by its own schedule (its cron, zone and
//! its row's calendar, as the claims read them) and its jitter window (its own, else its
//! task's), each with what became of it: the run that served it, the skip record and its
//! reason, `waiting` while its row waits for its limit shared by tasks, or nothing (`missed`, or
//! `due` within its grace). The tick rules say it, as for a task's strip ([`super::ticks`],
//! [`crate::ticks`]'s `strip`).
//!
//! A page of instances costs a fixed number of reads, whatever the number of instances: one
//! read of their latest runs (each instance's latest `count x (retries + 2)`, at most
//! [`RUNS_PER_INSTANCE`]) and one read of skip records per class of window length (at most
//! five, each instance's latest `count + 10` reaching back only as far as its group's windows)
//! and one read of the rows waiting for their limits ([`super::tick_waits`]), never a read per
//! instance.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::tick_waits::Waits;
use super::ticks::{EXTRA_SKIPS, TickView, off_the_runtime, tick_views, window_class};
use crate::admin::error::ApiError;
use crate::engine::EngineView;
use crate::schedule::ScheduleSpec;
use crate::store::{InstanceState, RunRecord, SkipRecord, TaskState};
use crate::ticks::strip::{self, Facts, window_start};

/// Runs read per instance at most; past them its oldest ticks are left out (`complete: false`).
const RUNS_PER_INSTANCE: u32 = 200;

/// An instance's strip.
pub(super) struct InstanceStrip {
    /// Its latest expected ticks and manual runs, oldest first.
    pub(super) ticks: Vec<TickView>,
    /// False when older ticks are left out because the runs read did not reach back so far
    /// (or its schedule cannot be read).
    pub(super) complete: bool,
}

/// An instance with its schedule, where its window starts and its jitter window.
struct Plan {
    key: String,
    state: TaskState,
    spec: Option<ScheduleSpec>,
    since: DateTime<Utc>,
    jitter: Duration,
}

/// The strips of `count` ticks (0: none) of `instances` of `task` at `now`, by key.
pub(super) async fn instance_strips(
    engine: &EngineView,
    task: &str,
    instances: &[InstanceState],
    count: u32,
    now: DateTime<Utc>,
) -> Result<HashMap<String, InstanceStrip>, ApiError> {
    if count == 0 || instances.is_empty() {
        return Ok(HashMap::new());
    }
    let task_jitter = engine.task_jitter(task);
    let rows: Vec<(String, TaskState, Duration)> = instances
        .iter()
        .map(|i| {
            let jitter = i.jitter.unwrap_or(task_jitter);
            (i.key.clone(), i.state.clone(), jitter)
        })
        .collect();
    // Walking schedules happens off the async threads, as for the tasks' strips.
    let view = engine.clone();
    let plans = off_the_runtime(move || plan(&view, rows, now, count as usize)).await?;
    let retries = engine.task_settings(task).map_or(0, |(t, _)| t.retries);
    let need = count
        .saturating_mul(retries.saturating_add(2))
        .min(RUNS_PER_INSTANCE);
    let keys: Vec<String> = plans.iter().map(|p| p.key.clone()).collect();
    let store = engine.store();
    let runs = store.latest_runs_per_instance(task, &keys, need).await?;
    // Skip records are the rows' own (`task/key`): one read per class of window length, so a
    // yearly instance does not make an every-second one's read reach back years.
    let mut groups: BTreeMap<usize, (Vec<String>, DateTime<Utc>)> = BTreeMap::new();
    for p in &plans {
        let (names, from) = groups
            .entry(window_class(now - p.since))
            .or_insert_with(|| (Vec::new(), p.since));
        names.push(p.state.name.clone());
        *from = (*from).min(p.since);
    }
    let mut skips = Vec::new();
    for (names, since) in groups.into_values() {
        skips.extend(
            store
                .latest_skips_per_task(&names, count + EXTRA_SKIPS, since)
                .await?,
        );
    }
    let waits = Waits::read(store.as_ref()).await?;
    let grace = engine.missed_grace();
    let count = count as usize;
    off_the_runtime(move || strips(&plans, &runs, &skips, &waits, need, now, grace, count)).await
}

/// Each instance with its schedule and where its window starts (a walk back over `count`
/// ticks).
fn plan(
    engine: &EngineView,
    rows: Vec<(String, TaskState, Duration)>,
    now: DateTime<Utc>,
    count: usize,
) -> Vec<Plan> {
    rows.into_iter()
        .map(|(key, state, jitter)| {
            let spec = engine
                .schedule(&state.cron, &state.timezone, state.calendar.as_deref())
                .ok();
            let since = spec
                .as_ref()
                .map_or(now - chrono::TimeDelta::hours(1), |spec| {
                    window_start(spec, now, count)
                });
            Plan {
                key,
                state,
                spec,
                since,
                jitter,
            }
        })
        .collect()
}

/// Every instance's strip from the runs, skips and waiting rows read.
#[allow(clippy::too_many_arguments)]
fn strips(
    plans: &[Plan],
    runs: &[RunRecord],
    skips: &[SkipRecord],
    waits: &Waits,
    need: u32,
    now: DateTime<Utc>,
    grace: Option<Duration>,
    count: usize,
) -> HashMap<String, InstanceStrip> {
    let mut runs_of: HashMap<&str, Vec<&RunRecord>> = HashMap::new();
    for run in runs {
        if let Some(key) = run.instance_key.as_deref() {
            runs_of.entry(key).or_default().push(run);
        }
    }
    let mut skips_of: HashMap<&str, Vec<&SkipRecord>> = HashMap::new();
    for skip in skips {
        skips_of.entry(&skip.task_name).or_default().push(skip);
    }
    plans
        .iter()
        .map(|p| {
            let runs = runs_of.get(p.key.as_str()).map_or(&[][..], |v| v);
            let facts = Facts {
                state: &p.state,
                runs,
                more_runs: runs.len() == need as usize,
                skips: skips_of.get(p.state.name.as_str()).map_or(&[][..], |v| v),
                now,
                since: p.since,
                missed_grace: grace,
                jitter: p.jitter,
                waiting: waits.tick(&p.state),
            };
            let strip = strip::strip(p.spec.as_ref(), &facts, count);
            let ticks = tick_views(&strip.marks, waits.view(&p.state.name));
            (
                p.key.clone(),
                InstanceStrip {
                    ticks,
                    complete: strip.complete,
                },
            )
        })
        .collect()
}
