//! Run history: filtered (by task, an instance's key, status, trigger, start), cursor-paginated;
//! one run with its log.

use axum::extract::State;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::refusals::{ReadErrors, in_range};
use super::views::{RunView, run_starts};
use crate::admin::auth::Reader;
use crate::admin::error::{ApiError, ErrorBody, Path, Query};
use crate::admin::state::AdminState;
use crate::bounds;
use crate::store::{RunQuery, RunStatus, Trigger};

const DEFAULT_LIMIT: u32 = 50;

pub(super) fn router() -> OpenApiRouter<AdminState> {
    OpenApiRouter::new()
        .routes(routes!(list_runs))
        .routes(routes!(get_run))
}

/// A run's status, as a filter.
#[derive(Debug, Clone, Copy, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
enum StatusFilter {
    Running,
    Succeeded,
    Failed,
    TimedOut,
    Interrupted,
    Lost,
    Cancelled,
}

impl From<StatusFilter> for RunStatus {
    fn from(s: StatusFilter) -> Self {
        match s {
            StatusFilter::Running => RunStatus::Running,
            StatusFilter::Succeeded => RunStatus::Succeeded,
            StatusFilter::Failed => RunStatus::Failed,
            StatusFilter::TimedOut => RunStatus::TimedOut,
            StatusFilter::Interrupted => RunStatus::Interrupted,
            StatusFilter::Lost => RunStatus::Lost,
            StatusFilter::Cancelled => RunStatus::Cancelled,
        }
    }
}

/// What started a run, as a filter.
#[derive(Debug, Clone, Copy, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
enum TriggerFilter {
    Schedule,
    Retry,
    Manual,
    Backfill,
}

impl From<TriggerFilter> for Trigger {
    fn from(t: TriggerFilter) -> Self {
        match t {
            TriggerFilter::Schedule => Trigger::Schedule,
            TriggerFilter::Retry => Trigger::Retry,
            TriggerFilter::Manual => Trigger::Manual,
            TriggerFilter::Backfill => Trigger::Backfill,
        }
    }
}

/// Which runs.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct RunsQuery {
    /// Only this task's runs.
    task: Option<String>,
    /// Only the runs of the task's instance with this key (with `task`).
    key: Option<String>,
    /// Only runs with this status.
    #[param(inline)]
    status: Option<StatusFilter>,
    /// Only runs started so.
    #[param(inline)]
    trigger: Option<TriggerFilter>,
    /// Only runs that started at or after this instant (RFC 3339).
    since: Option<DateTime<Utc>>,
    /// Only runs that started before this instant (RFC 3339).
    until: Option<DateTime<Utc>>,
    /// The `next_cursor` of the previous page.
    #[param(minimum = 1)]
    cursor: Option<i64>,
    /// Runs per page, 1 to 500 (default 50).
    #[param(minimum = 1, maximum = 500)]
    limit: Option<u32>,
}

/// A page of runs, newest first.
#[derive(Debug, Serialize, ToSchema)]
struct RunPage {
    /// The runs.
    runs: Vec<RunView>,
    /// Pass as `cursor` for the next page; none on the last page.
    next_cursor: Option<i64>,
}

/// Runs, newest first, filtered by task, status, trigger and start time; cursor-paginated.
#[utoipa::path(get, path = "/api/runs", tag = "runs",
    security((), ("bearer" = [])),
    params(RunsQuery),
    responses((status = 200, description = "A page of runs", body = RunPage), ReadErrors))]
async fn list_runs(
    _: Reader,
    State(state): State<AdminState>,
    Query(q): Query<RunsQuery>,
) -> Result<axum::Json<RunPage>, ApiError> {
    let limit = in_range(bounds::API_LIST_LIMIT, "limit", q.limit, DEFAULT_LIMIT)?;
    if q.cursor.is_some_and(|c| c < 1) {
        return Err(ApiError::bad_request("`cursor` must be a positive run id"));
    }
    let mut query = RunQuery::latest(limit).between(q.since, q.until);
    match (q.task, q.key) {
        (Some(task), key) => {
            query = query.task(task);
            if let Some(key) = key {
                query = query.key(key);
            }
        }
        (None, Some(_)) => {
            return Err(ApiError::bad_request(
                "`key` names an instance of a task: give `task` too",
            ));
        }
        (None, None) => {}
    }
    if let Some(status) = q.status {
        query = query.status(status.into());
    }
    if let Some(trigger) = q.trigger {
        query = query.trigger(trigger.into());
    }
    if let Some(cursor) = q.cursor {
        query = query.before(cursor);
    }
    let runs = state.engine.store().runs(&query).await?;
    let next_cursor = (runs.len() == limit as usize)
        .then(|| runs.last().map(|r| r.id))
        .flatten();
    // Each run placed at its tick's start, as a task's detail places its runs.
    let starts = run_starts(&state.engine, &[], &runs).await?;
    Ok(axum::Json(RunPage {
        runs: runs
            .into_iter()
            .map(|run| RunView::placed(run, &starts))
            .collect(),
        next_cursor,
    }))
}

/// What a run's handler logged.
#[derive(Debug, Serialize, ToSchema)]
struct LogView {
    /// The log text.
    text: String,
    /// Its lines.
    lines: i64,
    /// Whether the capture stopped at its bound.
    truncated: bool,
}

/// One run with its log.
#[derive(Debug, Serialize, ToSchema)]
struct RunDetail {
    /// The run.
    run: RunView,
    /// Its log.
    log: LogView,
}

/// One run with what its handler logged.
#[utoipa::path(get, path = "/api/runs/{id}", tag = "runs",
    security((), ("bearer" = [])),
    params(("id" = i64, Path, description = "The run's id")),
    responses(
        (status = 200, description = "The run", body = RunDetail),
        (status = 404, description = "No such run", body = ErrorBody),
        ReadErrors,
    ))]
async fn get_run(
    _: Reader,
    State(state): State<AdminState>,
    Path(id): Path<i64>,
) -> Result<axum::Json<RunDetail>, ApiError> {
    let store = &state.engine.store();
    let run = store
        .run(id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("no run {id}")))?;
    let chunks = store.run_log(id).await?;
    let log = LogView {
        text: chunks.iter().map(|c| c.text.as_str()).collect(),
        lines: chunks.iter().map(|c| i64::from(c.lines)).sum(),
        truncated: chunks.iter().any(|c| c.truncated),
    };
    let starts = run_starts(&state.engine, &[], std::slice::from_ref(&run)).await?;
    Ok(axum::Json(RunDetail {
        run: RunView::placed(run, &starts),
        log,
    }))
}
