//! An instance's own owners, labels and shared limit (`Schedule::owners`, `::label`,
//! `::limit`; the same fields in the admin API, the command line and the config file): its
//! alerts carry its own owners (else its task's) and its labels over its task's, and are routed
//! by them, on a node that did not make it (the tags come from its row in the store); unusable
//! owners, labels or limit names are refused with the reason; every way of writing an instance
//! shows them back. (Its runs holding its own limit: `instance_limits`.)

use crate::common;

use std::time::Duration;

use common::*;
use reqwest::StatusCode;
use scheduler::channels::{Channel, ChannelKind, Channels, Route};
use scheduler::config::{InstanceConfig, TaskConfig};
use scheduler::{Schedule, Schedules, task};
use serde_json::{Value, json};

on_both_backends! {
    threads = 2;
    an_instance_s_own_owners_route_its_alert_and_its_sibling_s_go_by_the_task_s,
    unusable_owners_labels_and_limit_names_are_refused_with_the_reason,
    the_api_the_command_line_and_the_config_write_and_show_owners_labels_and_limit,
}

const TOKEN: &str = "instance-tags-admin-token-0123456";
const WHSEC: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// Fails every run.
#[task(name = "itag.fails")]
async fn itag_fails() -> Result<(), std::io::Error> {
    Err(std::io::Error::other("the upstream refused"))
}

fn webhook_channel(name: &str, url: &str) -> Channel {
    let settings = scheduler::webhook::WebhookSettings::new(url, WHSEC).unwrap();
    let ChannelKind::Webhook { secret, .. } = Channel::webhook(&settings).kind else {
        unreachable!("a webhook's channel")
    };
    Channel::new(
        name,
        ChannelKind::Webhook {
            url: url.parse().unwrap(),
            secret,
        },
    )
}

fn route(owner: &str, channel: &str) -> Route {
    let mut route = Route::default();
    route.owners = vec![owner.into()];
    route.channels = vec![channel.into()];
    route
}

/// The `run.failed` alerts a receiver took, by the row they are about.
fn failures(got: &Bodies) -> Vec<Value> {
    got.lock()
        .unwrap()
        .iter()
        .filter(|b| b["type"] == "run.failed")
        .cloned()
        .collect()
}

/// `itag.fails`'s entry names the team as owner and two labels. Its instance `own` names alice
/// and a label of its own over the task's `tier`; its sibling `plain` names none. Made by a
/// handle of the store (not the running node), both fail: alice's channel takes `own`'s alert
/// only, with her as owner and the labels merged (its `tier` winning); the team's channel takes
/// `plain`'s only, with the task's owners and labels.
async fn an_instance_s_own_owners_route_its_alert_and_its_sibling_s_go_by_the_task_s(db: &TestDb) {
    let (alice_url, alice, s1) = webhook_receiver().await;
    let (team_url, team, s2) = webhook_receiver().await;
    let mut channels = Channels::new()
        .with(webhook_channel("alice-hook", &alice_url))
        .unwrap()
        .with(webhook_channel("team-hook", &team_url))
        .unwrap()
        .route(route("alice@example.com", "alice-hook"))
        .unwrap()
        .route(route("team@example.com", "team-hook"))
        .unwrap();
    channels.retry_base = Duration::from_millis(200);
    let config = doc(vec![TaskConfig {
        owners: vec!["team@example.com".into()],
        labels: [("team", "ads"), ("tier", "2")]
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .into(),
        ..entry("itag.fails", "0 0 0 1 1 *")
    }]);
    let builder = node(db, "a", tasks("itag.fails"))
        .config_document(config)
        .poll_interval(Duration::from_millis(500))
        .channels(channels);
    let n = started(db, builder, &["itag.fails"]).await;
    let schedules = Schedules::new(db.node_store(2), &tasks("itag.fails"), "test");
    let yearly = |key: &str| Schedule::new("itag.fails", key).cron("0 0 0 1 1 *");
    let own = schedules
        .upsert(
            yearly("own")
                .owners(["alice@example.com"])
                .label("tier", "1")
                .label("tenant", "42"),
        )
        .await
        .unwrap();
    assert_eq!(own.owners, ["alice@example.com"]);
    assert_eq!(own.labels["tier"], "1");
    schedules.upsert(yearly("plain")).await.unwrap();
    for row in ["itag.fails/own", "itag.fails/plain"] {
        db.set_next_run(Some(row), Some(db.now())).await;
    }
    db.api().notify().await.unwrap();
    wait_until(
        Duration::from_secs(120),
        "each channel took a failure",
        || async { !failures(&alice).is_empty() && !failures(&team).is_empty() },
    )
    .await;
    n.stop().await;

    for body in failures(&alice) {
        let data = &body["data"];
        assert_eq!(data["run"]["task"], "itag.fails/own", "{body}");
        assert_eq!(data["owners"], json!(["alice@example.com"]), "{body}");
        assert_eq!(
            data["labels"],
            json!({"team": "ads", "tier": "1", "tenant": "42"}),
            "the task's labels with its own over them: {body}"
        );
    }
    for body in failures(&team) {
        let data = &body["data"];
        assert_eq!(data["run"]["task"], "itag.fails/plain", "{body}");
        assert_eq!(data["owners"], json!(["team@example.com"]), "{body}");
        assert_eq!(
            data["labels"],
            json!({"team": "ads", "tier": "2"}),
            "{body}"
        );
    }
    s1.abort();
    s2.abort();
}

