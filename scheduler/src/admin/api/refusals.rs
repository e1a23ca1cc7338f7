//! The refusals shared by the resources: the error answers every read or mutation documents,
//! the range check of a count parameter, and the check of a pause request (a task's or an
//! instance's).

use chrono::{DateTime, Utc};

use crate::admin::error::{ApiError, ErrorBody};
use crate::operate;

/// A pause request's `reason`, trimmed, checked with its `until` as
/// [`operate::check_pause`] checks them, and no longer than [`operate::MAX_REASON`]: a `400`
/// for a reason blank or too long, a `409` for an `until` already past.
pub(crate) fn pause_reason(reason: &str, until: Option<DateTime<Utc>>) -> Result<&str, ApiError> {
    let reason = reason.trim();
    let bad_reason = || {
        ApiError::bad_request(format!(
            "`reason` must be 1 to {} characters",
            operate::MAX_REASON
        ))
    };
    if reason.chars().count() > operate::MAX_REASON {
        return Err(bad_reason());
    }
    match operate::check_pause(reason, until, Utc::now()) {
        Ok(()) => Ok(reason),
        Err(operate::PauseRefusal::UntilPast) => Err(ApiError::conflict(
            "`until` is already past: the pause would end at once",
        )),
        Err(_) => Err(bad_reason()),
    }
}

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
