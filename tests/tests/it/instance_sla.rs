//! An instance's own service levels (`Schedule::sla`; `sla` in the admin API, the command line
//! and the config file's instances): its breaches are judged by its own levels, else by its
//! task's, on real nodes posting their alerts to a real webhook receiver on 127.0.0.1, judged
//! by what the receiver took; unusable levels are refused with the reason; every way of writing
//! an instance shows them back.

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::TimeDelta;
use common::*;
use reqwest::StatusCode;
use scheduler::config::{InstanceConfig, TaskConfig, TaskSla};
use scheduler::{Schedule, Schedules, task};
use serde_json::{Value, json};

on_both_backends! {
    threads = 2;
    an_instance_s_own_warn_after_judges_its_runs_and_a_sibling_takes_its_task_s,
    an_instance_s_own_start_within_raises_its_late_tick,
    unusable_levels_are_refused_with_the_reason,
    the_api_the_command_line_and_the_config_write_and_show_an_instance_s_sla,
}

const TOKEN: &str = "instance-sla-admin-token-01234567";
const WHSEC: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const YEARLY: &str = "0 0 0 1 1 *";

/// Works 3 s: past a warning of 1 s, within one of an hour.
#[task(name = "isla.strict")]
async fn isla_strict() {
    tokio::time::sleep(Duration::from_secs(3)).await;
}

/// Works 3 s too; its task names no levels.
#[task(name = "isla.calm")]
async fn isla_calm() {
    tokio::time::sleep(Duration::from_secs(3)).await;
}

/// What a webhook receiver on 127.0.0.1 took: each request's JSON body.
type Got = Arc<Mutex<Vec<Value>>>;

