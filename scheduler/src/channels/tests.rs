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
    let bad = |text: &str| Channels::parse(text, ConfigFormat::Toml, "c.toml", &none).unwrap_err();
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
        bad("[[channels]]\nname = \"x\"\nkind = \"slack\"\nurl = \"https://a\"\nhost = \"h\"\n")
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
