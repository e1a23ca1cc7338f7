//! What a vendor's answer means (the table in the `vendor` docs): per vendor, which statuses and
//! which codes in a 200's body are retried, given up or disable the channel, and how long a
//! `Retry-After` asks to wait.

use super::excerpt;

/// What a vendor's refusal calls for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Verdict {
    /// Try again later.
    Retry,
    /// This delivery cannot succeed: give it up, keep the channel.
    GiveUp,
    /// The endpoint is gone: disable the channel.
    Gone,
}

/// How one vendor's answers are read.
pub(super) struct Judge {
    /// The vendor, as a delivery's error names it.
    pub(super) vendor: &'static str,
    /// A non-2xx status (with the answer's body).
    pub(super) status: fn(u16, &str) -> Verdict,
    /// A 2xx answer's body: `Ok` when taken.
    pub(super) body: fn(&str) -> Result<(), (String, Verdict)>,
}

/// Any status but 2xx is retried, except 410 (Standard Webhooks: the endpoint is gone).
pub(super) fn by_status(status: u16, _: &str) -> Verdict {
    if status == 410 {
        Verdict::Gone
    } else {
        Verdict::Retry
    }
}

/// Slack's incoming webhooks answer a refusal with a status and a word
/// (<https://api.slack.com/messaging/webhooks#handling_errors>): 400 for this message
/// (`invalid_payload`, `user_not_found`, `no_service_id`, ...), 403, 404 and 410 for the
/// webhook or its channel (`action_prohibited`, `posting_to_general_channel_denied`,
/// `invalid_token`, `channel_not_found`, `no_service`, `no_team`, `channel_is_archived`,
/// `team_disabled`): none changes by sending the same message again.
pub(super) fn slack_status(status: u16, _: &str) -> Verdict {
    match status {
        400 | 403 | 404 | 410 => Verdict::GiveUp,
        _ => Verdict::Retry,
    }
}

/// A chat robot's hook is its URL: a 404 says there is no such hook (the robot removed, the
/// URL mistyped), a configuration fault no retry mends: the delivery is given up, the channel
/// stays on (a robot made again at that URL takes the next alert). A 410 disables the channel,
/// as for every endpoint; other statuses are retried.
pub(super) fn robot_status(status: u16, body: &str) -> Verdict {
    match status {
        404 => Verdict::GiveUp,
        _ => by_status(status, body),
    }
}

pub(super) const WEBHOOK: Judge = Judge {
    vendor: "the endpoint",
    status: by_status,
    body: any_answer,
};

pub(super) const SLACK: Judge = Judge {
    vendor: "Slack",
    status: slack_status,
    body: any_answer,
};

pub(super) const FEISHU: Judge = Judge {
    vendor: "the Feishu bot",
    status: robot_status,
    body: feishu_code,
};

pub(super) const DINGTALK: Judge = Judge {
    vendor: "the DingTalk robot",
    status: robot_status,
    body: dingtalk_code,
};

pub(super) const WECOM: Judge = Judge {
    vendor: "the WeCom robot",
    status: robot_status,
    body: wecom_code,
};

/// The longest a `Retry-After` is honoured (the backoff's own bound).
pub(super) const MAX_RETRY_AFTER: std::time::Duration = std::time::Duration::from_secs(6 * 3600);

/// A `Retry-After` header: delay-seconds or an HTTP date (RFC 9110 section 10.2.3).
pub(super) fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<std::time::Duration> {
    let value = headers
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim();
    let wait = match value.parse::<u64>() {
        Ok(seconds) => std::time::Duration::from_secs(seconds),
        Err(_) => {
            let at = chrono::DateTime::parse_from_rfc2822(value).ok()?;
            (at.with_timezone(&chrono::Utc) - chrono::Utc::now())
                .to_std()
                .unwrap_or_default()
        }
    };
    Some(wait.min(MAX_RETRY_AFTER))
}

fn any_answer(_: &str) -> Result<(), (String, Verdict)> {
    Ok(())
}

/// Feishu and DingTalk/WeCom refuse with a 200 and a code: `code`/`StatusCode` (Feishu) or
/// `errcode` must be 0 when present. `Err` holds the code and what to say.
fn nonzero_code(text: &str) -> Option<(i64, String)> {
    let json = serde_json::from_str::<serde_json::Value>(text).ok()?;
    for field in ["code", "errcode", "StatusCode"] {
        if let Some(code) = json[field].as_i64()
            && code != 0
        {
            let message = json["msg"]
                .as_str()
                .or_else(|| json["errmsg"].as_str())
                .unwrap_or_default();
            return Some((
                code,
                format!("the robot refused it: {field} {code}{}", excerpt(message)),
            ));
        }
    }
    None
}

/// A robot's answer: taken unless it holds a non-zero code; given up when the code is one of
/// `for_good` (a configuration fault a retry cannot mend), retried otherwise (rate limits,
/// codes not documented as permanent).
fn robot_code(text: &str, for_good: &[i64]) -> Result<(), (String, Verdict)> {
    match nonzero_code(text) {
        None => Ok(()),
        Some((code, error)) if for_good.contains(&code) => Err((error, Verdict::GiveUp)),
        Some((_, error)) => Err((error, Verdict::Retry)),
    }
}

/// Feishu custom bots: 19001 (the webhook's token is invalid), 19007 (the bot is not enabled),
/// 19021 (signature or timestamp), 19022 (IP not allowed), 19024 (keyword missing). 9499, a
/// generic refusal of the gateway, and 11232 (rate limit) are retried.
pub(super) fn feishu_code(text: &str) -> Result<(), (String, Verdict)> {
    robot_code(text, &[19001, 19007, 19021, 19022, 19024])
}

/// DingTalk custom robots: 300001 (no such token), 310000 (signature, keyword or IP
/// allow-list). 130101 and 410100 (sending too fast) are retried.
pub(super) fn dingtalk_code(text: &str) -> Result<(), (String, Verdict)> {
    robot_code(text, &[300001, 310000])
}

/// WeCom group robots: 93000 (invalid webhook key), 40008 (invalid message type). 45009
/// (rate limit) and -1 (system busy) are retried.
pub(super) fn wecom_code(text: &str) -> Result<(), (String, Verdict)> {
    robot_code(text, &[93000, 40008])
}
