//! Backfills: recorded with their ticks (audited), cancelled, and read back with their progress.
//! Their ticks are claimed with the task's other work (`claim.rs`).

use sqlx::Row;

use super::bind::micros;
use super::writes::insert_audit;
use crate::store::sqlite::SqliteStore;
use crate::store::writes::backfill_not_cancelled;
use crate::store::{AuditEntry, BackfillCancel, BackfillCreate, NewBackfill, StoreResult};

pub(super) async fn create_backfill(
    store: &SqliteStore,
    backfill: &NewBackfill,
    audit: &AuditEntry,
) -> StoreResult<BackfillCreate> {
    let answer = write_tx!(store, "create_backfill", |tx, now| {
        let Some(row) = sqlx::query(query!("backfill_task"))
            .bind(&backfill.task_name)
            .fetch_optional(&mut *tx)
            .await?
        else {
            return Ok(BackfillCreate::NotFound);
        };
        if let Some(busy) = row.try_get::<Option<i64>, _>("backfill_id")? {
            return Ok(BackfillCreate::Busy(busy));
        }
        // The rows that run each tick: those of `backfill.rows` that exist, none still waiting
        // on another backfill.
        let mut rows = Vec::new();
        for name in backfill.run_rows() {
            let row = sqlx::query(query!("backfill_task"))
                .bind(&name)
                .fetch_optional(&mut *tx)
                .await?;
            let Some(row) = row else { continue };
            if let Some(busy) = row.try_get::<Option<i64>, _>("backfill_id")? {
                return Ok(BackfillCreate::Busy(busy));
            }
            rows.push(name);
        }
        let id: i64 = sqlx::query_scalar(query!("backfill_insert"))
            .bind(&backfill.task_name)
            .bind(micros(backfill.from))
            .bind(micros(backfill.to))
            .bind(backfill.all_ticks)
            .bind(i64::from(backfill.max_runs))
            .bind(i64::from(backfill.concurrency))
            .bind(crate::bounds::BACKFILL_PACE.capped_millis(backfill.pace))
            .bind(&backfill.requested_by)
            .bind(micros(now))
            .fetch_one(&mut *tx)
            .await?;
        for name in &rows {
            for tick in &backfill.ticks {
                sqlx::query(query!("backfill_tick_insert"))
                    .bind(id)
                    .bind(micros(*tick))
                    .bind(name)
                    .execute(&mut *tx)
                    .await?;
            }
            if !backfill.ticks.is_empty() {
                sqlx::query(query!("backfill_start"))
                    .bind(name)
                    .bind(id)
                    .bind(micros(now))
                    .execute(&mut *tx)
                    .await?;
            }
        }
        insert_audit(&mut tx, audit, now, &store.inner.own_audits).await?;
        BackfillCreate::Created(id)
    })?;
    if matches!(answer, BackfillCreate::Created(_)) {
        store.inner.wake();
    }
    Ok(answer)
}

pub(super) async fn cancel_backfill(
    store: &SqliteStore,
    id: i64,
    by: &str,
    audit: &AuditEntry,
) -> StoreResult<BackfillCancel> {
    write_tx!(store, "cancel_backfill", |tx, now| {
        let cancelled = sqlx::query(query!("backfill_cancel"))
            .bind(id)
            .bind(by)
            .bind(micros(now))
            .fetch_optional(&mut *tx)
            .await?;
        let Some(row) = cancelled else {
            return backfill_not_cancelled::<SqliteStore>(&mut tx, now, id).await;
        };
        let task: String = row.try_get("task_name")?;
        let dropped: i64 = row.try_get("dropped")?;
        sqlx::query(query!("backfill_stop"))
            .bind(&task)
            .bind(id)
            .bind(micros(now))
            .execute(&mut *tx)
            .await?;
        let running: Vec<i64> = sqlx::query_scalar(query!("backfill_running"))
            .bind(id)
            .fetch_all(&mut *tx)
            .await?;
        insert_audit(&mut tx, audit, now, &store.inner.own_audits).await?;
        BackfillCancel::Cancelled { dropped, running }
    })
}