/// A webhook receiver on a free port of 127.0.0.1 that takes everything.
async fn receiver() -> (String, Got, tokio::task::JoinHandle<()>) {
    let got: Got = Arc::default();
    let sink = Arc::clone(&got);
    let app = axum::Router::new().fallback(move |body: String| {
        let sink = Arc::clone(&sink);
        async move {
            sink.lock()
                .unwrap()
                .push(serde_json::from_str(&body).unwrap_or(Value::Null));
            StatusCode::NO_CONTENT
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let handle = tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    (url, got, handle)
}

/// The events of type `kind` about row `row` the receiver took.
fn of(got: &Got, kind: &str, row: &str) -> Vec<Value> {
    got.lock()
        .unwrap()
        .iter()
        .filter(|b| b["type"] == kind)
        .filter(|b| b["data"]["task"] == row || b["data"]["run"]["task"] == row)
        .cloned()
        .collect()
}

fn sla(levels: Value) -> TaskSla {
    serde_json::from_value(levels).unwrap()
}

/// A node running the `isla.` tasks under `config`, posting its alerts to a receiver.
async fn alerting_node(
    db: &TestDb,
    config: scheduler::config::ConfigDocument,
) -> (RunningNode, Got, tokio::task::JoinHandle<()>) {
    let (url, got, server) = receiver().await;
    let webhook = scheduler::webhook::WebhookSettings::new(&url, WHSEC).unwrap();
    let n = start(
        node(db, "a", tasks("isla."))
            .config_document(config)
            .poll_interval(Duration::from_millis(500))
            .webhook(webhook)
            // No missed-run alerts: the ticks here are late on purpose.
            .missed_grace(Duration::from_secs(3600))
            .build()
            .unwrap(),
    );
    wait_until(Duration::from_secs(60), "the config applied", || async {
        db.try_task("isla.strict").await.is_some() && db.try_task("isla.calm").await.is_some()
    })
    .await;
    (n, got, server)
}

/// Waits until every alert written to the outbox was delivered.
async fn delivered(db: &TestDb) {
    wait_until(Duration::from_secs(60), "the outbox delivered", || async {
        db.outbox()
            .await
            .iter()
            .all(|(_, state)| state != "pending")
    })
    .await;
}

/// `isla.strict`'s entry warns after 1 s, `isla.calm`'s names no levels; every run works 3 s.
/// Made by a handle of the store (not the running node): `isla.strict/plain` (none of its own)
/// raises `task.slow` by its task's 1 s, `isla.strict/lenient` (its own: 1 h) none;
/// `isla.calm/own` (its own: 1 s) raises it, `isla.calm/plain` none. All four succeed. Each
/// event carries its instance's own zone (`isla.calm/own` is in Shanghai), not its task's.
async fn an_instance_s_own_warn_after_judges_its_runs_and_a_sibling_takes_its_task_s(
    db: &TestDb,
) {
    let config = doc(vec![
        TaskConfig {
            sla: Some(sla(json!({"warn_after": "1s"}))),
            ..entry("isla.strict", YEARLY)
        },
        entry("isla.calm", YEARLY),
    ]);
    let (n, got, server) = alerting_node(db, config).await;
    let schedules = Schedules::new(db.node_store(2), &tasks("isla."), "test");
    let yearly = |task: &str, key: &str| Schedule::new(task, key).cron(YEARLY);
    schedules.upsert(yearly("isla.strict", "plain")).await.unwrap();
    let lenient = schedules
        .upsert(yearly("isla.strict", "lenient").sla(sla(json!({"warn_after": "1h"}))))
        .await
        .unwrap();
    assert_eq!(
        lenient.sla.as_ref().and_then(|s| s.warn_after.as_deref()),
        Some("1h")
    );
    schedules
        .upsert(
            yearly("isla.calm", "own")
                .timezone("Asia/Shanghai")
                .sla(sla(json!({"warn_after": "1s"}))),
        )
        .await
        .unwrap();
    schedules.upsert(yearly("isla.calm", "plain")).await.unwrap();
    let rows = [
        "isla.strict/plain",
        "isla.strict/lenient",
        "isla.calm/own",
        "isla.calm/plain",
    ];
    for row in rows {
        db.set_next_run(Some(row), Some(db.now())).await;
    }
    db.api().notify().await.unwrap();
    wait_until(Duration::from_secs(120), "the four runs succeeded", || async {
        let runs = db.runs(Some("isla.strict")).await.len() + db.runs(Some("isla.calm")).await.len();
        runs == 4
            && db
                .count_runs("isla.strict", scheduler::testing::store::RunStatus::Succeeded)
                .await
                == 2
            && db
                .count_runs("isla.calm", scheduler::testing::store::RunStatus::Succeeded)
                .await
                == 2
    })
    .await;
    wait_until(Duration::from_secs(60), "both task.slow delivered", || async {
        !of(&got, "task.slow", "isla.strict/plain").is_empty()
            && !of(&got, "task.slow", "isla.calm/own").is_empty()
    })
    .await;
    delivered(db).await;
    n.stop().await;

    let plain = of(&got, "task.slow", "isla.strict/plain");
    assert_eq!(plain.len(), 1, "its task's warning, once: {plain:?}");
    assert_eq!(plain[0]["data"]["warn_after_ms"], 1_000);
    let own = of(&got, "task.slow", "isla.calm/own");
    assert_eq!(own.len(), 1, "its own warning, once: {own:?}");
    assert_eq!(own[0]["data"]["warn_after_ms"], 1_000);
    assert_eq!(own[0]["data"]["timezone"], "Asia/Shanghai", "its own zone");
    assert_eq!(plain[0]["data"]["timezone"], "UTC", "its own zone, its task's too");
    assert!(
        of(&got, "task.slow", "isla.strict/lenient").is_empty(),
        "its own hour, not its task's second"
    );
    assert!(
        of(&got, "task.slow", "isla.calm/plain").is_empty(),
        "its task names no levels"
    );
    server.abort();
}

/// `isla.calm` names no levels. Its instances `late` (its own `start_within: 5s`) and `waits`
/// (none) hold a limit no document declares, so their ticks, due a minute ago, wait: `late`
/// raises `task.late` once, naming its own 5 s; `waits` raises none.
async fn an_instance_s_own_start_within_raises_its_late_tick(db: &TestDb) {
    let config = doc(vec![entry("isla.strict", YEARLY), entry("isla.calm", YEARLY)]);
    let (n, got, server) = alerting_node(db, config).await;
    let schedules = Schedules::new(db.node_store(2), &tasks("isla."), "test");
    let held = |key: &str| Schedule::new("isla.calm", key).cron(YEARLY).limit("undeclared");
    schedules
        .upsert(held("late").sla(sla(json!({"start_within": "5s"}))))
        .await
        .unwrap();
    schedules.upsert(held("waits")).await.unwrap();
    for row in ["isla.calm/late", "isla.calm/waits"] {
        db.set_next_run(Some(row), Some(db.now() - TimeDelta::seconds(60)))
            .await;
    }
    db.api().notify().await.unwrap();
    wait_stepping(db, Duration::from_secs(60), "task.late delivered", || async {
        !of(&got, "task.late", "isla.calm/late").is_empty()
    })
    .await;
    // The watch keeps judging: a few more passes.
    tokio::time::sleep(Duration::from_secs(3)).await;
    delivered(db).await;
    n.stop().await;

    let late = of(&got, "task.late", "isla.calm/late");
    assert_eq!(late.len(), 1, "once per tick: {late:?}");
    assert_eq!(late[0]["data"]["start_within_ms"], 5_000);
    assert!(
        of(&got, "task.late", "isla.calm/waits").is_empty(),
        "neither it nor its task names levels"
    );
    assert!(
        db.runs(Some("isla.calm")).await.is_empty(),
        "staged: the limit held both ticks"
    );
    server.abort();
}

/// Levels are checked as a config entry's `sla` is, the refusal naming the instance and the
/// field; nothing is written.
async fn unusable_levels_are_refused_with_the_reason(db: &TestDb) {
    let n = start(
        node(db, "a", tasks("isla."))
            .config_document(doc(vec![entry("isla.calm", YEARLY)]))
            .build()
            .unwrap(),
    );
    wait_until(Duration::from_secs(60), "the config applied", || async {
        db.try_task("isla.calm").await.is_some()
    })
    .await;
    let schedules = Schedules::new(db.node_store(2), &tasks("isla."), "test");
    for (levels, says) in [
        (json!({"start_within": "soon"}), "sla.start_within"),
        (json!({"succeed_by": "8 am"}), "sla.succeed_by"),
        (json!({"alert_after_failures": 0}), "sla.alert_after_failures"),
    ] {
        let schedule = Schedule::new("isla.calm", "k").cron(YEARLY).sla(sla(levels));
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
    let scheduler = node(db, "a", tasks("isla."))
        .config_document(config)
        .admin_addr("127.0.0.1:0".parse().unwrap())
        .admin_token(TOKEN)
        .build()
        .unwrap();
    let admin = scheduler.admin_addr().unwrap();
    let base = format!("http://{admin}/api/tasks/isla.calm/instances");
    let n = start(scheduler);
    wait_until(Duration::from_secs(60), "the config applied", || async {
        db.try_task("isla.calm/cfg").await.is_some()
    })
    .await;
    assert!(
        db.try_task("isla.calm/cfg-bad").await.is_none(),
        "unusable levels refuse the instance"
    );
    let client = reqwest::Client::new();
    let call = |method: reqwest::Method, url: String, body: Option<Value>| {
        let mut request = client.request(method, url).bearer_auth(TOKEN);
        if let Some(body) = body {
            request = request.json(&body);
        }
        async move {
            let response = request.send().await.unwrap();
            let status = response.status();
            (
                status,
                response.json::<Value>().await.unwrap_or(Value::Null),
            )
        }
    };
    let (status, report) = call(reqwest::Method::GET, format!("http://{admin}/api/config"), None).await;
    assert_eq!(status, StatusCode::OK, "{report}");
    assert!(
        report.to_string().contains("isla.calm/cfg-bad")
            && report.to_string().contains("sla.remind_every"),
        "the refusal names the instance and the field: {report}"
    );

    // The config's instance.
    let (status, got) = call(reqwest::Method::GET, format!("{base}/cfg"), None).await;
    assert_eq!(status, StatusCode::OK, "{got}");
    assert_eq!(
        got["sla"],
        json!({"warn_after": "10m", "alert_after_failures": 2}),
        "{got}"
    );

    // One PUT, then GET.
    let body = json!({"cron": YEARLY, "sla": {"start_within": "30s", "succeed_by": "08:00"}});
    let (status, got) = call(reqwest::Method::PUT, format!("{base}/one"), Some(body)).await;
    assert_eq!(status, StatusCode::OK, "{got}");
    let levels = json!({"start_within": "30s", "succeed_by": "08:00"});
    assert_eq!(got["sla"], levels, "{got}");
    let (_, got) = call(reqwest::Method::GET, format!("{base}/one"), None).await;
    assert_eq!(got["sla"], levels, "{got}");
    let (_, list) = call(reqwest::Method::GET, base.clone(), None).await;
    let one = list["instances"]
        .as_array()
        .and_then(|all| all.iter().find(|i| i["key"] == "one"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(one["sla"], levels, "{list}");
    // Written again without it: its task's again.
    let body = json!({"cron": YEARLY});
    let (_, got) = call(reqwest::Method::PUT, format!("{base}/one"), Some(body)).await;
    assert_eq!(got["sla"], Value::Null, "{got}");

    // The list PUT: each item's own, unusable levels refused alone.
    let body = json!([
        {"key": "l1", "cron": YEARLY, "sla": {"remind_every": "1h"}},
        {"key": "l2", "cron": YEARLY, "sla": {"warn_after": "0s"}},
    ]);
    let (status, got) = call(reqwest::Method::PUT, base.clone(), Some(body)).await;
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
    let (status, got) = call(reqwest::Method::PUT, format!("{base}/bad"), Some(body)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{got}");
    assert!(got.to_string().contains("sla.succeed_by"), "{got}");

    // The command line.
    let cli = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_test_node"))
            .args(args)
            .args(db.cli_store_args())
            .env_remove("DATABASE_URL")
            .env_remove("SCHEDULER_DATABASE_URL")
            .env_remove("SCHEDULER_SCHEMA")
            .output()
            .expect("run the application binary");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8(out.stdout).unwrap() + &String::from_utf8(out.stderr).unwrap(),
        )
    };
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
