//! The channels document as written (TOML, YAML or JSON): its raw entries, `env:NAME` values
//! resolved, each checked into a [`Channel`], and the checks a route and an event list pass.

use serde::Deserialize;

use super::{Channel, ChannelKind, EmailSettings, EmailTls, Route, Secret};
use crate::events::SchedulerEvent;
use crate::webhook::WebhookSecret;

pub(super) fn check_route(route: &Route, channels: &[Channel]) -> Result<(), String> {
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
pub(super) struct RawFile {
    #[serde(default)]
    pub(super) channels: Vec<RawChannel>,
    #[serde(default)]
    pub(super) routes: Vec<Route>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawChannel {
    pub(super) name: String,
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
    pub(super) fn into_channel(
        self,
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Channel, String> {
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
                secret: secret.map(Secret::new),
            },
            "dingtalk" => ChannelKind::DingTalk {
                url: http_url(url)?,
                secret: secret.map(Secret::new),
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
                password: password.map(Secret::new),
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
