//! The built-in webhook: alerts delivered as JSON `{type, timestamp, data}` to one URL, signed
//! per [Standard Webhooks](https://www.standardwebhooks.com/), from a durable outbox.
//!
//! ```text
//! SCHEDULER_WEBHOOK_URL=https://hooks.example.com/scheduler
//! SCHEDULER_WEBHOOK_SECRET=whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw
//! SCHEDULER_WEBHOOK_EVENTS=run.failed,run.timed_out,task.missed   # default: the alerts
//! ```
//!
//! - **Which events:** by default the alerts ([`SchedulerEvent::ALERTS`]): a failure, a
//!   timeout, a lost run, a missed run and its recovery, a task that disappeared (from the code:
//!   `task.orphaned`; from the config: `task.removed`), a refused config entry (once per
//!   document that holds it), the scheduler's own errors. Any of [`SchedulerEvent::KINDS`] may be listed.
//! - **Once, by one node, surviving restarts:** the node that saw an event writes it to the
//!   outbox table; any node claims due events with a lease (so one node sends each), posts them,
//!   and records every attempt in the delivery log. Each event keeps its `webhook-id` across
//!   retries, so a receiver can drop duplicates (an attempt whose answer was lost is retried).
//! - **Retries:** any answer but 2xx, or none within the timeout, is retried after 10 s, 30 s,
//!   90 s, ... (times 3, at most 6 h), 8 attempts in all, then the event is `failed`; a 429's
//!   `Retry-After` is honoured (the next attempt is not sooner). The chat channels give up
//!   at once on their vendors' refusals for good (see [`crate::channels`]).
//! - **Bounded and concurrent:** at most [`DEFAULT_MAX_PENDING`] undelivered events are kept
//!   (older ones are given up, counted as `dropped` and logged), so an endpoint that hangs for
//!   hours cannot grow the outbox without bound; a node has up to [`DELIVERY_CONCURRENCY`]
//!   deliveries in flight, and its claim on a batch lasts as long as the batch can take.
//! - **410 Gone disables the endpoint** for every node (until the URL changes): nothing more is
//!   sent to it, and that is logged and recorded.
//! - Redirects are not followed. The secret is never logged.
//!
//! Mail or chat alerts need no code: point the webhook at the receiver of your alerting tool
//! (most accept a generic JSON webhook), or at a small relay.

mod sign;

use std::time::Duration;

use chrono::{DateTime, Utc};

pub use sign::WebhookSecret;

use crate::events::SchedulerEvent;

/// Default time a delivery may take.
pub const DEFAULT_WEBHOOK_TIMEOUT: Duration = Duration::from_secs(10);
/// Delivery attempts per event, in all.
pub const MAX_ATTEMPTS: i32 = 8;
/// Default bound of the outbox's backlog: undelivered events beyond the newest this many are
/// given up, oldest first (counted in `scheduler_webhook_deliveries_total{result="dropped"}`
/// and logged).
pub const DEFAULT_MAX_PENDING: u32 = 10_000;
/// Deliveries one node has in flight at once.
pub const DELIVERY_CONCURRENCY: usize = 8;

/// Where and what the webhook sends.
#[derive(Clone)]
#[non_exhaustive]
pub struct WebhookSettings {
    /// The endpoint.
    pub url: reqwest::Url,
    /// The signing secret.
    pub secret: WebhookSecret,
    /// The event types sent.
    pub events: Vec<String>,
    /// How long one delivery may take.
    pub timeout: Duration,
    /// The most undelivered events the outbox keeps (default [`DEFAULT_MAX_PENDING`]): while
    /// the endpoint hangs or refuses, older ones are given up so the table stays bounded.
    pub max_pending: u32,
}

