//! A batch of a task's instances made or changed at once (`PUT /api/tasks/{name}/instances`
//! with a list): one transaction of the store ([`Schedules::upsert_many`]), each instance
//! answered on its own as its single `PUT` would be (`instances_write.rs`).
//!
//! [`Schedules::upsert_many`]: crate::Schedules::upsert_many

use axum::extract::State;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::instances_write::{InstanceTagsRequest, refused, schedules, with_zone_and_args};
use super::refusals::MutationErrors;
use crate::Schedule;
use crate::admin::auth::Operator;
use crate::admin::error::{ApiError, Json, Path};
use crate::admin::state::AdminState;
use crate::redact::redact_args;

pub(super) fn router() -> OpenApiRouter<AdminState> {
    OpenApiRouter::new().routes(routes!(upsert_instances))
}

/// One instance of a batch to make or change: its key, and what the single `PUT` takes.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct BatchItemRequest {
    /// The instance's key: 1 to 128 ASCII letters, digits, `_`, `.`, `:`, `-`.
    key: String,
    /// Its cron expression, in the task attribute's syntax (5 or 6 fields, or an alias);
    /// required (an item without one is refused alone).
    cron: Option<String>,
    /// The IANA zone its cron is read in (default `UTC`).
    timezone: Option<String>,
    /// Its arguments, any JSON value of at most 64 KiB as text, read by the handler with
    /// `ctx.args()` (none: JSON `null`).
    args: Option<serde_json::Value>,
    /// Its own owners, labels and limit, as the single `PUT` takes them.
    #[serde(flatten)]
    tags: InstanceTagsRequest,
}

/// An instance of a batch as written.
#[derive(Debug, Serialize, ToSchema)]
struct BatchInstanceView {
    /// Its cron expression.
    cron: String,
    /// The IANA zone its cron is read in.
    timezone: String,
    /// Its arguments (JSON `null`: none), secrets hidden.
    args: serde_json::Value,
    /// Whether it runs: false while its task is disabled.
    enabled: bool,
    /// When its next scheduled tick starts.
    next_run_at: Option<DateTime<Utc>>,
    /// Its own owners (empty: its task's).
    owners: Vec<String>,
    /// Its own labels (empty: none over its task's).
    labels: std::collections::BTreeMap<String, String>,
    /// Its own limit shared by tasks (none: its task's).
    limit: Option<String>,
    /// Its own service levels, the `sla` block as written (`null`: its task's).
    #[schema(value_type = Option<Object>)]
    sla: Option<crate::config::TaskSla>,
    /// Its own calendar, by the name of the document's calendar (`null`: its task's).
    calendar: Option<String>,
}

/// What became of one instance of a batch.
#[derive(Debug, Serialize, ToSchema)]
struct BatchItemResult {
    /// Its key, as given.
    key: String,
    /// What the single `PUT` of it would have answered: 200 written; 400, 404 or 409 refused.
    status: u16,
    /// Written: the instance as written.
    #[serde(skip_serializing_if = "Option::is_none")]
    instance: Option<BatchInstanceView>,
    /// Refused: the stable code, as an error body's `error`.
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'static str>,
    /// Refused: why.
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<String>,
}

/// What a batch did: each instance's result, in the order given.
#[derive(Debug, Serialize, ToSchema)]
struct BatchResult {
    /// The task.
    task: String,
    /// How many were written.
    written: usize,
    /// How many were refused.
    refused: usize,
    /// Each instance's result, in the order of the request.
    results: Vec<BatchItemResult>,
}

/// Makes or changes a batch of the task's instances, each as `PUT
/// /api/tasks/{name}/instances/{key}` does one, in one transaction of the store: a list of at
/// most 1,000 (`{"key": ..., "cron": ..., "timezone": ..., "args": ..., "calendar": ...}`, the
/// body at most 2 MiB). Each instance is answered on its own, in order: written (`status` 200, the instance),
/// or refused with the status and reason its single `PUT` would have had (a bad key, cron or
/// zone, arguments over 64 KiB: 400; a task this node does not register or the store does not
/// have: 404; a task with shards, a key the config declares: 409); a refusal refuses that
/// instance only. The request as a whole is refused only for a body that cannot be read, a
/// list over 1,000 (400), or a store that fails (503: nothing written). Each written instance
/// is audited on its own (`instance upsert`, its detail ending `in a batch of N`).
#[utoipa::path(put, path = "/api/tasks/{name}/instances", tag = "instances",
    security(("bearer" = [])),
    params(("name" = String, Path, description = "The task's name"),
        ("X-Scheduler-Actor" = Option<String>, Header, description = "Who asks, for the audit trail")),
    request_body(content = Vec<BatchItemRequest>, description = "The instances, at most 1,000"),
    responses(
        (status = 200, description = "Each instance written or refused, in order", body = BatchResult),
        MutationErrors,
    ))]
async fn upsert_instances(
    Operator(actor): Operator,
    State(state): State<AdminState>,
    Path(task): Path<String>,
    Json(body): Json<Vec<BatchItemRequest>>,
) -> Result<axum::Json<BatchResult>, ApiError> {
    let keys: Vec<String> = body.iter().map(|item| item.key.clone()).collect();
    let batch = body.into_iter().map(|item| {
        let mut schedule = Schedule::new(&task, item.key);
        if let Some(cron) = item.cron {
            schedule = schedule.cron(cron);
        }
        item.tags
            .apply(with_zone_and_args(schedule, item.timezone, item.args))
    });
    let answers = schedules(&state, &task, &actor)
        .upsert_many(batch)
        .await
        .map_err(refused)?;
    let results: Vec<BatchItemResult> = keys
        .into_iter()
        .zip(answers)
        .map(|(key, answer)| match answer {
            Ok(written) => BatchItemResult {
                key,
                status: 200,
                instance: Some(BatchInstanceView {
                    args: redact_args(&written.args),
                    cron: written.cron,
                    timezone: written.timezone,
                    enabled: written.enabled,
                    next_run_at: written.next_run_at,
                    owners: written.owners,
                    labels: written.labels,
                    limit: written.limit,
                    sla: written.sla,
                    calendar: written.calendar,
                }),
                error: None,
                message: None,
            },
            Err(e) => {
                let e = refused(e);
                BatchItemResult {
                    key,
                    status: e.status,
                    instance: None,
                    error: Some(e.body.error),
                    message: Some(e.body.message),
                }
            }
        })
        .collect();
    let written = results.iter().filter(|r| r.status == 200).count();
    let refused = results.len() - written;
    tracing::info!(task = %task, written, refused, actor = %actor.name, source = %actor.source,
        "instances upserted in a batch through the admin API");
    Ok(axum::Json(BatchResult {
        task,
        written,
        refused,
        results,
    }))
}
