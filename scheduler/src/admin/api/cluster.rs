//! The cluster: nodes, the audit trail, webhook deliveries.

use axum::extract::State;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::refusals::ReadErrors;
use crate::admin::auth::Reader;
use crate::admin::error::{ApiError, Query};
use crate::admin::state::AdminState;

pub(super) fn router() -> OpenApiRouter<AdminState> {
    OpenApiRouter::new()
        .routes(routes!(list_nodes))
        .routes(routes!(list_audit))
        .routes(routes!(list_deliveries))
}

/// A node of the cluster.
#[derive(Debug, Serialize, ToSchema)]
struct NodeView {
    /// Its id.
    node_id: String,
    /// Its host.
    hostname: String,
    /// Its process id.
    pid: i32,
    /// Its scheduler version.
    version: String,
    /// The tasks its binary registers.
    tasks: Vec<String>,
    /// When it started.
    started_at: DateTime<Utc>,
    /// Its last heartbeat.
    heartbeat_at: DateTime<Utc>,
    /// When it stopped (none while running).
    stopped_at: Option<DateTime<Utc>>,
    /// How many handlers it is running (locks it holds).
    running: i64,
    /// The tasks whose lock it holds, by name.
    running_tasks: Vec<String>,
    /// Whether this is the node answering.
    this_node: bool,
    /// The node's background services and their states (see `/readyz`), for the node
    /// answering; `null` for the others (see `services_down`).
    services: Option<Vec<crate::admin::probes::ServiceView>>,
    /// Its background services that are not running (restarting after a panic, or stopping),
    /// by name, as the node last reported them; empty while all run.
    services_down: Vec<String>,
    /// `host:port` of the database server its connections go to, as it last reported it
    /// (never credentials; it changes after a failover); `null` on SQLite, which has no
    /// server, and until the node reported one.
    database_server: Option<String>,
}

/// Every known node.
#[derive(Debug, Serialize, ToSchema)]
struct NodeList {
    /// The nodes.
    nodes: Vec<NodeView>,
}

/// Every node known to the store, running or stopped.
#[utoipa::path(get, path = "/api/nodes", tag = "cluster",
    security((), ("bearer" = [])),
    responses((status = 200, description = "The nodes", body = NodeList), ReadErrors))]
async fn list_nodes(
    _: Reader,
    State(state): State<AdminState>,
) -> Result<axum::Json<NodeList>, ApiError> {
    let mut locks: std::collections::HashMap<String, Vec<String>> = Default::default();
    for task in state.engine.store().task_states(None).await? {
        if let Some(owner) = task.lock_owner {
            locks.entry(owner).or_default().push(task.name);
        }
    }
    let nodes = state
        .engine
        .store()
        .nodes()
        .await?
        .into_iter()
        .map(|n| NodeView {
            running_tasks: {
                let mut tasks = locks.remove(&n.node_id).unwrap_or_default();
                tasks.sort();
                tasks
            },
            this_node: n.node_id == state.engine.node_id(),
            services: (n.node_id == state.engine.node_id()).then(|| {
                state
                    .engine
                    .services()
                    .into_iter()
                    .map(Into::into)
                    .collect()
            }),
            node_id: n.node_id,
            hostname: n.hostname,
            pid: n.pid,
            version: n.version,
            tasks: n.tasks,
            started_at: n.started_at,
            heartbeat_at: n.heartbeat_at,
            stopped_at: n.stopped_at,
            running: n.running,
            services_down: n.services_down,
            database_server: n.database_server,
        })
        .collect();
    Ok(axum::Json(NodeList { nodes }))
}

/// One audit entry: who changed what, when, from where.
#[derive(Debug, Serialize, ToSchema)]
struct AuditView {
    /// Its id (the `cursor` of older pages).
    id: i64,
    /// When.
    at: DateTime<Utc>,
    /// Who.
    actor: String,
    /// What: `trigger`, `pause`, `resume`, `cancel`.
    action: String,
    /// Which task.
    task: String,
    /// Details (a pause's reason).
    detail: String,
    /// From where (`cli@host`, `http@peer`).
    source: String,
}

