//! Expected ticks: for every task, the ticks its schedule says should have fired lately and what
//! became of each (a run and its outcome, a skip record and its reason, or nothing: missed).
//! Computed here from the schedule, the runs and the skip records, in one request for every
//! task (three store reads whatever the number of tasks), so a dashboard can draw a strip per
//! task without asking per task.

use std::collections::HashMap;

use axum::extract::State;
use chrono::{DateTime, TimeDelta, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::ReadErrors;
use crate::admin::AdminState;
use crate::admin::auth::Reader;
use crate::admin::error::{ApiError, ErrorBody, Query};
use crate::schedule::ScheduleSpec;
use crate::store::{RunRecord, RunStatus, SkipRecord, TaskState, Trigger};

const DEFAULT_COUNT: u32 = 30;
const MAX_COUNT: u32 = 200;
/// How far back a strip looks at most, whatever its count.
const MAX_LOOKBACK: TimeDelta = TimeDelta::days(7);
/// Runs read per task at most; past them the oldest ticks are left out (`complete: false`).
const RUNS_PER_TASK: u32 = 400;
const SKIPS_PER_READ: u32 = 10_000;

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
    /// grace), or `due` (not started yet, within its grace).
    outcome: &'static str,
    /// Why it was skipped: `overlap`, `misfire`, `invalid_schedule`, `disabled`, `paused`,
    /// `retry_gave_way`.
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'static str>,
    /// The run that served it (the latest attempt).
    #[serde(skip_serializing_if = "Option::is_none")]
    run_id: Option<i64>,
    /// Attempts made at it.
    attempts: i32,
    /// `schedule`, `retry` or `manual` (of the latest attempt).
    #[serde(skip_serializing_if = "Option::is_none")]
    trigger: Option<&'static str>,
    /// How long the latest attempt took (so far, while running), in seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    duration_seconds: Option<f64>,
    /// How late the first attempt started, in seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    late_seconds: Option<f64>,
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
    let count = match q.count.unwrap_or(DEFAULT_COUNT) {
        n @ 1..=MAX_COUNT => n as usize,
        n => {
            return Err(ApiError::bad_request(format!(
                "`count` must be 1 to {MAX_COUNT}, not {n}"
            )));
        }
    };
    let store = &state.shared.store;
    let mut states = store.task_states(q.task.as_deref()).await?;
    if let Some(task) = &q.task
        && states.is_empty()
    {
        return Err(ApiError::not_found(format!("no task `{task}`")));
    }
    states.sort_by(|a, b| a.name.cmp(&b.name));
    let now = Utc::now();
    let grace = state.shared.settings.missed_grace;
    let plans: Vec<(TaskState, Option<ScheduleSpec>, DateTime<Utc>)> = states
        .into_iter()
        .map(|s| {
            let spec = state.shared.specs.get_named(&s.cron, &s.timezone).ok();
            let since = spec.as_ref().map_or(now - TimeDelta::hours(1), |spec| {
                window_start(spec, now, count)
            });
            (s, spec, since)
        })
        .collect();
    let Some(since) = plans.iter().map(|(_, _, since)| *since).min() else {
        return Ok(axum::Json(TickList {
            at: now,
            tasks: vec![],
        }));
    };
    let names: Vec<String> = plans.iter().map(|(s, _, _)| s.name.clone()).collect();
    // Enough runs per task for its strip with retries and manual runs among them.
    let per_task = (count as u32 * 2).min(RUNS_PER_TASK);
    let runs = store.latest_runs_per_task(&names, per_task, since).await?;
    let mut runs_of: HashMap<&str, Vec<&RunRecord>> = HashMap::new();
    for run in &runs {
        runs_of.entry(&run.task_name).or_default().push(run);
    }
    let skips = store.skips_since(since, SKIPS_PER_READ).await?;
    let mut skips_of: HashMap<&str, Vec<&SkipRecord>> = HashMap::new();
    for skip in &skips {
        skips_of.entry(&skip.task_name).or_default().push(skip);
    }
    let tasks = plans
        .iter()
        .map(|(s, spec, since)| {
            let runs = runs_of.get(s.name.as_str()).map_or(&[][..], |v| v);
            // A task with as many runs as were read may have older ones: before the oldest
            // read, what happened is not known here.
            let horizon = (runs.len() == per_task as usize)
                .then(|| runs.iter().map(|r| r.scheduled_at).min())
                .flatten();
            let facts = Facts {
                state: s,
                runs,
                skips: skips_of.get(s.name.as_str()).map_or(&[][..], |v| v),
                now,
                since: horizon.map_or(*since, |h| (h - TimeDelta::milliseconds(1)).max(*since)),
                grace: |tick| {
                    spec.as_ref().map_or(TimeDelta::seconds(5), |spec| {
                        crate::engine::missed_grace(spec, tick, grace)
                    })
                },
            };
            let mut ticks = strip(spec.as_ref(), &facts);
            let complete =
                spec.is_some() && (horizon.is_none_or(|h| h <= *since) || ticks.len() >= count);
            let drop = ticks.len().saturating_sub(count);
            ticks.drain(..drop);
            TaskTicks {
                task: s.name.clone(),
                ticks,
                complete,
            }
        })
        .collect();
    Ok(axum::Json(TickList { at: now, tasks }))
}

