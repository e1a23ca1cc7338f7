//! The OpenAPI 3.1 document: its frame (title, security scheme, tags) here, its paths and
//! schemas from the handlers' annotations, collected by the router itself.

use std::sync::{Arc, OnceLock};

use axum::response::IntoResponse;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "scheduler admin API",
        description = "Operate a scheduler cluster: tasks, runs and their logs, nodes, config, audit trail; trigger, pause and resume tasks, backfill a range of their past ticks; incidents and snoozes. Reads are open on loopback, else need a bearer token, the operator's (SCHEDULER_ADMIN_TOKEN) or the read-only viewer's (SCHEDULER_ADMIN_VIEWER_TOKEN); mutations always need the operator's.",
        license(name = "MIT OR Apache-2.0")
    ),
    modifiers(&Bearer),
    tags(
        (name = "tasks", description = "Tasks: config, state, policies; trigger, pause, resume; backfills"),
        (name = "runs", description = "Run history and logs"),
        (name = "cluster", description = "Nodes, config, audit trail, webhook deliveries"),
        (name = "incidents", description = "Incidents (a task's alerts folded per problem) and snoozes"),
        (name = "probes", description = "Health, readiness, metrics, this document"),
    )
)]
struct ApiDoc;

struct Bearer;

impl Modify for Bearer {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some("SCHEDULER_ADMIN_TOKEN (reads and mutations) or SCHEDULER_ADMIN_VIEWER_TOKEN (reads)"))
                    .build(),
            ),
        );
    }
}

/// The frame the router's paths are added to.
pub(super) fn base() -> utoipa::openapi::OpenApi {
    let mut doc = ApiDoc::openapi();
    doc.info.version = env!("CARGO_PKG_VERSION").to_owned();
    doc
}

fn document() -> &'static Arc<String> {
    static DOCUMENT: OnceLock<Arc<String>> = OnceLock::new();
    DOCUMENT.get_or_init(|| {
        let doc = super::routes().into_openapi();
        Arc::new(
            doc.to_pretty_json()
                .expect("the OpenAPI document serialises"),
        )
    })
}

/// The admin API's OpenAPI 3.1 document (JSON), as served at `/openapi.json`.
///
/// ```
/// let doc: serde_json::Value = serde_json::from_str(&scheduler::admin::openapi_document()).unwrap();
/// assert!(doc["openapi"].as_str().unwrap().starts_with("3.1"));
/// assert!(doc["paths"]["/api/tasks"]["get"].is_object());
/// ```
pub fn openapi_document() -> String {
    document().as_str().to_owned()
}

/// This document.
#[utoipa::path(
    get,
    path = "/openapi.json",
    tag = "probes",
    responses((status = 200, description = "The OpenAPI 3.1 document", content_type = "application/json", body = Object))
)]
pub(super) async fn serve() -> impl IntoResponse {
    (
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        document().as_str().to_owned(),
    )
}
