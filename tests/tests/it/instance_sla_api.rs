//! How an instance's own service levels are written, checked and shown (`Schedule::sla`; `sla`
//! in the admin API's single and list `PUT` and answers, `instances upsert --sla` and
//! `instances get --json`, a config instance's `sla`): unusable levels are refused with the
//! reason naming the field. How they are judged: `instance_sla`.

use crate::common;

use common::*;
use reqwest::StatusCode;
use scheduler::config::{InstanceConfig, TaskConfig, TaskSla};
use scheduler::{Schedule, Schedules};
use serde_json::{Value, json};

on_both_backends! {
    threads = 2;
    unusable_levels_are_refused_with_the_reason,
    the_api_the_command_line_and_the_config_write_and_show_an_instance_s_sla,
}

const TOKEN: &str = "instance-sla-admin-token-01234567";
const YEARLY: &str = "0 0 0 1 1 *";

fn sla(levels: Value) -> TaskSla {
    serde_json::from_value(levels).unwrap()
}

/// Levels are checked as a config entry's `sla` is, the refusal naming the instance and the
/// field; nothing is written.
async fn unusable_levels_are_refused_with_the_reason(db: &TestDb) {
    let builder =
        node(db, "a", tasks("isla.")).config_document(doc(vec![entry("isla.calm", YEARLY)]));
    let n = started(db, builder, &["isla.calm"]).await;
    let schedules = Schedules::new(db.node_store(2), &tasks("isla."), "test");
    for (levels, says) in [
        (json!({"start_within": "soon"}), "sla.start_within"),
        (json!({"succeed_by": "8 am"}), "sla.succeed_by"),
        (
            json!({"alert_after_failures": 0}),
            "sla.alert_after_failures",
        ),
    ] {
        let schedule = Schedule::new("isla.calm", "k")
            .cron(YEARLY)
            .sla(sla(levels));
        let refused = schedules.upsert(schedule).await.unwrap_err();
        let scheduler::Error::Instance(refusal) = &refused else {
            panic!("{refused:?}")
        };
        assert!(format!("{refusal:?}").starts_with("BadSla"), "{refusal:?}");
        let message = refused.to_string();
        assert!(message.contains("isla.calm/k"), "{message}");
        assert!(message.contains(says), "{message}");
    }
    assert!(schedules.get("isla.calm", "k").await.unwrap().is_none());
    n.stop().await;
}

