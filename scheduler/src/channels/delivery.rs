//! One delivery attempt of an outbox row to a channel, in the channel's own format, and what
//! it came to.

#[cfg(feature = "email")]
use super::email;
use super::{Alert, Channel, ChannelKind, vendor};

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
