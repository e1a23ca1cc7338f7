//! The end of runs: their outcomes recorded, their locks released and what the engine decided
//! to requeue, and the skip records of ticks that got no run of their own.

use chrono::{DateTime, Utc};
use sqlx::SqliteConnection;

use super::bind::{micros, token};
use super::writes::insert_skips;
use crate::store::sqlite::SqliteStore;
use crate::store::{
    FailureCount, FinishResult, LastRun, LockKey, Requeue, RunEnd, RunFinish, SkipRecord,
    StoreResult,
};

/// Releases `lock` if it still has its token (and, with `expired_only`, only if it expired
/// before `now`), records on the task row how run `run_id` ended (`end`, when it is the row's
/// [`LastRun::Record`]; the row's last run is left as it was without one, and as it was before
/// the run's claim, its start included, for [`LastRun::Keep`]), counts `failures`, and applies
/// `requeue`: the one place a released lock's row is written (queries/release_lock.sql), for a
/// rescue and for the end of a run alike. Returns whether the lock was released.
#[allow(clippy::too_many_arguments)]
pub(super) async fn release_lock(
    conn: &mut SqliteConnection,
    lock: &LockKey,
    run_id: Option<i64>,
    end: Option<(&RunEnd, LastRun)>,
    failures: FailureCount,
    requeue: Option<&Requeue>,
    now: DateTime<Utc>,
    expired_only: bool,
) -> Result<bool, sqlx::Error> {
    let (kind, tick, attempt, at, by) = match requeue {
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
            (Some("manual"), None, None, Some(micros(*at)), by.as_deref())
        }
        Some(Requeue::Backfill(tick)) => (Some("backfill"), Some(micros(*tick)), None, None, None),
    };
    let last_run = end.is_none_or(|(_, last)| last == LastRun::Record);
    let end = end.and_then(|(end, last)| (last == LastRun::Record).then_some(end));
    let released: Option<String> = sqlx::query_scalar(query!("release_lock"))
        .bind(&lock.task_name)
        .bind(token(lock.token))
        .bind(run_id)
        .bind(end.map(|e| e.status.as_str()))
        .bind(end.and_then(|e| e.error.as_deref()))
        .bind(failures.as_str())
        .bind(kind)
        .bind(tick)
        .bind(attempt)
        .bind(at)
        .bind(by)
        .bind(micros(now))
        .bind(expired_only)
        .bind(last_run)
        .fetch_optional(&mut *conn)
        .await?;
    if let (Some(_), Some(Requeue::Backfill(tick)), Some(run_id)) = (&released, requeue, run_id) {
        sqlx::query(query!("backfill_tick_back"))
            .bind(run_id)
            .bind(&lock.task_name)
            .bind(micros(*tick))
            .execute(conn)
            .await?;
    }
    Ok(released.is_some())
}

pub(super) async fn finish_runs(
    store: &SqliteStore,
    finishes: &[RunFinish],
) -> StoreResult<Vec<FinishResult>> {
    let results = write_tx!(store, "finish_runs", |tx, now| {
        let mut results = Vec::with_capacity(finishes.len());
        for f in finishes {
            sqlx::query(query!("finish_run"))
                .bind(f.run_id)
                .bind(token(f.lock.token))
                .bind(f.end.status.as_str())
                .bind(f.end.error.as_deref())
                .bind(f.collapsed_ticks())
                .bind(micros(now))
                .bind(f.started_at.map(micros))
                .execute(&mut *tx)
                .await?;
            let lock_held = release_lock(
                &mut tx,
                &f.lock,
                Some(f.run_id),
                Some((&f.end, f.last_run)),
                f.failures,
                f.requeue.as_ref(),
                now,
                false,
            )
            .await?;
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
    write_tx!(store, "record_skips", |tx, now| {
        insert_skips(&mut tx, skips, now).await?;
    })
}
