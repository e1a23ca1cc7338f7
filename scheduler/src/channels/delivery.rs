//! One delivery attempt of an outbox row to a channel, in the channel's own format, and what
//! it came to.

#[cfg(feature = "email")]
use super::email;
use super::{Alert, Channel, ChannelKind, Outcome, vendor};

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
