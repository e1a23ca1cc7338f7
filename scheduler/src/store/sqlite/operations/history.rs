//! Run history, skip records, run logs, nodes and task states, and pruning.

use std::time::Duration;

use super::bind::earlier;
use crate::store::sqlite::SqliteStore;
use crate::store::{LogChunk, StoreResult};

pub(super) async fn append_run_logs(store: &SqliteStore, chunks: &[LogChunk]) -> StoreResult<()> {
    if chunks.is_empty() {
        return Ok(());
    }
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

pub(super) async fn prune_history(
    store: &SqliteStore,
    retention: Duration,
    batch: u32,
) -> StoreResult<u64> {
    let batch = i64::from(batch.max(1));
    let mut pruned_runs = 0;
    // Each table's batch: what goes with its rows first (a run's logs, an event's delivery
    // log), then the rows, in one transaction per batch, so the write lock is never held for
    // long.
    for (table, dependent, sql) in [
        ("runs", Some(query!("prune_run_logs")), query!("prune_runs")),
        ("skips", None, query!("prune_skips")),
        (
            "outbox",
            Some(query!("prune_deliveries")),
            query!("prune_outbox"),
        ),
        ("audit", None, query!("prune_audit")),
        ("incidents", None, query!("prune_incidents")),
        ("alert marks", None, query!("prune_alert_marks")),
        ("broadcast ticks", None, query!("prune_broadcast_ticks")),
    ] {
        loop {
            let deleted = write_tx!(store, "prune_history", |tx, now| {
                let before = earlier(now, retention);
                if let Some(dependent) = dependent {
                    sqlx::query(dependent)
                        .bind(before)
                        .bind(batch)
                        .execute(&mut *tx)
                        .await?;
                }
                sqlx::query(sql)
                    .bind(before)
                    .bind(batch)
                    .execute(&mut *tx)
                    .await?
                    .rows_affected()
            })?;
            if table == "runs" {
                pruned_runs += deleted;
            }
            if deleted < batch as u64 {
                break;
            }
        }
    }
    write_tx!(store, "prune_history", |tx, now| {
        sqlx::query(query!("prune_nodes"))
            .bind(earlier(now, retention))
            .execute(&mut *tx)
            .await?;
        sqlx::query(query!("prune_node_rows"))
            .execute(&mut *tx)
            .await?;
    })?;
    Ok(pruned_runs)
}
