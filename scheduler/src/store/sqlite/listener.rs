//! The change listener of a store owned by one process: LISTEN/NOTIFY becomes an in-process
//! wake-up. The store bumps a counter after each commit that released a lock, applied a config,
//! queued a manual run or ended a pause, and when asked to notify; every listener watches it, so
//! wake-ups between two `recv` calls are not lost (several of them are folded into one, which is
//! all a wake-up needs).

use async_trait::async_trait;
use tokio::sync::watch;

use crate::store::{ChangeListener, StoreResult};

pub(super) struct SqliteChangeListener {
    changes: watch::Receiver<u64>,
    started: bool,
}

impl SqliteChangeListener {
    pub(super) fn new(changes: watch::Receiver<u64>) -> Self {
        Self {
            changes,
            started: false,
        }
    }
}

#[async_trait]
impl ChangeListener for SqliteChangeListener {
    async fn recv(&mut self) -> StoreResult<()> {
        if !self.started {
            // Like a LISTEN connection just opened: whatever happened before may have been a
            // change, so the first call returns at once.
            self.started = true;
            self.changes.mark_unchanged();
            return Ok(());
        }
        if self.changes.changed().await.is_err() {
            // The store is gone, and with it everything that could change: nothing to wake for.
            std::future::pending::<()>().await;
        }
        Ok(())
    }
}
