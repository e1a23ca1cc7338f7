//! Run history, skip records, run logs, nodes and task states, and pruning.

use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::Row;

use super::millis;
use crate::store::postgres::PgStore;
use crate::store::records::{log_chunk, node_record, run_record, skip_record, task_state};
use crate::store::{LogChunk, NodeRecord, RunQuery, RunRecord, SkipRecord, StoreResult, TaskState};

/// The most runs one query returns.
const MAX_RUNS_PER_PAGE: u32 = 1_000;
/// The most skip records one read of every task's returns.
const MAX_SKIPS_PER_READ: u32 = 10_000;

pub(super) async fn runs(store: &PgStore, q: &RunQuery) -> StoreResult<Vec<RunRecord>> {
    let limit = i64::from(q.limit.clamp(1, MAX_RUNS_PER_PAGE));
    timed!(store, "runs", |conn| {
        sqlx::query(query!("runs_query"))
            .bind(q.task.as_deref())
            .bind(q.status.map(|s| s.as_str()))
            .bind(q.trigger.map(|t| t.as_str()))
            .bind(q.since)
            .bind(q.until)
            .bind(q.before_id)
            .bind(limit)
            .fetch_all(conn)
            .await?
            .iter()
            .map(run_record)
            .collect()
    })
}

pub(super) async fn run(store: &PgStore, run_id: i64) -> StoreResult<Option<RunRecord>> {
    timed!(store, "run", |conn| {
        sqlx::query(query!("run_one"))
            .bind(run_id)
            .fetch_optional(conn)
            .await?
            .as_ref()
            .map(run_record)
            .transpose()
    })
}

pub(super) async fn recent_runs(
    store: &PgStore,
    task_name: Option<&str>,
    limit: i64,
) -> StoreResult<Vec<RunRecord>> {
    timed!(store, "recent_runs", |conn| {
        sqlx::query(query!("recent_runs"))
            .bind(task_name)
            .bind(limit)
            .fetch_all(conn)
            .await?
            .iter()
            .map(run_record)
            .collect()
    })
}

pub(super) async fn skips(
    store: &PgStore,
    task_name: &str,
    since: DateTime<Utc>,
) -> StoreResult<Vec<SkipRecord>> {
    timed!(store, "skips", |conn| {
        sqlx::query(shared_query!("skips_select"))
            .bind(task_name)
            .bind(since)
            .fetch_all(conn)
            .await?
            .iter()
            .map(skip_record)
            .collect()
    })
}

pub(super) async fn latest_runs_per_task(
    store: &PgStore,
    tasks: &[String],
    per_task: u32,
    since: DateTime<Utc>,
) -> StoreResult<Vec<RunRecord>> {
    let per_task = i64::from(per_task.clamp(1, MAX_RUNS_PER_PAGE));
    timed!(store, "latest_runs_per_task", |conn| {
        sqlx::query(query!("runs_per_task"))
            .bind(tasks)
            .bind(per_task)
            .bind(since)
            .fetch_all(conn)
            .await?
            .iter()
            .map(run_record)
            .collect()
    })
}

pub(super) async fn skips_since(
    store: &PgStore,
    since: DateTime<Utc>,
    limit: u32,
) -> StoreResult<Vec<SkipRecord>> {
    let limit = i64::from(limit.clamp(1, MAX_SKIPS_PER_READ));
    timed!(store, "skips_since", |conn| {
        sqlx::query(shared_query!("skips_since"))
            .bind(since)
            .bind(limit)
            .fetch_all(conn)
            .await?
            .iter()
            .map(skip_record)
            .collect()
    })
}

pub(super) async fn latest_skips_per_task(
    store: &PgStore,
    tasks: &[String],
    per_task: u32,
    since: DateTime<Utc>,
) -> StoreResult<Vec<SkipRecord>> {
    let per_task = i64::from(per_task.clamp(1, MAX_SKIPS_PER_READ));
    timed!(store, "latest_skips_per_task", |conn| {
        sqlx::query(query!("skips_per_task"))
            .bind(tasks)
            .bind(per_task)
            .bind(since)
            .fetch_all(conn)
            .await?
            .iter()
            .map(skip_record)
            .collect()
    })
}

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

pub(super) async fn run_log(store: &PgStore, run_id: i64) -> StoreResult<Vec<LogChunk>> {
    timed!(store, "run_log", |conn| {
        sqlx::query(shared_query!("run_logs_select"))
            .bind(run_id)
            .fetch_all(conn)
            .await?
            .iter()
            .map(log_chunk)
            .collect()
    })
}

pub(super) async fn nodes(store: &PgStore) -> StoreResult<Vec<NodeRecord>> {
    timed!(store, "nodes", |conn| {
        sqlx::query(query!("nodes"))
            .fetch_all(conn)
            .await?
            .iter()
            .map(node_record)
            .collect()
    })
}

pub(super) async fn task_states(
    store: &PgStore,
    task: Option<&str>,
) -> StoreResult<Vec<TaskState>> {
    timed!(store, "task_states", |conn| {
        sqlx::query(query!("task_states"))
            .bind(task)
            .fetch_all(conn)
            .await?
            .iter()
            .map(task_state)
            .collect()
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
