//! The store's own error type. Callers above the store (engine, reconciler) never name a
//! database driver: a backend's error is boxed behind [`StoreError`], classified once here into
//! "try again later" and "retrying will not help".

use std::time::Duration;

/// A backend error, boxed so that no driver type crosses the store boundary.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Store operations fail with a [`StoreError`].
pub type StoreResult<T> = Result<T, StoreError>;

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The store could not be reached or dropped the connection (down, restarting, network,
    /// pool exhausted). Transient: the engine retries with backoff.
    #[error("store unavailable during `{operation}`: {source}")]
    Unavailable {
        /// The operation that failed.
        operation: &'static str,
        /// The backend's error.
        #[source]
        source: BoxError,
    },
    /// The operation did not finish within its timeout; its connection was closed. Transient.
    #[error("store operation `{operation}` timed out after {}", humantime::format_duration(*timeout))]
    Timeout {
        /// The operation that timed out.
        operation: &'static str,
        /// The limit it exceeded.
        timeout: Duration,
    },
    /// A row the operation needed is locked by another transaction, or two writers conflicted.
    /// Transient: try again shortly.
    #[error("store operation `{operation}` conflicted with a concurrent one: {source}")]
    Conflict {
        /// The operation that conflicted.
        operation: &'static str,
        /// The backend's error.
        #[source]
        source: BoxError,
    },
    /// The store refused the request or its data (a constraint, bad data, an unexpected schema).
    /// Retrying the same request will not help.
    #[error("store rejected `{operation}`: {source}")]
    Rejected {
        /// The operation that was refused.
        operation: &'static str,
        /// The backend's error.
        #[source]
        source: BoxError,
    },
    /// The store cannot be used as configured (bad URL, unusable file, held by another process,
    /// a schema newer than this binary).
    #[error("{message}")]
    Setup {
        /// What is wrong and what to do about it.
        message: String,
    },
}

impl StoreError {
    /// Whether trying the same operation again later may succeed.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            StoreError::Unavailable { .. }
                | StoreError::Timeout { .. }
                | StoreError::Conflict { .. }
        )
    }

    /// A driver error of `operation` as its backend judged it: `Some(true)` if another
    /// transaction got in the way (a [`Conflict`](StoreError::Conflict)), `Some(false)` if the
    /// database or the way to it failed ([`Unavailable`](StoreError::Unavailable)), `None` if the
    /// statement itself was refused ([`Rejected`](StoreError::Rejected)).
    #[cfg_attr(not(any(feature = "postgres", feature = "sqlite")), allow(dead_code))]
    pub(crate) fn classified(
        operation: &'static str,
        source: BoxError,
        transient: Option<bool>,
    ) -> Self {
        match transient {
            Some(true) => StoreError::Conflict { operation, source },
            Some(false) => StoreError::Unavailable { operation, source },
            None => StoreError::Rejected { operation, source },
        }
    }

    /// A setup error with `message`.
    pub fn setup(message: impl Into<String>) -> Self {
        StoreError::Setup {
            message: message.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transient_errors_are_the_ones_worth_retrying() {
        let io = || -> BoxError { Box::new(std::io::Error::other("reset by peer")) };
        assert!(
            StoreError::Unavailable {
                operation: "claim",
                source: io()
            }
            .is_transient()
        );
        assert!(
            StoreError::Timeout {
                operation: "claim",
                timeout: Duration::from_secs(1)
            }
            .is_transient()
        );
        assert!(
            !StoreError::Rejected {
                operation: "finish_runs",
                source: io()
            }
            .is_transient()
        );
        assert!(!StoreError::setup("bad url").is_transient());
    }

    #[test]
    fn messages_name_the_operation() {
        let e = StoreError::Timeout {
            operation: "renew_locks",
            timeout: Duration::from_millis(1500),
        };
        assert_eq!(
            e.to_string(),
            "store operation `renew_locks` timed out after 1s 500ms"
        );
    }
}
