//! A pooled connection while one store operation uses it, for both backends.

use sqlx::Database;
use sqlx::pool::PoolConnection;

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

impl<DB: Database> Drop for InUse<DB> {
    fn drop(&mut self) {
        if !self.done {
            self.conn.close_on_drop();
        }
    }
}
