//! Writes whose COMMIT got no answer. The server may have committed and the connection died
//! before its answer came (a failover, a network cut, a backend killed, the operation's
//! timeout): the outcome is unknown, and assuming either failure or success is wrong (a claim
//! that committed but looked failed leaves a run no one starts, recorded lost when its lock
//! expires; a renewal that failed but looked done lets a lock expire under a running handler).
//!
//! So a write sets aside what it is committing just before the COMMIT ([`commit`], or
//! [`sending`] for a statement committed on its own). If the answer is an error the server gave
//! while its session went on (a serialization failure, a deferred constraint), the write
//! failed. Any other error leaves what was set aside, and the caller reads back what the write
//! did ([`PgStore::read_back`]): its own query says what it finds, and the caller's Rust code
//! decides what that means. Only when the read-back cannot reach the server within its time is
//! the write treated as failed (the engine's ordinary retry, and lock expiry, take it from
//! there).

use std::time::{Duration, Instant};

use sqlx::Postgres;

use crate::store::postgres::PgStore;
use crate::store::{StoreError, StoreResult};

/// Whether an error of a write leaves its outcome unknown: no answer from the server (the
/// connection lost, a protocol error, class 08) or the session ended as it answered (57P01-57P03:
/// a shutdown or `pg_terminate_backend`, which may come after the commit).
pub(super) fn outcome_unknown(error: &sqlx::Error) -> bool {
    use sqlx::Error as E;
    match error {
        E::Io(_) | E::Protocol(_) | E::WorkerCrashed => true,
        E::Database(db) => {
            let code = db.code().map(|c| c.into_owned()).unwrap_or_default();
            code.starts_with("08") || matches!(code.as_str(), "57P01" | "57P02" | "57P03")
        }
        _ => false,
    }
}

/// Commits `tx`, with `value` set aside in `sent` first. When the server refused the COMMIT with
/// an answer, `sent` is emptied (nothing was written); otherwise it keeps the value, and
/// [`written`] says what came of it. (Through a transaction-mode pooler `tx` is a savepoint and
/// the COMMIT comes after it: the value stays set aside until then.)
pub(super) async fn commit<T>(
    tx: sqlx::Transaction<'_, Postgres>,
    sent: &mut Option<T>,
    value: T,
) -> Result<(), sqlx::Error> {
    *sent = Some(value);
    tx.commit().await.inspect_err(|e| {
        if !outcome_unknown(e) {
            *sent = None;
        }
    })
}

/// Runs `write`, a statement committed on its own, with `value` set aside in `sent` while its
/// answer is awaited: after an error the server answered with, `sent` is emptied (the write did
/// nothing).
pub(super) async fn sending<T, R>(
    sent: &mut Option<T>,
    value: T,
    write: impl Future<Output = Result<R, sqlx::Error>>,
) -> Result<R, sqlx::Error> {
    *sent = Some(value);
    write.await.inspect_err(|e| {
        if !outcome_unknown(e) {
            *sent = None;
        }
    })
}

/// What came of a write run by `timed!` with [`commit`] or [`sending`].
pub(super) enum Written<T> {
    /// Committed: what was set aside.
    Done(T),
    /// The answer was lost: what was set aside, and the error to return if the read-back finds
    /// nothing.
    Unknown(T, StoreError),
    /// Not committed (refused, or failed before the write was sent).
    Failed(StoreError),
}

/// What `result` (of `timed!`) and `sent` (as the write left it) say.
pub(super) fn written<T>(result: StoreResult<()>, sent: Option<T>) -> Written<T> {
    match (result, sent) {
        (Ok(()), Some(value)) => Written::Done(value),
        (Ok(()), None) => Written::Failed(StoreError::Rejected {
            operation: "commit",
            source: "a write returned without setting aside what it wrote".into(),
        }),
        (Err(error), Some(value)) => Written::Unknown(value, error),
        (Err(error), None) => Written::Failed(error),
    }
}

/// Pause before the `attempt`-th read-back retry (from 0): 100 ms doubling, at most 1 s.
fn pause(attempt: u32) -> Duration {
    Duration::from_millis(100u64 << attempt.min(4)).min(Duration::from_secs(1))
}

impl PgStore {
    /// After `operation` lost the answer to its write (`error`): runs `read` until it answers,
    /// for up to `within`. `Some(value)`: the write was committed, `value` is its result;
    /// `None`: it was not, and `error` is returned (transient: the caller retries as after any
    /// failure). A read-back that cannot reach the server in time also returns `error`.
    pub(super) async fn read_back<T, F, Fut>(
        &self,
        operation: &'static str,
        error: StoreError,
        within: Duration,
        mut read: F,
    ) -> StoreResult<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = StoreResult<Option<T>>>,
    {
        tracing::warn!(operation, error = %error, "the answer to a write was lost: reading back what it wrote");
        let deadline = Instant::now() + within;
        let mut attempt = 0;
        loop {
            match read().await {
                Ok(Some(value)) => {
                    tracing::info!(operation, "read back: the write was committed");
                    return Ok(value);
                }
                Ok(None) => {
                    tracing::info!(operation, "read back: the write was not committed");
                    return Err(error);
                }
                Err(e) if e.is_transient() && Instant::now() + pause(attempt) < deadline => {
                    tokio::time::sleep(pause(attempt)).await;
                    attempt += 1;
                }
                Err(e) => {
                    tracing::warn!(operation, error = %e, "could not read back whether the write was committed: treated as failed");
                    return Err(error);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lost_connection_is_unknown_and_a_refusal_is_not() {
        let lost = sqlx::Error::Io(std::io::Error::from(std::io::ErrorKind::UnexpectedEof));
        assert!(outcome_unknown(&lost));
        assert!(outcome_unknown(&sqlx::Error::Protocol("eof".into())));
        assert!(!outcome_unknown(&sqlx::Error::RowNotFound));
        assert!(!outcome_unknown(&sqlx::Error::PoolTimedOut));
    }

    #[test]
    fn read_back_pauses_stay_short() {
        assert_eq!(pause(0), Duration::from_millis(100));
        assert_eq!(pause(3), Duration::from_millis(800));
        assert_eq!(pause(10), Duration::from_secs(1));
    }
}
