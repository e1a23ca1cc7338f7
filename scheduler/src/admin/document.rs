//! The documented routes (the API, probes, metrics, and the OpenAPI document itself) and the
//! OpenAPI 3.1 document generated from them, so no route exists that the document lacks.

use std::sync::{Arc, OnceLock};

use axum::response::IntoResponse;
use utoipa_axum::router::OpenApiRouter;

use super::state::AdminState;
use super::{api, openapi, probes};

/// Every documented route: the API, probes, metrics and the OpenAPI document. The document is
/// generated from this very router.
pub(super) fn routes() -> OpenApiRouter<AdminState> {
    OpenApiRouter::with_openapi(openapi::base())
        .merge(api::router())
        .merge(probes::router())
        .routes(utoipa_axum::routes!(serve))
}

fn document() -> &'static Arc<String> {
    static DOCUMENT: OnceLock<Arc<String>> = OnceLock::new();
    DOCUMENT.get_or_init(|| {
        let doc = routes().into_openapi();
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