impl std::fmt::Debug for WebhookSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookSettings")
            // The path and query of a webhook URL are often its credential: only the origin.
            .field(
                "url",
                &format!("{}/…", self.url.origin().ascii_serialization()),
            )
            .field("events", &self.events)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl WebhookSettings {
    /// The webhook of the environment contract, if `SCHEDULER_WEBHOOK_URL` is set.
    pub(crate) fn from_reader(
        env: &crate::env::Env<'_>,
    ) -> Result<Option<Self>, crate::env::InvalidSetting> {
        use crate::env::invalid;
        use crate::vars;
        let Some(url) = env.string(vars::WEBHOOK_URL) else {
            for name in [
                vars::WEBHOOK_SECRET,
                vars::WEBHOOK_EVENTS,
                vars::WEBHOOK_TIMEOUT,
            ] {
                if env.string(name).is_some() {
                    return Err(invalid(
                        name,
                        format!("only applies with {}", vars::WEBHOOK_URL),
                    ));
                }
            }
            return Ok(None);
        };
        let Some(secret) = env.string(vars::WEBHOOK_SECRET) else {
            return Err(invalid(
                vars::WEBHOOK_SECRET,
                "a webhook needs a signing secret (`whsec_` + base64, at least 16 bytes)",
            ));
        };
        let mut webhook = Self::new(&url, &secret).map_err(|e| {
            if e.contains("secret") {
                invalid(vars::WEBHOOK_SECRET, e)
            } else {
                invalid(vars::WEBHOOK_URL, e)
            }
        })?;
        if let Some(events) = env.string(vars::WEBHOOK_EVENTS) {
            webhook = webhook
                .events(events.split(','))
                .map_err(|e| invalid(vars::WEBHOOK_EVENTS, e))?;
        }
        if let Some(timeout) = env.string(vars::WEBHOOK_TIMEOUT) {
            webhook.timeout = crate::bounds::DELIVERY_TIMEOUT
                .parse(vars::WEBHOOK_TIMEOUT, &timeout)
                .map_err(|e| invalid(vars::WEBHOOK_TIMEOUT, e.problem))?;
        }
        Ok(Some(webhook))
    }

    /// Settings for `url` signed with `secret`, sending the alerts, with the default timeout.
    pub fn new(url: &str, secret: &str) -> Result<Self, String> {
        let url = parse_url(url)?;
        Ok(Self {
            url,
            secret: WebhookSecret::parse(secret)?,
            events: SchedulerEvent::ALERTS
                .iter()
                .map(|s| (*s).to_owned())
                .collect(),
            timeout: DEFAULT_WEBHOOK_TIMEOUT,
            max_pending: DEFAULT_MAX_PENDING,
        })
    }

    /// Sends these event types instead (comma-separated in `SCHEDULER_WEBHOOK_EVENTS`); an
    /// unknown type is refused, naming the known ones.
    pub fn events<I, S>(mut self, events: I) -> Result<Self, String>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut chosen = Vec::new();
        for event in events {
            let event = event.as_ref().trim();
            if event.is_empty() {
                continue;
            }
            if !SchedulerEvent::KINDS.contains(&event) {
                return Err(format!(
                    "unknown event type `{event}`; the types are {}",
                    SchedulerEvent::KINDS.join(", ")
                ));
            }
            chosen.push(event.to_owned());
        }
        self.events = chosen;
        Ok(self)
    }

    /// Whether events of `kind` are sent.
    pub fn sends(&self, kind: &str) -> bool {
        self.events.iter().any(|e| e == kind)
    }

    /// A digest of the URL, naming the endpoint in the store (so a new URL starts enabled).
    pub fn url_digest(&self) -> String {
        use sha2::Digest;
        let digest = sha2::Sha256::digest(self.url.as_str().as_bytes());
        digest[..16].iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// Reads an endpoint's URL (`http` or `https`). An error shows the URL's scheme and host only
/// (see [`url_for_people`]): the path and query of a chat hook are its credential.
pub(crate) fn parse_url(text: &str) -> Result<reqwest::Url, String> {
    let url = reqwest::Url::parse(text.trim())
        .map_err(|e| format!("`{}` is not a URL: {e}", url_for_people(text)))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!("`{}` is not an http(s) URL", url_for_people(text)));
    }
    Ok(url)
}

/// A URL as an error or a log may show it, valid or not: its scheme and host, never its user,
/// password, path, query or fragment (`https://hooks.slack.com/…`).
///
/// ```
/// use scheduler::webhook::url_for_people;
///
/// assert_eq!(url_for_people("https://hooks.slack.com/services/T/B/s3cret"), "https://hooks.slack.com/…");
/// assert_eq!(url_for_people("htps://u:pw@open.feishu.cn:8443 /hook/x?y"), "htps://open.feishu.cn:8443/…");
/// assert_eq!(url_for_people("oapi.dingtalk.com/robot/send?access_token=t"), "oapi.dingtalk.com/…");
/// ```
pub fn url_for_people(text: &str) -> String {
    let text = text.trim();
    let (scheme, rest) = match text.find("://") {
        Some(i) => (&text[..i + 3], &text[i + 3..]),
        None => ("", text),
    };
    let authority = rest
        .find(|c: char| matches!(c, '/' | '?' | '#' | '\\') || c.is_whitespace())
        .map_or(rest, |end| &rest[..end]);
    // The user and password end at the authority's last `@`.
    let host = authority.rsplit('@').next().unwrap_or_default();
    let scheme = if scheme.len() > 20 { "" } else { scheme };
    crate::bounds::printable(&format!("{scheme}{host}/…"))
}

