//! The end of runs: their outcomes recorded, their locks released and what the engine decided
//! to requeue, and the skip records of ticks that got no run of their own.

use super::{insert_skips, micros, token};
use crate::store::sqlite::SqliteStore;
use crate::store::{FinishResult, Requeue, RunFinish, SkipRecord, StoreResult};

/// A requeue as the bound values of release_lock and finish_release: kind, tick, attempt, due
/// time, asker.
pub(super) type RequeueValues = (
    Option<&'static str>,
    Option<i64>,
    Option<i32>,
    Option<i64>,
    Option<String>,
);

pub(super) fn requeue_values(requeue: Option<&Requeue>) -> RequeueValues {
    match requeue {
        None => (None, None, None, None, None),
        Some(Requeue::Tick(tick)) => (Some("tick"), Some(micros(*tick)), None, None, None),
        Some(Requeue::Retry { tick, attempt, at }) => (
            Some("retry"),
            Some(micros(*tick)),
            Some(*attempt),
            Some(micros(*at)),
            None,
        ),
        Some(Requeue::Manual { at, by }) => {
            (Some("manual"), None, None, Some(micros(*at)), by.clone())
        }
    }
}

pub(super) async fn finish_runs(
    store: &SqliteStore,
    finishes: &[RunFinish],
) -> StoreResult<Vec<FinishResult>> {
    if finishes.is_empty() {
        return Ok(Vec::new());
    }
    let results = write_tx!(store, "finish_runs", |tx, now| {
        let mut results = Vec::with_capacity(finishes.len());
        for f in finishes {
            let collapsed: i64 = f.skips.iter().map(|s| s.ticks).sum();
            // PostgreSQL stores the count as int4; the same bound here.
            let collapsed = collapsed.clamp(0, i64::from(i32::MAX));
            sqlx::query(query!("finish_run"))
                .bind(f.run_id)
                .bind(token(f.lock.token))
                .bind(f.end.status.as_str())
                .bind(f.end.error.as_deref())
                .bind(collapsed)
                .bind(micros(now))
                .bind(f.started_at.map(micros))
                .execute(&mut *tx)
                .await?;
            let (kind, tick, attempt, at, by) = requeue_values(f.requeue.as_ref());
            let lock_held = sqlx::query(query!("finish_release"))
                .bind(&f.lock.task_name)
                .bind(token(f.lock.token))
                .bind(f.end.status.as_str())
                .bind(f.end.error.as_deref())
                .bind(f.failures.as_str())
                .bind(kind)
                .bind(tick)
                .bind(attempt)
                .bind(at)
                .bind(by)
                .bind(micros(now))
                .execute(&mut *tx)
                .await?
                .rows_affected()
                > 0;
            results.push(FinishResult {
                run_id: f.run_id,
                lock_held,
            });
        }
        for f in finishes {
            insert_skips(&mut tx, &f.skips, now).await?;
        }
        results
    })?;
    if results.iter().any(|r| r.lock_held) {
        store.inner.wake();
    }
    Ok(results)
}

pub(super) async fn record_skips(store: &SqliteStore, skips: &[SkipRecord]) -> StoreResult<()> {
    if skips.is_empty() {
        return Ok(());
    }
    write_tx!(store, "record_skips", |tx, now| {
        insert_skips(&mut tx, skips, now).await?;
    })
}
