//! `/healthz` (the process answers), `/readyz` (store reachable, config loaded, not draining,
//! every background service running) and `/metrics` (Prometheus text).

use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::auth::Reader;
use super::error::ErrorBody;
use super::state::AdminState;

/// How long `/readyz` waits for the store.
const STORE_CHECK_TIMEOUT: Duration = Duration::from_secs(2);

pub(super) fn router() -> OpenApiRouter<AdminState> {
    OpenApiRouter::new()
        .routes(routes!(healthz))
        .routes(routes!(readyz))
        .routes(routes!(metrics))
}

/// The process is alive.
#[derive(Debug, Serialize, ToSchema)]
struct Health {
    /// Always `ok`.
    status: &'static str,
    /// This node's id.
    node_id: String,
}

/// Whether this node can do its work, and if not, why.
#[derive(Debug, Serialize, ToSchema)]
struct Readiness {
    /// All of the checks below pass.
    ready: bool,
    /// The store answered within 2 s.
    store_reachable: bool,
    /// Migrations ran and the node registered.
    started: bool,
    /// The config was read and reconciled once (true without a config).
    config_loaded: bool,
    /// Shutdown was requested.
    draining: bool,
    /// The node's background services; any not `running` makes the node not ready.
    services: Vec<ServiceView>,
    /// What is wrong, for a person (empty when ready).
    reasons: Vec<String>,
}

/// One background service of a node (see `engine::health`).
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ServiceView {
    /// Its name: `claimer`, `completer`, `renewer` (lock renewal), `cancels`, `heartbeat`,
    /// `pruner`, `listener`, `config`, `sla`, `incidents`, `delivery`, `reporter`, `startup`.
    name: String,
    /// `running`; `restarting` (a pass panicked, it runs again after a backoff); `stopping`
    /// (it cannot go on: the node is exiting with status 70).
    state: String,
    /// Its panics since the node started.
    panics: u64,
    /// Its last panic's message.
    last_panic: Option<String>,
}

impl From<crate::engine::ServiceStatus> for ServiceView {
    fn from(s: crate::engine::ServiceStatus) -> Self {
        Self {
            name: s.name.to_owned(),
            state: s.state.to_owned(),
            panics: s.panics,
            last_panic: s.last_panic,
        }
    }
}

/// Liveness: answers while the process runs.
#[utoipa::path(get, path = "/healthz", tag = "probes",
    responses((status = 200, description = "Alive", body = Health)))]
async fn healthz(State(state): State<AdminState>) -> axum::Json<Health> {
    axum::Json(Health {
        status: "ok",
        node_id: state.engine.node_id().to_owned(),
    })
}

/// Readiness: the store is reachable, the config is loaded, the node is not draining, and every
/// background service runs (`reasons` names any that does not).
#[utoipa::path(get, path = "/readyz", tag = "probes",
    responses(
        (status = 200, description = "Ready", body = Readiness),
        (status = 503, description = "Not ready; `reasons` says why", body = Readiness),
    ))]
async fn readyz(State(state): State<AdminState>) -> impl IntoResponse {
    let engine = &state.engine;
    let store_reachable = matches!(
        tokio::time::timeout(STORE_CHECK_TIMEOUT, engine.store().config_state()).await,
        Ok(Ok(_))
    );
    let started = engine.started();
    let config_loaded = engine.read_config(|config| config.loaded());
    let draining = engine.draining();
    let mut reasons = Vec::new();
    if !store_reachable {
        reasons.push("the store cannot be reached".to_owned());
    }
    if !started {
        reasons.push("the node has not prepared the store yet (migrations, registration)".into());
    }
    if !config_loaded {
        reasons.push("the task config has not been read and applied yet".to_owned());
    }
    if draining {
        reasons.push("the node is shutting down".to_owned());
    }
    let services = engine.services();
    for down in services.iter().filter(|s| !s.is_up()) {
        reasons.push(format!(
            "the {} service is {} after a panic ({})",
            down.name,
            down.state,
            down.last_panic.as_deref().unwrap_or("no message")
        ));
    }
    let ready = reasons.is_empty();
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (
        status,
        axum::Json(Readiness {
            ready,
            store_reachable,
            started,
            config_loaded,
            draining,
            services: services.into_iter().map(ServiceView::from).collect(),
            reasons,
        }),
    )
}

/// This node's metrics, in the OpenMetrics text format (see `scheduler::metrics`).
#[utoipa::path(get, path = "/metrics", tag = "probes",
    security((), ("bearer" = [])),
    responses(
        (status = 200, description = "OpenMetrics text", content_type = "application/openmetrics-text; version=1.0.0; charset=utf-8", body = String),
        (status = 401, description = "A wrong token, or none beyond loopback", body = ErrorBody),
        (status = 403, description = "Beyond loopback without a configured token", body = ErrorBody),
    ))]
async fn metrics(_: Reader, State(state): State<AdminState>) -> impl IntoResponse {
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        state.engine.metrics().encode(),
    )
}
