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
//! Redirects are not followed; URLs never reach an error message.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

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

/// Posts `body` as JSON; what came of it, judged by `accept` on the answer's body when the
/// status is 2xx.
async fn post(
    client: &reqwest::Client,
    channel: &Channel,
    url: reqwest::Url,
    headers: &[(&str, String)],
    body: String,
    accept: fn(&str) -> Result<(), String>,
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
    let text = response.text().await.unwrap_or_default();
    let mut outcome = Outcome {
        status: Some(status),
        error: None,
        delivered: false,
        gone: status == 410,
        permanent: false,
    };
    if (200..300).contains(&status) {
        match accept(&text) {
            Ok(()) => outcome.delivered = true,
            Err(e) => outcome.error = Some(e),
        }
    } else {
        outcome.error = Some(format!("the endpoint answered {status}{}", excerpt(&text)));
    }
    outcome
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

fn any_answer(_: &str) -> Result<(), String> {
    Ok(())
}

/// Feishu and DingTalk/WeCom refuse with a 200 and a code: `code`/`StatusCode` (Feishu) or
/// `errcode` must be 0 when present.
fn zero_code(text: &str) -> Result<(), String> {
    let Ok(json) = serde_json::from_str::<serde_json::Value>(text) else {
        return Ok(());
    };
    for field in ["code", "errcode", "StatusCode"] {
        if let Some(code) = json[field].as_i64()
            && code != 0
        {
            let message = json["msg"]
                .as_str()
                .or_else(|| json["errmsg"].as_str())
                .unwrap_or_default();
            return Err(format!(
                "the robot refused it: {field} {code}{}",
                excerpt(message)
            ));
        }
    }
    Ok(())
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
        any_answer,
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
        any_answer,
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
            "text": {"type": "mrkdwn", "text": format!("```{}```", slack_escape(error))},
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
    post(
        client,
        channel,
        url.clone(),
        &[],
        body.to_string(),
        zero_code,
    )
    .await
}

pub(crate) fn feishu_body(
    alert: &Alert,
    secret: Option<&Secret>,
    timestamp: i64,
) -> serde_json::Value {
    let mut body = serde_json::json!({
        "msg_type": "text",
        "content": {"text": alert.plain()},
    });
    if let Some(secret) = secret {
        body["timestamp"] = timestamp.to_string().into();
        body["sign"] = feishu_sign(secret.expose(), timestamp).into();
    }
    body
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
        zero_code,
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
        zero_code,
    )
    .await
}

pub(crate) fn wecom_body(alert: &Alert) -> serde_json::Value {
    let mut content = alert.markdown("### ");
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
mod tests {
    use super::*;

    #[test]
    fn the_signatures_match_the_vendors_examples() {
        // Computed independently with Python's hmac module, following each vendor's sample:
        // Feishu: hmac.new(f"{ts}\n{secret}".encode(), b"", sha256); DingTalk:
        // hmac.new(secret.encode(), f"{ts}\n{secret}".encode(), sha256).
        assert_eq!(
            feishu_sign("demo-secret", 1599360473),
            "3/MaVZ8JLIy4TUG+7KSFJqvUkTKd+HWY8g+56DZWq8s="
        );
        assert_eq!(
            dingtalk_sign("SECdemo", 1577808000000),
            "SFqI8mtuQw6r87NiZIWLBWL38++gElAGVS/zEomx+fw="
        );
    }

    #[test]
    fn a_refusal_in_a_200_is_not_a_delivery() {
        assert!(zero_code(r#"{"code":0,"msg":"success"}"#).is_ok());
        assert!(zero_code(r#"{"errcode":0,"errmsg":"ok"}"#).is_ok());
        let e = zero_code(r#"{"code":19021,"msg":"sign match fail or timestamp is not within one hour from current time"}"#).unwrap_err();
        assert!(e.contains("19021"), "{e}");
        assert!(zero_code(r#"{"errcode":310000,"errmsg":"sign not match"}"#).is_err());
        assert!(zero_code("ok").is_ok());
    }
}
