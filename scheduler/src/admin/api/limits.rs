//! Limits shared by tasks (`crate::limits`): each limit's size, the runs holding it and the
//! ticks waiting for it.

use axum::extract::State;
use chrono::{DateTime, Utc};
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::refusals::ReadErrors;
use crate::admin::auth::Reader;
use crate::admin::error::ApiError;
use crate::admin::state::AdminState;
use crate::store::limits::{LimitHolder, LimitState, LimitWaiter};

pub(super) fn router() -> OpenApiRouter<AdminState> {
    OpenApiRouter::new().routes(routes!(list_limits))
}

/// A limit shared by tasks.
#[derive(Debug, Serialize, ToSchema)]
struct LimitView {
    /// Its name.
    name: String,
    /// How many runs may hold it at once; `null`: no config declares it (rows naming it
    /// wait).
    size: Option<u32>,
    /// The runs holding it now.
    holders: Vec<HolderView>,
    /// The ticks waiting for a share of it, longest waiting first.
    waiting: Vec<WaiterView>,
}

/// A run holding a share of a limit.
#[derive(Debug, Serialize, ToSchema)]
struct HolderView {
    /// The task.
    task: String,
    /// The instance's key (none: the task's own row or a shard's).
    key: Option<String>,
    /// The row holding the lock (`task`, `task[i]` or `task/key`).
    row: String,
    /// The node running it.
    node: String,
    /// The run (none until it is recorded running).
    run_id: Option<i64>,
    /// When the run started.
    started_at: Option<DateTime<Utc>>,
}

/// A tick waiting for a share of a limit.
#[derive(Debug, Serialize, ToSchema)]
struct WaiterView {
    /// The task.
    task: String,
    /// The instance's key (none: the task's own row or a shard's).
    key: Option<String>,
    /// The row waiting (`task`, `task[i]` or `task/key`).
    row: String,
    /// Waiting since.
    since: DateTime<Utc>,
    /// The tick it waits to run, at its scheduled time (it starts late, or is skipped by its
    /// misfire rule).
    due_at: Option<DateTime<Utc>>,
}

/// Every limit.
#[derive(Debug, Serialize, ToSchema)]
struct LimitList {
    /// The limits, by name.
    limits: Vec<LimitView>,
}

/// The task and instance key of a row.
fn task_and_key(row: &str) -> (String, Option<String>) {
    match crate::instance::split_row(row) {
        Some((task, key)) => (task.to_owned(), Some(key.to_owned())),
        None => (crate::shard::split_row(row).0.to_owned(), None),
    }
}

impl From<LimitHolder> for HolderView {
    fn from(h: LimitHolder) -> Self {
        let (task, key) = task_and_key(&h.row);
        HolderView {
            task,
            key,
            row: h.row,
            node: h.node,
            run_id: h.run_id,
            started_at: h.started_at,
        }
    }
}

impl From<LimitWaiter> for WaiterView {
    fn from(w: LimitWaiter) -> Self {
        let (task, key) = task_and_key(&w.row);
        WaiterView {
            task,
            key,
            row: w.row,
            since: w.since,
            due_at: w.due_at,
        }
    }
}

impl From<LimitState> for LimitView {
    fn from(l: LimitState) -> Self {
        LimitView {
            name: l.name,
            size: l.size,
            holders: l.holders.into_iter().map(Into::into).collect(),
            waiting: l.waiting.into_iter().map(Into::into).collect(),
        }
    }
}

/// Every limit shared by tasks (declared in the config's `limits`, or named by a row): its
/// size, the runs holding it (task, key, node, start) and the ticks waiting for it.
#[utoipa::path(get, path = "/api/limits", tag = "tasks",
    security((), ("bearer" = [])),
    responses((status = 200, description = "The limits", body = LimitList), ReadErrors))]
async fn list_limits(
    _: Reader,
    State(state): State<AdminState>,
) -> Result<axum::Json<LimitList>, ApiError> {
    let limits = state.engine.store().limits().await?;
    Ok(axum::Json(LimitList {
        limits: limits.into_iter().map(Into::into).collect(),
    }))
}
