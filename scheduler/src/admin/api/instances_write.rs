//! The instances of a task, written: make or change one (`PUT`; a batch of them is
//! `instances_batch.rs`), remove one (`DELETE`), pause and resume one, run one now;
//! and a manual run's arguments override, on an instance's run and on the task's own (`POST
//! /api/tasks/{name}/trigger` with `{"args": ...}`). Each is an operator's mutation, audited,
//! through [`Schedules`] and [`crate::operate`], as the command line's are. Every view of
//! arguments hides their secrets ([`crate::redact::redact_args`]).

use axum::extract::State;
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::instances::InstanceView;
use super::refusals::{MutationErrors, pause_reason};
use crate::admin::auth::Operator;
use crate::admin::error::{ApiError, ErrorBody, Json, MaybeJson, Path};
use crate::admin::state::AdminState;
use crate::instance::{InstanceRefusal, row_name};
use crate::operate::{self, Actor};
use crate::redact::redact_args;
use crate::store::RunRequest;
use crate::{Schedule, Schedules};

pub(super) fn router() -> OpenApiRouter<AdminState> {
    OpenApiRouter::new()
        .routes(routes!(upsert_instance, remove_instance))
        .routes(routes!(pause_instance))
        .routes(routes!(resume_instance))
        .routes(routes!(trigger_instance))
}

/// An instance to make or change.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct InstanceRequest {
    /// Its cron expression, in the task attribute's syntax (5 or 6 fields, or an alias).
    #[schema(min_length = 1)]
    cron: String,
    /// The IANA zone its cron is read in (default `UTC`).
    timezone: Option<String>,
    /// Its arguments, any JSON value of at most 64 KiB as text, read by the handler with
    /// `ctx.args()` (none: JSON `null`).
    args: Option<serde_json::Value>,
    /// Its own owners, over its task's (see [`InstanceTagsRequest`]).
    #[serde(flatten)]
    tags: InstanceTagsRequest,
}

/// An instance's own owners, labels and limit, as the write routes take them (each absent:
/// its task's).
#[derive(Debug, Default, Deserialize, ToSchema)]
pub(super) struct InstanceTagsRequest {
    /// Its own owners, which its events carry and its alerts are routed by in place of its
    /// task's (checked as a config entry's: at most 100, none blank, padded, over 256
    /// characters or listed twice). Absent or empty: its task's.
    owners: Option<Vec<String>>,
    /// Its own labels, over its task's in its events (its own win on a key; checked as a config
    /// entry's). Absent or empty: none of its own.
    labels: Option<std::collections::BTreeMap<String, String>>,
    /// The limit shared by tasks its runs hold in place of its task's (1 to 64 ASCII letters,
    /// digits, `_`, `.`, `:`, `-`; one no document declares holds its ticks waiting). Absent:
    /// its task's.
    limit: Option<String>,
    /// Its own service levels in place of its task's: the shape of a config entry's `sla`
    /// block (`start_within`, `warn_after`, `succeed_by`, `alert_after_failures`,
    /// `remind_every`), checked as it is. Absent: its task's.
    #[schema(value_type = Option<Object>)]
    sla: Option<crate::config::TaskSla>,
    /// Its own calendar in place of its task's: the name of one of the `calendars` of the config
    /// document this node applied (its rules written with it; a name the document does not
    /// have is a 400 naming it). Absent: its task's.
    calendar: Option<String>,
}

impl InstanceTagsRequest {
    /// `schedule` with these owners, labels and limit, where given.
    pub(super) fn apply(self, mut schedule: Schedule) -> Schedule {
        if let Some(owners) = self.owners {
            schedule = schedule.owners(owners);
        }
        if let Some(labels) = self.labels {
            schedule = schedule.labels(labels);
        }
        if let Some(limit) = self.limit {
            schedule = schedule.limit(limit);
        }
        if let Some(sla) = self.sla {
            schedule = schedule.sla(sla);
        }
        if let Some(calendar) = self.calendar {
            schedule = schedule.calendar(calendar);
        }
        schedule
    }
}

/// Instance `key` of `task` as `request` asks for it.
fn schedule_of(task: &str, key: &str, request: InstanceRequest) -> Schedule {
    let schedule = Schedule::new(task, key).cron(request.cron);
    request
        .tags
        .apply(with_zone_and_args(schedule, request.timezone, request.args))
}