/// The JSON body of an event: `{"type": ..., "timestamp": ..., "data": {...}}`.
pub fn body(event: &SchedulerEvent, at: DateTime<Utc>) -> String {
    let mut data = serde_json::to_value(event).unwrap_or_default();
    if let Some(map) = data.as_object_mut() {
        map.remove("type");
    }
    serde_json::json!({
        "type": event.kind(),
        "timestamp": at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        "data": data,
    })
    .to_string()
}

/// The pause before attempt `attempt + 1`: 10 s times 3 per earlier attempt, at most 6 h.
pub fn retry_delay(attempt: i32) -> Duration {
    let exp = u32::try_from(attempt.saturating_sub(1))
        .unwrap_or(0)
        .min(10);
    (Duration::from_secs(10) * 3u32.pow(exp)).min(Duration::from_secs(6 * 3600))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_are_checked() {
        let ok =
            WebhookSettings::new("https://hooks.example.com/x", "a secret of sixteen+").unwrap();
        assert!(ok.sends("run.failed") && !ok.sends("run.started"));
        assert!(WebhookSettings::new("ftp://x", "a secret of sixteen+").is_err());
        let err = ok
            .clone()
            .events(["run.failed", "run.exploded"])
            .unwrap_err();
        assert!(err.contains("unknown event type `run.exploded`"), "{err}");
        let some = ok.events(["run.started", " "]).unwrap();
        assert_eq!(some.events, ["run.started"]);
    }

    #[test]
    fn a_hostile_timeout_in_the_environment_is_refused_with_its_range() {
        let read = |timeout: &'static str| {
            let lookup = move |name: &str| match name {
                "SCHEDULER_WEBHOOK_URL" => Some("https://hooks.example.com/x".to_owned()),
                "SCHEDULER_WEBHOOK_SECRET" => Some("a secret of sixteen+".to_owned()),
                "SCHEDULER_WEBHOOK_TIMEOUT" => Some(timeout.to_owned()),
                _ => None,
            };
            WebhookSettings::from_reader(&crate::env::Env::new(&lookup)).map(|w| w.unwrap().timeout)
        };
        let e = read("200000000000years").unwrap_err().to_string();
        assert!(e.contains("SCHEDULER_WEBHOOK_TIMEOUT"), "{e}");
        assert!(e.contains("from 100ms to 10m"), "{e}");
        assert!(read("0s").is_err());
        assert_eq!(read("2s").unwrap(), Duration::from_secs(2));
    }

    #[test]
    fn a_url_with_a_mistake_is_named_by_its_host_only() {
        let e = WebhookSettings::new(
            "https://hooks.example.com:0x/secret-path?token=s3cret",
            "a secret of sixteen+",
        )
        .unwrap_err();
        assert!(e.contains("`https://hooks.example.com:0x/…`"), "{e}");
        assert!(!e.contains("secret-path") && !e.contains("s3cret"), "{e}");
        let e = WebhookSettings::new(
            "ftp://u:pw@files.example.com/secret-path",
            "a secret of sixteen+",
        )
        .unwrap_err();
        assert!(
            e.contains("`ftp://files.example.com/…`") && !e.contains("pw"),
            "{e}"
        );
    }

    #[test]
    fn the_body_is_type_timestamp_and_data() {
        let event = SchedulerEvent::TaskOrphaned {
            task: "old.task".into(),
        };
        let at: DateTime<Utc> = "2026-01-01T00:00:00Z".parse().unwrap();
        let json: serde_json::Value = serde_json::from_str(&body(&event, at)).unwrap();
        assert_eq!(json["type"], "task.orphaned");
        assert_eq!(json["timestamp"], "2026-01-01T00:00:00.000Z");
        assert_eq!(json["data"], serde_json::json!({"task": "old.task"}));
    }

    #[test]
    fn retries_back_off_to_six_hours() {
        assert_eq!(retry_delay(1), Duration::from_secs(10));
        assert_eq!(retry_delay(2), Duration::from_secs(30));
        assert_eq!(retry_delay(9), Duration::from_secs(6 * 3600));
    }
}
