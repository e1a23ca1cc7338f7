//! The instances of a task (`crate::instance`), read: a page of them, filtered by key, and one
//! of them, each with its row's state and, on request, its latest runs and its strip of expected
//! ticks (the dashboard's strip of an instance, [`super::instance_ticks`]). What an instance is
//! shown as ([`InstanceView`]) is shared with the routes that change instances; its arguments
//! go through [`instance_args_view`] wherever shown.

use axum::extract::State;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::instance_ticks::{InstanceStrip, instance_strips};
use super::refusals::{ReadErrors, in_range};
use super::tasks::{health::timeliness, one_state};
use super::ticks::TickView;
use super::views::{PauseView, RunView, run_starts};
use crate::admin::auth::Reader;
use crate::admin::error::{ApiError, ErrorBody, Path, Query};
use crate::admin::state::AdminState;
use crate::bounds::{
    API_INSTANCE_RUNS as RUNS, API_INSTANCE_TICKS as TICKS, API_INSTANCES_LIMIT as LIMIT,
};
use crate::engine::EngineView;
use crate::store::{InstanceQuery, InstanceState, RunRecord, TaskState};

/// Instances per page by default.
const DEFAULT_LIMIT: u32 = 100;

pub(super) fn router() -> OpenApiRouter<AdminState> {
    OpenApiRouter::new()
        .routes(routes!(list_instances))
        .routes(routes!(get_instance))
}

/// An instance's arguments as the API and the dashboard show them: the one place they pass
/// through on their way out, so that what hides secrets in them applies everywhere.
pub(crate) fn instance_args_view(args: &serde_json::Value) -> serde_json::Value {
    crate::redact::redact_args(args)
}

/// The run an instance's row last started, as its row records it.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct LastRunView {
    /// When it started.
    started_at: Option<DateTime<Utc>>,
    /// When it ended (none while it runs).
    finished_at: Option<DateTime<Utc>>,
    /// How it ended: `succeeded`, `failed`, `timed_out`, ... (none while it runs).
    result: Option<String>,
    /// Its error.
    error: Option<String>,
    /// Failed attempts in a row.
    consecutive_failures: i32,
}

/// The lock of an instance's run in flight.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct InstanceLockView {
    /// The node running it.
    owner: String,
    /// When the lock expires unless renewed.
    expires_at: Option<DateTime<Utc>>,
}

/// An instance of a task: its schedule, arguments and state.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct InstanceView {
    /// Its task.
    task: String,
    /// Its key.
    key: String,
    /// Its cron expression.
    cron: String,
    /// The cron expression in words.
    cron_in_words: String,
    /// The IANA zone its cron is read in.
    timezone: String,
    /// Its arguments (JSON `null`: none), as the handler reads them with `ctx.args()`.
    #[schema(value_type = Object)]
    args: serde_json::Value,
    /// Its own owners, which its events carry and its alerts are routed by in place of its
    /// task's (empty: its task's).
    owners: Vec<String>,
    /// Its own labels, over its task's in its events (empty: none of its own).
    labels: std::collections::BTreeMap<String, String>,
    /// The limit shared by tasks its runs hold in place of its task's (none: its task's).
    limit: Option<String>,
    /// Its own service levels, the shape of a config entry's `sla` block, by which its
    /// breaches are judged in place of its task's (`null`: its task's).
    #[schema(value_type = Option<Object>)]
    sla: Option<serde_json::Value>,
    /// The calendar its row holds, by the names of the config document's `calendars` it was
    /// made of (joined by `+`; `inline`: rules written on a task entry): its own, or for one the
    /// config declares its own else its task's as the document had it. `null`: its task's, if
    /// any, read at each claim.
    calendar: Option<String>,
    /// Who owns it: `config` (declared in the config document: the reconciler changes it, an
    /// upsert of its key is refused) or `runtime` (made through `Schedules` or the API).
    source: &'static str,
    /// Whether it runs: false while its task is disabled, or when its config entry is.
    enabled: bool,
    /// Whether an operator's pause is in force.
    paused: bool,
    /// The pause in force, if any.
    pause: Option<PauseView>,
    /// When its next run starts (its next tick, shifted by its jitter).
    next_run_at: Option<DateTime<Utc>>,
    /// The tick its next run serves (`next_run_at` is that tick shifted by its jitter).
    next_tick: Option<DateTime<Utc>>,
    /// `on_time`, `due`, `late`, `waiting`, `paused` or `off`, as a task's (`GET /api/tasks`).
    timeliness: &'static str,
    /// Its run in flight, if any.
    running: Option<InstanceLockView>,
    /// Its latest run, as its row records it (none: it never ran).
    last_run: Option<LastRunView>,
    /// A retry waiting to run.
    retry_at: Option<DateTime<Utc>>,
    /// A manual run asked for and not started yet.
    manual_at: Option<DateTime<Utc>>,
    /// Removed while a run of it was in flight: nothing of it runs again; it goes once that run
    /// ends.
    removed: bool,
    /// Its latest runs, newest first, when asked for (`runs`).
    #[serde(skip_serializing_if = "Option::is_none")]
    recent_runs: Option<Vec<RunView>>,
    /// Its strip, when asked for (`ticks`): its latest expected ticks by its own schedule (and
    /// manual runs), oldest first, each with what became of it, as a task's strip
    /// (`GET /api/ticks`): its run and outcome, a skip and its reason, `missed` (no run later
    /// than its grace) or `due`. A tick's lateness counts from its start (shifted by its
    /// jitter).
    #[serde(skip_serializing_if = "Option::is_none")]
    ticks: Option<Vec<TickView>>,
    /// With `ticks`: false when older ticks are left out because the runs read did not reach
    /// back so far (or its schedule cannot be read).
    #[serde(skip_serializing_if = "Option::is_none")]
    ticks_complete: Option<bool>,
}