/// `schedule` in `zone` with `args`, where given.
pub(super) fn with_zone_and_args(
    mut schedule: Schedule,
    zone: Option<String>,
    args: Option<serde_json::Value>,
) -> Schedule {
    if let Some(zone) = zone {
        schedule = schedule.timezone(zone);
    }
    if let Some(args) = args {
        schedule = schedule.args(args);
    }
    schedule
}

/// The handle that writes instances for `actor`: of `task` if this node registers it.
pub(super) fn schedules(state: &AdminState, task: &str, actor: &Actor) -> Schedules {
    let registered: std::sync::Arc<[String]> = match state.engine.task_settings(task) {
        Some(_) => std::sync::Arc::from(vec![task.to_owned()]),
        None => std::sync::Arc::from(Vec::new()),
    };
    Schedules::for_operator(state.engine.store().clone(), Some(registered), actor)
        .with_documents(state.engine.config_documents())
}

/// An instance refused, as an answer: what was asked cannot be (400), the task is not known
/// here (404), or has no instances or owns the key in its config (409); the reason quoted from
/// the refusal.
pub(super) fn refused(e: crate::Error) -> ApiError {
    match e {
        crate::Error::Instance(refusal) => {
            let message = crate::bounds::printable_up_to(&refusal.to_string(), 500);
            match refusal {
                InstanceRefusal::UnknownTask { .. } | InstanceRefusal::TaskNotStored { .. } => {
                    ApiError::not_found(message)
                }
                InstanceRefusal::Sharded { .. } | InstanceRefusal::ConfigOwned { .. } => {
                    ApiError::conflict(message)
                }
                _ => ApiError::bad_request(message),
            }
        }
        other => other.into(),
    }
}

/// A 404 unless instance `key` of `task` exists (a removed one does not): one row read.
async fn existing(state: &AdminState, task: &str, key: &str) -> Result<(), ApiError> {
    match state.engine.store().instance(task, key).await? {
        Some(_) => Ok(()),
        None => Err(no_instance(task, key)),
    }
}

/// Instance `key` of `task` as the read side shows it (one row read), or a 404.
async fn current(state: &AdminState, task: &str, key: &str) -> Result<InstanceView, ApiError> {
    let query = crate::store::InstanceQuery::of(task, 1).key(key);
    let found = state.engine.store().instance_states(&query).await?;
    let Some(instance) = found.into_iter().next() else {
        return Err(no_instance(task, key));
    };
    Ok(InstanceView::of(&state.engine, instance, None, Utc::now()))
}

fn no_instance(task: &str, key: &str) -> ApiError {
    ApiError::not_found(format!(
        "task `{}` has no instance `{}`",
        crate::bounds::printable(task),
        crate::bounds::printable(key)
    ))
}

/// Makes instance `key` of the task, or changes it in place (its history stays; a changed cron
/// or zone moves its next run to the new schedule's first tick after now, changed arguments
/// apply from its next run). Refused, with the reason, as `Schedules::upsert` refuses: a task
/// this node does not register or the store does not have (404), a task with shards (409), a
/// bad key, cron or zone, arguments over 64 KiB (400). Audited (`instance upsert`, the
/// arguments' secrets hidden).
#[utoipa::path(put, path = "/api/tasks/{name}/instances/{key}", tag = "instances",
    security(("bearer" = [])),
    params(("name" = String, Path, description = "The task's name"),
        ("key" = String, Path, description = "The instance's key: 1 to 128 ASCII letters, digits, `_`, `.`, `:`, `-`"),
        ("X-Scheduler-Actor" = Option<String>, Header, description = "Who asks, for the audit trail")),
    request_body = InstanceRequest,
    responses(
        (status = 200, description = "The instance as written", body = InstanceView),
        (status = 409, description = "The task has shards or runs on every node", body = ErrorBody),
        MutationErrors,
    ))]
async fn upsert_instance(
    Operator(actor): Operator,
    State(state): State<AdminState>,
    Path((task, key)): Path<(String, String)>,
    Json(body): Json<InstanceRequest>,
) -> Result<axum::Json<InstanceView>, ApiError> {
    let schedule = schedule_of(&task, &key, body);
    let written = schedules(&state, &task, &actor)
        .upsert(schedule)
        .await
        .map_err(refused)?;
    tracing::info!(task = %task, key = %key, cron = %written.cron, timezone = %written.timezone,
        args = %redact_args(&written.args), actor = %actor.name, source = %actor.source,
        "instance upserted through the admin API");
    current(&state, &task, &key).await.map(axum::Json)
}

