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
//! [`SchedulerEvent::ALERTS`](crate::events::SchedulerEvent::ALERTS)) and `timeout` (default 10 s).
//!
//! **Routing.** An event goes to a channel when the channel's `events` list it and, if any
//! routes are configured, at least one route names the channel and matches the event: every
//! field a route sets must hold (`events`: the event's type is listed; `owners`: the task has one
//! of them; `labels`: the task has every one of them). The task's owners and labels come from its
//! config entry (`owners`, `labels`), or the node's default owners; an instance's own owners
//! replace its task's, and its own labels go over its task's (`Schedule::owners`,
//! `Schedule::label`).
//!
//! **Delivery.** Each (event, channel) pair is one row of the durable outbox, delivered at least
//! once with retries (10 s, 30 s, 90 s, ... at most 6 h, 8 attempts), listed in
//! `/api/deliveries` with its channel; one channel failing never holds back another. A channel's
//! URL, secret and password are never logged nor shown (a channel's `Debug` shows its origin).
//!
//! This module owns the channels' settings, routing and the vendors' formats; the engine's
//! delivery (`engine/delivery.rs`) owns the outbox loop.

mod channel;
mod delivery;
mod document;
mod message;
mod outcome;
mod vendor;

#[cfg(feature = "email")]
mod email;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

pub use channel::{Channel, ChannelKind, EmailSettings, EmailTls, Route, Secret, WEBHOOK_CHANNEL};
pub(crate) use delivery::deliver;
use document::{RawFile, check_route};
pub use message::Alert;
pub(crate) use outcome::Outcome;

use crate::webhook::DEFAULT_MAX_PENDING;

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
