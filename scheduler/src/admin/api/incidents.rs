//! Incidents (one per problem of a task: its alerts folded) and snoozes (a task's alerts held
//! back until a time, with a reason; audited like the other operator actions).

use axum::extract::State;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::refusals::{MutationErrors, ReadErrors, in_range};
use crate::admin::auth::{Operator, Reader};
use crate::admin::error::{ApiError, ErrorBody, Json, Path, Query};
use crate::admin::state::AdminState;
use crate::bounds;
use crate::operate;
use crate::store::{IncidentQuery, IncidentRecord, Snooze};

const DEFAULT_LIMIT: u32 = 100;

pub(super) fn router() -> OpenApiRouter<AdminState> {
    OpenApiRouter::new()
        .routes(routes!(list_incidents))
        .routes(routes!(list_snoozes))
        .routes(routes!(snooze_task, unsnooze_task))
}

/// One problem of one task: the alerts of one type about it, folded, from the first until the
/// task recovered.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct IncidentView {
    /// Its id.
    id: i64,
    /// The task.
    task: String,
    /// The alert type it folds (`run.failed`, `task.late`, `task.slow`,
    /// `task.deadline_missed`, ...).
    kind: String,
    /// `open` or `closed`.
    state: &'static str,
    /// When its first alert was raised.
    opened_at: DateTime<Utc>,
    /// When its latest alert was raised.
    last_seen_at: DateTime<Utc>,
    /// How many alerts it folds.
    count: i64,
    /// The latest alert (the webhook's JSON body).
    last_alert: serde_json::Value,
    /// When its alert was sent (none: held back, by `sla.alert_after_failures` or a snooze).
    notified_at: Option<DateTime<Utc>>,
    /// Reminders sent.
    reminders: i64,
    /// When the latest reminder went.
    reminded_at: Option<DateTime<Utc>>,
    /// When it closed.
    closed_at: Option<DateTime<Utc>>,
    /// What closed it (`run 42 succeeded`).
    closed_by: Option<String>,
}

impl From<IncidentRecord> for IncidentView {
    fn from(i: IncidentRecord) -> Self {
        Self {
            id: i.id,
            state: if i.closed_at.is_none() {
                "open"
            } else {
                "closed"
            },
            task: i.task_name,
            kind: i.kind,
            opened_at: i.opened_at,
            last_seen_at: i.last_seen_at,
            count: i.count,
            last_alert: serde_json::from_str(&i.summary).unwrap_or(serde_json::Value::Null),
            notified_at: i.notified_at,
            reminders: i.reminders,
            reminded_at: i.reminded_at,
            closed_at: i.closed_at,
            closed_by: i.closed_by,
        }
    }
}

/// Which incidents, as a filter.
#[derive(Debug, Clone, Copy, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
enum StateFilter {
    Open,
    Closed,
}

/// Which incidents.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct IncidentsQuery {
    /// `open` or `closed` (default: both).
    #[param(inline)]
    state: Option<StateFilter>,
    /// Only this task's.
    task: Option<String>,
    /// At most this many, 1 to 1,000 (default 100).
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<u32>,
}

/// Incidents and snoozes.
#[derive(Debug, Serialize, ToSchema)]
struct IncidentList {
    /// The incidents, newest first.
    incidents: Vec<IncidentView>,
    /// The snoozes in force.
    snoozes: Vec<SnoozeView>,
}

/// Incidents, newest first: one per problem of a task (a task's alerts of one type, folded,
/// until it recovers); with the snoozes in force.
#[utoipa::path(get, path = "/api/incidents", tag = "incidents",
    security((), ("bearer" = [])),
    params(IncidentsQuery),
    responses((status = 200, description = "Incidents", body = IncidentList), ReadErrors))]
async fn list_incidents(
    _: Reader,
    State(state): State<AdminState>,
    Query(q): Query<IncidentsQuery>,
) -> Result<axum::Json<IncidentList>, ApiError> {
    let limit = in_range(bounds::API_INCIDENTS_LIMIT, "limit", q.limit, DEFAULT_LIMIT)?;
    let mut query = IncidentQuery::new(limit);
    if let Some(s) = q.state {
        query = query.open(matches!(s, StateFilter::Open));
    }
    if let Some(task) = q.task {
        query = query.task(task);
    }
    let store = state.engine.store();
    let incidents = store.incidents(&query).await?;
    let snoozes = store.snoozes().await?;
    Ok(axum::Json(IncidentList {
        incidents: incidents.into_iter().map(IncidentView::from).collect(),
        snoozes: snoozes.into_iter().map(SnoozeView::from).collect(),
    }))
}

/// A task's alerts held back.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct SnoozeView {
    /// The task.
    task: String,
    /// Until when.
    until: DateTime<Utc>,
    /// Why.
    reason: String,
    /// Who.
    by: String,
    /// When it was set.
    at: DateTime<Utc>,
}

