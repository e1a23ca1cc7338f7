//! Run history, skip records, run logs, nodes and task states, and pruning.

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::{earlier, micros};
use crate::store::records::{log_chunk, node_record, run_record, skip_record, task_state};
use crate::store::sqlite::SqliteStore;
use crate::store::{
    LogChunk, NodeRecord, RunQuery, RunRecord, SkipRecord, StoreError, StoreResult, TaskState,
};

/// The most runs one query returns (as on PostgreSQL).
const MAX_RUNS_PER_PAGE: u32 = 1_000;
/// The most skip records one read of every task's returns (as on PostgreSQL).
const MAX_SKIPS_PER_READ: u32 = 10_000;

pub(super) async fn runs(store: &SqliteStore, q: &RunQuery) -> StoreResult<Vec<RunRecord>> {
    let limit = i64::from(q.limit.clamp(1, MAX_RUNS_PER_PAGE));
    // The filter that leads picks the query, and with it the index: a task's runs are few,
    // a time window is bounded, a status or a trigger of interest is usually rare.
    let sql = if q.task.is_some() {
        query!("runs_by_task")
    } else if q.since.is_some() {
        query!("runs_by_time")
    } else if q.status.is_some() {
        query!("runs_by_status")
    } else if q.trigger.is_some() {
        query!("runs_by_trigger")
    } else {
        query!("runs_query")
    };
    read!(store, "runs", |conn, _now| {
        sqlx::query(sql)
            .bind(q.task.as_deref())
            .bind(q.status.map(|s| s.as_str()))
            .bind(q.trigger.map(|t| t.as_str()))
            .bind(q.since.map(micros))
            .bind(q.until.map(micros))
            .bind(q.before_id)
            .bind(limit)
            .fetch_all(conn)
            .await?
            .iter()
            .map(run_record)
            .collect::<Result<Vec<_>, sqlx::Error>>()?
    })
}

pub(super) async fn run(store: &SqliteStore, run_id: i64) -> StoreResult<Option<RunRecord>> {
    read!(store, "run", |conn, _now| {
        sqlx::query(query!("run_one"))
            .bind(run_id)
            .fetch_optional(conn)
            .await?
            .as_ref()
            .map(run_record)
            .transpose()?
    })
}

pub(super) async fn recent_runs(
    store: &SqliteStore,
    task_name: Option<&str>,
    limit: i64,
) -> StoreResult<Vec<RunRecord>> {
    if limit < 0 {
        // SQLite reads a negative LIMIT as none; PostgreSQL refuses it. Refuse it alike.
        return Err(StoreError::Rejected {
            operation: "recent_runs",
            source: "LIMIT must not be negative".into(),
        });
    }
    read!(store, "recent_runs", |conn, _now| {
        sqlx::query(query!("recent_runs"))
            .bind(task_name)
            .bind(limit)
            .fetch_all(conn)
            .await?
            .iter()
            .map(run_record)
            .collect::<Result<Vec<_>, sqlx::Error>>()?
    })
}

pub(super) async fn skips(
    store: &SqliteStore,
    task_name: &str,
    since: DateTime<Utc>,
) -> StoreResult<Vec<SkipRecord>> {
    read!(store, "skips", |conn, _now| {
        sqlx::query(shared_query!("skips_select"))
            .bind(task_name)
            .bind(micros(since))
            .fetch_all(conn)
            .await?
            .iter()
            .map(skip_record)
            .collect::<Result<Vec<_>, sqlx::Error>>()?
    })
}

pub(super) async fn latest_runs_per_task(
    store: &SqliteStore,
    tasks: &[String],
    per_task: u32,
    since: DateTime<Utc>,
) -> StoreResult<Vec<RunRecord>> {
    let per_task = i64::from(per_task.clamp(1, MAX_RUNS_PER_PAGE));
    let tasks = super::names_json(tasks);
    read!(store, "latest_runs_per_task", |conn, _now| {
        sqlx::query(query!("runs_per_task"))
            .bind(&tasks)
            .bind(per_task)
            .bind(micros(since))
            .fetch_all(conn)
            .await?
            .iter()
            .map(run_record)
            .collect::<Result<Vec<_>, sqlx::Error>>()?
    })
}

pub(super) async fn skips_since(
    store: &SqliteStore,
    since: DateTime<Utc>,
    limit: u32,
) -> StoreResult<Vec<SkipRecord>> {
    let limit = i64::from(limit.clamp(1, MAX_SKIPS_PER_READ));
    read!(store, "skips_since", |conn, _now| {
        sqlx::query(shared_query!("skips_since"))
            .bind(micros(since))
            .bind(limit)
            .fetch_all(conn)
            .await?
            .iter()
            .map(skip_record)
            .collect::<Result<Vec<_>, sqlx::Error>>()?
    })
}

pub(super) async fn latest_skips_per_task(
    store: &SqliteStore,
    tasks: &[String],
    per_task: u32,
    since: DateTime<Utc>,
) -> StoreResult<Vec<SkipRecord>> {
    let per_task = i64::from(per_task.clamp(1, MAX_SKIPS_PER_READ));
    let tasks = super::names_json(tasks);
    read!(store, "latest_skips_per_task", |conn, _now| {
        sqlx::query(query!("skips_per_task"))
            .bind(&tasks)
            .bind(per_task)
            .bind(micros(since))
            .fetch_all(conn)
            .await?
            .iter()
            .map(skip_record)
            .collect::<Result<Vec<_>, sqlx::Error>>()?
    })
}

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

pub(super) async fn run_log(store: &SqliteStore, run_id: i64) -> StoreResult<Vec<LogChunk>> {
    read!(store, "run_log", |conn, _now| {
        sqlx::query(shared_query!("run_logs_select"))
            .bind(run_id)
            .fetch_all(conn)
            .await?
            .iter()
            .map(log_chunk)
            .collect::<Result<Vec<_>, sqlx::Error>>()?
    })
}

pub(super) async fn nodes(store: &SqliteStore) -> StoreResult<Vec<NodeRecord>> {
    read!(store, "nodes", |conn, _now| {
        sqlx::query(query!("nodes"))
            .fetch_all(conn)
            .await?
            .iter()
            .map(node_record)
            .collect::<Result<Vec<_>, sqlx::Error>>()?
    })
}

pub(super) async fn task_states(
    store: &SqliteStore,
    task: Option<&str>,
) -> StoreResult<Vec<TaskState>> {
    read!(store, "task_states", |conn, _now| {
        sqlx::query(query!("task_states"))
            .bind(task)
            .fetch_all(conn)
            .await?
            .iter()
            .map(task_state)
            .collect::<Result<Vec<_>, sqlx::Error>>()?
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
