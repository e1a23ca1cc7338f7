//! The JSON API, one module per resource; views shared by several of them here.

mod actions;
mod backfills;
mod cluster;
mod config;
mod incidents;
mod runs;
mod tasks;
mod ticks;

use chrono::{DateTime, Utc};
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;

use super::AdminState;
use super::error::ErrorBody;
use crate::store::{Pause, RunRecord};

/// `value` (or `default` when absent) checked against `range`: a `400` naming `field` and the
/// range otherwise.
pub(crate) fn in_range(
    range: crate::bounds::CountRange,
    field: &'static str,
    value: Option<u32>,
    default: u32,
) -> Result<u32, super::error::ApiError> {
    range
        .check(field, value.unwrap_or(default))
        .map_err(|e| super::error::ApiError::bad_request(e.to_string()))
}

pub(super) fn router() -> OpenApiRouter<AdminState> {
    OpenApiRouter::new()
        .merge(tasks::router())
        .merge(ticks::router())
        .merge(actions::router())
        .merge(backfills::router())
        .merge(config::router())
        .merge(runs::router())
        .merge(cluster::router())
        .merge(incidents::router())
}

/// One run.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct RunView {
    /// The run's id.
    id: i64,
    /// Its task.
    task: String,
    /// The tick it serves.
    scheduled_at: DateTime<Utc>,
    /// When its handler started, on the database's clock (none: it never started, e.g. handed
    /// over at shutdown before its tick; while it runs, the start its claim planned).
    started_at: Option<DateTime<Utc>>,
    /// When it ended (none while running).
    finished_at: Option<DateTime<Utc>>,
    /// `running`, `succeeded`, `failed`, `timed_out`, `interrupted`, `lost`, `cancelled`.
    status: String,
    /// The node that ran it.
    node_id: String,
    /// Ticks this run served (more than 1 after a misfire collapsed several).
    ticks_collapsed: i64,
    /// The handler's error, if it failed.
    error: Option<String>,
    /// 1 for the first attempt of a tick, then 2, 3 for retries.
    attempt: i32,
    /// `schedule`, `retry`, `manual` or `backfill`.
    trigger: String,
    /// Who asked for a manual run.
    triggered_by: Option<String>,
    /// When an operator asked to cancel it, if anyone did.
    cancel_requested_at: Option<DateTime<Utc>>,
    /// Who asked to cancel it.
    cancel_requested_by: Option<String>,
    /// Which shard of its tick it ran, `0..shard_total` (0 for an ordinary task).
    shard_index: u32,
    /// How many shards its tick has (1: the task is not sharded).
    shard_total: u32,
}

impl From<RunRecord> for RunView {
    fn from(r: RunRecord) -> Self {
        Self {
            id: r.id,
            task: r.task_name,
            scheduled_at: r.scheduled_at,
            started_at: r.started_at,
            finished_at: r.finished_at,
            status: r.status.as_str().to_owned(),
            node_id: r.node_id,
            ticks_collapsed: r.ticks_collapsed,
            error: r.error,
            attempt: r.attempt,
            trigger: r.trigger.as_str().to_owned(),
            triggered_by: r.triggered_by,
            cancel_requested_at: r.cancel_requested_at,
            cancel_requested_by: r.cancel_requested_by,
            shard_index: r.shard_index,
            shard_total: r.shard_total,
        }
    }
}

/// An operator's pause of a task.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct PauseView {
    /// When it was paused.
    at: DateTime<Utc>,
    /// Who paused it.
    by: String,
    /// Why.
    reason: String,
    /// When the pause ends by itself (none: until resumed).
    until: Option<DateTime<Utc>>,
}

impl From<Pause> for PauseView {
    fn from(p: Pause) -> Self {
        Self {
            at: p.at,
            by: p.by,
            reason: p.reason,
            until: p.until,
        }
    }
}

/// The refusals every read may answer with besides its own.
#[derive(utoipa::IntoResponses)]
#[allow(dead_code)]
pub(crate) enum ReadErrors {
    /// A parameter could not be read.
    #[response(status = 400)]
    BadRequest(ErrorBody),
    /// A wrong token, or none beyond loopback.
    #[response(status = 401)]
    Unauthorized(ErrorBody),
    /// Beyond loopback without a configured token.
    #[response(status = 403)]
    Forbidden(ErrorBody),
    /// The store failed.
    #[response(status = 503)]
    Unavailable(ErrorBody),
}

/// The refusals every mutation may answer with besides its own.
#[derive(utoipa::IntoResponses)]
#[allow(dead_code)]
pub(crate) enum MutationErrors {
    /// The body or a parameter could not be read.
    #[response(status = 400)]
    BadRequest(ErrorBody),
    /// No token, or a wrong one.
    #[response(status = 401)]
    Unauthorized(ErrorBody),
    /// No token is configured on the node: every mutation is refused.
    #[response(status = 403)]
    Forbidden(ErrorBody),
    /// No such task (or run).
    #[response(status = 404)]
    NotFound(ErrorBody),
    /// The body is over 2 MiB.
    #[response(status = 413)]
    TooLarge(ErrorBody),
    /// The store failed.
    #[response(status = 503)]
    Unavailable(ErrorBody),
}
