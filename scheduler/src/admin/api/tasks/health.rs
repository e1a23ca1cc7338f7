//! What an operator asks first about a task: is it on time now (`timeliness`, judged by the
//! missed grace of [`crate::ticks`]), and how many ticks in a row failed (retries of one tick
//! counted once).

use chrono::{DateTime, Utc};

use crate::admin::error::ApiError;
use crate::engine::EngineView;
use crate::store::{RunRecord, RunStatus, TaskState};

/// Runs read per failing task to count its failed ticks; past them the count is a lower bound.
const FAILED_RUNS_READ: u32 = 100;

/// Whether a task is on time at `now`, and how long past its tick it is.
pub(in crate::admin::api) fn timeliness(
    engine: &EngineView,
    s: &TaskState,
    now: DateTime<Utc>,
) -> (&'static str, Option<f64>) {
    timeliness_of(s, now, |next| {
        engine
            .schedule(&s.cron, &s.timezone, s.calendar.as_deref())
            .ok()
            .and_then(|spec| crate::ticks::missed_by(&spec, next, now, engine.missed_grace()))
            .is_some()
    })
}

/// [`timeliness`], with `missed(tick)` saying whether a tick not started by `now` is past its
/// missed grace.
pub(super) fn timeliness_of(
    s: &TaskState,
    now: DateTime<Utc>,
    missed: impl FnOnce(DateTime<Utc>) -> bool,
) -> (&'static str, Option<f64>) {
    if s.pause.as_ref().is_some_and(|p| p.in_force(now)) {
        return ("paused", None);
    }
    let Some(next) = s.next_run_at.filter(|_| s.enabled) else {
        return ("off", None);
    };
    if next > now {
        return ("on_time", None);
    }
    let overdue = Some((now - next).num_milliseconds() as f64 / 1000.0);
    if s.lock_owner.is_some() {
        return ("waiting", overdue);
    }
    (if missed(next) { "late" } else { "due" }, overdue)
}

/// Failed ticks in a row per task, from its latest runs: `(count, more)`.
pub(super) type FailedTicks = std::collections::HashMap<String, (i64, bool)>;

/// Counts the failed ticks of the tasks whose failed runs may include retries (more than one
/// failed run, and retries allowed or unknown): one bounded read for all of them. The others'
/// count is their `consecutive_failures`.
pub(super) async fn failed_ticks(
    engine: &EngineView,
    states: &[TaskState],
) -> Result<FailedTicks, ApiError> {
    let retried: Vec<&TaskState> = states
        .iter()
        .filter(|s| {
            s.consecutive_failures > 1
                && engine
                    .task_settings(&s.name)
                    .is_none_or(|(t, _)| t.retries > 0)
        })
        .collect();
    let Some(most) = retried.iter().map(|s| s.consecutive_failures).max() else {
        return Ok(FailedTicks::new());
    };
    let per_task = (most.max(1) as u32).min(FAILED_RUNS_READ);
    let names: Vec<String> = retried.iter().map(|s| s.name.clone()).collect();
    let runs = engine
        .store()
        .latest_runs_per_task(&names, per_task, DateTime::<Utc>::UNIX_EPOCH)
        .await?;
    let mut of: std::collections::HashMap<&str, Vec<&RunRecord>> = Default::default();
    for run in &runs {
        of.entry(run.task_name.as_str()).or_default().push(run);
    }
    Ok(retried
        .iter()
        .map(|s| {
            let runs = of.get(s.name.as_str()).map_or(&[][..], |v| v);
            (
                s.name.clone(),
                count_failed_ticks(runs, s.consecutive_failures),
            )
        })
        .collect())
}

/// The distinct ticks among a task's latest `failures` finished runs (newest first), and
/// whether fewer runs than that were read.
pub(super) fn count_failed_ticks(runs: &[&RunRecord], failures: i32) -> (i64, bool) {
    let finished: Vec<&RunRecord> = runs
        .iter()
        .copied()
        .filter(|r| r.status != RunStatus::Running)
        .take(failures.max(0) as usize)
        .collect();
    let ticks: std::collections::HashSet<_> = finished.iter().map(|r| r.scheduled_at).collect();
    (ticks.len() as i64, finished.len() < failures as usize)
}
