//! A pooled connection while one store operation uses it, for both backends.

use std::time::Duration;

use sqlx::Database;
use sqlx::pool::PoolConnection;
use tokio::time::error::Elapsed;

use crate::store::{StoreError, StoreResult};

/// A pooled connection while an operation uses it. If the operation's future is dropped before
/// it is [`done`](InUse::done) (a node stopping in the middle of a prune, an HTTP client that
/// went away), the connection is closed, not handed back to the pool in the middle of a
/// statement or a transaction for the next operation to wait behind.
pub(crate) struct InUse<DB: Database> {
    pub(crate) conn: PoolConnection<DB>,
    done: bool,
}

impl<DB: Database> InUse<DB> {
    pub(crate) fn new(conn: PoolConnection<DB>) -> Self {
        Self { conn, done: false }
    }

    /// The operation has its answer (or its error): the connection may go back to the pool,
    /// unless the operation closes it.
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
        let conn = self.done();
        match result {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) => {
                if broken(&e) {
                    conn.close_on_drop();
                }
                Err(classify(operation, e))
            }
            Err(_) => {
                conn.close_on_drop();
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
        if !self.done {
            self.conn.close_on_drop();
        }
    }
}
