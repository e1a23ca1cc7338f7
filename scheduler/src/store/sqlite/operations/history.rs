//! Run logs appended, and what this backend prunes its own way (`Prune`: runs and the outbox
//! with what goes with their rows, and nodes); the reads of history are `store/reads.rs`, the
//! rest of the prune `store/writes.rs`.

use std::time::Duration;

use async_trait::async_trait;

use super::bind::earlier;
use crate::store::sqlite::SqliteStore;
use crate::store::writes::{Prune, Pruned, in_batches};
use crate::store::{LogChunk, StoreResult};

pub(super) async fn append_run_logs(store: &SqliteStore, chunks: &[LogChunk]) -> StoreResult<()> {
    write_tx!(store, "append_run_logs", |tx, _now| {
        for c in chunks {
            sqlx::query(query!("run_logs_insert"))
                .bind(c.run_id)
                .bind(c.seq)
                .bind(&c.text)
                .bind(c.lines)
                .bind(c.truncated)
                .execute(&mut *tx)
                .await?;
        }
    })
}

#[async_trait]
impl Prune for SqliteStore {
    async fn prune_runs(&self, retention: Duration, batch: i64) -> StoreResult<u64> {
        let prune = |dependent, sql| prune_with(self, retention, batch, dependent, sql);
        let pruned_runs = prune(query!("prune_run_logs"), query!("prune_runs")).await?;
        prune(query!("prune_deliveries"), query!("prune_outbox")).await?;
        Ok(pruned_runs)
    }

    async fn prune_nodes(&self, retention: Duration) -> StoreResult<()> {
        let store = self;
        write_tx!(store, "prune_history", |tx, now| {
            sqlx::query(query!("prune_nodes"))
                .bind(earlier(now, retention))
                .execute(&mut *tx)
                .await?;
            sqlx::query(query!("prune_node_rows"))
                .execute(&mut *tx)
                .await?;
        })
    }
}

/// Prunes the rows of `sql` older than `retention` in batches, each in one transaction that
/// first deletes what goes with its rows (`dependent`: a run's logs, an event's delivery log),
/// so the write lock is never held for long; says how many rows of `sql` it deleted.
async fn prune_with(
    store: &SqliteStore,
    retention: Duration,
    batch: i64,
    dependent: &'static str,
    sql: &'static str,
) -> StoreResult<u64> {
    in_batches(batch, (), |()| async move {
        let deleted = write_tx!(store, "prune_history", |tx, now| {
            let before = earlier(now, retention);
            sqlx::query(dependent)
                .bind(before)
                .bind(batch)
                .execute(&mut *tx)
                .await?;
            sqlx::query(sql)
                .bind(before)
                .bind(batch)
                .execute(&mut *tx)
                .await?
                .rows_affected()
        })?;
        Ok(Pruned {
            found: deleted,
            deleted,
            next: (),
        })
    })
    .await
}
