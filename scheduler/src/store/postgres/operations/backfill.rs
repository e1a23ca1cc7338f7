//! Backfills: recorded with their ticks (audited), cancelled, and read back with their progress.
//! Their ticks are claimed with the task's other work (`claim.rs`).

use sqlx::Row;

use super::exec::{insert_audit, notify_on};
use crate::store::postgres::PgStore;
use crate::store::writes::backfill_not_cancelled;
use crate::store::{AuditEntry, BackfillCancel, BackfillCreate, NewBackfill, StoreResult};

/// A `u32` as PostgreSQL's `integer`, saturating.
fn int4(n: u32) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

pub(super) async fn create_backfill(
    store: &PgStore,
    backfill: &NewBackfill,
    audit: &AuditEntry,
) -> StoreResult<BackfillCreate> {
    write_tx!(store, "create_backfill", |tx, ()| {
        let Some(row) = sqlx::query(query!("backfill_create"))
            .bind(&backfill.task_name)
            .bind(backfill.from)
            .bind(backfill.to)
            .bind(backfill.all_ticks)
            .bind(int4(backfill.max_runs))
            .bind(int4(backfill.concurrency))
            .bind(crate::bounds::BACKFILL_PACE.capped_millis(backfill.pace))
            .bind(&backfill.requested_by)
            .bind(&backfill.ticks)
            .bind(backfill.run_rows())
            .fetch_optional(&mut *tx)
            .await?
        else {
            tx.rollback().await?;
            return Ok(BackfillCreate::NotFound);
        };
        if let Some(busy) = row.try_get::<Option<i64>, _>("busy")? {
            tx.rollback().await?;
            return Ok(BackfillCreate::Busy(busy));
        }
        let id: i64 = row.try_get("id")?;
        insert_audit(&mut tx, audit).await?;
        notify_on(&mut tx, store, "request").await?;
        BackfillCreate::Created(id)
    })
}

pub(super) async fn cancel_backfill(
    store: &PgStore,
    id: i64,
    by: &str,
    audit: &AuditEntry,
) -> StoreResult<BackfillCancel> {
    write_tx!(store, "cancel_backfill", |tx, ()| {
        let cancelled = sqlx::query(query!("backfill_cancel"))
            .bind(id)
            .bind(by)
            .fetch_optional(&mut *tx)
            .await?;
        let Some(row) = cancelled else {
            let answer = backfill_not_cancelled::<PgStore>(&mut tx, (), id).await?;
            tx.rollback().await?;
            return Ok(answer);
        };
        let dropped: i64 = row.try_get("dropped")?;
        let running: Vec<i64> = row.try_get("running")?;
        insert_audit(&mut tx, audit).await?;
        BackfillCancel::Cancelled { dropped, running }
    })
}