/// Owners, labels and limit names are checked as a config entry's are, each refusal naming the
/// instance and what is wrong; nothing is written.
async fn unusable_owners_labels_and_limit_names_are_refused_with_the_reason(db: &TestDb) {
    let config = doc(vec![entry("itag.fails", "0 0 0 1 1 *")]);
    let builder = node(db, "a", tasks("itag.fails")).config_document(config);
    let n = started(db, builder, &["itag.fails"]).await;
    let schedules = Schedules::new(db.node_store(2), &tasks("itag.fails"), "test");
    let yearly = || Schedule::new("itag.fails", "k").cron("0 0 0 1 1 *");
    for (schedule, variant, says) in [
        (
            yearly().owners([" padded"]),
            "BadOwners",
            "has leading or trailing whitespace",
        ),
        (yearly().owners(["a", "a"]), "BadOwners", "is listed twice"),
        (
            yearly().label("bad key", "v"),
            "BadLabels",
            "the key must be 1 to 63 characters",
        ),
        (
            yearly().limit("no spaces"),
            "BadLimit",
            "a limit's name holds only",
        ),
        (yearly().limit(""), "BadLimit", "a limit's name is empty"),
    ] {
        let refused = schedules.upsert(schedule).await.unwrap_err();
        let scheduler::Error::Instance(refusal) = &refused else {
            panic!("{refused:?}")
        };
        assert!(format!("{refusal:?}").starts_with(variant), "{refusal:?}");
        let message = refused.to_string();
        assert!(message.contains("itag.fails/k"), "{message}");
        assert!(message.contains(says), "{message}");
    }
    assert!(schedules.get("itag.fails", "k").await.unwrap().is_none());
    n.stop().await;
}

