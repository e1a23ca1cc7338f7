//! Backfills: run a range of a task's past ticks again (dry run first), follow their progress,
//! cancel them. Audited (see [`crate::operate::backfill`]).

use axum::extract::State;
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::refusals::{MutationErrors, ReadErrors, in_range};
use crate::admin::auth::{Operator, Reader};
use crate::admin::error::{ApiError, ErrorBody, Json, Path, Query};
use crate::admin::state::AdminState;
use crate::backfill::{BackfillRefusal, BackfillRequest, DEFAULT_MAX_RUNS, parse_bound};
use crate::bounds;
use crate::operate;
use crate::store::{BackfillCancel, BackfillRecord, BackfillTick};

pub(super) fn router() -> OpenApiRouter<AdminState> {
    OpenApiRouter::new()
        .routes(routes!(backfill_task))
        .routes(routes!(list_backfills))
        .routes(routes!(get_backfill))
        .routes(routes!(cancel_backfill))
}

/// What to backfill.
#[derive(Debug, Deserialize, ToSchema)]
struct BackfillBody {
    /// The range's start, inclusive: RFC 3339, or a date or date and time without an offset
    /// read in the task's zone (`2026-03-01`, `2026-03-01T06:00`).
    from: String,
    /// The range's end, inclusive (same forms). Ticks after now are left to the schedule.
    to: String,
    /// Every tick of the range, not only those without a succeeded run (default false).
    #[serde(default)]
    all: bool,
    /// List what would run; write nothing (default false).
    #[serde(default)]
    dry_run: bool,
    /// Refuse a backfill of more runs than this (default 1000; 1 to 1000000). Runs, not ticks:
    /// a tick of a task with N shards (or of an instance of one) is N runs, one per shard.
    #[schema(minimum = 1, maximum = 1_000_000)]
    max_runs: Option<u32>,
    /// Runs at once: 1 (the default and only value allowed: a task never overlaps itself).
    #[schema(minimum = 1, maximum = 1)]
    concurrency: Option<u32>,
    /// The least time between the starts of two of its runs, in milliseconds (default 1000;
    /// 0 to 86400000, one day).
    #[schema(minimum = 0, maximum = 86_400_000)]
    pace_ms: Option<u64>,
}

/// What a backfill runs (or, for a dry run, would run).
#[derive(Debug, Serialize, ToSchema)]
struct BackfillPlanView {
    /// The backfill's id (none: a dry run, or nothing to run).
    id: Option<i64>,
    /// The task.
    task: String,
    /// Its zone: the ticks are its schedule's in it.
    timezone: String,
    /// The range's start.
    from: DateTime<Utc>,
    /// The range's end.
    to: DateTime<Utc>,
    /// Whether nothing was written.
    dry_run: bool,
    /// Ticks of the schedule in the range (up to now).
    ticks_in_range: usize,
    /// Of those, ticks left out: they already have a succeeded run (0 with `all`).
    already_succeeded: usize,
    /// How many runs: the ticks listed, each once per shard (a task with N shards, or an
    /// instance of one: N runs a tick). What `max_runs` counts.
    runs: usize,
    /// The ticks to run, in order (each handler's `ctx.scheduled_at()`).
    ticks: Vec<DateTime<Utc>>,
}

/// The runs of a backfill (each tick once per shard), counted by state.
#[derive(Debug, Serialize, ToSchema)]
struct ProgressView {
    /// Runs in the backfill: its ticks, each once per shard.
    total: i64,
    /// Not run yet.
    pending: i64,
    /// Running now.
    running: i64,
    /// Succeeded.
    succeeded: i64,
    /// Ended otherwise (failed, timed out, interrupted, lost, cancelled run).
    failed: i64,
    /// Never run: the backfill was cancelled first.
    cancelled: i64,
}

/// A backfill and its progress.
#[derive(Debug, Serialize, ToSchema)]
struct BackfillView {
    /// Its id.
    id: i64,
    /// The task.
    task: String,
    /// `running` (ticks pending or running), `done` or `cancelled`.
    state: &'static str,
    /// The range's start.
    from: DateTime<Utc>,
    /// The range's end.
    to: DateTime<Utc>,
    /// Every tick, not only those without a succeeded run.
    all: bool,
    /// The cap it was checked against.
    max_runs: i64,
    /// Runs at once.
    concurrency: i64,
    /// The least time between the starts of two of its runs, in milliseconds.
    pace_ms: i64,
    /// Who asked.
    requested_by: String,
    /// When.
    requested_at: DateTime<Utc>,
    /// When it was cancelled.
    cancelled_at: Option<DateTime<Utc>>,
    /// Who cancelled it.
    cancelled_by: Option<String>,
    /// Its ticks by state.
    progress: ProgressView,
}

