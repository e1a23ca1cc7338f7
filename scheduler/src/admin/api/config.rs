//! The config as this node read and applied it: the last document, when, from where, its
//! revision, and the last reconcile report (what was refused and why).

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
use crate::reconciler::ReconcileReport;

pub(super) fn router() -> OpenApiRouter<AdminState> {
    OpenApiRouter::new().routes(routes!(get_config))
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
    /// Who answers for it, as written.
    owners: Vec<String>,
    /// Its labels.
    labels: std::collections::BTreeMap<String, String>,
    /// The keys of the instances it declares (`GET /api/tasks/{name}/instances` reads them;
    /// a refused one is among the last reconcile's refusals, named `task/key`).
    instances: Vec<String>,
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
        .engine
        .store()
        .config_state()
        .await?
        .map(|a| AppliedView {
            revision: a.version,
            digest: a.digest,
            applied_by: a.applied_by,
        });
    let view = state.engine.read_config(Clone::clone);
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
                    owners: t.owners.clone(),
                    labels: t.labels.clone(),
                    instances: t.instances.iter().map(|i| i.key.clone()).collect(),
                })
                .collect(),
        }),
        applied,
        last_reconcile: view.report.map(|(r, at)| ReconcileView::new(r, at)),
    }))
}
