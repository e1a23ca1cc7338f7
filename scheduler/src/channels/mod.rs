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

mod message;
mod vendor;

#[cfg(feature = "email")]
mod email;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;

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

fn check_route(route: &Route, channels: &[Channel]) -> Result<(), String> {
    if route.channels.is_empty() {
        return Err("a route names no channel".to_owned());
    }
    for name in &route.channels {
        if !channels.iter().any(|c| c.name == *name) {
            return Err(format!(
                "a route names channel `{name}`, which is not configured"
            ));
        }
    }
    check_kinds(&route.events)
}

fn check_kinds(kinds: &[String]) -> Result<(), String> {
    for kind in kinds {
        if !SchedulerEvent::KINDS.contains(&kind.as_str()) {
            return Err(format!(
                "unknown event type `{kind}`; the types are {}",
                SchedulerEvent::KINDS.join(", ")
            ));
        }
    }
    Ok(())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    channels: Vec<RawChannel>,
    #[serde(default)]
    routes: Vec<Route>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawChannel {
    name: String,
    kind: String,
    #[serde(default)]
    events: Option<Vec<String>>,
    #[serde(default)]
    timeout: Option<String>,
    #[serde(default)]
    url: Option<String>,
    #[serde(default)]
    secret: Option<String>,
    #[serde(default)]
    host: Option<String>,
    #[serde(default)]
    port: Option<u16>,
    #[serde(default)]
    tls: Option<String>,
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    password: Option<String>,
    #[serde(default)]
    from: Option<String>,
    #[serde(default)]
    to: Vec<String>,
    #[serde(default)]
    owners_as_recipients: Option<bool>,
    #[serde(default)]
    ca_file: Option<String>,
}

/// `env:NAME` is the variable's value; anything else is itself.
fn resolve(
    field: &str,
    value: Option<String>,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<String>, String> {
    match value {
        Some(v) => match v.trim().strip_prefix("env:") {
            Some(name) => lookup(name.trim())
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
                .map(Some)
                .ok_or_else(|| format!("`{field}` names `{}`, which is not set", name.trim())),
            None => Ok(Some(v.trim().to_owned())),
        },
        None => Ok(None),
    }
}

fn http_url(value: Option<String>) -> Result<reqwest::Url, String> {
    let Some(text) = value else {
        return Err("needs a `url`".to_owned());
    };
    crate::webhook::parse_url(&text)
}

impl RawChannel {
    fn into_channel(self, lookup: &dyn Fn(&str) -> Option<String>) -> Result<Channel, String> {
        let name = self.name.trim().to_owned();
        if name.is_empty() || name.chars().any(|c| c.is_control() || c.is_whitespace()) {
            return Err("a channel's name must be a word without spaces".to_owned());
        }
        let url = resolve("url", self.url, lookup)?;
        let secret = resolve("secret", self.secret, lookup)?;
        let password = resolve("password", self.password, lookup)?;
        let username = resolve("username", self.username, lookup)?;
        let is_email = self.kind == "email";
        let email_only = [
            ("host", self.host.is_some()),
            ("port", self.port.is_some()),
            ("tls", self.tls.is_some()),
            ("username", username.is_some()),
            ("password", password.is_some()),
            ("from", self.from.is_some()),
            ("to", !self.to.is_empty()),
            ("owners_as_recipients", self.owners_as_recipients.is_some()),
            ("ca_file", self.ca_file.is_some()),
        ];
        if !is_email {
            if let Some((field, _)) = email_only.iter().find(|(_, set)| *set) {
                return Err(format!("`{field}` only applies to `kind = \"email\"`"));
            }
        } else if url.is_some() || secret.is_some() {
            return Err("`url` and `secret` do not apply to e-mail".to_owned());
        }
        let kind = match self.kind.as_str() {
            "webhook" => {
                let secret = secret.ok_or("a webhook needs a signing `secret`")?;
                ChannelKind::Webhook {
                    url: http_url(url)?,
                    secret: WebhookSecret::parse(&secret)?,
                }
            }
            "slack" | "wecom" if secret.is_some() => {
                return Err(format!("`secret` does not apply to {}", self.kind));
            }
            "slack" => ChannelKind::Slack {
                url: http_url(url)?,
            },
            "wecom" => ChannelKind::WeCom {
                url: http_url(url)?,
            },
            "feishu" | "lark" => ChannelKind::Feishu {
                url: http_url(url)?,
                secret: secret.map(Secret),
            },
            "dingtalk" => ChannelKind::DingTalk {
                url: http_url(url)?,
                secret: secret.map(Secret),
            },
            "email" => ChannelKind::Email(EmailSettings {
                host: self.host.ok_or("an e-mail channel needs the SMTP `host`")?,
                port: self.port.unwrap_or(match self.tls.as_deref() {
                    Some("implicit") => 465,
                    _ => 587,
                }),
                tls: match self.tls.as_deref() {
                    None | Some("starttls") => EmailTls::StartTls,
                    Some("implicit") => EmailTls::Implicit,
                    Some(other) => {
                        return Err(format!(
                            "`tls = \"{other}\"`: write `starttls` or `implicit` (mail is never sent in the clear)"
                        ));
                    }
                },
                username,
                password: password.map(Secret),
                from: self
                    .from
                    .ok_or("an e-mail channel needs a sender, `from`")?,
                to: self.to,
                owners_as_recipients: self.owners_as_recipients.unwrap_or(true),
                ca_pem: self
                    .ca_file
                    .map(|f| {
                        std::fs::read(&f).map_err(|e| format!("cannot read `ca_file` `{f}`: {e}"))
                    })
                    .transpose()?,
            }),
            other => {
                return Err(format!(
                    "unknown kind `{other}`; the kinds are webhook, slack, feishu, dingtalk, wecom, email"
                ));
            }
        };
        #[cfg(not(feature = "email"))]
        if matches!(kind, ChannelKind::Email(_)) {
            return Err("e-mail needs the scheduler's `email` feature".to_owned());
        }
        let mut channel = Channel::new(name, kind);
        if let Some(events) = self.events {
            check_kinds(&events)?;
            channel.events = events;
        }
        if let Some(timeout) = self.timeout {
            channel.timeout = crate::bounds::DELIVERY_TIMEOUT
                .parse("timeout", &timeout)
                .map_err(|e| e.to_string())?;
        }
        Ok(channel)
    }
}

/// What one delivery attempt came to.
#[derive(Debug)]
pub(crate) struct Outcome {
    /// The HTTP status (or SMTP reply code), if the other end answered.
    pub status: Option<u16>,
    /// What went wrong, if anything (never a URL or a secret).
    pub error: Option<String>,
    /// Whether the channel took it.
    pub delivered: bool,
    /// The endpoint is gone (410): send nothing more to it.
    pub gone: bool,
    /// Retrying cannot help (a refused address, no recipient, a message the vendor refuses
    /// for good): the delivery is given up, the channel stays on.
    pub permanent: bool,
    /// The earliest the endpoint wants to be tried again (a 429's `Retry-After`).
    pub retry_after: Option<std::time::Duration>,
}

impl Outcome {
    pub(crate) fn failed(error: impl Into<String>) -> Self {
        Self {
            status: None,
            error: Some(error.into()),
            delivered: false,
            gone: false,
            permanent: false,
            retry_after: None,
        }
    }
}

/// Delivers one outbox row (`payload` is the webhook body, `id` its `webhook-id`) to `channel`.
pub(crate) async fn deliver(
    client: &reqwest::Client,
    channel: &Channel,
    id: &str,
    payload: &str,
    public_url: Option<&str>,
) -> Outcome {
    if let ChannelKind::Webhook { url, secret } = &channel.kind {
        return vendor::standard_webhook(client, channel, url, secret, id, payload).await;
    }
    let alert = match Alert::from_body(payload, public_url) {
        Ok(alert) => alert,
        Err(e) => {
            let mut outcome = Outcome::failed(format!("the event cannot be read: {e}"));
            outcome.permanent = true;
            return outcome;
        }
    };
    match &channel.kind {
        ChannelKind::Webhook { .. } => unreachable!("handled above"),
        ChannelKind::Slack { url } => vendor::slack(client, channel, url, &alert).await,
        ChannelKind::Feishu { url, secret } => {
            vendor::feishu(client, channel, url, secret.as_ref(), &alert).await
        }
        ChannelKind::DingTalk { url, secret } => {
            vendor::dingtalk(client, channel, url, secret.as_ref(), &alert).await
        }
        ChannelKind::WeCom { url } => vendor::wecom(client, channel, url, &alert).await,
        #[cfg(feature = "email")]
        ChannelKind::Email(mail) => email::send(mail, channel.timeout, id, &alert).await,
        #[cfg(not(feature = "email"))]
        ChannelKind::Email(_) => {
            let mut outcome = Outcome::failed("e-mail needs the scheduler's `email` feature");
            outcome.permanent = true;
            outcome
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ConfigFormat;

    fn none(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn a_file_is_checked_and_routes_pick_channels() {
        let text = r#"
[[channels]]
name = "slack"
kind = "slack"
url = "https://hooks.slack.com/services/T1/B1/SecretPath"

[[channels]]
name = "wecom"
kind = "wecom"
url = "https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=SecretKey"
events = ["run.failed"]

[[routes]]
owners = ["alice@example.com"]
channels = ["slack", "wecom"]

[[routes]]
events = ["task.missed"]
labels = { team = "ads" }
channels = ["slack"]
"#;
        let channels = Channels::parse(text, ConfigFormat::Toml, "c.toml", &none).unwrap();
        let debug = format!("{channels:?}");
        assert!(
            !debug.contains("SecretPath") && !debug.contains("SecretKey"),
            "{debug}"
        );
        let alice = vec!["alice@example.com".to_owned()];
        let ads: BTreeMap<String, String> = [("team".into(), "ads".into())].into();
        assert_eq!(
            channels.route_event("run.failed", &alice, &BTreeMap::new()),
            ["slack", "wecom"]
        );
        assert_eq!(
            channels.route_event("task.missed", &alice, &BTreeMap::new()),
            ["slack"],
            "wecom takes run.failed only"
        );
        assert!(channels.route_event("run.failed", &[], &ads).is_empty());
        assert_eq!(channels.route_event("task.missed", &[], &ads), ["slack"]);
    }

    #[test]
    fn a_channels_file_too_deep_is_refused_before_it_is_parsed() {
        let none = |_: &str| None;
        let deep = format!("channels: {}{}", "[".repeat(65_536), "]".repeat(65_536));
        let e = Channels::parse(&deep, ConfigFormat::Yaml, "c.yaml", &none).unwrap_err();
        assert!(e.starts_with("c.yaml: at line 1"), "{e}");
        assert!(e.contains("deeper than the limit of 32 levels"), "{e}");
    }

    #[test]
    fn a_hostile_timeout_is_refused_naming_the_field_and_the_range() {
        let text = "[[channels]]\nname = \"x\"\nkind = \"slack\"\nurl = \"https://a\"\ntimeout = \"200000000000years\"\n";
        let e = Channels::parse(text, ConfigFormat::Toml, "c.toml", &none).unwrap_err();
        assert!(e.starts_with("c.toml: channel `x`: `timeout`: "), "{e}");
        assert!(e.contains("from 100ms to 10m"), "{e}");
        for bad in ["0s", "11m", "soon"] {
            let text = text.replace("200000000000years", bad);
            let e = Channels::parse(&text, ConfigFormat::Toml, "c.toml", &none).unwrap_err();
            assert!(
                e.contains("`timeout`") && e.contains("from 100ms to 10m"),
                "{e}"
            );
        }
        let ok = text.replace("200000000000years", "30s");
        let channels = Channels::parse(&ok, ConfigFormat::Toml, "c.toml", &none).unwrap();
        assert_eq!(channels.channels[0].timeout, Duration::from_secs(30));
    }

    #[test]
    fn a_url_with_a_mistake_is_named_by_its_host_only() {
        for (url, host) in [
            (
                "https://hooks.slack.com:8o/services/T0/B0/SecretPath",
                "https://hooks.slack.com:8o/…",
            ),
            (
                "https://open.feishu.cn:99999/open-apis/bot/v2/hook/SecretPath",
                "https://open.feishu.cn:99999/…",
            ),
            (
                "ftp://user:SecretPass@oapi.dingtalk.com/robot/send?access_token=SecretPath",
                "ftp://oapi.dingtalk.com/…",
            ),
            (
                "qyapi.weixin.qq.com/cgi-bin/webhook/send?key=SecretPath",
                "qyapi.weixin.qq.com/…",
            ),
        ] {
            let text = format!("[[channels]]\nname = \"x\"\nkind = \"slack\"\nurl = \"{url}\"\n");
            let e = Channels::parse(&text, ConfigFormat::Toml, "c.toml", &none).unwrap_err();
            assert!(!e.contains("Secret"), "{e}");
            assert!(e.contains(host), "{e}");
            assert!(e.contains("channel `x`"), "{e}");
        }
    }

    #[test]
    fn mistakes_are_named() {
        let bad =
            |text: &str| Channels::parse(text, ConfigFormat::Toml, "c.toml", &none).unwrap_err();
        assert!(
            bad("[[channels]]\nname = \"x\"\nkind = \"pager\"\nurl = \"https://a\"\n")
                .contains("unknown kind `pager`")
        );
        assert!(
            bad("[[channels]]\nname = \"x\"\nkind = \"teams\"\nurl = \"https://a\"\n")
                .contains("channel `x`: unknown kind `teams`; the kinds are")
        );
        assert!(
            bad("[[channels]]\nname = \"x\"\nkind = \"slack\"\nurl = \"env:NOPE\"\n")
                .contains("`NOPE`, which is not set")
        );
        assert!(
            bad("[[channels]]\nname = \"x\"\nkind = \"slack\"\nurl = \"https://a\"\n[[routes]]\nchannels = [\"y\"]\n")
                .contains("channel `y`, which is not configured")
        );
        assert!(
            bad(
                "[[channels]]\nname = \"x\"\nkind = \"slack\"\nurl = \"https://a\"\nhost = \"h\"\n"
            )
            .contains("`host` only applies")
        );
        let unknown = bad(
            "[[channels]]\nname = \"x\"\nkind = \"slack\"\nurl = \"https://a\"\nevents = [\"run.exploded\"]\n",
        );
        assert!(
            unknown.contains("unknown event type `run.exploded`"),
            "{unknown}"
        );
    }
}
