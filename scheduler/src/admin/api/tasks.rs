//! Tasks: config, state and policies; one task with its recent runs and next fire times.
//!
//! Besides the stored row, each task says what an operator asks first: is it on time now
//! (`timeliness`, judged by the missed grace of [`crate::ticks`]), how many ticks in a row
//! failed (`failed_ticks_in_a_row`: retries of one tick count once, where the row's
//! `consecutive_failures` counts attempts), and whether it fails, its instances' last runs
//! included (`failing`). What it says of its instances and of its rows' limit waits is read in
//! `summaries`.

pub(super) mod health;
mod summaries;

use axum::extract::State;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use health::{FailedTicks, failed_ticks, timeliness};
use summaries::{InstanceRunsView, Instances, TaskWaitingView, TaskWaits, task_rows};

use super::refusals::{ReadErrors, in_range};
use super::views::{PauseView, RunView, run_starts};
use crate::admin::auth::Reader;
use crate::admin::error::{ApiError, ErrorBody, Path, Query};
use crate::admin::state::AdminState;
use crate::bounds;
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

/// The lock of a running task (a sharded or broadcast task's: of its own row, else of one of
/// its shards' or nodes' rows; the task runs while any of them is locked).
#[derive(Debug, Serialize, ToSchema)]
struct LockView {
    /// The node holding it.
    owner: String,
    /// When it expires unless renewed.
    expires_at: Option<DateTime<Utc>>,
    /// How many of the task's rows are locked: 1 for an ordinary task; a sharded task's
    /// running shards, a broadcast's running nodes.
    rows: u32,
}

/// A task's run state.
#[derive(Debug, Serialize, ToSchema)]
struct StateView {
    /// When its next scheduled tick starts: the tick itself, or shifted by the task's jitter
    /// (see `next_tick`).
    next_run_at: Option<DateTime<Utc>>,
    /// The tick its next scheduled run serves (`next_run_at` itself without jitter).
    next_tick: Option<DateTime<Utc>>,
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
    /// Failed runs in a row (attempts: a tick retried twice counts three).
    consecutive_failures: i32,
    /// Ticks whose every attempt failed, in a row (a tick and its retries count once; a
    /// manual run counts as one).
    failed_ticks_in_a_row: i64,
    /// True when more runs failed than were read: `failed_ticks_in_a_row` is a lower bound.
    failed_ticks_more: bool,
    /// Whether it is on time now: `on_time` (its next tick is ahead), `due` (past its tick,
    /// within its missed grace), `late` (past its missed grace and not started), `waiting`
    /// (past its tick while a run of an earlier tick still runs: that run stands for it),
    /// `paused`, or `off` (disabled, not scheduled, or a schedule that never fires again).
    timeliness: &'static str,
    /// How long past its tick it is, in seconds, for `due`, `late` and `waiting`.
    overdue_seconds: Option<f64>,
    /// What it waits for, while one of its rows waits for a share of its limit shared by tasks
    /// (left out otherwise): its own row's due tick, else a shard's, a broadcast node's or an
    /// instance's (the one waiting longest). The limit, its size, since when, the runs holding
    /// it, the row that waits (`row`) and how many of its rows wait (`rows`). Its `timeliness`
    /// stays what its own tick's lateness says (`due`, `late`, or `on_time` while only other
    /// rows wait).
    #[serde(skip_serializing_if = "Option::is_none")]
    waiting: Option<TaskWaitingView>,
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
    /// Its calendar in words (`calendar cn-holidays, weekends (skip)`), if it has one: the
    /// ticks it blocks are left out of the next fire times (or moved, `next_allowed`).
    calendar: Option<String>,
    /// Whether the config enables it.
    enabled: bool,
    /// Who answers for it: its config entry's `owners`, or the node's default owners.
    owners: Vec<String>,
    /// Whether `owners` are the node's default owners (its entry names none).
    default_owners: bool,
    /// Its labels, from its config entry.
    labels: std::collections::BTreeMap<String, String>,
    /// Where its entry comes from.
    origin: Origin,
    /// Its run state.
    state: StateView,
    /// Its policies (none: not registered in this node's binary).
    policy: Option<PolicyView>,
    /// How many instances it has (`GET /api/tasks/{name}/instances`).
    instances: u64,
    /// Its instances' runs at a glance, when it has instances (left out otherwise): how many
    /// run now or failed their last run, and the latest run among them. A task run only
    /// through its instances has no run of its own (`state.last_result` null): this says it
    /// runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    instance_runs: Option<InstanceRunsView>,
    /// Whether it fails now: its own last tick failed (`state.consecutive_failures` above 0)
    /// or one of its instances failed its last run (`instance_runs.failing` above 0). The
    /// dashboard's overview counts, badges and sorts a task as failing by this.
    failing: bool,
}