impl InstanceView {
    /// `instance` as shown at `now`, with its latest runs if read.
    pub(crate) fn of(
        engine: &EngineView,
        instance: InstanceState,
        recent_runs: Option<Vec<RunView>>,
        now: DateTime<Utc>,
    ) -> Self {
        let s = instance.state;
        let (timeliness, _) = timeliness(engine, &s, now);
        let args = instance
            .args
            .as_deref()
            .and_then(|text| serde_json::from_str(text).ok())
            .unwrap_or(serde_json::Value::Null);
        let pause = s.pause.filter(|p| p.in_force(now));
        let last_run = s.last_run_at.map(|started| LastRunView {
            started_at: Some(started),
            finished_at: s.last_finished_at,
            result: s.last_status.map(|st| st.as_str().to_owned()),
            error: s.last_error,
            consecutive_failures: s.consecutive_failures,
        });
        Self {
            cron_in_words: crate::schedule::describe(&s.cron),
            task: instance.task,
            key: instance.key,
            cron: s.cron,
            timezone: s.timezone,
            args: instance_args_view(&args),
            sla: instance.tags.sla.as_deref().and_then(sla_view),
            owners: instance.tags.owners,
            labels: instance.tags.labels,
            limit: instance.limit,
            calendar: crate::schedules::shown_calendar(s.calendar.as_deref()),
            source: instance.source.as_str(),
            enabled: s.enabled,
            paused: pause.is_some(),
            pause: pause.map(PauseView::from),
            next_run_at: s.next_run_at,
            next_tick: s.next_tick,
            timeliness,
            running: s.lock_owner.map(|owner| InstanceLockView {
                owner,
                expires_at: s.lock_expires_at,
            }),
            last_run,
            retry_at: s.retry_at,
            manual_at: s.manual_at,
            removed: instance.removed,
            recent_runs,
            ticks: None,
            ticks_complete: None,
        }
    }

    /// With its strip of expected ticks.
    fn with_strip(self, strip: Option<InstanceStrip>) -> Self {
        match strip {
            Some(strip) => Self {
                ticks: Some(strip.ticks),
                ticks_complete: Some(strip.complete),
                ..self
            },
            None => self,
        }
    }
}

/// Which instances.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct InstancesQuery {
    /// Only instances whose key contains this text (ASCII case ignored).
    key: Option<String>,
    /// The `next_cursor` of the previous page (the last key it listed).
    cursor: Option<String>,
    /// Instances per page, 1 to 1000 (default 100).
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<u32>,
    /// The latest runs to list with each instance, 0 to 30 (default 0: none).
    #[param(minimum = 0, maximum = 30)]
    runs: Option<u32>,
    /// The latest expected ticks to give each instance's strip, 0 to 30 (default 0: none).
    #[param(minimum = 0, maximum = 30)]
    ticks: Option<u32>,
}

/// A page of a task's instances, by key.
#[derive(Debug, Serialize, ToSchema)]
struct InstancePage {
    /// The node's clock when it answered.
    at: DateTime<Utc>,
    /// The instances, by key.
    instances: Vec<InstanceView>,
    /// Pass as `cursor` for the next page; none on the last page.
    next_cursor: Option<String>,
}

/// The latest `per_key` runs of each of `instances` of `task`, as views by key, each scheduled
/// run placed at its tick's start as the run history places it ([`run_starts`]).
async fn recent_runs(
    engine: &EngineView,
    task: &TaskState,
    instances: &[InstanceState],
    per_key: u32,
) -> Result<std::collections::HashMap<String, Vec<RunView>>, ApiError> {
    let mut by_key: std::collections::HashMap<String, Vec<RunView>> = Default::default();
    if per_key == 0 {
        return Ok(by_key);
    }
    let keys: Vec<String> = instances.iter().map(|i| i.key.clone()).collect();
    let runs: Vec<RunRecord> = engine
        .store()
        .latest_runs_per_instance(&task.name, &keys, per_key)
        .await?;
    let starts = run_starts(engine, &[task], &runs).await?;
    for key in keys {
        by_key.entry(key).or_default();
    }
    for run in runs {
        if let Some(key) = run.instance_key.clone() {
            by_key
                .entry(key)
                .or_default()
                .push(RunView::placed(run, &starts));
        }
    }
    Ok(by_key)
}