impl From<Snooze> for SnoozeView {
    fn from(s: Snooze) -> Self {
        Self {
            task: s.task_name,
            until: s.until,
            reason: s.reason,
            by: s.by,
            at: s.at,
        }
    }
}

/// The snoozes in force.
#[derive(Debug, Serialize, ToSchema)]
struct SnoozeList {
    /// By task.
    snoozes: Vec<SnoozeView>,
}

/// The snoozes in force, by task.
#[utoipa::path(get, path = "/api/snoozes", tag = "incidents",
    security((), ("bearer" = [])),
    responses((status = 200, description = "Snoozes", body = SnoozeList), ReadErrors))]
async fn list_snoozes(
    _: Reader,
    State(state): State<AdminState>,
) -> Result<axum::Json<SnoozeList>, ApiError> {
    let snoozes = state.engine.store().snoozes().await?;
    Ok(axum::Json(SnoozeList {
        snoozes: snoozes.into_iter().map(SnoozeView::from).collect(),
    }))
}

/// Why and how long to snooze.
#[derive(Debug, Deserialize, ToSchema)]
struct SnoozeRequest {
    /// Why (shown wherever the snooze is), 1 to 500 characters.
    #[schema(min_length = 1, max_length = 500, pattern = r"\S")]
    reason: String,
    /// When the snooze ends by itself (in the future, RFC 3339).
    #[schema(min_length = 20)]
    until: DateTime<Utc>,
}

/// A snooze in force.
#[derive(Debug, Serialize, ToSchema)]
struct SnoozeResult {
    /// The task.
    task: String,
    /// The snooze.
    snooze: SnoozeView,
}

/// Snoozes the task's alerts until `until`: the task keeps running (this is not a pause), its
/// alerts are folded into its incidents but not sent, nor reminded, until then. Replaces a
/// snooze in force. Audited.
#[utoipa::path(post, path = "/api/tasks/{name}/snooze", tag = "incidents",
    security(("bearer" = [])),
    params(("name" = String, Path, description = "The task's name"),
        ("X-Scheduler-Actor" = Option<String>, Header, description = "Who asks, for the audit trail")),
    request_body = SnoozeRequest,
    responses(
        (status = 200, description = "Snoozed", body = SnoozeResult),
        (status = 409, description = "`until` is already past", body = ErrorBody),
        MutationErrors,
    ))]
async fn snooze_task(
    Operator(actor): Operator,
    State(state): State<AdminState>,
    Path(name): Path<String>,
    Json(body): Json<SnoozeRequest>,
) -> Result<axum::Json<SnoozeResult>, ApiError> {
    match operate::check_snooze(&body.reason, body.until, Utc::now()) {
        Ok(()) => {}
        Err(operate::SnoozeRefusal::UntilPast) => {
            return Err(ApiError::conflict(
                "`until` is already past: the snooze would end at once",
            ));
        }
        Err(_) => {
            return Err(ApiError::bad_request(format!(
                "`reason` must be 1 to {} characters",
                operate::MAX_REASON
            )));
        }
    }
    let store = state.engine.store();
    if !operate::snooze(store.as_ref(), &name, &actor, &body.reason, body.until).await? {
        return Err(ApiError::no_task(&name));
    }
    tracing::info!(task = %name, actor = %actor.name, source = %actor.source, until = %body.until, "task's alerts snoozed through the admin API");
    let snooze = store
        .snoozes()
        .await?
        .into_iter()
        .find(|s| s.task_name == name)
        .ok_or_else(|| ApiError::conflict(format!("the snooze of `{name}` ended meanwhile")))?;
    Ok(axum::Json(SnoozeResult {
        task: name,
        snooze: snooze.into(),
    }))
}

/// What lifting a snooze did.
#[derive(Debug, Serialize, ToSchema)]
struct UnsnoozeResult {
    /// The task.
    task: String,
    /// The snooze that ended (none: none was in force).
    ended: Option<SnoozeView>,
}

/// Lifts the task's snooze: its alerts are sent again from now on. Audited.
#[utoipa::path(delete, path = "/api/tasks/{name}/snooze", tag = "incidents",
    security(("bearer" = [])),
    params(("name" = String, Path, description = "The task's name"),
        ("X-Scheduler-Actor" = Option<String>, Header, description = "Who asks, for the audit trail")),
    responses((status = 200, description = "Lifted (or was not snoozed)", body = UnsnoozeResult), MutationErrors))]
async fn unsnooze_task(
    Operator(actor): Operator,
    State(state): State<AdminState>,
    Path(name): Path<String>,
) -> Result<axum::Json<UnsnoozeResult>, ApiError> {
    let ended = operate::unsnooze(state.engine.store().as_ref(), &name, &actor).await?;
    if ended.is_none() {
        super::tasks::one_state(&state.engine, &name).await?;
    }
    tracing::info!(task = %name, actor = %actor.name, source = %actor.source, "task's snooze lifted through the admin API");
    Ok(axum::Json(UnsnoozeResult {
        task: name,
        ended: ended.map(SnoozeView::from),
    }))
}
