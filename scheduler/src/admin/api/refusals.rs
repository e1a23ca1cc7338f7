//! The refusals shared by the resources: the error answers every read or mutation documents,
//! and the range check of a count parameter.

use crate::admin::error::{ApiError, ErrorBody};

/// `value` (or `default` when absent) checked against `range`: a `400` naming `field` and the
/// range otherwise.
pub(crate) fn in_range(
    range: crate::bounds::CountRange,
    field: &'static str,
    value: Option<u32>,
    default: u32,
) -> Result<u32, ApiError> {
    range
        .check(field, value.unwrap_or(default))
        .map_err(|e| ApiError::bad_request(e.to_string()))
}

/// The refusals every read may answer with besides its own.
#[derive(utoipa::IntoResponses)]
#[allow(dead_code)]
pub(crate) enum ReadErrors {
    /// A parameter could not be read.
    #[response(status = 400)]
    BadRequest(ErrorBody),
    /// A wrong token, or none beyond loopback.
    #[response(status = 401)]
    Unauthorized(ErrorBody),
    /// Beyond loopback without a configured token.
    #[response(status = 403)]
    Forbidden(ErrorBody),
    /// The store failed.
    #[response(status = 503)]
    Unavailable(ErrorBody),
}

/// The refusals every mutation may answer with besides its own.
#[derive(utoipa::IntoResponses)]
#[allow(dead_code)]
pub(crate) enum MutationErrors {
    /// The body or a parameter could not be read.
    #[response(status = 400)]
    BadRequest(ErrorBody),
    /// No token, or a wrong one.
    #[response(status = 401)]
    Unauthorized(ErrorBody),
    /// No token is configured on the node: every mutation is refused.
    #[response(status = 403)]
    Forbidden(ErrorBody),
    /// No such task (or run).
    #[response(status = 404)]
    NotFound(ErrorBody),
    /// The body is over 2 MiB.
    #[response(status = 413)]
    TooLarge(ErrorBody),
    /// The store failed.
    #[response(status = 503)]
    Unavailable(ErrorBody),
}
