//! Operator actions: trigger a task, pause it with a reason, resume it; cancel a running run.
//! Each is audited (see [`crate::operate`]).

use axum::extract::State;
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::instances_write::{TriggerRequest, TriggerResult, queue_run};
use super::refusals::{MutationErrors, pause_reason};
use super::tasks::one_state;
use super::views::{PauseView, RunView};
use crate::admin::auth::Operator;
use crate::admin::error::{ApiError, ErrorBody, Json, MaybeJson, Path};
use crate::admin::state::AdminState;
use crate::operate;
use crate::store::CancelRequest;

pub(super) fn router() -> OpenApiRouter<AdminState> {
    OpenApiRouter::new()
        .routes(routes!(trigger_task))
        .routes(routes!(pause_task))
        .routes(routes!(resume_task))
        .routes(routes!(cancel_run))
}

/// Runs the task now, through the same locking as any run (after a running one ends); with
/// `{"args": ...}` its handler reads those arguments in place of the task's own, for that run
/// only (recorded with the run as `args_override`). Audited.
#[utoipa::path(post, path = "/api/tasks/{name}/trigger", tag = "tasks",
    security(("bearer" = [])),
    params(("name" = String, Path, description = "The task's name"),
        ("X-Scheduler-Actor" = Option<String>, Header, description = "Who asks, for the audit trail")),
    request_body(content = Option<TriggerRequest>, description = "Optional: arguments for this run only"),
    responses(
        (status = 202, description = "Queued", body = TriggerResult),
        (status = 409, description = "The task is paused", body = ErrorBody),
        MutationErrors,
    ))]
async fn trigger_task(
    Operator(actor): Operator,
    State(state): State<AdminState>,
    Path(name): Path<String>,
    MaybeJson(body): MaybeJson<TriggerRequest>,
) -> Result<(StatusCode, axum::Json<TriggerResult>), ApiError> {
    queue_run(&state, &actor, &name, None, body).await
}

/// Why and how long to pause.
#[derive(Debug, Deserialize, ToSchema)]
struct PauseRequest {
    /// Why (shown everywhere the pause is), 1 to 500 characters.
    #[schema(min_length = 1, max_length = 500, pattern = r"\S")]
    reason: String,
    /// When the pause ends by itself (in the future, RFC 3339); none: until resumed.
    #[schema(min_length = 20)]
    until: Option<DateTime<Utc>>,
}

/// A pause in force.
#[derive(Debug, Serialize, ToSchema)]
struct PauseResult {
    /// The task.
    task: String,
    /// The pause.
    pause: PauseView,
}

/// Pauses the task cluster-wide, and every instance of it not paused on its own: no new runs
/// until resumed or `until`. Survives config reconciles. Audited.
#[utoipa::path(post, path = "/api/tasks/{name}/pause", tag = "tasks",
    security(("bearer" = [])),
    params(("name" = String, Path, description = "The task's name"),
        ("X-Scheduler-Actor" = Option<String>, Header, description = "Who asks, for the audit trail")),
    request_body = PauseRequest,
    responses(
        (status = 200, description = "Paused", body = PauseResult),
        (status = 409, description = "`until` is already past", body = ErrorBody),
        MutationErrors,
    ))]
async fn pause_task(
    Operator(actor): Operator,
    State(state): State<AdminState>,
    Path(name): Path<String>,
    Json(body): Json<PauseRequest>,
) -> Result<axum::Json<PauseResult>, ApiError> {
    let reason = pause_reason(&body.reason, body.until)?;
    if !operate::pause(
        state.engine.store().as_ref(),
        &name,
        &actor,
        reason,
        body.until,
    )
    .await?
    {
        return Err(ApiError::no_task(&name));
    }
    tracing::info!(task = %name, actor = %actor.name, source = %actor.source, reason, "task paused through the admin API");
    let pause = one_state(&state.engine, &name)
        .await?
        .pause
        .ok_or_else(|| ApiError::conflict(format!("task `{name}` was resumed meanwhile")))?;
    Ok(axum::Json(PauseResult {
        task: name,
        pause: pause.into(),
    }))
}

