//! Alert channels and routing: where each alert goes, configured once for the node (a file
//! named by `SCHEDULER_CHANNELS_FILE`, plus the Standard Webhooks channel of
//! `SCHEDULER_WEBHOOK_URL`), never in code.
//!
//! ```toml
//! # channels.toml (TOML, YAML or JSON; the format is told by the extension or sniffed)
//! [[channels]]
//! name = "ops-slack"
//! kind = "slack"                      # an incoming webhook
//! url = "env:SLACK_WEBHOOK_URL"       # `env:NAME` reads the value from the environment
//!
//! [[channels]]
//! name = "ads-feishu"
//! kind = "feishu"                     # a Feishu/Lark custom bot, signed
//! url = "https://open.feishu.cn/open-apis/bot/v2/hook/0f6c..."
//! secret = "env:FEISHU_SECRET"
//!
//! [[channels]]
//! name = "mail"
//! kind = "email"                      # SMTP with STARTTLS (the `email` feature)
//! host = "smtp.example.com"
//! port = 587
//! username = "alerts@example.com"
//! password = "env:SMTP_PASSWORD"
//! from = "Scheduler <alerts@example.com>"
//! to = ["oncall@example.com"]         # and the task's owners that are addresses
//!
//! [[routes]]                          # without routes, every channel gets every alert
//! labels = { team = "ads" }
//! channels = ["ads-feishu", "mail"]
//!
//! [[routes]]
//! events = ["run.failed", "run.timed_out", "task.missed"]
//! channels = ["ops-slack"]
//! ```
//!
//! Kinds: `webhook` (Standard Webhooks, signed), `slack`, `feishu` (also Lark), `dingtalk`,
//! `wecom`, `email`. Each channel has optional `events` (default: the alerts,
//! [`SchedulerEvent::ALERTS`]) and `timeout` (default 10 s).
//!
//! **Routing.** An event goes to a channel when the channel's `events` list it and, if any
//! routes are configured, at least one route names the channel and matches the event: every
//! field a route sets must hold (`events`: the event's type is listed; `owners`: the task has one
//! of them; `labels`: the task has every one of them). The task's owners and labels come from its
//! config entry (`owners`, `labels`), or the node's default owners.
//!
//! **Delivery.** Each (event, channel) pair is one row of the durable outbox, delivered at least
//! once with retries (10 s, 30 s, 90 s, ... at most 6 h, 8 attempts), listed in
//! `/api/deliveries` with its channel; one channel failing never holds back another. A channel's
//! URL, secret and password are never logged nor shown (a channel's `Debug` shows its origin).
//!
//! This module owns the channels' settings, routing and the vendors' formats; the engine's
//! delivery (`engine/delivery.rs`) owns the outbox loop.

mod delivery;
mod document;
mod message;
mod vendor;

#[cfg(feature = "email")]
mod email;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;

pub(crate) use delivery::{Outcome, deliver};
use document::{RawFile, check_route};
pub use message::Alert;

use crate::events::SchedulerEvent;
use crate::webhook::{
    DEFAULT_MAX_PENDING, DEFAULT_WEBHOOK_TIMEOUT, WebhookSecret, WebhookSettings,
};

/// The name of the channel made from `SCHEDULER_WEBHOOK_URL` (or
/// [`SchedulerBuilder::webhook`](crate::SchedulerBuilder::webhook)).
pub const WEBHOOK_CHANNEL: &str = "webhook";

/// The node's alert channels and routes (see the [module docs](self)).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Channels {
    /// The channels, by name (unique).
    pub channels: Vec<Channel>,
    /// The routes; none: every channel gets every event its `events` list.
    pub routes: Vec<Route>,
    /// The most undelivered (event, channel) rows the outbox keeps (default
    /// [`DEFAULT_MAX_PENDING`]).
    pub max_pending: u32,
    /// The first retry's pause; each later one is 3 times longer, at most 6 h (default 10 s).
    pub retry_base: Duration,
}

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