/// A task's instances, by key: filtered by key, paged, each with its state and, with `runs`,
/// its latest runs. A removed instance is left out (read by its key, it says `removed` while
/// its run in flight finishes).
#[utoipa::path(get, path = "/api/tasks/{name}/instances", tag = "tasks",
    security((), ("bearer" = [])),
    params(("name" = String, Path, description = "The task's name"), InstancesQuery),
    responses(
        (status = 200, description = "A page of the task's instances", body = InstancePage),
        (status = 404, description = "No such task", body = ErrorBody),
        ReadErrors,
    ))]
async fn list_instances(
    _: Reader,
    State(state): State<AdminState>,
    Path(name): Path<String>,
    Query(q): Query<InstancesQuery>,
) -> Result<axum::Json<InstancePage>, ApiError> {
    let limit = in_range(LIMIT, "limit", q.limit, DEFAULT_LIMIT)?;
    let runs = in_range(RUNS, "runs", q.runs, 0)?;
    let ticks = in_range(TICKS, "ticks", q.ticks, 0)?;
    let task = one_state(&state.engine, &name).await?;
    let mut query = InstanceQuery::of(&name, limit);
    if let Some(key) = q.key.filter(|k| !k.is_empty()) {
        query = query.key_contains(key);
    }
    if let Some(cursor) = q.cursor {
        query = query.after(cursor);
    }
    let instances = state.engine.store().instance_states(&query).await?;
    let next_cursor = (instances.len() == limit as usize)
        .then(|| instances.last().map(|i| i.key.clone()))
        .flatten();
    let mut recent = recent_runs(&state.engine, &task, &instances, runs).await?;
    let now = state.engine.now();
    let mut strips = instance_strips(&state.engine, &name, &instances, ticks, now).await?;
    let instances = instances
        .into_iter()
        .map(|i| {
            let runs = (runs > 0).then(|| recent.remove(&i.key).unwrap_or_default());
            let strip = strips.remove(&i.key);
            InstanceView::of(&state.engine, i, runs, now).with_strip(strip)
        })
        .collect();
    Ok(axum::Json(InstancePage {
        at: now,
        instances,
        next_cursor,
    }))
}

/// How many of an instance's latest runs and expected ticks to show.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct InstanceDetailQuery {
    /// The latest runs to list, 0 to 30 (default 10).
    #[param(minimum = 0, maximum = 30)]
    runs: Option<u32>,
    /// The latest expected ticks to give its strip, 0 to 30 (default 0: none).
    #[param(minimum = 0, maximum = 30)]
    ticks: Option<u32>,
}

/// One instance of a task with its state and latest runs.
#[utoipa::path(get, path = "/api/tasks/{name}/instances/{key}", tag = "tasks",
    security((), ("bearer" = [])),
    params(
        ("name" = String, Path, description = "The task's name"),
        ("key" = String, Path, description = "The instance's key"),
        InstanceDetailQuery,
    ),
    responses(
        (status = 200, description = "The instance", body = InstanceView),
        (status = 404, description = "No such task, or no such instance of it", body = ErrorBody),
        ReadErrors,
    ))]
async fn get_instance(
    _: Reader,
    State(state): State<AdminState>,
    Path((name, key)): Path<(String, String)>,
    Query(q): Query<InstanceDetailQuery>,
) -> Result<axum::Json<InstanceView>, ApiError> {
    let runs = in_range(RUNS, "runs", q.runs, 10)?;
    let ticks = in_range(TICKS, "ticks", q.ticks, 0)?;
    let task = one_state(&state.engine, &name).await?;
    let query = InstanceQuery::of(&name, 1).key(&key);
    let instance = state
        .engine
        .store()
        .instance_states(&query)
        .await?
        .into_iter()
        .next()
        .ok_or_else(|| {
            ApiError::not_found(format!(
                "task `{}` has no instance `{}`",
                crate::bounds::printable(&name),
                crate::bounds::printable(&key)
            ))
        })?;
    let mut recent =
        recent_runs(&state.engine, &task, std::slice::from_ref(&instance), runs).await?;
    let runs = (runs > 0).then(|| recent.remove(&instance.key).unwrap_or_default());
    let now = state.engine.now();
    let mut strips = instance_strips(
        &state.engine,
        &name,
        std::slice::from_ref(&instance),
        ticks,
        now,
    )
    .await?;
    let strip = strips.remove(&instance.key);
    Ok(axum::Json(
        InstanceView::of(&state.engine, instance, runs, now).with_strip(strip),
    ))
}

/// An instance's own service levels as its row stores them (the `sla` block as JSON text), as
/// the answers show them: the block as written.
pub(super) fn sla_view(stored: &str) -> Option<serde_json::Value> {
    serde_json::from_str(stored).ok()
}
