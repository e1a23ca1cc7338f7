//! Tasks: config, state and policies; one task with its recent runs and next fire times.

use axum::extract::State;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::{PauseView, ReadErrors, RunView};
use crate::admin::AdminState;
use crate::admin::auth::Reader;
use crate::admin::error::{ApiError, ErrorBody, Path, Query};
use crate::engine::EngineView;
use crate::schedule::ScheduleSpec;
use crate::store::TaskState;

pub(super) fn router() -> OpenApiRouter<AdminState> {
    OpenApiRouter::new()
        .routes(routes!(list_tasks))
        .routes(routes!(get_task))
}

/// Where a task's entry comes from.
#[derive(Debug, Serialize, ToSchema)]
struct Origin {
    /// `config` (an entry of the config document), `not_in_config` (registered, absent from
    /// the config: not scheduled), `orphaned` (neither in the config nor in this binary), or
    /// `database` (the node has no config: the row as stored).
    kind: &'static str,
    /// The config source (redacted), for `config`.
    source: Option<String>,
    /// Why the last reconcile refused this task's entry, if it did (the row keeps its last
    /// valid schedule).
    refused: Option<String>,
}

/// The lock of a running task.
#[derive(Debug, Serialize, ToSchema)]
struct LockView {
    /// The node holding it.
    owner: String,
    /// When it expires unless renewed.
    expires_at: Option<DateTime<Utc>>,
}

/// A task's run state.
#[derive(Debug, Serialize, ToSchema)]
struct StateView {
    /// Its next scheduled tick.
    next_run_at: Option<DateTime<Utc>>,
    /// Its lock, while a run holds it.
    lock: Option<LockView>,
    /// When its last run started.
    last_started_at: Option<DateTime<Utc>>,
    /// When its last run ended.
    last_finished_at: Option<DateTime<Utc>>,
    /// How its last run ended.
    last_result: Option<String>,
    /// Its last run's error.
    last_error: Option<String>,
    /// Failed runs in a row.
    consecutive_failures: i32,
    /// The operator's pause, if in force.
    pause: Option<PauseView>,
    /// A retry waiting to run.
    retry_at: Option<DateTime<Utc>>,
    /// A manual run asked for and not yet started.
    manual_at: Option<DateTime<Utc>>,
    /// Since when it is overdue (a missed-run incident).
    missed_since: Option<DateTime<Utc>>,
    /// Since when it is orphaned.
    orphaned_since: Option<DateTime<Utc>>,
    /// Since when it is disabled.
    disabled_at: Option<DateTime<Utc>>,
}

/// A task's policies, from its `#[task]` attribute and the node's defaults.
#[derive(Debug, Serialize, ToSchema)]
struct PolicyView {
    /// Run timeout in seconds (none: no timeout).
    timeout_seconds: Option<f64>,
    /// Retries after a failure.
    retries: u32,
    /// Retry backoff in seconds.
    backoff_seconds: f64,
    /// `once` or `skip`.
    misfire: &'static str,
    /// `rerun` or `never`.
    recovery: &'static str,
    /// Lock lifetime in seconds.
    lock_lifetime_seconds: f64,
    /// Where the handler is defined (`file:line`).
    defined_at: String,
}

/// A task: its config, state and policies.
#[derive(Debug, Serialize, ToSchema)]
struct TaskView {
    /// The task's name.
    name: String,
    /// The cron expression as written.
    cron: String,
    /// The cron expression in words.
    cron_in_words: String,
    /// The IANA zone it is read in.
    timezone: String,
    /// Whether the config enables it.
    enabled: bool,
    /// Where its entry comes from.
    origin: Origin,
    /// Its run state.
    state: StateView,
    /// Its policies (none: not registered in this node's binary).
    policy: Option<PolicyView>,
}

/// Every task.
#[derive(Debug, Serialize, ToSchema)]
struct TaskList {
    /// The tasks, by name.
    tasks: Vec<TaskView>,
}

/// One task with its recent runs and next fire times.
#[derive(Debug, Serialize, ToSchema)]
struct TaskDetail {
    /// The task.
    task: TaskView,
    /// Its latest runs, newest first.
    recent_runs: Vec<RunView>,
    /// The schedule's next fire times (whether or not the task is enabled or paused).
    next_fire_times: Vec<DateTime<Utc>>,
}

fn seconds(d: std::time::Duration) -> f64 {
    d.as_secs_f64()
}

/// The config entries' names and source, read once per request.
struct Entries {
    source: Option<String>,
    names: std::collections::HashSet<String>,
    refused: std::collections::HashMap<String, String>,
}

impl Entries {
    fn of(engine: &EngineView) -> Self {
        engine.read_config(|view| Self {
            source: view.source.clone(),
            names: view
                .document
                .iter()
                .flat_map(|(doc, _)| doc.tasks.iter().map(|t| t.name.clone()))
                .collect(),
            refused: view
                .report
                .iter()
                .flat_map(|(report, _)| report.refused.iter().cloned())
                .collect(),
        })
    }