/// Every task.
#[derive(Debug, Serialize, ToSchema)]
struct TaskList {
    /// The node's clock when it answered (what `timeliness` was judged against).
    at: DateTime<Utc>,
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
    /// Owners and labels, by task.
    tags: std::collections::HashMap<
        String,
        (Vec<String>, std::collections::BTreeMap<String, String>),
    >,
    default_owners: Vec<String>,
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
            tags: view
                .document
                .iter()
                .flat_map(|(doc, _)| {
                    doc.tasks
                        .iter()
                        .map(|t| (t.name.clone(), (t.owners.clone(), t.labels.clone())))
                })
                .collect(),
            default_owners: engine.default_owners().to_vec(),
        })
    }

    /// A task's owners (and whether they are the defaults) and labels.
    fn tags(
        &self,
        name: &str,
    ) -> (
        Vec<String>,
        bool,
        std::collections::BTreeMap<String, String>,
    ) {
        match self.tags.get(name) {
            Some((owners, labels)) if !owners.is_empty() => (owners.clone(), false, labels.clone()),
            Some((_, labels)) => (self.default_owners.clone(), true, labels.clone()),
            None => (self.default_owners.clone(), true, Default::default()),
        }
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

/// What a task's view is made of besides its row, read once per request for every task.
struct Reads {
    entries: Entries,
    failed: FailedTicks,
    instances: Instances,
    waits: TaskWaits,
}

fn task_view(
    engine: &EngineView,
    reads: &Reads,
    (s, locked_rows): (TaskState, u32),
    now: DateTime<Utc>,
) -> TaskView {
    let Reads {
        entries,
        failed,
        instances,
        waits,
    } = reads;
    let (instances, instance_runs) = instances.of(&s.name);
    let waiting = waits.of(&s.name).cloned();
    let failing =
        s.consecutive_failures > 0 || instance_runs.as_ref().is_some_and(|r| r.failing > 0);
    let origin = entries.origin(&s);
    let (owners, default_owners, labels) = entries.tags(&s.name);
    let (timeliness, overdue_seconds) = timeliness(engine, &s, now);
    let (failed_ticks_in_a_row, failed_ticks_more) = failed
        .get(&s.name)
        .copied()
        .unwrap_or((i64::from(s.consecutive_failures), false));
    let policy = engine.task_settings(&s.name).map(|(t, d)| PolicyView {
        timeout_seconds: t.timeout.map(seconds),
        retries: t.retries,
        backoff_seconds: seconds(t.backoff),
        misfire: t.misfire.as_str(),
        recovery: t.recovery.as_str(),
        lock_lifetime_seconds: seconds(t.lock_lifetime),
        defined_at: d.location(),
    });
    let calendar = s.calendar.as_deref().map(|stored| {
        crate::schedule::TaskCalendar::from_stored(stored)
            .and_then(|c| c.compile(chrono_tz::UTC))
            .map_or_else(|e| format!("unreadable calendar: {e}"), |c| c.describe())
    });
    TaskView {
        calendar,
        cron_in_words: crate::schedule::describe(&s.cron),
        owners,
        default_owners,
        labels,
        origin,
        policy,
        state: StateView {
            next_run_at: s.next_run_at,
            next_tick: s.next_tick,
            lock: s.lock_owner.map(|owner| LockView {
                owner,
                expires_at: s.lock_expires_at,
                rows: locked_rows.max(1),
            }),
            last_started_at: s.last_run_at,
            last_finished_at: s.last_finished_at,
            last_result: s.last_status.map(|st| st.as_str().to_owned()),
            last_error: s.last_error,
            consecutive_failures: s.consecutive_failures,
            failed_ticks_in_a_row,
            failed_ticks_more,
            timeliness,
            overdue_seconds,
            waiting,
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
        instances,
        instance_runs,
        failing,
    }
}

pub(super) async fn one_state(engine: &EngineView, name: &str) -> Result<TaskState, ApiError> {
    engine
        .store()
        .task_states(Some(name))
        .await?
        .into_iter()
        .next()
        .ok_or_else(|| ApiError::no_task(name))
}

/// Every task: config, state, policies. A sharded task is listed once (its shards' rows are
/// not tasks; its ticks' shards are in `GET /api/ticks`). A task `failing` is one whose own
/// last tick or one of whose instances' last runs failed; its `state.waiting` says when any of
/// its rows (its own, a shard's, a node's, an instance's) waits for its limit.
#[utoipa::path(get, path = "/api/tasks", tag = "tasks",
    security((), ("bearer" = [])),
    responses((status = 200, description = "The tasks", body = TaskList), ReadErrors))]
