//! Webhook delivery: alerts this node raised go to the outbox; due outbox events (this node's or
//! any other's) are claimed with a lease that covers the whole batch, posted, signed, up to
//! [`DELIVERY_CONCURRENCY`] at once, and every attempt recorded; the backlog is bounded by the
//! settings' `max_pending` (the oldest given up, counted and logged). See [`crate::webhook`]
//! for the contract.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::Utc;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::Shared;
use super::service::Service;
use crate::events::{EventSink, SchedulerEvent};
use crate::store::{Delivery, DeliveryNext, NewEvent, OutboxRow, StoreError};
use crate::webhook::{DELIVERY_CONCURRENCY, MAX_ATTEMPTS, WebhookSettings, body, retry_delay};

/// Events claimed per pass.
const BATCH: u32 = 32;
/// With nothing raised here, how often the outbox is looked at (other nodes' events, retries).
const IDLE_POLL: Duration = Duration::from_secs(60);

/// Where the node's alerts wait to be written to the outbox.
#[derive(Debug)]
pub(crate) struct AlertSink {
    pub(crate) settings: Arc<WebhookSettings>,
    queue: Mutex<Vec<NewEvent>>,
    pub(crate) wake: Notify,
}

impl AlertSink {
    pub(crate) fn new(settings: Arc<WebhookSettings>) -> Self {
        Self {
            settings,
            queue: Mutex::new(Vec::new()),
            wake: Notify::new(),
        }
    }

    fn take(&self) -> Vec<NewEvent> {
        std::mem::take(&mut *self.queue.lock().unwrap_or_else(|p| p.into_inner()))
    }

    fn put_back(&self, mut events: Vec<NewEvent>) {
        let mut queue = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        events.append(&mut queue);
        *queue = events;
    }
}

impl EventSink for AlertSink {
    /// Queues `event` if the webhook sends its type; never waits.
    fn offer(&self, event: &SchedulerEvent) {
        if self.settings.sends(event.kind()) {
            self.queue
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(NewEvent::new(event.kind(), body(event, Utc::now())));
            self.wake.notify_one();
        }
    }
}

/// What one pass did.
pub(crate) struct Pass {
    delivered: usize,
    full: bool,
}

pub(crate) struct Deliverer {
    shared: Arc<Shared>,
    sink: Arc<AlertSink>,
    client: reqwest::Client,
    /// The endpoint answered 410 (here or on another node): nothing is sent any more.
    disabled: Option<String>,
    checked: bool,
    next_retry: Option<Instant>,
}

impl Deliverer {
    pub(crate) fn new(shared: Arc<Shared>, sink: Arc<AlertSink>) -> Self {
        let client = reqwest::Client::builder()
            .timeout(sink.settings.timeout)
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("scheduler/", env!("CARGO_PKG_VERSION")))
            .build()
            .unwrap_or_default();
        Self {
            shared,
            sink,
            client,
            disabled: None,
            checked: false,
            next_retry: None,
        }
    }
}

/// How long a node's claim on a batch lasts: every round of [`DELIVERY_CONCURRENCY`] deliveries
/// may take the whole timeout, plus one round and 5 s for claiming and recording, so no other
/// node re-sends an event of the batch while this one still works on it.
fn batch_lease(timeout: Duration) -> Duration {
    let per_round = u32::try_from(DELIVERY_CONCURRENCY).unwrap_or(1).max(1);
    timeout * (BATCH.div_ceil(per_round) + 1) + Duration::from_secs(5)
}

/// Posts `row` to the endpoint, signed; what happened, as an attempt by `node_id`.
async fn send(
    client: reqwest::Client,
    settings: Arc<WebhookSettings>,
    node_id: String,
    row: OutboxRow,
) -> Delivery {
    let id = format!("msg_{}", row.id);
    let timestamp = Utc::now().timestamp();
    let signature = settings.secret.sign(&id, timestamp, row.payload.as_bytes());
    let started = std::time::Instant::now();
    let response = client
        .post(settings.url.clone())
        .header("content-type", "application/json")
        .header("webhook-id", &id)
        .header("webhook-timestamp", timestamp.to_string())
        .header("webhook-signature", signature)
        .body(row.payload.clone())
        .send()
        .await;
    let duration_ms = i32::try_from(started.elapsed().as_millis()).unwrap_or(i32::MAX);
    let attempt = row.attempts + 1;
    let (status, error) = match response {
        Ok(r) => (Some(r.status().as_u16()), None),
        Err(e) => (None, Some(delivery_error(e))),
    };
    let next = match status {
        Some(s) if (200..300).contains(&s) => DeliveryNext::Delivered,
        Some(410) => DeliveryNext::Disabled,
        _ if attempt >= MAX_ATTEMPTS => DeliveryNext::Failed,
        _ => DeliveryNext::RetryAt(
            Utc::now()
                + chrono::TimeDelta::from_std(retry_delay(attempt))
                    .unwrap_or(chrono::TimeDelta::hours(1)),
        ),
    };
    let error = error.or_else(|| {
        status
            .filter(|s| !(200..300).contains(s))
            .map(|s| format!("the endpoint answered {s}"))
    });
    Delivery {
        outbox_id: row.id,
        attempt,
        node_id,
        status,
        error,
        duration_ms,
        next,
    }
}

/// What a failed delivery says, for the delivery log, the API and the node's log: never the
/// endpoint's URL, whose path or query often is the credential (Slack, Teams and Discord style
/// URLs, `?api_key=`); reqwest's " for url (...)" is dropped and the rest redacted.
fn delivery_error(error: reqwest::Error) -> String {
    let error = error.without_url();
    crate::redact::redact_text(&crate::causes::error_chain(&error))
}

