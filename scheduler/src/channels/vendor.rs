//! The HTTP channels, each a client of its vendor's documented API:
//!
//! - **Standard Webhooks**: the body as is, `webhook-id`, `webhook-timestamp`,
//!   `webhook-signature` (see [`crate::webhook`]); any 2xx is taken.
//! - **Slack incoming webhooks**: `{"text": ..., "blocks": [...]}` (`text` is the notification's
//!   fallback); Slack answers `200 ok`.
//! - **Feishu/Lark custom bots**: `{"timestamp", "sign", "msg_type": "text", "content": {"text"}}`,
//!   where `sign` is base64 of HMAC-SHA256 keyed by `"{timestamp}\n{secret}"` over an empty
//!   message (`timestamp` in seconds, as a string); the bot answers `{"code": 0}` (a refusal is
//!   a 200 with another code).
//! - **DingTalk custom robots**: `{"msgtype": "markdown", "markdown": {"title", "text"}}` posted to
//!   the robot's URL with `&timestamp=...&sign=...` appended: `sign` is base64 of HMAC-SHA256
//!   keyed by the secret over `"{timestamp}\n{secret}"` (milliseconds), URL-encoded; the robot
//!   answers `{"errcode": 0}`.
//! - **WeCom group robots**: `{"msgtype": "markdown", "markdown": {"content"}}` (at most 4,096
//!   bytes); the robot answers `{"errcode": 0}`.
//!
//! **What a refusal means** is decided per vendor, from its documentation:
//!
//! | Answer | Every vendor | Slack |
//! |---|---|---|
//! | no answer, 5xx, other 4xx | retried (backoff) | retried |
//! | 429 | retried, not before its `Retry-After` (seconds or a date) | the same |
//! | 410 | the channel is disabled (Standard Webhooks: the endpoint is gone) | this delivery given up, the channel stays on |
//! | 400 | retried | this message refused (`invalid_payload`, `user_not_found`, ...): given up, the channel stays on |
//! | 403, 404 | retried (the chat robots: 404 gives up, the hook is gone) | the webhook refused (`action_prohibited`, `channel_not_found`, `no_service`, `invalid_token`, ...): given up, the channel stays on |
//!
//! Slack's refusals say what an operator must fix in Slack (unarchive the channel, re-enable
//! the app, lift a posting restriction); retrying the same message cannot help, and disabling
//! the channel could only be undone by a new URL, so the next alert is tried again. The chat
//! robots answer 200 with a code: a code that names a configuration fault (Feishu 19001,
//! 19007, 19021 signature, 19022 IP allow-list, 19024 keyword; DingTalk 300001 unknown token,
//! 310000 signature, keyword or IP; WeCom 93000 bad webhook key, 40008 message type) is given
//! up; a rate limit (Feishu 11232, DingTalk 130101 and 410100, WeCom 45009) or any other code is
//! retried. A delivery given up says why in the delivery log (`/api/deliveries`), with "not
//! retried", and is logged once.
//!
//! Redirects are not followed; URLs never reach an error message.

mod answers;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use answers::{DINGTALK, FEISHU, Judge, SLACK, Verdict, WEBHOOK, WECOM, retry_after};

use super::{Alert, Channel, Outcome, Secret};
use crate::webhook::WebhookSecret;

/// WeCom's bound on a markdown message, in bytes.
const WECOM_MAX_BYTES: usize = 4096;

/// Feishu's `sign` for `timestamp` (seconds).
pub(crate) fn feishu_sign(secret: &str, timestamp: i64) -> String {
    let key = format!("{timestamp}\n{secret}");
    let mac = <Hmac<Sha256> as KeyInit>::new_from_slice(key.as_bytes())
        .expect("HMAC takes a key of any length");
    STANDARD.encode(mac.finalize().into_bytes())
}

/// DingTalk's `sign` for `timestamp` (milliseconds), before URL encoding.
pub(crate) fn dingtalk_sign(secret: &str, timestamp: i64) -> String {
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(secret.as_bytes())
        .expect("HMAC takes a key of any length");
    mac.update(format!("{timestamp}\n{secret}").as_bytes());
    STANDARD.encode(mac.finalize().into_bytes())
}

