//! Run history, skip records, run logs, nodes and task states, and pruning.

use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::Row;

use super::columns::millis;
use crate::store::postgres::PgStore;
use crate::store::{LogChunk, StoreResult};

pub(super) async fn append_run_logs(store: &PgStore, chunks: &[LogChunk]) -> StoreResult<()> {
    if chunks.is_empty() {
        return Ok(());
    }
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

pub(super) async fn prune_history(
    store: &PgStore,
    retention: Duration,
    batch: u32,
) -> StoreResult<u64> {
    let batch = i64::from(batch.max(1));
    // Runs: each batch continues where the previous one stopped (see prune_runs.sql).
    let mut pruned_runs = 0;
    let mut stopped_at: Option<DateTime<Utc>> = None;
    loop {
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
        pruned_runs += u64::try_from(deleted).unwrap_or(0);
        // Judged by what the batch found, not by what it deleted: a batch racing another
        // node's prune deletes fewer, and the pass is not done.
        if found < batch {
            break;
        }
        stopped_at = last.or(stopped_at);
    }
    for sql in [
        query!("prune_skips"),
        query!("prune_outbox"),
        query!("prune_audit"),
        query!("prune_incidents"),
        query!("prune_alert_marks"),
        query!("prune_broadcast_ticks"),
    ] {
        loop {
            let deleted: u64 = timed!(store, "prune_history", |conn| {
                sqlx::query(sql)
                    .bind(millis(retention))
                    .bind(batch)
                    .execute(conn)
                    .await
                    .map(|done| done.rows_affected())
            })?;
            if deleted < batch as u64 {
                break;
            }
        }
    }
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
    })?;
    Ok(pruned_runs)
}
