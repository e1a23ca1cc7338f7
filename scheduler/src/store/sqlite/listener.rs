//! The change listener of an SQLite store: LISTEN/NOTIFY becomes two cheap signals.
//!
//! - In this process, the store bumps a counter after each commit that released a lock, applied
//!   a config, queued a manual run or ended a pause, and when asked to notify; every listener
//!   watches it, so wake-ups between two `recv` calls are not lost (several of them are folded
//!   into one, which is all a wake-up needs).
//! - From another process (an [`operator`](super::SqliteStoreBuilder::operator) store: the
//!   `scheduler trigger`, `pause` and `resume` commands beside the node), the listener's own
//!   connection reads `PRAGMA data_version` every [`CHANGE_CHECK_INTERVAL`]: SQLite changes it
//!   when any other connection has committed since the last read. That includes this process's
//!   own pooled connections, so a busy node gets an extra claim pass now and then (at most one
//!   per interval), which is harmless; it is one read of a page SQLite already has in memory.

use std::time::Duration;

use async_trait::async_trait;
use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{Connection, SqliteConnection};
use tokio::sync::watch;

use crate::store::{ChangeListener, StoreResult};

/// How often the listener asks SQLite whether another connection committed.
pub(super) const CHANGE_CHECK_INTERVAL: Duration = Duration::from_millis(250);

pub(super) struct SqliteChangeListener {
    changes: watch::Receiver<u64>,
    options: SqliteConnectOptions,
    /// The listener's own connection and the last `data_version` it read.
    watch: Option<(SqliteConnection, i64)>,
    started: bool,
}

impl SqliteChangeListener {
    pub(super) fn new(changes: watch::Receiver<u64>, options: SqliteConnectOptions) -> Self {
        Self {
            changes,
            options,
            watch: None,
            started: false,
        }
    }

    /// The listener's connection, opened (and its first `data_version` read) on first use.
    async fn connection(&mut self) -> StoreResult<&mut (SqliteConnection, i64)> {
        if self.watch.is_none() {
            let mut conn = SqliteConnection::connect_with(&self.options)
                .await
                .map_err(|e| super::classify("listen", e))?;
            let version = data_version(&mut conn).await?;
            self.watch = Some((conn, version));
        }
        Ok(self.watch.as_mut().expect("opened above"))
    }

    /// Returns once another connection has committed. Cancel-safe: the last version seen is
    /// only replaced by a completed read.
    async fn foreign_commit(&mut self) -> StoreResult<()> {
        let mut tick = tokio::time::interval(CHANGE_CHECK_INTERVAL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        loop {
            tick.tick().await;
            let (conn, seen) = self.connection().await?;
            let version = match data_version(conn).await {
                Ok(version) => version,
                Err(e) => {
                    // A broken connection is reopened at the next call.
                    self.watch = None;
                    return Err(e);
                }
            };
            if version != *seen {
                *seen = version;
                return Ok(());
            }
        }
    }
}

async fn data_version(conn: &mut SqliteConnection) -> StoreResult<i64> {
    sqlx::query_scalar("PRAGMA data_version")
        .fetch_one(conn)
        .await
        .map_err(|e| super::classify("listen", e))
}

#[async_trait]
impl ChangeListener for SqliteChangeListener {
    async fn recv(&mut self) -> StoreResult<()> {
        if !self.started {
            // Like a LISTEN connection just opened: whatever happened before may have been a
            // change, so the first call returns at once (once the connection is open, so a
            // commit from now on is seen).
            self.connection().await?;
            self.started = true;
            self.changes.mark_unchanged();
            return Ok(());
        }
        let mut changes = self.changes.clone();
        let local = tokio::select! {
            changed = changes.changed() => changed.is_ok(),
            result = self.foreign_commit() => return result,
        };
        if !local {
            // The store is gone, and with it the node this listener wakes: nothing to wake for.
            std::future::pending::<()>().await;
        }
        self.changes.mark_unchanged();
        Ok(())
    }
}