impl Service for Deliverer {
    type Pass = Pass;
    type Error = StoreError;

    fn what(&self) -> &'static str {
        "webhook delivery"
    }

    async fn run_once(&mut self) -> Result<Pass, StoreError> {
        let store = &self.shared.store;
        let raised = self.sink.take();
        if self.disabled.is_some() {
            // The endpoint is gone: nothing more is sent to it (the events still reach this
            // node's subscribers and its log).
            for _ in &raised {
                self.shared.metrics.webhook_delivery("disabled");
            }
            return Ok(Pass {
                delivered: 0,
                full: false,
            });
        }
        if !raised.is_empty()
            && let Err(e) = store.enqueue_events(&raised).await
        {
            self.sink.put_back(raised);
            return Err(e);
        }
        let max_pending = self.sink.settings.max_pending;
        let dropped = store
            .trim_outbox(
                max_pending,
                &format!(
                    "given up unsent: the outbox held more than {max_pending} undelivered events \
                     (the endpoint hung or refused)"
                ),
            )
            .await?;
        if dropped > 0 {
            self.shared.metrics.webhook_dropped(dropped);
            tracing::error!(
                dropped,
                max_pending,
                "webhook outbox over its bound: the oldest undelivered events were given up unsent"
            );
        }
        let digest = self.sink.settings.url_digest();
        if !self.checked {
            self.disabled = store.webhook_disabled(&digest).await?;
            self.checked = true;
            if let Some(reason) = &self.disabled {
                tracing::error!(reason = %reason, "the webhook endpoint is disabled (it answered 410 Gone); alerts stay in the outbox unsent until the URL changes");
            }
        }
        if self.disabled.is_some() {
            return Ok(Pass {
                delivered: 0,
                full: false,
            });
        }
        let lease = batch_lease(self.sink.settings.timeout);
        let rows = store
            .claim_outbox(&self.shared.node_id, BATCH, lease)
            .await?;
        let claimed = rows.len();
        // Up to DELIVERY_CONCURRENCY in flight; then judged in the outbox's order.
        let slots = Arc::new(tokio::sync::Semaphore::new(DELIVERY_CONCURRENCY));
        let mut sending = tokio::task::JoinSet::new();
        for row in rows.iter().cloned() {
            let slots = Arc::clone(&slots);
            let client = self.client.clone();
            let settings = Arc::clone(&self.sink.settings);
            let node_id = self.shared.node_id.to_string();
            sending.spawn(async move {
                let _slot = slots.acquire_owned().await;
                send(client, settings, node_id, row).await
            });
        }
        let mut sent = Vec::with_capacity(claimed);
        while let Some(done) = sending.join_next().await {
            if let Ok(delivery) = done {
                sent.push(delivery);
            }
        }
        sent.sort_by_key(|d| d.outbox_id);
        let mut deliveries = Vec::with_capacity(claimed);
        for delivery in sent {
            let Some(row) = rows.iter().find(|r| r.id == delivery.outbox_id) else {
                continue;
            };
            let result = match delivery.next {
                DeliveryNext::Delivered => "delivered",
                DeliveryNext::RetryAt(_) => "retry",
                DeliveryNext::Failed => "failed",
                DeliveryNext::Disabled => "disabled",
            };
            self.shared.metrics.webhook_delivery(result);
            match delivery.next {
                DeliveryNext::Delivered => {}
                DeliveryNext::RetryAt(at) => {
                    let wait = (at - Utc::now()).to_std().unwrap_or(Duration::ZERO);
                    let due = Instant::now() + wait;
                    self.next_retry = Some(self.next_retry.map_or(due, |n| n.min(due)));
                    tracing::warn!(event = row.id, kind = %row.kind, attempt = delivery.attempt, error = delivery.error.as_deref().unwrap_or(""), "webhook delivery failed; retrying");
                }
                DeliveryNext::Failed => {
                    tracing::error!(event = row.id, kind = %row.kind, attempts = delivery.attempt, error = delivery.error.as_deref().unwrap_or(""), "webhook delivery given up")
                }
                _ => {}
            }
            deliveries.push(delivery);
        }
        store.record_deliveries(&deliveries).await?;
        if deliveries.iter().any(|d| d.next == DeliveryNext::Disabled) {
            let reason = "the endpoint answered 410 Gone".to_owned();
            store.disable_webhook(&digest, &reason).await?;
            tracing::error!(
                "the webhook endpoint answered 410 Gone: disabled for every node; later alerts are not sent"
            );
            self.disabled = Some(reason);
        }
        Ok(Pass {
            delivered: deliveries.len(),
            full: claimed == BATCH as usize,
        })
    }

    fn pause_after(&mut self, pass: Pass) -> Option<Duration> {
        if pass.full && pass.delivered > 0 {
            return Some(Duration::ZERO);
        }
        let until_retry = self
            .next_retry
            .take()
            .map(|at| at.saturating_duration_since(Instant::now()));
        Some(until_retry.map_or(IDLE_POLL, |d| d.min(IDLE_POLL)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_lease_outlasts_every_round_of_the_batch() {
        for timeout in [Duration::from_secs(1), Duration::from_secs(10)] {
            let rounds = BATCH.div_ceil(DELIVERY_CONCURRENCY as u32);
            assert!(batch_lease(timeout) > timeout * rounds, "{timeout:?}");
        }
    }
}