/// A routing rule (see the [module docs](self)).
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
    fn matches(&self, kind: &str, owners: &[String], labels: &BTreeMap<String, String>) -> bool {
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

impl Default for Channels {
    fn default() -> Self {
        Self::new()
    }
}

impl Channels {
    /// No channels; add some with [`with`](Self::with), or read a file with
    /// [`from_file`](Self::from_file).
    pub fn new() -> Self {
        Self {
            channels: Vec::new(),
            routes: Vec::new(),
            max_pending: DEFAULT_MAX_PENDING,
            retry_base: Duration::from_secs(10),
        }
    }

    /// Adds `channel`; a name already taken is refused.
    pub fn with(mut self, channel: Channel) -> Result<Self, String> {
        if self.get(&channel.name).is_some() {
            return Err(format!(
                "channel `{}` is configured more than once",
                channel.name
            ));
        }
        self.channels.push(channel);
        Ok(self)
    }

    /// Adds `route`; a channel it names must be configured already.
    pub fn route(mut self, route: Route) -> Result<Self, String> {
        check_route(&route, &self.channels)?;
        self.routes.push(route);
        Ok(self)
    }

    /// The channel named `name`.
    pub fn get(&self, name: &str) -> Option<&Channel> {
        self.channels.iter().find(|c| c.name == name)
    }

    /// Whether there is no channel.
    pub fn is_empty(&self) -> bool {
        self.channels.is_empty()
    }

    /// The channels an event of `kind` about a task with these owners and labels goes to.
    ///
    /// ```
    /// use scheduler::channels::{Channel, ChannelKind, Channels, Route};
    ///
    /// let slack = |name: &str| {
    ///     Channel::new(name, ChannelKind::Slack { url: "https://hooks.slack.com/services/T/B/x".parse().unwrap() })
    /// };
    /// let mut ads = Route::default();
    /// ads.labels.insert("team".into(), "ads".into());
    /// ads.channels = vec!["ads".into()];
    /// let channels = Channels::new().with(slack("ads"))?.with(slack("ops"))?.route(ads)?;
    /// let labels = [("team".to_string(), "ads".to_string())].into();
    /// assert_eq!(channels.route_event("run.failed", &[], &labels), ["ads"]);
    /// assert!(channels.route_event("run.failed", &[], &Default::default()).is_empty());
    /// # Ok::<(), String>(())
    /// ```
    pub fn route_event(
        &self,
        kind: &str,
        owners: &[String],
        labels: &BTreeMap<String, String>,
    ) -> Vec<&str> {
        self.channels
            .iter()
            .filter(|c| c.sends(kind))
            .filter(|c| {
                self.routes.is_empty()
                    || self
                        .routes
                        .iter()
                        .any(|r| r.channels.contains(&c.name) && r.matches(kind, owners, labels))
            })
            .map(|c| c.name.as_str())
            .collect()
    }

    /// Reads the channels file at `path` (TOML, YAML or JSON, by extension or sniffed); values
    /// written `env:NAME` are read from the process environment.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, String> {
        Self::from_file_with(path.as_ref(), &crate::env::process)
    }

    pub(crate) fn from_file_with(
        path: &Path,
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read `{}`: {e}", path.display()))?;
        let format = crate::config::ConfigFormat::from_path(path)
            .unwrap_or_else(|| crate::config::ConfigFormat::sniff(&text));
        Self::parse(&text, format, &path.display().to_string(), lookup)
    }

    /// Parses a channels document (see the [module docs](self)).
    ///
    /// ```
    /// use scheduler::channels::Channels;
    /// use scheduler::config::ConfigFormat;
    ///
    /// let text = r#"
    /// [[channels]]
    /// name = "robot"
    /// kind = "dingtalk"
    /// url = "https://oapi.dingtalk.com/robot/send?access_token=abc"
    /// secret = "env:DINGTALK_SECRET"
    /// "#;
    /// let env = |name: &str| (name == "DINGTALK_SECRET").then(|| "SECxyz".to_string());
    /// let channels = Channels::parse(text, ConfigFormat::Toml, "channels.toml", &env)?;
    /// assert_eq!(channels.channels[0].kind_name(), "dingtalk");
    /// assert!(!format!("{channels:?}").contains("access_token"));
    /// # Ok::<(), String>(())
    /// ```
    pub fn parse(
        text: &str,
        format: crate::config::ConfigFormat,
        source: &str,
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, String> {
        use crate::config::ConfigFormat;
        // The same size and depth caps as the task config, before any parser sees the text.
        crate::config::prescan::check_text(text, format).map_err(|e| format!("{source}: {e}"))?;
        let raw: RawFile = match format {
            ConfigFormat::Json => serde_json::from_str(text).map_err(|e| e.to_string()),
            ConfigFormat::Toml => toml::from_str(text).map_err(|e| e.message().trim().to_owned()),
            ConfigFormat::Yaml => serde_norway::from_str(text).map_err(|e| e.to_string()),
            #[allow(unreachable_patterns)]
            _ => Err("unsupported format".to_owned()),
        }
        .map_err(|e| format!("{source}: {e}"))?;
        let mut channels = Self::new();
        for entry in raw.channels {
            let name = entry.name.clone();
            let channel = entry
                .into_channel(lookup)
                .map_err(|e| format!("{source}: channel `{name}`: {e}"))?;
            channels = channels
                .with(channel)
                .map_err(|e| format!("{source}: {e}"))?;
        }
        for route in raw.routes {
            channels = channels
                .route(route)
                .map_err(|e| format!("{source}: {e}"))?;
        }
        Ok(channels)
    }
}

#[cfg(test)]
mod tests;
