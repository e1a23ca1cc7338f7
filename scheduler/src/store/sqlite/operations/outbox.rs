//! The webhook outbox: events to deliver, their claims, the delivery log, a disabled endpoint.

use std::time::Duration;

use super::bind::{later, limit_of, micros};
use crate::store::records::outbox_row;
use crate::store::sqlite::SqliteStore;
use crate::store::{Delivery, DeliveryNext, NewEvent, OutboxRow, StoreResult};

pub(super) async fn enqueue_events(store: &SqliteStore, events: &[NewEvent]) -> StoreResult<()> {
    write_tx!(store, "enqueue_events", |tx, now| {
        for e in events {
            sqlx::query(query!("outbox_insert"))
                .bind(&e.kind)
                .bind(&e.payload)
                .bind(micros(now))
                .bind(&e.channel)
                .execute(&mut *tx)
                .await?;
        }
    })
}

pub(super) async fn trim_outbox(store: &SqliteStore, keep: u32, reason: &str) -> StoreResult<u64> {
    write_tx!(store, "trim_outbox", |tx, _now| {
        sqlx::query(query!("outbox_trim"))
            .bind(i64::from(keep))
            .bind(reason)
            .execute(&mut *tx)
            .await?
            .rows_affected()
    })
}

pub(super) async fn claim_outbox(
    store: &SqliteStore,
    node_id: &str,
    channels: &[String],
    limit: u32,
    lease: Duration,
) -> StoreResult<Vec<OutboxRow>> {
    let channels = serde_json::to_string(channels).unwrap_or_else(|_| "[]".to_owned());
    write_tx!(store, "claim_outbox", |tx, now| {
        let mut rows = sqlx::query(query!("outbox_claim"))
            .bind(node_id)
            .bind(limit_of(limit))
            .bind(micros(now))
            .bind(later(now, lease))
            .bind(&channels)
            .fetch_all(&mut *tx)
            .await?
            .iter()
            .map(outbox_row)
            .collect::<Result<Vec<_>, sqlx::Error>>()?;
        rows.sort_by_key(|r| r.id);
        rows
    })
}

pub(super) async fn record_deliveries(
    store: &SqliteStore,
    deliveries: &[Delivery],
) -> StoreResult<()> {
    write_tx!(store, "record_deliveries", |tx, now| {
        for d in deliveries {
            sqlx::query(query!("outbox_log"))
                .bind(d.outbox_id)
                .bind(d.attempt)
                .bind(&d.node_id)
                .bind(d.status.map(i32::from))
                .bind(d.error.as_deref())
                .bind(d.duration_ms)
                .bind(micros(now))
                .execute(&mut *tx)
                .await?;
            let (state, retry_at) = match d.next {
                DeliveryNext::Delivered => ("delivered", None),
                DeliveryNext::RetryAt(at) => ("pending", Some(micros(at))),
                DeliveryNext::Failed => ("failed", None),
                DeliveryNext::Disabled => ("disabled", None),
            };
            sqlx::query(query!("outbox_record"))
                .bind(d.outbox_id)
                .bind(d.attempt)
                .bind(state)
                .bind(retry_at)
                .bind(d.error.as_deref())
                .bind(micros(now))
                .execute(&mut *tx)
                .await?;
        }
        for d in deliveries
            .iter()
            .filter(|d| d.next == DeliveryNext::Disabled)
        {
            sqlx::query(query!("outbox_disable_pending"))
                .bind(d.outbox_id)
                .execute(&mut *tx)
                .await?;
        }
    })
}

pub(super) async fn disable_webhook(
    store: &SqliteStore,
    url_digest: &str,
    reason: &str,
) -> StoreResult<()> {
    write_tx!(store, "disable_webhook", |tx, now| {
        sqlx::query(query!("webhook_disable"))
            .bind(url_digest)
            .bind(reason)
            .bind(micros(now))
            .execute(&mut *tx)
            .await?;
    })
}