/// What removing an instance did.
#[derive(Debug, Serialize, ToSchema)]
struct RemoveResult {
    /// The task.
    task: String,
    /// The key.
    key: String,
    /// Always true (an unknown instance is a 404).
    removed: bool,
}

/// Removes instance `key` of the task: none of its ticks starts after this answers; a run of it
/// in flight finishes and is recorded. Audited (`instance remove`).
#[utoipa::path(delete, path = "/api/tasks/{name}/instances/{key}", tag = "instances",
    security(("bearer" = [])),
    params(("name" = String, Path, description = "The task's name"),
        ("key" = String, Path, description = "The instance's key"),
        ("X-Scheduler-Actor" = Option<String>, Header, description = "Who asks, for the audit trail")),
    responses((status = 200, description = "Removed", body = RemoveResult), MutationErrors))]
async fn remove_instance(
    Operator(actor): Operator,
    State(state): State<AdminState>,
    Path((task, key)): Path<(String, String)>,
) -> Result<axum::Json<RemoveResult>, ApiError> {
    let removed = Schedules::for_operator(state.engine.store().clone(), None, &actor)
        .remove(&task, &key)
        .await
        .map_err(refused)?;
    if !removed {
        return Err(no_instance(&task, &key));
    }
    tracing::info!(task = %task, key = %key, actor = %actor.name, source = %actor.source,
        "instance removed through the admin API");
    Ok(axum::Json(RemoveResult { task, key, removed }))
}

/// Why and how long to pause an instance.
#[derive(Debug, Deserialize, ToSchema)]
struct InstancePauseRequest {
    /// Why (shown everywhere the pause is), 1 to 500 characters.
    #[schema(min_length = 1, max_length = 500, pattern = r"\S")]
    reason: String,
    /// When the pause ends by itself (in the future, RFC 3339); none: until resumed.
    #[schema(min_length = 20)]
    until: Option<DateTime<Utc>>,
}

/// Pauses instance `key` of the task alone, cluster-wide: none of its ticks runs until resumed
/// or `until` (its task and the other instances go on). Survives reconciles. Audited.
#[utoipa::path(post, path = "/api/tasks/{name}/instances/{key}/pause", tag = "instances",
    security(("bearer" = [])),
    params(("name" = String, Path, description = "The task's name"),
        ("key" = String, Path, description = "The instance's key"),
        ("X-Scheduler-Actor" = Option<String>, Header, description = "Who asks, for the audit trail")),
    request_body = InstancePauseRequest,
    responses(
        (status = 200, description = "Paused: the instance as it is now", body = InstanceView),
        (status = 409, description = "`until` is already past", body = ErrorBody),
        MutationErrors,
    ))]
async fn pause_instance(
    Operator(actor): Operator,
    State(state): State<AdminState>,
    Path((task, key)): Path<(String, String)>,
    Json(body): Json<InstancePauseRequest>,
) -> Result<axum::Json<InstanceView>, ApiError> {
    let reason = pause_reason(&body.reason, body.until)?;
    existing(&state, &task, &key).await?;
    let row = row_name(&task, &key);
    if !operate::pause(
        state.engine.store().as_ref(),
        &row,
        &actor,
        reason,
        body.until,
    )
    .await?
    {
        return Err(no_instance(&task, &key));
    }
    tracing::info!(task = %task, key = %key, actor = %actor.name, source = %actor.source, reason,
        "instance paused through the admin API");
    current(&state, &task, &key).await.map(axum::Json)
}

/// Ends the pause of instance `key` of the task; the ticks due meanwhile are recorded as
/// skipped (`paused`), its next run is its first tick from now. Audited.
#[utoipa::path(post, path = "/api/tasks/{name}/instances/{key}/resume", tag = "instances",
    security(("bearer" = [])),
    params(("name" = String, Path, description = "The task's name"),
        ("key" = String, Path, description = "The instance's key"),
        ("X-Scheduler-Actor" = Option<String>, Header, description = "Who asks, for the audit trail")),
    responses((status = 200, description = "Resumed (or was not paused): the instance as it is now", body = InstanceView),
        MutationErrors))]
