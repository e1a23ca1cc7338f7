//! The webhook outbox: events to deliver, their claims, the delivery log, a disabled endpoint.

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use sqlx::Acquire;

use super::columns::millis;
use super::commit::sending;
use crate::store::postgres::PgStore;
use crate::store::records::outbox_row;
use crate::store::{Delivery, DeliveryNext, NewEvent, OutboxRow, StoreResult};

pub(super) async fn enqueue_events(store: &PgStore, events: &[NewEvent]) -> StoreResult<()> {
    let channels: Vec<&str> = events.iter().map(|e| e.channel.as_str()).collect();
    let kinds: Vec<&str> = events.iter().map(|e| e.kind.as_str()).collect();
    let payloads: Vec<&str> = events.iter().map(|e| e.payload.as_str()).collect();
    let mut sent = None;
    let mut began = Instant::now();
    let result = timed!(store, "enqueue_events", |conn| {
        began = Instant::now();
        let insert = sqlx::query(query!("outbox_insert"))
            .bind(&kinds)
            .bind(&payloads)
            .bind(&channels)
            .execute(&mut *conn);
        sending(&mut sent, (), insert).await.map(drop)
    });
    match (result, sent) {
        (Ok(()), _) => Ok(()),
        (Err(error), Some(())) => {
            store
                .read_back("enqueue_events", error, store.op_timeout, || {
                    read_back_events(store, [&kinds, &payloads, &channels], began)
                })
                .await
        }
        (Err(error), None) => Err(error),
    }
}

/// Reads back events whose insert (sent at `began`) got no answer: written if each has a row
/// with its type, body and channel written no earlier than `began` by the store's clock (its
/// clock now, less the time since `began` measured after the read). One statement wrote them:
/// all are there or none is.
async fn read_back_events(
    store: &PgStore,
    [kinds, payloads, channels]: [&[&str]; 3],
    began: Instant,
) -> StoreResult<Option<()>> {
    // Rows of the last while only (the index on created_at); the exact test is below.
    let window = millis(began.elapsed() + store.op_timeout);
    let found: Vec<(Option<DateTime<Utc>>, DateTime<Utc>)> =
        timed!(store, "outbox_read_back", |conn| {
            sqlx::query_as(query!("outbox_read_back"))
                .bind(kinds)
                .bind(payloads)
                .bind(channels)
                .bind(window)
                .fetch_all(conn)
                .await
        })?;
    let since = chrono::TimeDelta::from_std(began.elapsed()).unwrap_or(chrono::TimeDelta::MAX);
    let written = found
        .iter()
        .all(|(at, db_now)| at.is_some_and(|at| at >= *db_now - since));
    Ok(written.then_some(()))
}

pub(super) async fn trim_outbox(store: &PgStore, keep: u32, reason: &str) -> StoreResult<u64> {
    timed!(store, "trim_outbox", |conn| {
        sqlx::query(query!("outbox_trim"))
            .bind(i64::from(keep))
            .bind(reason)
            .execute(conn)
            .await
            .map(|done| done.rows_affected())
    })
}

pub(super) async fn claim_outbox(
    store: &PgStore,
    node_id: &str,
    channels: &[String],
    limit: u32,
    lease: Duration,
) -> StoreResult<Vec<OutboxRow>> {
    timed!(store, "claim_outbox", |conn| {
        let mut rows: Vec<OutboxRow> = sqlx::query(query!("outbox_claim"))
            .bind(node_id)
            .bind(i64::from(limit))
            .bind(millis(lease))
            .bind(channels)
            .fetch_all(conn)
            .await?
            .iter()
            .map(outbox_row)
            .collect::<Result<_, sqlx::Error>>()?;
        rows.sort_by_key(|r| r.id);
        Ok(rows)
    })
}

pub(super) async fn record_deliveries(store: &PgStore, deliveries: &[Delivery]) -> StoreResult<()> {
    let ids: Vec<i64> = deliveries.iter().map(|d| d.outbox_id).collect();
    let attempts: Vec<i32> = deliveries.iter().map(|d| d.attempt).collect();
    let nodes: Vec<&str> = deliveries.iter().map(|d| d.node_id.as_str()).collect();
    let statuses: Vec<Option<i32>> = deliveries.iter().map(|d| d.status.map(i32::from)).collect();
    let errors: Vec<Option<&str>> = deliveries.iter().map(|d| d.error.as_deref()).collect();
    let durations: Vec<i32> = deliveries.iter().map(|d| d.duration_ms).collect();
    let (states, retry_at): (Vec<&str>, Vec<Option<chrono::DateTime<chrono::Utc>>>) = deliveries
        .iter()
        .map(|d| match d.next {
            DeliveryNext::Delivered => ("delivered", None),
            DeliveryNext::RetryAt(at) => ("pending", Some(at)),
            DeliveryNext::Failed => ("failed", None),
            DeliveryNext::Disabled => ("disabled", None),
        })
        .unzip();
    let disabled: Vec<i64> = deliveries
        .iter()
        .filter(|d| d.next == DeliveryNext::Disabled)
        .map(|d| d.outbox_id)
        .collect();
    timed!(store, "record_deliveries", |conn| {
        let mut tx = conn.begin().await?;
        sqlx::query(query!("outbox_record"))
            .bind(&ids)
            .bind(&attempts)
            .bind(&nodes)
            .bind(&statuses)
            .bind(&errors)
            .bind(&durations)
            .bind(&states)
            .bind(&retry_at)
            .execute(&mut *tx)
            .await?;
        if !disabled.is_empty() {
            sqlx::query(query!("outbox_disable_pending"))
                .bind(&disabled)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await
    })
}

pub(super) async fn disable_webhook(
    store: &PgStore,
    url_digest: &str,
    reason: &str,
) -> StoreResult<()> {
    timed!(store, "disable_webhook", |conn| {
        sqlx::query(query!("webhook_disable"))
            .bind(url_digest)
            .bind(reason)
            .execute(conn)
            .await
            .map(drop)
    })
}
