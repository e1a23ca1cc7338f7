//! One error body for every refusal, `{"error": "...", "message": "..."}`, and extractors whose
//! rejections use it (axum's own answer in plain text).

use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde::de::DeserializeOwned;
use utoipa::ToSchema;

/// An error answer.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub(crate) struct ErrorBody {
    /// A stable code: `bad_request`, `unauthorized`, `forbidden`, `not_found`,
    /// `method_not_allowed`, `conflict`, `unavailable`, `internal`.
    pub error: &'static str,
    /// What went wrong, for a person.
    pub message: String,
}

/// An error answer with its status.
#[derive(Debug)]
pub(crate) struct ApiError {
    pub(crate) status: u16,
    pub(crate) body: ErrorBody,
}

impl ApiError {
    fn new(status: u16, error: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            body: ErrorBody {
                error,
                message: message.into(),
            },
        }
    }
    pub(crate) fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "bad_request", message)
    }
    pub(crate) fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(401, "unauthorized", message)
    }
    pub(crate) fn forbidden(message: impl Into<String>) -> Self {
        Self::new(403, "forbidden", message)
    }
    pub(crate) fn not_found(message: impl Into<String>) -> Self {
        Self::new(404, "not_found", message)
    }
    pub(crate) fn conflict(message: impl Into<String>) -> Self {
        Self::new(409, "conflict", message)
    }
    pub(crate) fn unavailable(message: impl Into<String>) -> Self {
        Self::new(503, "unavailable", message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        (status, axum::Json(self.body)).into_response()
    }
}

impl From<crate::store::StoreError> for ApiError {
    fn from(e: crate::store::StoreError) -> Self {
        // The store's messages never carry a password (see `crate::redact`).
        ApiError::unavailable(format!("the store failed: {e}"))
    }
}

impl From<crate::Error> for ApiError {
    fn from(e: crate::Error) -> Self {
        match e {
            crate::Error::Store(e) => e.into(),
            other => ApiError::bad_request(other.to_string()),
        }
    }
}

/// Unknown paths.
pub(crate) async fn not_found() -> ApiError {
    ApiError::not_found("no such route; the routes are listed in /openapi.json")
}

/// Known paths, other methods.
pub(crate) async fn method_not_allowed() -> ApiError {
    ApiError::new(
        405,
        "method_not_allowed",
        "method not allowed on this route; see /openapi.json",
    )
}

/// `axum::extract::Query` with a JSON error.
pub(crate) struct Query<T>(pub(crate) T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for Query<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        axum::extract::Query::<T>::from_request_parts(parts, state)
            .await
            .map(|q| Query(q.0))
            .map_err(|e: QueryRejection| ApiError::bad_request(e.body_text()))
    }
}

/// `axum::extract::Path` with a JSON error.
pub(crate) struct Path<T>(pub(crate) T);

impl<T: DeserializeOwned + Send, S: Send + Sync> FromRequestParts<S> for Path<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        axum::extract::Path::<T>::from_request_parts(parts, state)
            .await
            .map(|p| Path(p.0))
            .map_err(|e: PathRejection| ApiError::bad_request(e.body_text()))
    }
}

/// `axum::Json` with a JSON error.
pub(crate) struct Json<T>(pub(crate) T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for Json<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        axum::Json::<T>::from_request(req, state)
            .await
            .map(|j| Json(j.0))
            .map_err(|e: JsonRejection| ApiError::bad_request(e.body_text()))
    }
}
