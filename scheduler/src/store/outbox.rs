//! The webhook outbox: events written durably by the node that saw them, then delivered once by
//! whichever node claims them, with every attempt logged.

use chrono::{DateTime, Utc};
use serde::Serialize;

/// An event to deliver to one channel.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct NewEvent {
    /// The channel it goes to (`webhook` unless said otherwise).
    pub channel: String,
    /// Its type (`run.failed`, ...).
    pub kind: String,
    /// The JSON body to send (`{type, timestamp, data}`).
    pub payload: String,
}

impl NewEvent {
    /// An event of `kind` with the JSON `payload`, for the `webhook` channel.
    pub fn new(kind: impl Into<String>, payload: impl Into<String>) -> Self {
        Self {
            channel: "webhook".to_owned(),
            kind: kind.into(),
            payload: payload.into(),
        }
    }

    /// The same event for the channel named `channel`.
    pub fn to_channel(mut self, channel: impl Into<String>) -> Self {
        self.channel = channel.into();
        self
    }
}

/// An event claimed for delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct OutboxRow {
    /// Its id (the `webhook-id` is derived from it).
    pub id: i64,
    /// The channel it goes to.
    pub channel: String,
    /// Its type.
    pub kind: String,
    /// The JSON body.
    pub payload: String,
    /// Attempts made before this one.
    pub attempts: i32,
    /// When it was written.
    pub created_at: DateTime<Utc>,
}

/// What happens to an event after a delivery attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum DeliveryNext {
    /// Delivered: done.
    Delivered,
    /// Try again then.
    RetryAt(DateTime<Utc>),
    /// Given up (too many attempts, or a permanent refusal).
    Failed,
    /// The endpoint is gone (410): this event and every later one are not sent.
    Disabled,
}

/// One delivery attempt, to record.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Delivery {
    /// The event.
    pub outbox_id: i64,
    /// Which attempt this was (from 1).
    pub attempt: i32,
    /// The node that made it.
    pub node_id: String,
    /// The HTTP status, if the endpoint answered.
    pub status: Option<u16>,
    /// What went wrong, if anything.
    pub error: Option<String>,
    /// How long it took.
    pub duration_ms: i32,
    /// What happens next.
    pub next: DeliveryNext,
}

impl Delivery {
    /// Attempt `attempt` at event `outbox_id` by `node_id`, after which `next`; no answer, no
    /// error and no time taken recorded yet (set the fields).
    pub fn new(
        outbox_id: i64,
        attempt: i32,
        node_id: impl Into<String>,
        next: DeliveryNext,
    ) -> Self {
        Self {
            outbox_id,
            attempt,
            node_id: node_id.into(),
            status: None,
            error: None,
            duration_ms: 0,
            next,
        }
    }
}

/// A recorded delivery attempt, for operators.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct DeliveryRecord {
    /// The event (one row per event and channel).
    pub outbox_id: i64,
    /// The channel it went to.
    pub channel: String,
    /// Its type.
    pub kind: String,
    /// Which attempt.
    pub attempt: i32,
    /// Which node.
    pub node_id: String,
    /// When.
    pub at: DateTime<Utc>,
    /// The HTTP status, if any.
    pub status: Option<i32>,
    /// The error, if any.
    pub error: Option<String>,
    /// How long it took.
    pub duration_ms: i32,
}