    fn origin(&self, s: &TaskState) -> Origin {
        let (kind, source) = match &self.source {
            None => ("database", None),
            Some(source) if self.names.contains(&s.name) => ("config", Some(source.clone())),
            Some(_) if s.orphaned_since.is_some() => ("orphaned", None),
            Some(_) => ("not_in_config", None),
        };
        Origin {
            kind,
            source,
            refused: self.refused.get(&s.name).cloned(),
        }
    }
}

fn task_view(engine: &EngineView, entries: &Entries, s: TaskState) -> TaskView {
    let origin = entries.origin(&s);
    let policy = engine.task_settings(&s.name).map(|(t, d)| PolicyView {
        timeout_seconds: t.timeout.map(seconds),
        retries: t.retries,
        backoff_seconds: seconds(t.backoff),
        misfire: t.misfire.as_str(),
        recovery: t.recovery.as_str(),
        lock_lifetime_seconds: seconds(t.lock_lifetime),
        defined_at: d.location(),
    });
    let now = Utc::now();
    TaskView {
        cron_in_words: crate::schedule::describe(&s.cron),
        origin,
        policy,
        state: StateView {
            next_run_at: s.next_run_at,
            lock: s.lock_owner.map(|owner| LockView {
                owner,
                expires_at: s.lock_expires_at,
            }),
            last_started_at: s.last_run_at,
            last_finished_at: s.last_finished_at,
            last_result: s.last_status.map(|st| st.as_str().to_owned()),
            last_error: s.last_error,
            consecutive_failures: s.consecutive_failures,
            pause: s.pause.filter(|p| p.in_force(now)).map(PauseView::from),
            retry_at: s.retry_at,
            manual_at: s.manual_at,
            missed_since: s.missed_since,
            orphaned_since: s.orphaned_since,
            disabled_at: s.disabled_at,
        },
        name: s.name,
        cron: s.cron,
        timezone: s.timezone,
        enabled: s.enabled,
    }
}

pub(super) async fn one_state(engine: &EngineView, name: &str) -> Result<TaskState, ApiError> {
    engine
        .store()
        .task_states(Some(name))
        .await?
        .into_iter()
        .next()
        .ok_or_else(|| ApiError::not_found(format!("no task `{name}`")))
}

/// Every task: config, state, policies.
#[utoipa::path(get, path = "/api/tasks", tag = "tasks",
    security((), ("bearer" = [])),
    responses((status = 200, description = "The tasks", body = TaskList), ReadErrors))]
async fn list_tasks(
    _: Reader,
    State(state): State<AdminState>,
) -> Result<axum::Json<TaskList>, ApiError> {
    let entries = Entries::of(&state.engine);
    let mut tasks: Vec<TaskView> = state
        .engine
        .store()
        .task_states(None)
        .await?
        .into_iter()
        .map(|s| task_view(&state.engine, &entries, s))
        .collect();
    tasks.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(axum::Json(TaskList { tasks }))
}

/// How much of a task's future and past to show.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct DetailQuery {
    /// Next fire times to list, 1 to 100 (default 5).
    #[param(minimum = 1, maximum = 100)]
    count: Option<u32>,
    /// Recent runs to list, 1 to 100 (default 10).
    #[param(minimum = 1, maximum = 100)]
    runs: Option<u32>,
}

fn bounded(name: &str, value: Option<u32>, default: u32, max: u32) -> Result<u32, ApiError> {
    match value.unwrap_or(default) {
        n if (1..=max).contains(&n) => Ok(n),
        n => Err(ApiError::bad_request(format!(
            "`{name}` must be 1 to {max}, not {n}"
        ))),
    }
}

/// One task with its recent runs and its next fire times.
#[utoipa::path(get, path = "/api/tasks/{name}", tag = "tasks",
    security((), ("bearer" = [])),
    params(("name" = String, Path, description = "The task's name"), DetailQuery),
    responses(
        (status = 200, description = "The task", body = TaskDetail),
        (status = 404, description = "No such task", body = ErrorBody),
        ReadErrors,
    ))]
async fn get_task(
    _: Reader,
    State(state): State<AdminState>,
    Path(name): Path<String>,
    Query(query): Query<DetailQuery>,
) -> Result<axum::Json<TaskDetail>, ApiError> {
    let count = bounded("count", query.count, 5, 100)?;
    let runs = bounded("runs", query.runs, 10, 100)?;
    let task = one_state(&state.engine, &name).await?;
    let next_fire_times = match ScheduleSpec::parse(&task.cron, &task.timezone) {
        Ok(spec) => spec.iter_after(Utc::now()).take(count as usize).collect(),
        Err(_) => Vec::new(),
    };
    let recent_runs = state
        .engine
        .store()
        .recent_runs(Some(&name), i64::from(runs))
        .await?
        .into_iter()
        .map(RunView::from)
        .collect();
    Ok(axum::Json(TaskDetail {
        task: task_view(&state.engine, &Entries::of(&state.engine), task),
        recent_runs,
        next_fire_times,
    }))
}