/// Posts `body` as JSON; what came of it, as `judge` reads the answer.
async fn post(
    client: &reqwest::Client,
    channel: &Channel,
    url: reqwest::Url,
    headers: &[(&str, String)],
    body: String,
    judge: &Judge,
) -> Outcome {
    let mut request = client
        .post(url)
        .timeout(channel.timeout)
        .header("content-type", "application/json");
    for (name, value) in headers {
        request = request.header(*name, value);
    }
    let response = match request.body(body).send().await {
        Ok(r) => r,
        Err(e) => return Outcome::failed(request_error(e)),
    };
    let status = response.status().as_u16();
    let wait = (status == 429)
        .then(|| retry_after(response.headers()))
        .flatten();
    // Only the answer's start is read: enough for a vendor's code or an error's excerpt; a
    // huge (or endless) answer is cut there and the connection dropped.
    let text = read_capped(response, MAX_ANSWER_BYTES).await;
    let mut outcome = Outcome {
        status: Some(status),
        error: None,
        delivered: false,
        gone: false,
        permanent: false,
        retry_after: wait,
    };
    let (error, verdict) = if (200..300).contains(&status) {
        match (judge.body)(&text) {
            Ok(()) => {
                outcome.delivered = true;
                return outcome;
            }
            Err(refusal) => refusal,
        }
    } else {
        (
            format!("{} answered {status}{}", judge.vendor, excerpt(&text)),
            (judge.status)(status, &text),
        )
    };
    let hook_gone = status == 404;
    outcome.error = Some(match verdict {
        Verdict::Retry => error,
        Verdict::GiveUp if hook_gone => {
            format!("{error} (no such hook: a configuration fault, given up, not retried)")
        }
        Verdict::GiveUp => format!("{error} (a refusal for good: given up, not retried)"),
        Verdict::Gone => format!("{error} (gone: the channel is disabled)"),
    });
    outcome.permanent = verdict == Verdict::GiveUp;
    outcome.gone = verdict == Verdict::Gone;
    outcome
}

/// The most of an answer's body a delivery reads (a robot's `{"errcode": ...}` or an error
/// page's first lines fit many times over).
pub(crate) const MAX_ANSWER_BYTES: usize = 16 * 1024;