async fn resume_instance(
    Operator(actor): Operator,
    State(state): State<AdminState>,
    Path((task, key)): Path<(String, String)>,
) -> Result<axum::Json<InstanceView>, ApiError> {
    existing(&state, &task, &key).await?;
    let row = row_name(&task, &key);
    operate::resume(state.engine.store().as_ref(), &row, &actor).await?;
    tracing::info!(task = %task, key = %key, actor = %actor.name, source = %actor.source,
        "instance resumed through the admin API");
    current(&state, &task, &key).await.map(axum::Json)
}

/// A manual run's arguments, if it overrides its row's own.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct TriggerRequest {
    /// Arguments for this run only, in place of the instance's (or the task's) own: any JSON
    /// value of at most 64 KiB as text, read by the handler with `ctx.args()`, recorded with the
    /// run (`args_override`). None (or no body): its own.
    args: Option<serde_json::Value>,
}

/// What asking for a run did.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct TriggerResult {
    /// The task.
    task: String,
    /// The instance's key (none: the task's own run).
    #[serde(skip_serializing_if = "Option::is_none")]
    key: Option<String>,
    /// `queued`, or `already_queued` (a manual run was waiting already; this one's arguments
    /// are not used).
    outcome: &'static str,
    /// The arguments it runs with in place of its own, secrets hidden (none: its own).
    args: Option<serde_json::Value>,
}

/// Asks for a manual run of `task` (its own row, or instance `key`'s) with `body`'s arguments.
pub(super) async fn queue_run(
    state: &AdminState,
    actor: &Actor,
    task: &str,
    key: Option<&str>,
    body: Option<TriggerRequest>,
) -> Result<(StatusCode, axum::Json<TriggerResult>), ApiError> {
    let args = match body.and_then(|b| b.args) {
        None => None,
        Some(value) => Some(
            crate::instance::check_args(&value)
                .map_err(|e| ApiError::bad_request(format!("`args`: {e}")))?,
        ),
    };
    let row = match key {
        Some(key) => {
            existing(state, task, key).await?;
            row_name(task, key)
        }
        None => task.to_owned(),
    };
    let store = state.engine.store().as_ref();
    let outcome = match operate::trigger_with(store, &row, args.as_deref(), actor).await? {
        RunRequest::Queued => "queued",
        RunRequest::AlreadyQueued => "already_queued",
        RunRequest::NotFound => return Err(ApiError::no_task(task)),
        RunRequest::Paused(p) => {
            return Err(ApiError::conflict(format!(
                "`{}` is paused by {} ({}); resume it first",
                crate::bounds::printable(&row),
                p.by,
                p.reason
            )));
        }
    };
    let shown = args.as_deref().map(|text| {
        serde_json::from_str(text).map_or(serde_json::Value::Null, |v| redact_args(&v))
    });
    tracing::info!(task = %task, key = ?key, args = ?shown.as_ref().map(ToString::to_string),
        actor = %actor.name, source = %actor.source, "run asked for through the admin API");
    Ok((
        StatusCode::ACCEPTED,
        axum::Json(TriggerResult {
            task: task.to_owned(),
            key: key.map(str::to_owned),
            outcome,
            args: shown,
        }),
    ))
}

/// Runs instance `key` of the task now, once, through the same locking as any run (after a
/// running one ends), recorded as `manual`; with `{"args": ...}` it runs with those arguments
/// in place of the instance's own, for that run only (its next scheduled run uses its own).
/// Audited.
#[utoipa::path(post, path = "/api/tasks/{name}/instances/{key}/trigger", tag = "instances",
    security(("bearer" = [])),
    params(("name" = String, Path, description = "The task's name"),
        ("key" = String, Path, description = "The instance's key"),
        ("X-Scheduler-Actor" = Option<String>, Header, description = "Who asks, for the audit trail")),
    request_body(content = Option<TriggerRequest>, description = "Optional: arguments for this run only"),
    responses(
        (status = 202, description = "Queued", body = TriggerResult),
        (status = 409, description = "The instance is paused", body = ErrorBody),
        MutationErrors,
    ))]
async fn trigger_instance(
    Operator(actor): Operator,
    State(state): State<AdminState>,
    Path((task, key)): Path<(String, String)>,
    MaybeJson(body): MaybeJson<TriggerRequest>,
) -> Result<(StatusCode, axum::Json<TriggerResult>), ApiError> {
    queue_run(&state, &actor, &task, Some(&key), body).await
}