/// Where a strip of `count` ticks ending at `now` starts: a little before the `count`-th last
/// tick, estimated from the interval of the coming ticks and widened while it holds too few
/// (weekday schedules), never more than a week back.
fn window_start(spec: &ScheduleSpec, now: DateTime<Utc>, count: usize) -> DateTime<Utc> {
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

/// What a task's strip is made from.
struct Facts<'a, G> {
    state: &'a TaskState,
    /// Its runs in the window, newest first.
    runs: &'a [&'a RunRecord],
    /// Its skip records overlapping the window.
    skips: &'a [&'a SkipRecord],
    now: DateTime<Utc>,
    /// The strip starts after this.
    since: DateTime<Utc>,
    /// How late a tick may start before it counts as missed.
    grace: G,
}

/// The strip: every expected tick after `since` up to `now`, and every run in the window, each
/// with what became of it, oldest first.
fn strip<G: Fn(DateTime<Utc>) -> TimeDelta>(
    spec: Option<&ScheduleSpec>,
    f: &Facts<'_, G>,
) -> Vec<TickView> {
    // The runs of each tick, by tick; a manual run is its own mark.
    let mut by_tick: std::collections::BTreeMap<DateTime<Utc>, Vec<&RunRecord>> =
        Default::default();
    for run in f.runs.iter().filter(|r| r.scheduled_at > f.since) {
        by_tick.entry(run.scheduled_at).or_default().push(run);
    }
    if let Some(spec) = spec {
        for tick in spec.iter_after(f.since).take_while(|t| *t <= f.now) {
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
    by_tick
        .into_iter()
        .filter_map(|(at, runs)| {
            if let Some(latest) = runs.iter().max_by_key(|r| (r.attempt, r.id)) {
                let first = runs
                    .iter()
                    .min_by_key(|r| (r.attempt, r.id))
                    .unwrap_or(latest);
                let end = latest.finished_at.unwrap_or(f.now);
                return Some(TickView {
                    at,
                    outcome: latest.status.as_str(),
                    reason: None,
                    run_id: Some(latest.id),
                    attempts: latest.attempt.max(runs.len() as i32),
                    trigger: Some(latest.trigger.as_str()),
                    duration_seconds: Some(seconds(end - latest.started_at)),
                    late_seconds: (first.trigger != Trigger::Manual)
                        .then(|| seconds(first.started_at - at)),
                });
            }
            let skipped = |reason: &'static str| TickView {
                at,
                outcome: "skipped",
                reason: Some(reason),
                run_id: None,
                attempts: 0,
                trigger: None,
                duration_seconds: None,
                late_seconds: None,
            };
            if let Some(skip) = f
                .skips
                .iter()
                .find(|s| s.first_tick <= at && at <= s.last_tick)
            {
                return Some(TickView {
                    run_id: skip.run_id,
                    ..skipped(skip.reason.as_str())
                });
            }
            // Not recorded yet: a pause or a disable records its ticks when it ends, an
            // overlap when the run that overlapped ends.
            if pause.is_some_and(|p| p <= at) {
                return Some(skipped("paused"));
            }
            if !f.state.enabled && f.state.disabled_at.is_some_and(|d| d <= at) {
                return Some(skipped("disabled"));
            }
            // Due while a run of an earlier tick runs: that run will stand for it.
            if running.is_some_and(|r| r < at) {
                return Some(skipped("overlap"));
            }
            if first_known.is_none_or(|first| at < first) {
                return None;
            }
            let outcome = if f.now - at < (f.grace)(at) {
                "due"
            } else {
                "missed"
            };
            Some(TickView {
                outcome,
                reason: None,
                ..skipped("")
            })
        })
        .collect()
}

fn seconds(d: TimeDelta) -> f64 {
    d.num_milliseconds().max(0) as f64 / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{Pause, SkipReason};

    fn at(s: u32) -> DateTime<Utc> {
        "2026-03-02T12:00:00Z".parse::<DateTime<Utc>>().unwrap() + TimeDelta::seconds(s.into())
    }

    fn state() -> TaskState {
        TaskState {
            name: "t".into(),
            cron: "*/10 * * * * *".into(),
            timezone: "UTC".into(),
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
        }
    }

    fn run(id: i64, tick: u32, started: u32, took: Option<u32>, status: RunStatus) -> RunRecord {
        RunRecord {
            id,
            task_name: "t".into(),
            scheduled_at: at(tick),
            started_at: at(started),
            finished_at: took.map(|t| at(started + t)),
            status,
            node_id: "n".into(),
            ticks_collapsed: 1,
            error: None,
            attempt: 1,
            trigger: Trigger::Schedule,
            triggered_by: None,
        }
    }

    fn outcomes(ticks: &[TickView]) -> Vec<(u32, &'static str, Option<&'static str>)> {
        ticks
            .iter()
            .map(|t| ((t.at - at(0)).num_seconds() as u32, t.outcome, t.reason))
            .collect()
    }

    #[test]
    fn each_tick_gets_its_run_its_skip_or_missed() {
        let spec = ScheduleSpec::parse("*/10 * * * * *", "UTC").unwrap();
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
        let facts = Facts {
            state: &state,
            runs: &runs,
            skips: &skips,
            now: at(72),
            since: at(0),
            grace: |_| TimeDelta::seconds(5),
        };
        let ticks = strip(Some(&spec), &facts);
        assert_eq!(
            outcomes(&ticks),
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
        assert_eq!(ticks[0].late_seconds, Some(1.0));
        assert_eq!(ticks[0].duration_seconds, Some(3.0));
        assert_eq!((ticks[1].attempts, ticks[1].run_id), (2, Some(3)));
        assert_eq!(ticks[1].trigger, Some("retry"));
        assert_eq!(ticks[2].trigger, Some("manual"));
        assert_eq!(ticks[2].late_seconds, None, "a manual run is never late");
    }

    #[test]
    fn ticks_not_recorded_yet_are_skipped_while_paused_or_overlapped() {
        let spec = ScheduleSpec::parse("*/10 * * * * *", "UTC").unwrap();
        let runs = [run(1, 10, 10, None, RunStatus::Running)];
        let runs: Vec<&RunRecord> = runs.iter().collect();
        let state = state();
        let facts = Facts {
            state: &state,
            runs: &runs,
            skips: &[],
            now: at(31),
            since: at(0),
            grace: |_| TimeDelta::seconds(5),
        };
        let ticks = strip(Some(&spec), &facts);
        assert_eq!(
            outcomes(&ticks),
            [
                (10, "running", None),
                (20, "skipped", Some("overlap")),
                (30, "skipped", Some("overlap")),
            ]
        );
        assert_eq!(ticks[0].duration_seconds, Some(21.0), "so far");

        let mut paused = state;
        paused.pause = Some(Pause::new(at(15), "ops", "checking", None));
        let facts = Facts {
            state: &paused,
            runs: &[],
            skips: &[],
            now: at(41),
            since: at(0),
            grace: |_| TimeDelta::seconds(5),
        };
        assert_eq!(
            outcomes(&strip(Some(&spec), &facts)),
            [
                (20, "skipped", Some("paused")),
                (30, "skipped", Some("paused")),
                (40, "skipped", Some("paused")),
            ]
        );
    }

    #[test]
    fn a_window_holds_enough_ticks_of_sparse_schedules_but_at_most_a_week() {
        let now = at(0);
        let weekdays = ScheduleSpec::parse("0 9 * * MON-FRI", "UTC").unwrap();
        let start = window_start(&weekdays, now, 10);
        assert!(weekdays.count_fires(start, now, 100) >= 10 || start == now - MAX_LOOKBACK);
        let secondly = ScheduleSpec::parse("* * * * * *", "UTC").unwrap();
        let start = window_start(&secondly, now, 30);
        assert_eq!(secondly.count_fires(start, now, 100), 31);
        let yearly = ScheduleSpec::parse("0 0 1 1 *", "UTC").unwrap();
        assert_eq!(window_start(&yearly, now, 30), now - MAX_LOOKBACK);
    }
}
