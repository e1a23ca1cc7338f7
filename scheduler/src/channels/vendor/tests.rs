use super::answers::*;
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
    assert!(feishu_code(r#"{"code":0,"msg":"success"}"#).is_ok());
    assert!(wecom_code(r#"{"errcode":0,"errmsg":"ok"}"#).is_ok());
    let (e, verdict) = feishu_code(r#"{"code":19021,"msg":"sign match fail or timestamp is not within one hour from current time"}"#).unwrap_err();
    assert!(e.contains("19021"), "{e}");
    assert_eq!(verdict, Verdict::GiveUp);
    let (_, verdict) =
        dingtalk_code(r#"{"errcode":310000,"errmsg":"sign not match"}"#).unwrap_err();
    assert_eq!(verdict, Verdict::GiveUp);
    assert!(dingtalk_code("ok").is_ok());
}

#[test]
fn rate_limits_and_unknown_codes_are_retried_configuration_faults_are_not() {
    for (judge, text) in [
        (
            feishu_code as fn(&str) -> _,
            r#"{"code":11232,"msg":"frequency limited"}"#,
        ),
        (feishu_code, r#"{"code":9499,"msg":"Bad Request"}"#),
        (
            dingtalk_code,
            r#"{"errcode":130101,"errmsg":"send too fast"}"#,
        ),
        (
            wecom_code,
            r#"{"errcode":45009,"errmsg":"api freq out of limit"}"#,
        ),
        (wecom_code, r#"{"errcode":-1,"errmsg":"system busy"}"#),
    ] {
        assert_eq!(judge(text).unwrap_err().1, Verdict::Retry, "{text}");
    }
    for (judge, text) in [
        (
            feishu_code as fn(&str) -> _,
            r#"{"code":19024,"msg":"Key Words Not Found"}"#,
        ),
        (
            wecom_code,
            r#"{"errcode":93000,"errmsg":"invalid webhook url"}"#,
        ),
        (
            dingtalk_code,
            r#"{"errcode":300001,"errmsg":"token is not exist"}"#,
        ),
    ] {
        assert_eq!(judge(text).unwrap_err().1, Verdict::GiveUp, "{text}");
    }
}

#[test]
fn slack_s_refusals_are_given_up_and_only_a_webhook_410_disables() {
    for status in [400, 403, 404, 410] {
        assert_eq!(slack_status(status, ""), Verdict::GiveUp, "{status}");
    }
    for status in [429, 500, 502, 503] {
        assert_eq!(slack_status(status, ""), Verdict::Retry, "{status}");
    }
    assert_eq!(by_status(410, ""), Verdict::Gone);
    assert_eq!(robot_status(404, ""), Verdict::GiveUp);
    assert_eq!(robot_status(410, ""), Verdict::Gone);
    assert_eq!(robot_status(503, ""), Verdict::Retry);
    assert_eq!(by_status(400, ""), Verdict::Retry);
}

#[test]
fn retry_after_is_seconds_or_a_date_and_bounded() {
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert("retry-after", "7".parse().unwrap());
    assert_eq!(
        retry_after(&headers),
        Some(std::time::Duration::from_secs(7))
    );
    let later = (chrono::Utc::now() + chrono::TimeDelta::seconds(120)).to_rfc2822();
    headers.insert("retry-after", later.parse().unwrap());
    let wait = retry_after(&headers).unwrap();
    assert!(
        wait > std::time::Duration::from_secs(100) && wait <= std::time::Duration::from_secs(120),
        "{wait:?}"
    );
    headers.insert("retry-after", "99999999".parse().unwrap());
    assert_eq!(retry_after(&headers), Some(MAX_RETRY_AFTER));
    headers.insert("retry-after", "soon".parse().unwrap());
    assert_eq!(retry_after(&headers), None);
}

fn hostile_alert() -> Alert {
    let body = serde_json::json!({
        "type": "run.failed",
        "timestamp": "2026-03-01T02:00:00.000Z",
        "data": {"task": "t", "error": format!("```\n**x** <at user_id=\"all\">all</at> <!channel>\n```{}", "y".repeat(5000))},
    });
    Alert::from_body(&body.to_string(), None).unwrap()
}

#[test]
fn an_error_cannot_break_the_markup_of_any_channel() {
    let alert = hostile_alert();
    let dingtalk = dingtalk_body(&alert)["markdown"]["text"]
        .as_str()
        .unwrap()
        .to_owned();
    let wecom = wecom_body(&alert)["markdown"]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(wecom.len() <= WECOM_MAX_BYTES);
    for md in [&dingtalk, &wecom] {
        assert_eq!(md.matches("```").count(), 2, "{md}");
    }
    let slack = slack_body(&alert).to_string();
    assert!(!slack.contains("<!channel>"), "{slack}");
    let error_block = slack_body(&alert)["blocks"][2]["text"]["text"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(error_block.matches("```").count(), 2, "{error_block}");
    let feishu = feishu_body(&alert, None, 0)["content"]["text"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(!feishu.contains("<at"), "{feishu}");
}