/// What resuming did.
#[derive(Debug, Serialize, ToSchema)]
struct ResumeResult {
    /// The task.
    task: String,
    /// The pause that ended (none: the task was not paused).
    ended: Option<PauseView>,
}

/// Ends the task's pause, and that of the instances it held; the ticks due meanwhile are
/// recorded as skipped (`paused`) on each row. Audited.
#[utoipa::path(post, path = "/api/tasks/{name}/resume", tag = "tasks",
    security(("bearer" = [])),
    params(("name" = String, Path, description = "The task's name"),
        ("X-Scheduler-Actor" = Option<String>, Header, description = "Who asks, for the audit trail")),
    responses((status = 200, description = "Resumed (or was not paused)", body = ResumeResult), MutationErrors))]
async fn resume_task(
    Operator(actor): Operator,
    State(state): State<AdminState>,
    Path(name): Path<String>,
) -> Result<axum::Json<ResumeResult>, ApiError> {
    let ended = operate::resume(state.engine.store().as_ref(), &name, &actor).await?;
    if ended.is_none() {
        one_state(&state.engine, &name).await?;
    }
    tracing::info!(task = %name, actor = %actor.name, source = %actor.source, "task resumed through the admin API");
    Ok(axum::Json(ResumeResult {
        task: name,
        ended: ended.map(PauseView::from),
    }))
}

/// What asking to cancel a run did.
#[derive(Debug, Serialize, ToSchema)]
struct CancelResult {
    /// `requested`, or `already_requested` (somebody asked before: `run` says who and when).
    outcome: &'static str,
    /// The run, as it is now (still `running`: its node stops it).
    run: RunView,
    /// How long its handler has to return after it is told before it is stopped by force.
    grace_seconds: u64,
}

/// Cancels a running run, on whichever node runs it: the handler is asked to stop at once
/// (`ctx.cancelled()`) and stopped by force after the grace. The run is recorded `cancelled`
/// with who asked, and its tick is not run again; a handler that returns `Ok` all the same is
/// `succeeded`. Audited.
#[utoipa::path(post, path = "/api/runs/{id}/cancel", tag = "runs",
    security(("bearer" = [])),
    params(("id" = i64, Path, description = "The run's id"),
        ("X-Scheduler-Actor" = Option<String>, Header, description = "Who asks, for the audit trail")),
    responses(
        (status = 202, description = "Asked to stop (or asked before)", body = CancelResult),
        (status = 409, description = "The run has ended already", body = ErrorBody),
        MutationErrors,
    ))]
async fn cancel_run(
    Operator(actor): Operator,
    State(state): State<AdminState>,
    Path(id): Path<i64>,
) -> Result<(StatusCode, axum::Json<CancelResult>), ApiError> {
    let (outcome, run) = match operate::cancel(state.engine.store().as_ref(), id, &actor).await? {
        CancelRequest::Requested(run) => ("requested", run),
        CancelRequest::AlreadyRequested(run) => ("already_requested", run),
        CancelRequest::Ended(run) => {
            return Err(ApiError::conflict(format!(
                "run {id} of `{}` has ended already ({}): nothing to cancel",
                run.task_name, run.status
            )));
        }
        CancelRequest::NotFound => return Err(ApiError::not_found(format!("no run {id}"))),
    };
    tracing::info!(run_id = id, task = %run.task_name, node = %run.node_id, actor = %actor.name, source = %actor.source, "run cancel asked for through the admin API");
    Ok((
        StatusCode::ACCEPTED,
        axum::Json(CancelResult {
            outcome,
            run: run.into(),
            grace_seconds: operate::CANCEL_GRACE.as_secs(),
        }),
    ))
}
