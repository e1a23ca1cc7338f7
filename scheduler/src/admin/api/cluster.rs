//! The cluster: nodes, the config as this node read and applied it, the audit trail, webhook
//! deliveries.

use axum::extract::State;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::ReadErrors;
use crate::admin::AdminState;
use crate::admin::auth::Reader;
use crate::admin::error::{ApiError, Query};
use crate::reconciler::ReconcileReport;

pub(super) fn router() -> OpenApiRouter<AdminState> {
    OpenApiRouter::new()
        .routes(routes!(list_nodes))
        .routes(routes!(get_config))
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
    /// Handlers it is running (locks it holds).
    running: i64,
    /// Whether this is the node answering.
    this_node: bool,
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
    let nodes = state
        .shared
        .store
        .nodes()
        .await?
        .into_iter()
        .map(|n| NodeView {
            this_node: n.node_id == *state.shared.node_id,
            node_id: n.node_id,
            hostname: n.hostname,
            pid: n.pid,
            version: n.version,
            tasks: n.tasks,
            started_at: n.started_at,
            heartbeat_at: n.heartbeat_at,
            stopped_at: n.stopped_at,
            running: n.running,
        })
        .collect();
    Ok(axum::Json(NodeList { nodes }))
}

/// One entry of a config document.
#[derive(Debug, Serialize, ToSchema)]
struct EntryView {
    /// The task.
    name: String,
    /// Whether it runs.
    enabled: bool,
    /// Its cron expression.
    cron: String,
    /// Its zone, if it names one.
    timezone: Option<String>,
}

/// The last document this node read.
#[derive(Debug, Serialize, ToSchema)]
struct DocumentView {
    /// When it was read.
    read_at: DateTime<Utc>,
    /// Its `version` (revision), if it carries one.
    revision: Option<i64>,
    /// Its entries.
    tasks: Vec<EntryView>,
}

/// The config the cluster applied last (any node).
#[derive(Debug, Serialize, ToSchema)]
struct AppliedView {
    /// The document's version, if it carried one.
    revision: Option<i64>,
    /// Its content digest.
    digest: String,
    /// The node that applied it.
    applied_by: String,
}

/// An entry refused by a reconcile.
#[derive(Debug, Serialize, ToSchema)]
struct Refusal {
    /// The entry's task.
    task: String,
    /// Why it was refused.
    reason: String,
}

/// A document refused as older than the applied one.
#[derive(Debug, Serialize, ToSchema)]
struct StaleView {
    /// Its version.
    version: i64,
    /// The version applied.
    current: i64,
}

/// What this node's last reconcile did.
#[derive(Debug, Serialize, ToSchema)]
struct ReconcileView {
    /// When.
    at: DateTime<Utc>,
    /// `applied`, `unchanged` or `stale`.
    outcome: &'static str,
    /// Whether this node recorded the document (false: nothing to write, or another node had).
    recorded: bool,
    /// Rows created.
    created: Vec<String>,
    /// Rows enabled.
    enabled: Vec<String>,
    /// Rows disabled.
    disabled: Vec<String>,
    /// Rows whose cron or zone changed.
    updated: Vec<String>,
    /// Entries refused, with why.
    refused: Vec<Refusal>,
    /// Registered tasks absent from the config (not scheduled).
    absent: Vec<String>,
    /// Rows known to neither the config nor this binary.
    orphaned: Vec<String>,
    /// Enabled rows given a next run they lacked.
    repaired: Vec<String>,
    /// Rows kept paused (a reconcile never ends an operator's pause).
    paused: Vec<String>,
    /// Entries that matched their row.
    unchanged: usize,
    /// Set when the whole document was refused as stale.
    stale: Option<StaleView>,
}

impl ReconcileView {
    fn new(r: ReconcileReport, at: DateTime<Utc>) -> Self {
        let outcome = if r.stale.is_some() {
            "stale"
        } else if r.changed_anything() {
            "applied"
        } else {
            "unchanged"
        };
        Self {
            at,
            outcome,
            recorded: r.recorded,
            created: r.created,
            enabled: r.enabled,
            disabled: r.disabled,
            updated: r.updated,
            refused: r
                .refused
                .into_iter()
                .map(|(task, reason)| Refusal { task, reason })
                .collect(),
            absent: r.absent,
            orphaned: r.orphaned,
            repaired: r.repaired,
            paused: r.paused,
            unchanged: r.unchanged,
            stale: r.stale.map(|s| StaleView {
                version: s.version,
                current: s.current,
            }),
        }
    }
}

/// The config as this node sees it.
#[derive(Debug, Serialize, ToSchema)]
struct ConfigView {
    /// Where documents come from (redacted); none: the node has no config.
    source: Option<String>,
    /// Why the latest read failed, while it does (the last good document stays in force).
    last_error: Option<String>,
    /// The last good document read.
    document: Option<DocumentView>,
    /// The config the cluster applied last.
    applied: Option<AppliedView>,
    /// This node's last reconcile.
    last_reconcile: Option<ReconcileView>,
}

/// The last config document read, when, from where, its revision, and the last reconcile
/// report (what was refused and why).
#[utoipa::path(get, path = "/api/config", tag = "cluster",
    security((), ("bearer" = [])),
    responses((status = 200, description = "The config", body = ConfigView), ReadErrors))]
async fn get_config(
    _: Reader,
    State(state): State<AdminState>,
) -> Result<axum::Json<ConfigView>, ApiError> {
    let applied = state
        .shared
        .store
        .config_state()
        .await?
        .map(|a| AppliedView {
            revision: a.version,
            digest: a.digest,
            applied_by: a.applied_by,
        });
    let view = state
        .shared
        .config_view
        .read()
        .expect("config view lock")
        .clone();
    Ok(axum::Json(ConfigView {
        source: view.source,
        last_error: view.last_error,
        document: view.document.map(|(doc, read_at)| DocumentView {
            read_at,
            revision: doc.version,
            tasks: doc
                .tasks
                .iter()
                .map(|t| EntryView {
                    name: t.name.clone(),
                    enabled: t.enabled,
                    cron: t.cron.clone(),
                    timezone: t.timezone.clone(),
                })
                .collect(),
        }),
        applied,
        last_reconcile: view.report.map(|(r, at)| ReconcileView::new(r, at)),
    }))
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
    /// What: `trigger`, `pause`, `resume`.
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
    let entries = state.shared.store.audit_log(limit, q.cursor).await?;
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

/// One webhook delivery attempt.
#[derive(Debug, Serialize, ToSchema)]
struct DeliveryView {
    /// The event's id.
    event_id: i64,
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
        .shared
        .store
        .deliveries(limit)
        .await?
        .into_iter()
        .map(|d| DeliveryView {
            event_id: d.outbox_id,
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