impl From<BackfillRecord> for BackfillView {
    fn from(b: BackfillRecord) -> Self {
        let state = b.state();
        let p = b.progress;
        BackfillView {
            id: b.id,
            task: b.task_name,
            state,
            from: b.from,
            to: b.to,
            all: b.all_ticks,
            max_runs: b.max_runs,
            concurrency: b.concurrency,
            pace_ms: b.pace_ms,
            requested_by: b.requested_by,
            requested_at: b.requested_at,
            cancelled_at: b.cancelled_at,
            cancelled_by: b.cancelled_by,
            progress: ProgressView {
                total: p.total,
                pending: p.pending,
                running: p.running,
                succeeded: p.succeeded,
                failed: p.failed,
                cancelled: p.cancelled,
            },
        }
    }
}

/// One tick of a backfill, on one shard: a task with N shards (or an instance of one) has N
/// entries for each tick, one per shard.
#[derive(Debug, Serialize, ToSchema)]
struct BackfillTickView {
    /// The tick.
    tick: DateTime<Utc>,
    /// The shard of the tick this entry runs, `0..shard_total` (as the run's `shard_index`; 0
    /// for a task without shards).
    shard_index: u32,
    /// The runs each tick of the backfill makes: the task's shards (1 without shards, and for
    /// a broadcast task, whose backfill runs each tick once).
    shard_total: u32,
    /// The run that served it (none: not run).
    run_id: Option<i64>,
    /// That run's status.
    run_status: Option<String>,
}

impl From<BackfillTick> for BackfillTickView {
    fn from(t: BackfillTick) -> Self {
        BackfillTickView {
            tick: t.tick,
            shard_index: t.shard_index,
            shard_total: t.shard_total,
            run_id: t.run_id,
            run_status: t.run_status.map(|s| s.as_str().to_owned()),
        }
    }
}

/// A backfill with its ticks.
#[derive(Debug, Serialize, ToSchema)]
struct BackfillDetail {
    /// The backfill.
    backfill: BackfillView,
    /// Its ticks in order.
    ticks: Vec<BackfillTickView>,
}

/// Runs the task's past ticks in a range again: by default only those without a succeeded run,
/// every one with `all`; `dry_run` lists them and writes nothing. The nodes run them one at a
/// time through the task's lock (never beside its own runs), paced, with trigger `backfill`.
/// Audited.
#[utoipa::path(post, path = "/api/tasks/{name}/backfill", tag = "tasks",
    security(("bearer" = [])),
    params(("name" = String, Path, description = "The task's name"),
        ("X-Scheduler-Actor" = Option<String>, Header, description = "Who asks, for the audit trail")),
    request_body = BackfillBody,
    responses(
        (status = 200, description = "A dry run, or nothing to run: what would run", body = BackfillPlanView),
        (status = 201, description = "Recorded: the nodes run it", body = BackfillPlanView),
        (status = 409, description = "Another backfill of the task still has ticks to run", body = ErrorBody),
        MutationErrors,
    ))]
async fn backfill_task(
    Operator(actor): Operator,
    State(state): State<AdminState>,
    Path(name): Path<String>,
    Json(body): Json<BackfillBody>,
) -> Result<(StatusCode, axum::Json<BackfillPlanView>), ApiError> {
    let store = state.engine.store();
    let Some(task) = store
        .task_states(Some(&name))
        .await?
        .into_iter()
        .find(|t| t.name == name)
    else {
        return Err(ApiError::no_task(&name));
    };
    let zone = crate::schedule::parse_timezone(&task.timezone)
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
    let from =
        parse_bound(&body.from, zone).map_err(|e| ApiError::bad_request(format!("`from`: {e}")))?;
    let to =
        parse_bound(&body.to, zone).map_err(|e| ApiError::bad_request(format!("`to`: {e}")))?;
    let max_runs = bounds::BACKFILL_MAX_RUNS
        .check("max_runs", body.max_runs.unwrap_or(DEFAULT_MAX_RUNS))
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
    let mut request = BackfillRequest::new(&name, from, to)
        .all(body.all)
        .dry_run(body.dry_run)
        .max_runs(max_runs)
        .concurrency(body.concurrency.unwrap_or(1));
    if let Some(pace) = body.pace_ms {
        let pace = bounds::BACKFILL_PACE
            .check_millis("pace_ms", pace)
            .map_err(|e| ApiError::bad_request(e.to_string()))?;
        request = request.pace(pace);
    }
    let plan = match operate::backfill(store.as_ref(), &request, &actor).await? {
        Ok(plan) => plan,
        Err(BackfillRefusal::UnknownTask(_)) => {
            return Err(ApiError::no_task(&name));
        }
        Err(refusal @ BackfillRefusal::Busy(_)) => {
            return Err(ApiError::conflict(refusal.to_string()));
        }
        Err(refusal) => return Err(ApiError::bad_request(refusal.to_string())),
    };
    if let Some(id) = plan.id {
        tracing::info!(task = %name, backfill = id, runs = plan.runs, actor = %actor.name, source = %actor.source, "backfill asked for through the admin API");
    }
    let status = if plan.id.is_some() {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((
        status,
        axum::Json(BackfillPlanView {
            id: plan.id,
            task: plan.task,
            timezone: plan.timezone,
            from: plan.from,
            to: plan.to,
            dry_run: plan.dry_run,
            ticks_in_range: plan.ticks_in_range,
            already_succeeded: plan.already_succeeded,
            runs: plan.runs,
            ticks: plan.ticks,
        }),
    ))
}

/// Which backfills.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct BackfillsQuery {
    /// Only this task's.
    task: Option<String>,
    /// At most this many, 1 to 500 (default 50).
    #[param(minimum = 1, maximum = 500)]
    limit: Option<u32>,
}

