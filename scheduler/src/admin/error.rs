//! One error body for every refusal, `{"error": "...", "message": "..."}`, and extractors whose
//! rejections use it (axum's own answer in plain text).

use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, RawPathParams, Request};
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
    /// `method_not_allowed`, `conflict`, `too_large`, `unavailable`, `internal`.
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
    /// `404`: no task of this name (quoted printable: escaped, cut to 80 characters).
    pub(crate) fn no_task(name: &str) -> Self {
        Self::not_found(format!("no task `{}`", crate::bounds::printable(name)))
    }
}

/// The most characters of a rejection's text an answer carries (it may quote what a client
/// sent, of any length).
const REJECTION_CHARS: usize = 300;

/// `text` (a rejection's, quoting the client's input) with control characters escaped and cut
/// to [`REJECTION_CHARS`].
fn clipped(text: &str) -> String {
    crate::bounds::printable_up_to(text, REJECTION_CHARS)
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
            .map_err(|e: QueryRejection| ApiError::bad_request(clipped(&e.body_text())))
    }
}

/// `axum::extract::Path` with a JSON error.
pub(crate) struct Path<T>(pub(crate) T);

impl<T: DeserializeOwned + Send, S: Send + Sync> FromRequestParts<S> for Path<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        match axum::extract::Path::<T>::from_request_parts(parts, state).await {
            Ok(p) => Ok(Path(p.0)),
            Err(e) => {
                // axum's text names the parameter only for some shapes: name them all.
                let names = RawPathParams::from_request_parts(parts, state)
                    .await
                    .map(|raw| {
                        raw.iter()
                            .map(|(k, _)| format!("`{k}`"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    })
                    .unwrap_or_default();
                let e: PathRejection = e;
                Err(ApiError::bad_request(format!(
                    "the path's {names}: {}",
                    clipped(&e.body_text())
                )))
            }
        }
    }
}

/// The largest body a JSON extractor reads, 2 MiB (axum's default limit).
const BODY_LIMIT: usize = 2 << 20;
/// How much of a body over [`BODY_LIMIT`] is read and thrown away before the `413`: a client
/// still sending when the server closes gets a reset instead of the answer. Beyond this, the
/// connection is closed (a `Content-Length` beyond it is refused before reading).
const DRAIN_LIMIT: usize = 64 << 20;

/// An optional JSON body: none when the request has no body (no `Content-Length` nor
/// `Transfer-Encoding`, or a length of 0), else read as [`Json`] reads it.
pub(crate) struct MaybeJson<T>(pub(crate) Option<T>);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for MaybeJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        use axum::http::header::{CONTENT_LENGTH, TRANSFER_ENCODING};
        let headers = req.headers();
        let length = headers.get(CONTENT_LENGTH);
        let empty = length.is_some_and(|v| v.as_bytes().trim_ascii() == b"0")
            || (length.is_none() && headers.get(TRANSFER_ENCODING).is_none());
        if empty {
            return Ok(MaybeJson(None));
        }
        Json::<T>::from_request(req, state)
            .await
            .map(|j| MaybeJson(Some(j.0)))
    }
}

/// `axum::Json` with a JSON error: a `413` for a body over [`BODY_LIMIT`] (read and thrown
/// away up to [`DRAIN_LIMIT`], so the client reads the answer), a `400` for any other fault.
pub(crate) struct Json<T>(pub(crate) T);

fn too_large() -> ApiError {
    ApiError::new(
        413,
        "too_large",
        format!("the body is over the limit of {} MiB", BODY_LIMIT >> 20),
    )
}

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for Json<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        use axum::body::HttpBody;
        let (parts, mut body) = req.into_parts();
        let declared = parts
            .headers
            .get(axum::http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if declared.is_some_and(|n| n > DRAIN_LIMIT as u64) {
            return Err(too_large());
        }
        let mut kept = Vec::new();
        let mut read = 0usize;
        while let Some(frame) =
            std::future::poll_fn(|cx| std::pin::Pin::new(&mut body).poll_frame(cx)).await
        {
            let frame = frame.map_err(|e| {
                ApiError::bad_request(format!(
                    "the body could not be read: {}",
                    clipped(&e.to_string())
                ))
            })?;
            let Ok(data) = frame.into_data() else {
                continue;
            };
            read = read.saturating_add(data.len());
            if read <= BODY_LIMIT {
                kept.extend_from_slice(&data);
            } else if read > DRAIN_LIMIT {
                break;
            }
        }
        if read > BODY_LIMIT {
            return Err(too_large());
        }
        let req = Request::from_parts(parts, axum::body::Body::from(kept));
        axum::Json::<T>::from_request(req, state)
            .await
            .map(|j| Json(j.0))
            .map_err(|e: JsonRejection| ApiError::bad_request(clipped(&e.body_text())))
    }
}
