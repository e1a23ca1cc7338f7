//! What a channel is: where and how it sends (a webhook, a chat bot, e-mail), its secrets, and
//! the routing rules that pick channels for an event.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use crate::events::SchedulerEvent;
use crate::webhook::{DEFAULT_WEBHOOK_TIMEOUT, WebhookSecret, WebhookSettings};

/// The name of the channel made from `SCHEDULER_WEBHOOK_URL` (or
/// [`SchedulerBuilder::webhook`](crate::SchedulerBuilder::webhook)).
pub const WEBHOOK_CHANNEL: &str = "webhook";

/// One channel.
#[derive(Clone)]
#[non_exhaustive]
pub struct Channel {
    /// Its name, as routes and `/api/deliveries` name it.
    pub name: String,
    /// The event types it takes (default: the alerts).
    pub events: Vec<String>,
    /// How long one delivery may take.
    pub timeout: Duration,
    /// Where and how it sends.
    pub kind: ChannelKind,
}

/// Where and how a channel sends.
#[derive(Clone)]
#[non_exhaustive]
pub enum ChannelKind {
    /// Standard Webhooks: `{type, timestamp, data}`, signed.
    Webhook {
        /// The endpoint.
        url: reqwest::Url,
        /// The signing secret.
        secret: WebhookSecret,
    },
    /// A Slack incoming webhook: `{"text": ..., "blocks": [...]}`.
    Slack {
        /// The webhook URL (its path is the credential).
        url: reqwest::Url,
    },
    /// A Feishu/Lark custom bot, signed when it has a secret.
    Feishu {
        /// The bot's webhook URL.
        url: reqwest::Url,
        /// The signing secret (the bot's "signature verification").
        secret: Option<Secret>,
    },
    /// A DingTalk custom robot, signed when it has a secret (`SEC...`).
    DingTalk {
        /// The robot's URL (`...?access_token=...`).
        url: reqwest::Url,
        /// The signing secret.
        secret: Option<Secret>,
    },
    /// A WeCom (WeChat Work) group robot.
    WeCom {
        /// The robot's URL (`...?key=...`).
        url: reqwest::Url,
    },
    /// E-mail over SMTP (the `email` feature).
    Email(EmailSettings),
}

/// A secret string (bot secret, SMTP password): never printed.
#[derive(Clone)]
pub struct Secret(String);

impl Secret {
    /// Wraps `text`.
    pub fn new(text: impl Into<String>) -> Self {
        Self(text.into())
    }

    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("***")
    }
}

/// An SMTP server and the mail's sender and recipients.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct EmailSettings {
    /// The server's host name (also the name its certificate must carry).
    pub host: String,
    /// Its port (default 587, the submission port with STARTTLS; 465 with `tls = "implicit"`).
    pub port: u16,
    /// `starttls` (default: plain connection upgraded, refused if the server cannot) or
    /// `implicit` (TLS from the first byte).
    pub tls: EmailTls,
    /// The login, if the server wants one.
    pub username: Option<String>,
    /// Its password.
    pub password: Option<Secret>,
    /// The sender (`Name <address>` or an address).
    pub from: String,
    /// Recipients of every mail.
    pub to: Vec<String>,
    /// Whether the task's owners that are e-mail addresses receive its alerts too (default
    /// true).
    pub owners_as_recipients: bool,
    /// A PEM file of extra roots to trust (a private CA), besides the platform's.
    pub ca_pem: Option<Vec<u8>>,
}

/// How the SMTP connection is secured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum EmailTls {
    /// STARTTLS, required.
    StartTls,
    /// TLS from the first byte (port 465).
    Implicit,
}

/// A routing rule (see the [module docs](super)).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct Route {
    /// Event types it matches; empty: any.
    #[serde(default)]
    pub events: Vec<String>,
    /// Owners it matches (the task has one of them); empty: any.
    #[serde(default)]
    pub owners: Vec<String>,
    /// Labels it matches (the task has all of them); empty: any.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// The channels its events go to.
    pub channels: Vec<String>,
}

impl Route {
    pub(super) fn matches(
        &self,
        kind: &str,
        owners: &[String],
        labels: &BTreeMap<String, String>,
    ) -> bool {
        (self.events.is_empty() || self.events.iter().any(|e| e == kind))
            && (self.owners.is_empty() || self.owners.iter().any(|o| owners.contains(o)))
            && self
                .labels
                .iter()
                .all(|(k, v)| labels.get(k).is_some_and(|have| have == v))
    }
}

impl std::fmt::Debug for Channel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Channel")
            .field("name", &self.name)
            .field("kind", &self.kind_name())
            // The path and query of a chat webhook are its credential: only the origin.
            .field("target", &self.target())
            .field("events", &self.events)
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl Channel {
    /// A channel named `name` of `kind`, taking the alerts, with the default timeout.
    pub fn new(name: impl Into<String>, kind: ChannelKind) -> Self {
        Self {
            name: name.into(),
            events: SchedulerEvent::ALERTS
                .iter()
                .map(|s| (*s).to_owned())
                .collect(),
            timeout: DEFAULT_WEBHOOK_TIMEOUT,
            kind,
        }
    }

    /// The Standard Webhooks channel of `settings`, named [`WEBHOOK_CHANNEL`].
    pub fn webhook(settings: &WebhookSettings) -> Self {
        Self {
            name: WEBHOOK_CHANNEL.to_owned(),
            events: settings.events.clone(),
            timeout: settings.timeout,
            kind: ChannelKind::Webhook {
                url: settings.url.clone(),
                secret: settings.secret.clone(),
            },
        }
    }

    /// `webhook`, `slack`, `feishu`, `dingtalk`, `wecom` or `email`.
    pub fn kind_name(&self) -> &'static str {
        match &self.kind {
            ChannelKind::Webhook { .. } => "webhook",
            ChannelKind::Slack { .. } => "slack",
            ChannelKind::Feishu { .. } => "feishu",
            ChannelKind::DingTalk { .. } => "dingtalk",
            ChannelKind::WeCom { .. } => "wecom",
            ChannelKind::Email(_) => "email",
        }
    }

    /// Where it sends, for people: a URL's origin only, a mail server's host and port.
    pub fn target(&self) -> String {
        match &self.kind {
            ChannelKind::Webhook { url, .. }
            | ChannelKind::Slack { url }
            | ChannelKind::Feishu { url, .. }
            | ChannelKind::DingTalk { url, .. }
            | ChannelKind::WeCom { url } => format!("{}/…", url.origin().ascii_serialization()),
            ChannelKind::Email(mail) => format!("smtp://{}:{}", mail.host, mail.port),
        }
    }

    /// Whether it takes events of `kind`.
    pub fn sends(&self, kind: &str) -> bool {
        self.events.iter().any(|e| e == kind)
    }

    /// A digest naming the channel's endpoint in the store (a 410 Gone disables it until it
    /// changes).
    pub(crate) fn digest(&self) -> String {
        use sha2::Digest;
        let target = match &self.kind {
            ChannelKind::Webhook { url, .. }
            | ChannelKind::Slack { url }
            | ChannelKind::Feishu { url, .. }
            | ChannelKind::DingTalk { url, .. }
            | ChannelKind::WeCom { url } => url.as_str().to_owned(),
            ChannelKind::Email(mail) => format!("smtp://{}:{}", mail.host, mail.port),
        };
        let digest = sha2::Sha256::digest(target.as_bytes());
        digest[..16].iter().map(|b| format!("{b:02x}")).collect()
    }
}
