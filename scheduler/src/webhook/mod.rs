//! The built-in webhook: alerts (see [`SchedulerEvent::ALERTS`](crate::events::SchedulerEvent::ALERTS))
//! delivered as JSON `{type, timestamp, data}` to one URL, signed per Standard Webhooks.

mod sign;

pub use sign::WebhookSecret;