async fn list_tasks(
    _: Reader,
    State(state): State<AdminState>,
) -> Result<axum::Json<TaskList>, ApiError> {
    let entries = Entries::of(&state.engine);
    let states = state.engine.store().task_states(None).await?;
    // A sharded task's other rows (`name[i]`, a broadcast's `name[@node]`, see `crate::shard`)
    // are its shards or nodes, not tasks: the task is listed once (running while any of its
    // rows runs), its ticks' runs are on its strip (`/api/ticks`).
    let rows = task_rows(states);
    let task_states: Vec<TaskState> = rows.iter().map(|(s, _)| s.clone()).collect();
    let reads = Reads {
        entries,
        failed: failed_ticks(&state.engine, &task_states).await?,
        instances: Instances::read(&state.engine, None).await?,
        waits: TaskWaits::read(&state.engine).await?,
    };
    let now = Utc::now();
    let mut tasks: Vec<TaskView> = rows
        .into_iter()
        .map(|row| task_view(&state.engine, &reads, row, now))
        .collect();
    tasks.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(axum::Json(TaskList { at: now, tasks }))
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
    let count = in_range(bounds::API_TASK_DETAIL, "count", query.count, 5)?;
    let runs = in_range(bounds::API_TASK_DETAIL, "runs", query.runs, 10)?;
    let task = one_state(&state.engine, &name).await?;
    let failed = failed_ticks(&state.engine, std::slice::from_ref(&task)).await?;
    // A sharded or broadcast task runs while any of its rows does: read them all.
    let row = if task.shards > 1 || task.broadcast {
        let all = state.engine.store().task_states(None).await?;
        task_rows(all)
            .into_iter()
            .find(|(s, _)| s.name == task.name)
            .unwrap_or((task, 0))
    } else {
        let locked = u32::from(task.lock_owner.is_some());
        (task, locked)
    };
    let next_fire_times =
        match ScheduleSpec::stored(&row.0.cron, &row.0.timezone, row.0.calendar.as_deref()) {
            Ok(spec) => spec.iter_after(Utc::now()).take(count as usize).collect(),
            Err(_) => Vec::new(),
        };
    // Each run placed at its tick's start, what the dashboard's lateness counts from.
    let recent = state
        .engine
        .store()
        .recent_runs(Some(&name), i64::from(runs))
        .await?;
    let starts = run_starts(&state.engine, &[&row.0], &recent).await?;
    let recent_runs = recent
        .into_iter()
        .map(|run| RunView::placed(run, &starts))
        .collect();
    let reads = Reads {
        entries: Entries::of(&state.engine),
        failed,
        instances: Instances::read(&state.engine, Some(&row.0.name)).await?,
        waits: TaskWaits::read(&state.engine).await?,
    };
    Ok(axum::Json(TaskDetail {
        task: task_view(&state.engine, &reads, row, Utc::now()),
        recent_runs,
        next_fire_times,
    }))
}

#[cfg(test)]
mod tests;
