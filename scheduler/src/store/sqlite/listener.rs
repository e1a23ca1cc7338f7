//! The change listener of an SQLite store: LISTEN/NOTIFY becomes two cheap signals.
//!
//! - In this process, the store bumps a counter after each commit that released a lock, applied
//!   a config, queued a manual run or ended a pause, and when asked to notify; every listener
//!   watches it, so wake-ups between two `recv` calls are not lost (several of them are folded
//!   into one, which is all a wake-up needs). A request to cancel a run bumps a counter of its
//!   own, heard as [`Change::CancelRequested`].
//! - From another process (an [`operator`](super::SqliteStoreBuilder::operator) store: the
//!   `scheduler trigger`, `pause` and `resume` commands beside the node), every action is an
//!   audit entry. The listener's own connection reads `PRAGMA data_version` every
//!   [`CHANGE_CHECK_INTERVAL`] (SQLite changes it when any other connection has committed: one
//!   read of a page already in memory); only when it changed does the listener compare the
//!   newest audit id with the entries this store wrote itself, both read during this process's
//!   writer turn so no own write is half-counted. More entries than its own: another process
//!   acted (a trigger, a pause, a cancel: it cannot tell which), and the listener wakes with
//!   [`Change::Unknown`]. The node's own commits (heartbeats, runs) never wake it.

use std::sync::Weak;
use std::sync::atomic::Ordering;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::{Connection, SqliteConnection};
use tokio::sync::watch;

use super::Inner;
use crate::store::{Change, ChangeListener, StoreResult};

/// How often the listener asks SQLite whether another connection committed.
pub(super) const CHANGE_CHECK_INTERVAL: Duration = Duration::from_millis(250);

pub(super) struct SqliteChangeListener {
    cancels: watch::Receiver<u64>,
    changes: watch::Receiver<u64>,
    /// The store, not kept alive by its listener.
    store: Weak<Inner>,
    watch: Option<Watch>,
    started: bool,
}

/// The listener's own connection and what it last saw.
struct Watch {
    conn: SqliteConnection,
    data_version: i64,
    /// The newest audit id, and how many entries this store had written, at the last look.
    audit_max: i64,
    own_audits: u64,
}

enum Check {
    /// Another process acted.
    Foreign,
    /// Nothing to wake for.
    Quiet,
    /// The store is gone.
    Gone,
}

impl SqliteChangeListener {
    pub(super) fn new(
        cancels: watch::Receiver<u64>,
        changes: watch::Receiver<u64>,
        store: Weak<Inner>,
    ) -> Self {
        Self {
            cancels,
            changes,
            store,
            watch: None,
            started: false,
        }
    }

    /// One look: `data_version`, and the audit trail if that moved. Cancel-safe: what was seen
    /// is only replaced by a completed read.
    async fn check(&mut self) -> StoreResult<Check> {
        let Some(inner) = self.store.upgrade() else {
            return Ok(Check::Gone);
        };
        let result = self.check_with(&inner).await;
        if result.is_err() {
            // A broken connection is reopened at the next look.
            self.watch = None;
        }
        result
    }

    async fn check_with(&mut self, inner: &Inner) -> StoreResult<Check> {
        let Some(watch) = &mut self.watch else {
            let mut conn = SqliteConnection::connect_with(&inner.options)
                .await
                .map_err(|e| super::classify("listen", e))?;
            let data_version = data_version(&mut conn).await?;
            let (audit_max, own_audits) = audit_mark(&mut conn, inner).await?;
            self.watch = Some(Watch {
                conn,
                data_version,
                audit_max,
                own_audits,
            });
            return Ok(Check::Quiet);
        };
        let version = data_version(&mut watch.conn).await?;
        if version == watch.data_version {
            return Ok(Check::Quiet);
        }
        let (audit_max, own_audits) = audit_mark(&mut watch.conn, inner).await?;
        let foreign = i128::from(audit_max - watch.audit_max)
            > i128::from(own_audits.wrapping_sub(watch.own_audits));
        watch.data_version = version;
        watch.audit_max = audit_max;
        watch.own_audits = own_audits;
        Ok(if foreign {
            Check::Foreign
        } else {
            Check::Quiet
        })
    }

    /// Returns once another process has acted; pending forever once the store is gone.
    async fn foreign_action(&mut self) -> StoreResult<()> {
        let mut tick = tokio::time::interval(CHANGE_CHECK_INTERVAL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        loop {
            tick.tick().await;
            match self.check().await? {
                Check::Foreign => return Ok(()),
                Check::Quiet => {}
                Check::Gone => std::future::pending::<()>().await,
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

/// The newest audit id and this store's own count, read during its writer turn (a writer of
/// this process counts its entry inside its transaction, so both or neither are seen).
async fn audit_mark(conn: &mut SqliteConnection, inner: &Inner) -> StoreResult<(i64, u64)> {
    let _turn = inner.writer.lock().await;
    let max: i64 = sqlx::query_scalar(include_str!("queries/audit_max.sql"))
        .fetch_one(conn)
        .await
        .map_err(|e| super::classify("listen", e))?;
    Ok((max, inner.own_audits.load(Ordering::SeqCst)))
}

#[async_trait]
impl ChangeListener for SqliteChangeListener {
    async fn recv(&mut self) -> StoreResult<Change> {
        if !self.started {
            // Like a LISTEN connection just opened: whatever happened before may have been a
            // change, so the first call returns at once (once the connection is open, so a
            // commit from now on is seen).
            if let Check::Gone = self.check().await? {
                std::future::pending::<()>().await;
            }
            self.started = true;
            self.changes.mark_unchanged();
            self.cancels.mark_unchanged();
            return Ok(Change::Unknown);
        }
        let mut changes = self.changes.clone();
        let mut cancels = self.cancels.clone();
        let (local, change) = tokio::select! {
            changed = cancels.changed() => (changed.is_ok(), Change::CancelRequested),
            changed = changes.changed() => (changed.is_ok(), Change::Schedule),
            result = self.foreign_action() => return result.map(|()| Change::Unknown),
        };
        if !local {
            // The store is gone, and with it the node this listener wakes: nothing to wake for.
            std::future::pending::<()>().await;
        }
        match change {
            Change::CancelRequested => self.cancels.mark_unchanged(),
            _ => self.changes.mark_unchanged(),
        }
        Ok(change)
    }
}