/// `PUT /api/tasks/{task}/instances/{key}` and the list `PUT` take `sla` and answer it, as `GET`
/// does; unusable levels are a 400 naming the field. `instances upsert --sla JSON` writes it and
/// `instances get --json` shows it. A config document's instance with its own `sla` is written
/// with it, and one with unusable levels is refused alone.
async fn the_api_the_command_line_and_the_config_write_and_show_an_instance_s_sla(db: &TestDb) {
    let config = doc(vec![TaskConfig {
        instances: vec![
            InstanceConfig {
                key: "cfg".into(),
                cron: YEARLY.into(),
                sla: Some(sla(json!({"warn_after": "10m", "alert_after_failures": 2}))),
                ..Default::default()
            },
            InstanceConfig {
                key: "cfg-bad".into(),
                cron: YEARLY.into(),
                sla: Some(sla(json!({"remind_every": "1ms"}))),
                ..Default::default()
            },
        ],
        ..entry("isla.calm", YEARLY)
    }]);
    let builder = node(db, "a", tasks("isla."))
        .config_document(config)
        .admin_token(TOKEN);
    let node = admin_node(db, builder, &["isla.calm/cfg"]).await;
    let base = node.url("/api/tasks/isla.calm/instances");
    let config_url = node.url("/api/config");
    let n = node.running;
    assert!(
        db.try_task("isla.calm/cfg-bad").await.is_none(),
        "unusable levels refuse the instance"
    );
    let admin_api = AdminClient::with_token(TOKEN);
    let (status, report) = admin_api.call(reqwest::Method::GET, config_url, None).await;
    assert_eq!(status, StatusCode::OK, "{report}");
    assert!(
        report.to_string().contains("isla.calm/cfg-bad")
            && report.to_string().contains("sla.remind_every"),
        "the refusal names the instance and the field: {report}"
    );

    // The config's instance.
    let (status, got) = admin_api
        .call(reqwest::Method::GET, format!("{base}/cfg"), None)
        .await;
    assert_eq!(status, StatusCode::OK, "{got}");
    assert_eq!(
        got["sla"],
        json!({"warn_after": "10m", "alert_after_failures": 2}),
        "{got}"
    );

    // One PUT, then GET.
    let body = json!({"cron": YEARLY, "sla": {"start_within": "30s", "succeed_by": "08:00"}});
    let (status, got) = admin_api
        .call(reqwest::Method::PUT, format!("{base}/one"), Some(body))
        .await;
    assert_eq!(status, StatusCode::OK, "{got}");
    let levels = json!({"start_within": "30s", "succeed_by": "08:00"});
    assert_eq!(got["sla"], levels, "{got}");
    let (_, got) = admin_api
        .call(reqwest::Method::GET, format!("{base}/one"), None)
        .await;
    assert_eq!(got["sla"], levels, "{got}");
    let (_, list) = admin_api
        .call(reqwest::Method::GET, base.clone(), None)
        .await;
    let one = list["instances"]
        .as_array()
        .and_then(|all| all.iter().find(|i| i["key"] == "one"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(one["sla"], levels, "{list}");
    // Written again without it: its task's again.
    let body = json!({"cron": YEARLY});
    let (_, got) = admin_api
        .call(reqwest::Method::PUT, format!("{base}/one"), Some(body))
        .await;
    assert_eq!(got["sla"], Value::Null, "{got}");

    // The list PUT: each item's own, unusable levels refused alone.
    let body = json!([
        {"key": "l1", "cron": YEARLY, "sla": {"remind_every": "1h"}},
        {"key": "l2", "cron": YEARLY, "sla": {"warn_after": "0s"}},
    ]);
    let (status, got) = admin_api
        .call(reqwest::Method::PUT, base.clone(), Some(body))
        .await;
    assert_eq!(status, StatusCode::OK, "{got}");
    assert_eq!(
        got["results"][0]["instance"]["sla"],
        json!({"remind_every": "1h"}),
        "{got}"
    );
    assert_eq!(got["results"][1]["status"], 400, "{got}");
    assert!(
        got["results"][1]["message"]
            .as_str()
            .is_some_and(|m| m.contains("sla.warn_after")),
        "{got}"
    );
    let body = json!({"cron": YEARLY, "sla": {"succeed_by": "noon"}});
    let (status, got) = admin_api
        .call(reqwest::Method::PUT, format!("{base}/bad"), Some(body))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{got}");
    assert!(got.to_string().contains("sla.succeed_by"), "{got}");

    // The command line.
    let cli = |args: &[&str]| run_app(db, args);
    let (code, out) = cli(&[
        "instances",
        "upsert",
        "isla.calm",
        "c1",
        "--cron",
        YEARLY,
        "--sla",
        r#"{"warn_after": "5m"}"#,
    ]);
    assert_eq!(code, 0, "{out}");
    let (code, out) = cli(&["instances", "get", "isla.calm", "c1", "--json"]);
    assert_eq!(code, 0, "{out}");
    let shown: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(shown["sla"], json!({"warn_after": "5m"}), "{shown}");
    let (code, out) = cli(&[
        "instances",
        "upsert",
        "isla.calm",
        "c2",
        "--cron",
        YEARLY,
        "--sla",
        r#"{"warn_after": "soon"}"#,
    ]);
    assert_ne!(code, 0, "{out}");
    assert!(out.contains("sla.warn_after"), "{out}");
    n.stop().await;
}