/// The first `max` bytes of `response`'s body, read chunk by chunk (never the whole body when
/// it is longer), as text (invalid UTF-8 replaced). A body that breaks off gives what came.
pub(crate) async fn read_capped(mut response: reqwest::Response, max: usize) -> String {
    let mut bytes: Vec<u8> = Vec::new();
    while bytes.len() < max {
        match response.chunk().await {
            Ok(Some(chunk)) => {
                let room = max - bytes.len();
                bytes.extend_from_slice(&chunk[..chunk.len().min(room)]);
            }
            Ok(None) | Err(_) => break,
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

/// A short, redacted excerpt of an answer, for the delivery log.
fn excerpt(text: &str) -> String {
    let text = text.trim();
    if text.is_empty() {
        return String::new();
    }
    let cut: String = text.chars().take(200).collect();
    format!(": {}", crate::redact::redact_text(&cut))
}

/// What a failed request says: never the URL (its path or query is often the credential).
fn request_error(error: reqwest::Error) -> String {
    let error = error.without_url();
    crate::redact::redact_text(&crate::causes::error_chain(&error))
}

pub(super) async fn standard_webhook(
    client: &reqwest::Client,
    channel: &Channel,
    url: &reqwest::Url,
    secret: &WebhookSecret,
    id: &str,
    payload: &str,
) -> Outcome {
    let timestamp = chrono::Utc::now().timestamp();
    let headers = [
        ("webhook-id", id.to_owned()),
        ("webhook-timestamp", timestamp.to_string()),
        (
            "webhook-signature",
            secret.sign(id, timestamp, payload.as_bytes()),
        ),
    ];
    post(
        client,
        channel,
        url.clone(),
        &headers,
        payload.to_owned(),
        &WEBHOOK,
    )
    .await
}

pub(super) async fn slack(
    client: &reqwest::Client,
    channel: &Channel,
    url: &reqwest::Url,
    alert: &Alert,
) -> Outcome {
    post(
        client,
        channel,
        url.clone(),
        &[],
        slack_body(alert).to_string(),
        &SLACK,
    )
    .await
}

/// Slack's mrkdwn: `&`, `<`, `>` escaped.
fn slack_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

pub(crate) fn slack_body(alert: &Alert) -> serde_json::Value {
    let facts: Vec<serde_json::Value> = alert
        .facts()
        .into_iter()
        .map(|(label, value)| {
            serde_json::json!({"type": "mrkdwn", "text": format!("*{label}*\n{}", slack_escape(&value))})
        })
        .collect();
    let mut blocks = vec![
        serde_json::json!({
            "type": "header",
            "text": {"type": "plain_text", "text": alert.title().chars().take(150).collect::<String>()},
        }),
        // A section holds at most 10 fields.
        serde_json::json!({"type": "section", "fields": facts.into_iter().take(10).collect::<Vec<_>>()}),
    ];
    if let Some(error) = &alert.error {
        blocks.push(serde_json::json!({
            "type": "section",
            "text": {"type": "mrkdwn", "text": format!("```\n{}\n```", super::message::fence_safe(&slack_escape(error)))},
        }));
    }
    if let Some(link) = &alert.link {
        blocks.push(serde_json::json!({
            "type": "section",
            "text": {"type": "mrkdwn", "text": format!("<{link}|Open on the dashboard>")},
        }));
    }
    serde_json::json!({"text": alert.title(), "blocks": blocks})
}

pub(super) async fn feishu(
    client: &reqwest::Client,
    channel: &Channel,
    url: &reqwest::Url,
    secret: Option<&Secret>,
    alert: &Alert,
) -> Outcome {
    let body = feishu_body(alert, secret, chrono::Utc::now().timestamp());
    post(client, channel, url.clone(), &[], body.to_string(), &FEISHU).await
}

pub(crate) fn feishu_body(
    alert: &Alert,
    secret: Option<&Secret>,
    timestamp: i64,
) -> serde_json::Value {
    let mut body = serde_json::json!({
        "msg_type": "text",
        "content": {"text": feishu_text(&alert.plain())},
    });
    if let Some(secret) = secret {
        body["timestamp"] = timestamp.to_string().into();
        body["sign"] = feishu_sign(secret.expose(), timestamp).into();
    }
    body
}

/// Feishu's text messages read `<at user_id="...">` tags: a `<` in the alert (an error's text)
/// is parted from what follows by a zero-width space, so no text of the alert mentions anyone.
fn feishu_text(text: &str) -> String {
    text.replace('<', "<\u{200B}")
}

pub(super) async fn dingtalk(
    client: &reqwest::Client,
    channel: &Channel,
    url: &reqwest::Url,
    secret: Option<&Secret>,
    alert: &Alert,
) -> Outcome {
    let mut url = url.clone();
    if let Some(secret) = secret {
        let timestamp = chrono::Utc::now().timestamp_millis();
        url.query_pairs_mut()
            .append_pair("timestamp", &timestamp.to_string())
            .append_pair("sign", &dingtalk_sign(secret.expose(), timestamp));
    }
    post(
        client,
        channel,
        url,
        &[],
        dingtalk_body(alert).to_string(),
        &DINGTALK,
    )
    .await
}

/// Owners written as mobile numbers are @-mentioned (DingTalk mentions by number).
pub(crate) fn dingtalk_body(alert: &Alert) -> serde_json::Value {
    let mobiles: Vec<&str> = alert
        .owners
        .iter()
        .map(|o| o.trim_start_matches('+'))
        .filter(|o| o.len() >= 5 && o.chars().all(|c| c.is_ascii_digit()))
        .collect();
    let mut text = alert.markdown("### ");
    for mobile in &mobiles {
        text.push_str(&format!(" @{mobile}"));
    }
    serde_json::json!({
        "msgtype": "markdown",
        "markdown": {"title": alert.title(), "text": text},
        "at": {"atMobiles": mobiles, "isAtAll": false},
    })
}

pub(super) async fn wecom(
    client: &reqwest::Client,
    channel: &Channel,
    url: &reqwest::Url,
    alert: &Alert,
) -> Outcome {
    post(
        client,
        channel,
        url.clone(),
        &[],
        wecom_body(alert).to_string(),
        &WECOM,
    )
    .await
}

pub(crate) fn wecom_body(alert: &Alert) -> serde_json::Value {
    let mut content = alert.markdown("### ");
    // Too long: the error is cut first, so its code block stays closed.
    if content.len() > WECOM_MAX_BYTES
        && let Some(error) = &alert.error
    {
        let over = content.len() - WECOM_MAX_BYTES;
        let mut shorter = alert.clone();
        let keep = error.len().saturating_sub(over + 8);
        let mut end = keep;
        while !error.is_char_boundary(end) {
            end -= 1;
        }
        shorter.error = Some(format!("{}…", &error[..end]));
        content = shorter.markdown("### ");
    }
    if content.len() > WECOM_MAX_BYTES {
        let mut end = WECOM_MAX_BYTES - 3;
        while !content.is_char_boundary(end) {
            end -= 1;
        }
        content.truncate(end);
        content.push('…');
    }
    serde_json::json!({"msgtype": "markdown", "markdown": {"content": content}})
}

#[cfg(test)]
mod tests;
