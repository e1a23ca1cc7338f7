//! Alert delivery: each alert this node raised is routed (by event type, owner and label, see
//! [`crate::channels`]) and written to the outbox once per channel it goes to; due outbox rows
//! (this node's or any other's, for channels this node knows) are claimed with a lease that
//! covers the whole batch, sent, up to [`DELIVERY_CONCURRENCY`] at once, and every attempt
//! recorded; the backlog is bounded by the channels' `max_pending` (the oldest given up,
//! counted and logged). One channel failing never holds back another: each row succeeds, retries
//! or fails on its own. See [`crate::webhook`] for the Standard Webhooks contract.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::Notify;
use tokio::time::Instant;

use super::service::Service;
use crate::channels::{Channel, ChannelKind, Channels};
use crate::events::{Event, EventSink};
use crate::metrics::Metrics;
use crate::store::{Delivery, DeliveryNext, NewEvent, OutboxRow, Store, StoreError};
use crate::webhook::{DELIVERY_CONCURRENCY, MAX_ATTEMPTS};

/// Events claimed per pass.
const BATCH: u32 = 32;
/// With nothing raised here, how often the outbox is looked at (other nodes' events, retries).
const IDLE_POLL: Duration = Duration::from_secs(60);

/// Where the node's alerts wait to be written to the outbox.
#[derive(Debug)]
pub(crate) struct AlertSink {
    pub(crate) channels: Arc<Channels>,
    node_id: String,
    queue: Mutex<Vec<NewEvent>>,
    pub(crate) wake: Notify,
}