/// A page of the audit trail, newest first.
#[derive(Debug, Serialize, ToSchema)]
struct AuditPage {
    /// The entries.
    entries: Vec<AuditView>,
    /// Pass as `cursor` for older entries; none on the last page.
    next_cursor: Option<i64>,
}

/// Which entries.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct PageQuery {
    /// The `next_cursor` of the previous page.
    #[param(minimum = 1)]
    cursor: Option<i64>,
    /// Entries per page, 1 to 500 (default 50).
    #[param(minimum = 1, maximum = 500)]
    limit: Option<u32>,
}

fn page_limit(limit: Option<u32>) -> Result<u32, ApiError> {
    match limit.unwrap_or(50) {
        n @ 1..=500 => Ok(n),
        n => Err(ApiError::bad_request(format!(
            "`limit` must be 1 to 500, not {n}"
        ))),
    }
}

/// The audit trail of operator actions, newest first.
#[utoipa::path(get, path = "/api/audit", tag = "cluster",
    security((), ("bearer" = [])),
    params(PageQuery),
    responses((status = 200, description = "A page of the audit trail", body = AuditPage), ReadErrors))]
async fn list_audit(
    _: Reader,
    State(state): State<AdminState>,
    Query(q): Query<PageQuery>,
) -> Result<axum::Json<AuditPage>, ApiError> {
    let limit = page_limit(q.limit)?;
    if q.cursor.is_some_and(|c| c < 1) {
        return Err(ApiError::bad_request(
            "`cursor` must be a positive entry id",
        ));
    }
    let entries = state.engine.store().audit_log(limit, q.cursor).await?;
    let next_cursor = (entries.len() == limit as usize)
        .then(|| entries.last().map(|e| e.id))
        .flatten();
    Ok(axum::Json(AuditPage {
        entries: entries
            .into_iter()
            .map(|e| AuditView {
                id: e.id,
                at: e.at,
                actor: e.actor,
                action: e.action,
                task: e.task,
                detail: e.detail,
                source: e.source,
            })
            .collect(),
        next_cursor,
    }))
}

/// One alert delivery attempt.
#[derive(Debug, Serialize, ToSchema)]
struct DeliveryView {
    /// The event's id (one per event and channel; the webhook's `webhook-id` is `msg_` + it).
    event_id: i64,
    /// The channel it went to (`webhook` for `SCHEDULER_WEBHOOK_URL`).
    channel: String,
    /// The event's type.
    kind: String,
    /// Which attempt.
    attempt: i32,
    /// The node that tried.
    node_id: String,
    /// When.
    at: DateTime<Utc>,
    /// The HTTP status, if the endpoint answered.
    status: Option<i32>,
    /// The error, if any.
    error: Option<String>,
    /// How long it took, in milliseconds.
    duration_ms: i32,
}

/// The newest webhook delivery attempts.
#[derive(Debug, Serialize, ToSchema)]
struct DeliveryList {
    /// The attempts, newest first.
    deliveries: Vec<DeliveryView>,
}

/// How many.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct LimitQuery {
    /// Attempts to list, 1 to 500 (default 50).
    #[param(minimum = 1, maximum = 500)]
    limit: Option<u32>,
}

/// The newest webhook delivery attempts.
#[utoipa::path(get, path = "/api/deliveries", tag = "cluster",
    security((), ("bearer" = [])),
    params(LimitQuery),
    responses((status = 200, description = "Delivery attempts", body = DeliveryList), ReadErrors))]
async fn list_deliveries(
    _: Reader,
    State(state): State<AdminState>,
    Query(q): Query<LimitQuery>,
) -> Result<axum::Json<DeliveryList>, ApiError> {
    let limit = page_limit(q.limit)?;
    let deliveries = state
        .engine
        .store()
        .deliveries(limit)
        .await?
        .into_iter()
        .map(|d| DeliveryView {
            event_id: d.outbox_id,
            channel: d.channel,
            kind: d.kind,
            attempt: d.attempt,
            node_id: d.node_id,
            at: d.at,
            status: d.status,
            error: d.error,
            duration_ms: d.duration_ms,
        })
        .collect();
    Ok(axum::Json(DeliveryList { deliveries }))
}
