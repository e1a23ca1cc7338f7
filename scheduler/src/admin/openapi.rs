//! The OpenAPI 3.1 document's frame (title, security scheme, tags); its paths and schemas come
//! from the handlers' annotations, collected by the router itself (`super::document`).

use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "scheduler admin API",
        description = "Operate a scheduler cluster: tasks, runs and their logs, nodes, config, audit trail; trigger (with other arguments), pause and resume tasks and their instances, make and remove instances, backfill a range of their past ticks; incidents and snoozes. Reads are open on loopback, else need a bearer token, the operator's (SCHEDULER_ADMIN_TOKEN) or the read-only viewer's (SCHEDULER_ADMIN_VIEWER_TOKEN); mutations always need the operator's.",
        license(name = "MIT OR Apache-2.0")
    ),
    modifiers(&Bearer),
    tags(
        (name = "tasks", description = "Tasks: config, state, policies, their instances; trigger, pause, resume; backfills"),
        (name = "instances", description = "Instances of a task made at run time: make, change, pause, resume, run now (with other arguments), remove"),
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