/// `PUT /api/tasks/{task}/instances/{key}` and the list `PUT` take `owners`, `labels` and
/// `limit` and answer them, as `GET` does; a bad owner is a 400 naming it. `instances upsert
/// --owner --label --limit` writes them and `instances get --json` shows them. A config
/// document's instance with its own owners, labels and limit is written with them.
async fn the_api_the_command_line_and_the_config_write_and_show_owners_labels_and_limit(
    db: &TestDb,
) {
    let mut config = doc(vec![TaskConfig {
        instances: vec![InstanceConfig {
            key: "cfg".into(),
            cron: "0 0 0 1 1 *".into(),
            owners: vec!["cfg-owner".into()],
            labels: [("tier".to_owned(), "3".to_owned())].into(),
            limit: Some("cfg-limit".into()),
            ..Default::default()
        }],
        ..entry("itag.fails", "0 0 0 1 1 *")
    }]);
    config.limits = [("cfg-limit".to_owned(), 2)].into();
    let builder = node(db, "a", tasks("itag.fails"))
        .config_document(config)
        .admin_token(TOKEN);
    let node = admin_node(db, builder, &["itag.fails/cfg"]).await;
    let base = node.url("/api/tasks/itag.fails/instances");
    let n = node.running;
    let admin_api = AdminClient::with_token(TOKEN);
    let shows = |v: &Value, owners: Value, labels: Value, limit: Value| {
        assert_eq!(v["owners"], owners, "{v}");
        assert_eq!(v["labels"], labels, "{v}");
        assert_eq!(v["limit"], limit, "{v}");
    };

    // The config's instance.
    let (status, got) = admin_api
        .call(reqwest::Method::GET, format!("{base}/cfg"), None)
        .await;
    assert_eq!(status, StatusCode::OK, "{got}");
    shows(
        &got,
        json!(["cfg-owner"]),
        json!({"tier": "3"}),
        json!("cfg-limit"),
    );

    // One PUT, then GET.
    let body = json!({"cron": "0 0 0 1 1 *", "owners": ["alice@example.com"],
                      "labels": {"tier": "1"}, "limit": "warehouse-db"});
    let (status, got) = admin_api
        .call(reqwest::Method::PUT, format!("{base}/one"), Some(body))
        .await;
    assert_eq!(status, StatusCode::OK, "{got}");
    shows(
        &got,
        json!(["alice@example.com"]),
        json!({"tier": "1"}),
        json!("warehouse-db"),
    );
    let (_, got) = admin_api
        .call(reqwest::Method::GET, format!("{base}/one"), None)
        .await;
    shows(
        &got,
        json!(["alice@example.com"]),
        json!({"tier": "1"}),
        json!("warehouse-db"),
    );
    // Written again without them: its task's again.
    let body = json!({"cron": "0 0 0 1 1 *"});
    let (_, got) = admin_api
        .call(reqwest::Method::PUT, format!("{base}/one"), Some(body))
        .await;
    shows(&got, json!([]), json!({}), Value::Null);

    // The list PUT: each item's own, a bad owner refused alone.
    let body = json!([
        {"key": "l1", "cron": "0 0 0 1 1 *", "owners": ["bob@example.com"], "limit": "x"},
        {"key": "l2", "cron": "0 0 0 1 1 *", "owners": [""]},
    ]);
    let (status, got) = admin_api
        .call(reqwest::Method::PUT, base.clone(), Some(body))
        .await;
    assert_eq!(status, StatusCode::OK, "{got}");
    shows(
        &got["results"][0]["instance"],
        json!(["bob@example.com"]),
        json!({}),
        json!("x"),
    );
    assert_eq!(got["results"][1]["status"], 400, "{got}");
    assert!(
        got["results"][1]["message"]
            .as_str()
            .is_some_and(|m| m.contains("invalid owner") && m.contains("is blank")),
        "{got}"
    );
    let body = json!({"cron": "0 0 0 1 1 *", "labels": {"bad key": "v"}});
    let (status, got) = admin_api
        .call(reqwest::Method::PUT, format!("{base}/bad"), Some(body))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{got}");
    assert!(got.to_string().contains("invalid label"), "{got}");

    // The command line.
    let cli = |args: &[&str]| run_app(db, args);
    let (code, out) = cli(&[
        "instances",
        "upsert",
        "itag.fails",
        "c1",
        "--cron",
        "0 0 0 1 1 *",
        "--owner",
        "carol@example.com",
        "--owner",
        "13800138000",
        "--label",
        "tier=gold",
        "--label",
        "region=cn-east",
        "--limit",
        "warehouse-db",
    ]);
    assert_eq!(code, 0, "{out}");
    let (code, out) = cli(&["instances", "get", "itag.fails", "c1", "--json"]);
    assert_eq!(code, 0, "{out}");
    let shown: Value = serde_json::from_str(&out).unwrap();
    shows(
        &shown,
        json!(["carol@example.com", "13800138000"]),
        json!({"tier": "gold", "region": "cn-east"}),
        json!("warehouse-db"),
    );
    let (code, out) = cli(&[
        "instances",
        "upsert",
        "itag.fails",
        "c2",
        "--cron",
        "0 0 0 1 1 *",
        "--label",
        "novalue",
    ]);
    assert_eq!(code, 2, "a usage error: {out}");
    assert!(
        out.contains("--label") && out.contains("KEY=VALUE"),
        "{out}"
    );
    n.stop().await;
}
