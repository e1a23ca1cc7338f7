//! Run logs appended, and what this backend prunes its own way (`Prune`: runs and the outbox
//! with what goes with their rows, and nodes); the reads of history are `store/reads.rs`, the
//! rest of the prune `store/writes.rs`.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::Row;

use super::columns::millis;
use crate::store::postgres::PgStore;
use crate::store::writes::{Prune, Pruned, in_batches};
use crate::store::{LogChunk, StoreResult};

pub(super) async fn append_run_logs(store: &PgStore, chunks: &[LogChunk]) -> StoreResult<()> {
    let ids: Vec<i64> = chunks.iter().map(|c| c.run_id).collect();
    let seqs: Vec<i32> = chunks.iter().map(|c| c.seq).collect();
    let texts: Vec<&str> = chunks.iter().map(|c| c.text.as_str()).collect();
    let lines: Vec<i32> = chunks.iter().map(|c| c.lines).collect();
    let truncated: Vec<bool> = chunks.iter().map(|c| c.truncated).collect();
    timed!(store, "append_run_logs", |conn| {
        sqlx::query(query!("run_logs_insert"))
            .bind(&ids)
            .bind(&seqs)
            .bind(&texts)
            .bind(&lines)
            .bind(&truncated)
            .execute(conn)
            .await
            .map(drop)
    })
}

#[async_trait]
impl Prune for PgStore {
    async fn prune_runs(&self, retention: Duration, batch: i64) -> StoreResult<u64> {
        let store = self;
        // Runs: each batch continues where the previous one stopped (see prune_runs.sql).
        let pruned_runs = in_batches(batch, None, |stopped_at| async move {
            let (found, deleted, last): (i64, i64, Option<DateTime<Utc>>) =
                timed!(store, "prune_history", |conn| {
                    let row = sqlx::query(query!("prune_runs"))
                        .bind(millis(retention))
                        .bind(batch)
                        .bind(stopped_at)
                        .fetch_one(conn)
                        .await?;
                    Ok::<_, sqlx::Error>((
                        row.try_get("found")?,
                        row.try_get("deleted")?,
                        row.try_get("stopped_at")?,
                    ))
                })?;
            Ok(Pruned {
                found: u64::try_from(found).unwrap_or(0),
                deleted: u64::try_from(deleted).unwrap_or(0),
                next: last.or(stopped_at),
            })
        })
        .await?;
        // The outbox: its delivery log goes with each event (see prune_outbox.sql).
        in_batches(batch, (), |()| async move {
            let deleted: u64 = timed!(store, "prune_history", |conn| {
                sqlx::query(query!("prune_outbox"))
                    .bind(millis(retention))
                    .bind(batch)
                    .execute(conn)
                    .await
                    .map(|done| done.rows_affected())
            })?;
            Ok(Pruned {
                found: deleted,
                deleted,
                next: (),
            })
        })
        .await?;
        Ok(pruned_runs)
    }

    async fn prune_nodes(&self, retention: Duration) -> StoreResult<()> {
        let store = self;
        timed!(store, "prune_history", |conn| {
            sqlx::query(query!("prune_nodes"))
                .bind(millis(retention))
                .execute(conn)
                .await
                .map(|_| ())
        })?;
        timed!(store, "prune_history", |conn| {
            sqlx::query(query!("prune_node_rows"))
                .execute(conn)
                .await
                .map(|_| ())
        })
    }
}