/// The newest backfills, newest first, each with its progress.
#[utoipa::path(get, path = "/api/backfills", tag = "tasks",
    security((), ("bearer" = [])),
    params(BackfillsQuery),
    responses((status = 200, description = "Backfills, newest first", body = Vec<BackfillView>), ReadErrors))]
async fn list_backfills(
    _: Reader,
    State(state): State<AdminState>,
    Query(q): Query<BackfillsQuery>,
) -> Result<axum::Json<Vec<BackfillView>>, ApiError> {
    let limit = in_range(bounds::API_LIST_LIMIT, "limit", q.limit, 50)?;
    let list = state
        .engine
        .store()
        .backfills(q.task.as_deref(), limit)
        .await?;
    Ok(axum::Json(list.into_iter().map(Into::into).collect()))
}

/// One backfill with its progress and its ticks (each with the run that served it).
#[utoipa::path(get, path = "/api/backfills/{id}", tag = "tasks",
    security((), ("bearer" = [])),
    params(("id" = i64, Path, description = "The backfill's id")),
    responses(
        (status = 200, description = "The backfill", body = BackfillDetail),
        (status = 404, description = "No such backfill", body = ErrorBody),
        ReadErrors,
    ))]
async fn get_backfill(
    _: Reader,
    State(state): State<AdminState>,
    Path(id): Path<i64>,
) -> Result<axum::Json<BackfillDetail>, ApiError> {
    let Some((record, ticks)) = state.engine.store().backfill(id).await? else {
        return Err(ApiError::not_found(format!("no backfill {id}")));
    };
    Ok(axum::Json(BackfillDetail {
        backfill: record.into(),
        ticks: ticks.into_iter().map(Into::into).collect(),
    }))
}

/// What cancelling a backfill did.
#[derive(Debug, Serialize, ToSchema)]
struct BackfillCancelResult {
    /// The backfill.
    id: i64,
    /// `cancelled`, or `already_over` (cancelled before, or no tick left to run).
    outcome: &'static str,
    /// Ticks that will not run.
    dropped: i64,
    /// Its runs still running: they go on (cancel each with `POST /api/runs/{id}/cancel`).
    running: Vec<i64>,
}

/// Cancels a backfill: its ticks not yet run never run. Its runs still running go on; cancel
/// each through its run. Audited.
#[utoipa::path(post, path = "/api/backfills/{id}/cancel", tag = "tasks",
    security(("bearer" = [])),
    params(("id" = i64, Path, description = "The backfill's id"),
        ("X-Scheduler-Actor" = Option<String>, Header, description = "Who asks, for the audit trail")),
    responses(
        (status = 200, description = "Cancelled, or already over", body = BackfillCancelResult),
        MutationErrors,
    ))]
async fn cancel_backfill(
    Operator(actor): Operator,
    State(state): State<AdminState>,
    Path(id): Path<i64>,
) -> Result<axum::Json<BackfillCancelResult>, ApiError> {
    let result = operate::cancel_backfill(state.engine.store().as_ref(), id, &actor).await?;
    let (outcome, dropped, running) = match result {
        BackfillCancel::Cancelled { dropped, running } => ("cancelled", dropped, running),
        BackfillCancel::AlreadyOver => ("already_over", 0, Vec::new()),
        BackfillCancel::NotFound => return Err(ApiError::not_found(format!("no backfill {id}"))),
    };
    tracing::info!(backfill = id, outcome, actor = %actor.name, source = %actor.source, "backfill cancel asked for through the admin API");
    Ok(axum::Json(BackfillCancelResult {
        id,
        outcome,
        dropped,
        running,
    }))
}
