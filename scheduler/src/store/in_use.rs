//! A pooled connection while one store operation uses it, for both backends.

use std::time::Duration;

use sqlx::Database;
use sqlx::pool::PoolConnection;
use tokio::time::error::Elapsed;

use crate::store::{StoreError, StoreResult};

/// The longest a connection handed back to the pool may take to answer the pool's check of it
/// (one round trip) before it is dropped instead and its place freed.
const RELEASE_CHECK_LIMIT: Duration = Duration::from_secs(2);

/// A pooled connection while an operation uses it. If the operation's future is dropped before
/// it is [`done`](InUse::done) (a node stopping in the middle of a prune, an HTTP client that
/// went away), the connection is closed, not handed back to the pool in the middle of a
/// statement or a transaction for the next operation to wait behind.
///
/// A connection handed back is checked by sqlx with a round trip that has no timeout of its
/// own: a server that stops answering just then (a frozen server process, a partition that
/// keeps TCP up) would hold the pool's place until it answers again, and a few such places are
/// the whole pool. The check runs here, within [`RELEASE_CHECK_LIMIT`]; past it the connection
/// is dropped and its place freed.
pub(crate) struct InUse<DB: Database> {
    pub(crate) conn: PoolConnection<DB>,
    done: bool,
    /// The operation closes the connection rather than hand it back.
    close: bool,
}

impl<DB: Database> InUse<DB> {
    pub(crate) fn new(conn: PoolConnection<DB>) -> Self {
        Self {
            conn,
            done: false,
            close: false,
        }
    }

    /// The operation has its answer (or its error): the connection may go back to the pool,
    /// unless the operation closes it.
    #[cfg(feature = "postgres")]
    pub(crate) fn done(&mut self) -> &mut PoolConnection<DB> {
        self.done = true;
        &mut self.conn
    }
}

impl<DB: Database> InUse<DB> {
    /// The operation's answer from its `result` within `limit`, and the connection done with:
    /// closed if the operation timed out (a statement may still be running on it; a fresh
    /// connection is cheaper than finding out) or if `broken` says its error left the
    /// connection unfit for reuse, else handed back to the pool. An error is the backend's
    /// `classify`ing of it.
    pub(crate) fn settle<T>(
        &mut self,
        operation: &'static str,
        result: Result<Result<T, sqlx::Error>, Elapsed>,
        limit: Duration,
        broken: impl FnOnce(&sqlx::Error) -> bool,
        classify: fn(&'static str, sqlx::Error) -> StoreError,
    ) -> StoreResult<T> {
        self.done = true;
        match result {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) => {
                self.close = broken(&e);
                Err(classify(operation, e))
            }
            Err(_) => {
                self.close = true;
                Err(StoreError::Timeout {
                    operation,
                    timeout: limit,
                })
            }
        }
    }
}

impl<DB: Database> Drop for InUse<DB> {
    fn drop(&mut self) {
        if !self.done || self.close {
            // Closed without waiting for an answer (sqlx bounds the goodbye itself).
            self.conn.close_on_drop();
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return; // sqlx's own hand-back, unbounded: only outside a runtime, at exit
        };
        // `return_to_pool` is what sqlx's drop would spawn (the check, then back to the idle
        // connections); it takes the connection out now, so that drop does nothing more. Dropped
        // past the limit, it drops the connection and frees its place in the pool.
        let release = self.conn.return_to_pool();
        runtime.spawn(async move {
            if tokio::time::timeout(RELEASE_CHECK_LIMIT, release)
                .await
                .is_err()
            {
                tracing::warn!(
                    limit = ?RELEASE_CHECK_LIMIT,
                    "a connection handed back to the pool did not answer its check in time: dropped"
                );
            }
        });
    }
}
