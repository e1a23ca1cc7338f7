//! The end of runs: their outcomes recorded, their locks released and what the engine decided
//! to requeue, and the skip records of ticks that got no run of their own.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use sqlx::{Acquire, Row};
use uuid::Uuid;

use super::columns::{RequeueColumns, SkipColumns};
use super::commit::{Written, commit, written};
use crate::store::postgres::PgStore;
use crate::store::{FinishResult, LastRun, RunFinish, SkipRecord, StoreResult};

pub(super) async fn finish_runs(
    store: &PgStore,
    finishes: &[RunFinish],
) -> StoreResult<Vec<FinishResult>> {
    // In task-name order, like renewals (see renew_locks); results in the caller's order.
    let given: Vec<i64> = finishes.iter().map(|f| f.run_id).collect();
    let mut finishes: Vec<&RunFinish> = finishes.iter().collect();
    finishes.sort_unstable_by(|a, b| a.lock.task_name.cmp(&b.lock.task_name));
    let ids: Vec<i64> = finishes.iter().map(|f| f.run_id).collect();
    let names: Vec<&str> = finishes.iter().map(|f| f.lock.task_name.as_str()).collect();
    let tokens: Vec<Uuid> = finishes.iter().map(|f| f.lock.token).collect();
    let statuses: Vec<&str> = finishes.iter().map(|f| f.end.status.as_str()).collect();
    let errors: Vec<Option<&str>> = finishes.iter().map(|f| f.end.error.as_deref()).collect();
    let failures: Vec<&str> = finishes.iter().map(|f| f.failures.as_str()).collect();
    let started: Vec<Option<DateTime<Utc>>> = finishes.iter().map(|f| f.started_at).collect();
    let last_run: Vec<bool> = finishes
        .iter()
        .map(|f| f.last_run == LastRun::Record)
        .collect();
    let collapsed: Vec<i32> = finishes.iter().map(|f| f.collapsed_ticks()).collect();
    let mut requeue = RequeueColumns::default();
    for f in &finishes {
        requeue.push(f.requeue.as_ref());
    }
    let skips = SkipColumns::collect(finishes.iter().flat_map(|f| f.skips.iter()));
    let mut sent = None;
    let result = timed!(store, "finish_runs", |conn| {
        let mut tx = conn.begin().await?;
        let results = sqlx::query(releasing_query!("finish_runs"))
            .bind(&ids)
            .bind(&names)
            .bind(&tokens)
            .bind(&statuses)
            .bind(&errors)
            .bind(&failures)
            .bind(&collapsed)
            .bind(&requeue.kind)
            .bind(&requeue.tick)
            .bind(&requeue.attempt)
            .bind(&requeue.at)
            .bind(&requeue.by)
            .bind(&store.channel)
            .bind(&started)
            .bind(&last_run)
            .fetch_all(&mut *tx)
            .await?
            .iter()
            .map(|row| {
                Ok(FinishResult {
                    run_id: row.try_get("run_id")?,
                    lock_held: row.try_get("lock_held")?,
                })
            })
            .collect::<Result<Vec<_>, sqlx::Error>>()?;
        skips.insert(&mut tx).await?;
        commit(tx, &mut sent, results).await
    });
    let results = match written(result, sent) {
        Written::Done(results) => results,
        Written::Failed(error) => return Err(error),
        Written::Unknown(results, error) => {
            store
                .read_back("finish_runs", error, store.op_timeout, || {
                    read_back_finish(store, &finishes, &results)
                })
                .await?
        }
    };
    let mut by_id: HashMap<i64, FinishResult> =
        results.into_iter().map(|r| (r.run_id, r)).collect();
    Ok(given.iter().filter_map(|id| by_id.remove(id)).collect())
}

/// Reads back a batch of run ends whose COMMIT got no answer: committed if each run written
/// has the status the batch gave it (a run still `running`, or `lost`, was not written; the
/// batch is one transaction, so one run tells for all). `results` are what the batch's
/// statement returned before the COMMIT.
async fn read_back_finish(
    store: &PgStore,
    finishes: &[&RunFinish],
    results: &[FinishResult],
) -> StoreResult<Option<Vec<FinishResult>>> {
    let written: HashMap<i64, &str> = results
        .iter()
        .filter_map(|r| {
            let f = finishes.iter().find(|f| f.run_id == r.run_id)?;
            Some((r.run_id, f.end.status.as_str()))
        })
        .collect();
    let ids: Vec<i64> = written.keys().copied().collect();
    if ids.is_empty() {
        return Ok(None);
    }
    let found: Vec<(i64, String)> = timed!(store, "finish_read_back", |conn| {
        sqlx::query_as(query!("finish_read_back"))
            .bind(&ids)
            .fetch_all(conn)
            .await
    })?;
    let recorded = found
        .iter()
        .filter(|(id, status)| written.get(id) == Some(&status.as_str()))
        .count();
    Ok((recorded == ids.len()).then(|| results.to_vec()))
}

pub(super) async fn record_skips(store: &PgStore, skips: &[SkipRecord]) -> StoreResult<()> {
    let columns = SkipColumns::collect(skips.iter());
    timed!(store, "record_skips", |conn| columns.insert(conn).await)
}