impl AlertSink {
    pub(crate) fn new(channels: Arc<Channels>, node_id: &str) -> Self {
        Self {
            channels,
            node_id: node_id.to_owned(),
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

/// The JSON body of `event` (`{type, timestamp, data}`), `data` carrying the task's `owners`,
/// `labels` and `timezone` and, when the event names none, the `node` that raised it.
pub(crate) fn body(event: &Event, at: DateTime<Utc>, node: &str) -> String {
    let mut body: serde_json::Value =
        serde_json::from_str(&crate::webhook::body(event, at)).unwrap_or_default();
    if let Some(data) = body["data"].as_object_mut() {
        data.insert("owners".into(), serde_json::json!(event.tags.owners));
        data.insert("labels".into(), serde_json::json!(event.tags.labels));
        data.insert("timezone".into(), serde_json::json!(event.tags.timezone));
        if !data.contains_key("run") && !data.contains_key("node") {
            data.insert("node".into(), serde_json::json!(node));
        }
        // An alert that folds into an incident names it, as its reminders and resolution do.
        if let Some(task) = event.task()
            && crate::engine::INCIDENT_KINDS.contains(&event.kind())
            && !data.contains_key("incident")
        {
            data.insert(
                "incident".into(),
                serde_json::json!({
                    "task": task,
                    "kind": event.kind(),
                    "opened_at": at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                }),
            );
        }
    }
    body.to_string()
}

impl EventSink for AlertSink {
    /// Queues `event` once per channel it is routed to; never waits.
    fn offer(&self, event: &Event) {
        let kind = event.kind();
        if !self.channels.channels.iter().any(|c| c.sends(kind)) {
            return;
        }
        let targets = self
            .channels
            .route_event(kind, event.owners(), event.labels());
        if targets.is_empty() {
            return;
        }
        let payload = body(event, Utc::now(), &self.node_id);
        let mut queue = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        for channel in targets {
            queue.push(NewEvent::new(kind, payload.clone()).to_channel(channel));
        }
        drop(queue);
        self.wake.notify_one();
    }
}

/// What one pass did.
pub(crate) struct Pass {
    delivered: usize,
    full: bool,
}

pub(crate) struct Deliverer {
    store: Arc<dyn Store>,
    metrics: Arc<Metrics>,
    node_id: Arc<str>,
    /// Where this deployment's admin pages are, for links in the alerts.
    public_url: Option<String>,
    sink: Arc<AlertSink>,
    client: reqwest::Client,
    /// Channels whose endpoint answered 410 (here or on another node): nothing is sent there.
    disabled: HashMap<String, String>,
    checked: bool,
    /// When the retries this node scheduled fall due (the outbox holds them; this says when to
    /// look without waiting for the idle poll).
    retries: Vec<Instant>,
}

impl Deliverer {
    pub(crate) fn new(
        store: Arc<dyn Store>,
        metrics: Arc<Metrics>,
        node_id: Arc<str>,
        public_url: Option<String>,
        sink: Arc<AlertSink>,
    ) -> Self {
        // Each request sets its channel's timeout.
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("scheduler/", env!("CARGO_PKG_VERSION")))
            .build()
            .unwrap_or_default();
        Self {
            store,
            metrics,
            node_id,
            public_url,
            sink,
            client,
            disabled: HashMap::new(),
            checked: false,
            retries: Vec::new(),
        }
    }
}

/// The longest one delivery to `channel` may take (an SMTP exchange is several round trips).
fn longest(channel: &Channel) -> Duration {
    match channel.kind {
        ChannelKind::Email(_) => channel.timeout.saturating_mul(3),
        _ => channel.timeout,
    }
}

/// How long a node's claim on a batch lasts: every round of [`DELIVERY_CONCURRENCY`] deliveries
/// may take the whole timeout, plus one round and 5 s for claiming and recording, so no other
/// node re-sends an event of the batch while this one still works on it.
fn batch_lease(timeout: Duration) -> Duration {
    let per_round = u32::try_from(DELIVERY_CONCURRENCY).unwrap_or(1).max(1);
    timeout
        .saturating_mul(BATCH.div_ceil(per_round) + 1)
        .saturating_add(Duration::from_secs(5))
}

/// The pause before attempt `attempt + 1`: `base` times 3 per earlier attempt, at most 6 h.
fn retry_delay(base: Duration, attempt: i32) -> Duration {
    let exp = u32::try_from(attempt.saturating_sub(1))
        .unwrap_or(0)
        .min(10);
    base.saturating_mul(3u32.pow(exp))
        .min(Duration::from_secs(6 * 3600))
}

/// Sends `row` to its channel; what happened, as an attempt by `node_id`.
async fn send(
    client: reqwest::Client,
    channels: Arc<Channels>,
    public_url: Option<String>,
    node_id: String,
    row: OutboxRow,
) -> Delivery {
    let started = std::time::Instant::now();
    let attempt = row.attempts + 1;
    let outcome = match channels.get(&row.channel) {
        Some(channel) => {
            crate::channels::deliver(
                &client,
                channel,
                &format!("msg_{}", row.id),
                &row.payload,
                public_url.as_deref(),
            )
            .await
        }
        None => crate::channels::Outcome::failed("the channel is not configured on this node"),
    };
    let duration_ms = i32::try_from(started.elapsed().as_millis()).unwrap_or(i32::MAX);
    let next = if outcome.delivered {
        DeliveryNext::Delivered
    } else if outcome.gone {
        DeliveryNext::Disabled
    } else if outcome.permanent || attempt >= MAX_ATTEMPTS {
        DeliveryNext::Failed
    } else {
        // Not before the endpoint's own `Retry-After`, if it sent one.
        let pause =
            retry_delay(channels.retry_base, attempt).max(outcome.retry_after.unwrap_or_default());
        let pause = chrono::TimeDelta::from_std(pause).unwrap_or(chrono::TimeDelta::hours(6));
        let now = Utc::now();
        DeliveryNext::RetryAt(now.checked_add_signed(pause).unwrap_or(now))
    };
    let mut delivery = Delivery::new(row.id, attempt, node_id, next);
    delivery.status = outcome.status;
    delivery.error = outcome.error;
    delivery.duration_ms = duration_ms;
    delivery
}

impl Service for Deliverer {
    type Pass = Pass;
    type Error = StoreError;

    fn what(&self) -> &'static str {
        "alert delivery"
    }

    async fn run_once(&mut self) -> Result<Pass, StoreError> {
        let store = &self.store;
        let channels = Arc::clone(&self.sink.channels);
        // Retries due now are claimed by this pass; those still ahead are kept, so a pass woken
        // early (a new alert) forgets none of them.
        let now = Instant::now();
        self.retries.retain(|at| *at > now);
        let raised = self.sink.take();
        if !raised.is_empty()
            && let Err(e) = store.enqueue_events(&raised).await
        {
            self.sink.put_back(raised);
            return Err(e);
        }
        let max_pending = channels.max_pending;
        let dropped = store
            .trim_outbox(
                max_pending,
                &format!(
                    "given up unsent: the outbox held more than {max_pending} undelivered events \
                     (an endpoint hung or refused)"
                ),
            )
            .await?;
        if dropped > 0 {
            self.metrics.webhook_dropped(dropped);
            tracing::error!(
                dropped,
                max_pending,
                "alert outbox over its bound: the oldest undelivered events were given up unsent"
            );
        }
        if !self.checked {
            for channel in &channels.channels {
                if let Some(reason) = store.webhook_disabled(&channel.digest()).await? {
                    tracing::error!(channel = %channel.name, reason = %reason, "the channel's endpoint is disabled (it answered 410 Gone); its alerts stay in the outbox unsent until its URL changes");
                    self.disabled.insert(channel.name.clone(), reason);
                }
            }
            self.checked = true;
        }
        let open: Vec<String> = channels
            .channels
            .iter()
            .filter(|c| !self.disabled.contains_key(&c.name))
            .map(|c| c.name.clone())
            .collect();
        if open.is_empty() {
            return Ok(Pass {
                delivered: 0,
                full: false,
            });
        }
        let timeout = channels
            .channels
            .iter()
            .map(longest)
            .max()
            .unwrap_or(crate::webhook::DEFAULT_WEBHOOK_TIMEOUT);
        let rows = store
            .claim_outbox(&self.node_id, &open, BATCH, batch_lease(timeout))
            .await?;
        let claimed = rows.len();
        // Up to DELIVERY_CONCURRENCY in flight; then judged in the outbox's order.
        let slots = Arc::new(tokio::sync::Semaphore::new(DELIVERY_CONCURRENCY));
        let mut sending = tokio::task::JoinSet::new();
        for row in rows.iter().cloned() {
            let slots = Arc::clone(&slots);
            let client = self.client.clone();
            let channels = Arc::clone(&channels);
            let public_url = self.public_url.clone();
            let node_id = self.node_id.to_string();
            sending.spawn(async move {
                let _slot = slots.acquire_owned().await;
                send(client, channels, public_url, node_id, row).await
            });
        }
        let mut sent = Vec::with_capacity(claimed);
        while let Some(done) = sending.join_next().await {
            match done {
                Ok(delivery) => sent.push(delivery),
                // Not raised as an event: its alert would come back through this delivery.
                // The row stays claimed until its lease ends and is sent again then.
                Err(e) => {
                    self.metrics.service_panicked("delivery");
                    let why = if e.is_panic() {
                        super::health::panic_message(&*e.into_panic())
                    } else {
                        e.to_string()
                    };
                    tracing::error!(panic = %crate::redact::redact_text(&why), "sending an alert panicked; it is sent again when its claim on the outbox ends");
                }
            }
        }
        sent.sort_by_key(|d| d.outbox_id);
        let mut deliveries = Vec::with_capacity(claimed);
        let mut gone = Vec::new();
        for delivery in sent {
            let Some(row) = rows.iter().find(|r| r.id == delivery.outbox_id) else {
                continue;
            };
            let result = match delivery.next {
                DeliveryNext::Delivered => "delivered",
                DeliveryNext::RetryAt(_) => "retry",
                DeliveryNext::Failed => "failed",
                DeliveryNext::Disabled => "disabled",
                #[allow(unreachable_patterns)]
                _ => "failed",
            };
            self.metrics.webhook_delivery(result);
            let error = delivery.error.as_deref().unwrap_or("");
            match delivery.next {
                DeliveryNext::RetryAt(at) => {
                    let wait = (at - Utc::now()).to_std().unwrap_or(Duration::ZERO);
                    let now = Instant::now();
                    self.retries.push(now.checked_add(wait).unwrap_or(now));
                    tracing::warn!(event = row.id, channel = %row.channel, kind = %row.kind, attempt = delivery.attempt, error, "alert delivery failed; retrying");
                }
                // Once per delivery, never per attempt.
                DeliveryNext::Failed if delivery.attempt < MAX_ATTEMPTS => {
                    tracing::error!(event = row.id, channel = %row.channel, kind = %row.kind, attempts = delivery.attempt, error, "alert delivery refused for good: given up without retrying (the channel stays on; the next alert is tried)")
                }
                DeliveryNext::Failed => {
                    tracing::error!(event = row.id, channel = %row.channel, kind = %row.kind, attempts = delivery.attempt, error, "alert delivery given up")
                }
                DeliveryNext::Disabled if !gone.contains(&row.channel) => {
                    gone.push(row.channel.clone());
                }
                _ => {}
            }
            deliveries.push(delivery);
        }
        store.record_deliveries(&deliveries).await?;
        for name in gone {
            let reason = "the endpoint answered 410 Gone".to_owned();
            if let Some(channel) = channels.get(&name) {
                store.disable_webhook(&channel.digest(), &reason).await?;
            }
            tracing::error!(channel = %name, "the channel's endpoint answered 410 Gone: disabled for every node; later alerts to it are not sent");
            self.disabled.insert(name, reason);
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
            .retries
            .iter()
            .min()
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

    #[test]
    fn no_timeout_or_base_overflows_the_lease_or_the_backoff() {
        let huge = Duration::MAX;
        assert!(batch_lease(huge) >= huge / 2);
        assert_eq!(retry_delay(huge, 9), Duration::from_secs(6 * 3600));
        let mut mail = Channel::new(
            "m",
            ChannelKind::Email(crate::channels::EmailSettings {
                host: "h".into(),
                port: 587,
                tls: crate::channels::EmailTls::StartTls,
                username: None,
                password: None,
                from: "a@example.com".into(),
                to: Vec::new(),
                owners_as_recipients: true,
                ca_pem: None,
            }),
        );
        mail.timeout = huge;
        assert_eq!(longest(&mail), huge);
    }

    #[test]
    fn retries_back_off_from_the_base_to_six_hours() {
        let base = Duration::from_secs(10);
        assert_eq!(retry_delay(base, 1), Duration::from_secs(10));
        assert_eq!(retry_delay(base, 2), Duration::from_secs(30));
        assert_eq!(retry_delay(base, 9), Duration::from_secs(6 * 3600));
    }

    #[test]
    fn the_body_carries_owners_labels_zone_and_node() {
        let event = Event {
            event: crate::events::SchedulerEvent::TaskOrphaned {
                task: "old.task".into(),
            },
            tags: Arc::new(crate::events::TaskTags {
                owners: vec!["a@example.com".into()],
                default_owners: false,
                labels: [("team".to_owned(), "ads".to_owned())].into(),
                timezone: "Asia/Shanghai".into(),
            }),
        };
        let json: serde_json::Value =
            serde_json::from_str(&body(&event, Utc::now(), "n1")).unwrap();
        assert_eq!(json["type"], "task.orphaned");
        assert_eq!(json["data"]["task"], "old.task");
        assert_eq!(json["data"]["owners"], serde_json::json!(["a@example.com"]));
        assert_eq!(json["data"]["labels"]["team"], "ads");
        assert_eq!(json["data"]["timezone"], "Asia/Shanghai");
        assert_eq!(json["data"]["node"], "n1");
    }
}
