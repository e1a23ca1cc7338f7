//! Instances written through the admin API (a real node's server on 127.0.0.1, over real HTTP)
//! and the command line (the application binary, a real process): made, changed, paused,
//! resumed and removed while the node runs; a manual run with other arguments runs once with
//! them and the next scheduled run with the instance's own; the refusals with their reasons;
//! the audit trail; arguments' secrets hidden in every view while the handler reads them whole.
//! Judged by what the handlers themselves recorded, never by timings.

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use common::*;
use reqwest::StatusCode;
use scheduler::config::ConfigDocument;
use scheduler::{TaskContext, task};
use serde_json::{Value, json};

on_both_backends! {
    threads = 2;
    instances_are_made_changed_paused_resumed_and_removed_through_the_api,
    a_manual_run_with_other_arguments_runs_once_with_them,
    what_the_api_refuses_it_says_why,
    a_batch_writes_the_good_instances_and_refuses_each_bad_one_with_its_reason,
    the_instances_commands_write_and_run_instances,
    the_upsert_many_command_writes_a_file_in_batches_and_lists_each_refusal,
}

const TOKEN: &str = "instances-admin-token-0123456789";
/// The secret the arguments carry: the handler reads it, no view shows it.
const SECRET: &str = "hunter2-s3cret";

/// One run as its handler saw it: key, tick, its arguments whole.
#[derive(Debug, Clone)]
struct Seen {
    key: Option<String>,
    tick: DateTime<Utc>,
    args: Value,
}

#[derive(Default)]
struct Log {
    runs: Mutex<Vec<Seen>>,
}

impl Log {
    fn of(&self, key: Option<&str>) -> Vec<Seen> {
        let runs = self.runs.lock().unwrap();
        runs.iter()
            .filter(|r| r.key.as_deref() == key)
            .cloned()
            .collect()
    }
}

#[task(name = "iapi.sync")]
async fn iapi_sync(ctx: TaskContext) -> Result<(), scheduler::ArgsError> {
    let args: Value = ctx.args()?;
    let log = ctx.state::<Arc<Log>>().unwrap();
    log.runs.lock().unwrap().push(Seen {
        key: ctx.key().map(str::to_owned),
        tick: ctx.scheduled_at(),
        args,
    });
    Ok(())
}

fn config() -> ConfigDocument {
    doc(vec![entry("iapi.sync", "0 0 0 1 1 *")])
}

/// A node running `iapi.*` with its admin server on 127.0.0.1 (with the operator token
/// `token`), once the tasks' rows are in the store; and its address.
async fn iapi_node(
    db: &TestDb,
    id: &str,
    token: Option<&str>,
    log: &Arc<Log>,
) -> (RunningNode, String) {
    let mut builder =
        node_with(db, id, tasks("iapi."), config(), log).poll_interval(Duration::from_millis(500));
    if let Some(token) = token {
        builder = builder.admin_token(token);
    }
    let node = admin_node(db, builder, &["iapi.sync"]).await;
    let base = node.url("");
    (node.running, base)
}

/// A request to the admin API as the operator `alice` (`token`: none sends none).
async fn call(
    method: reqwest::Method,
    url: &str,
    token: Option<&str>,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let alice = AdminClient {
        token,
        actor: Some("alice"),
    };
    alice.call(method, url, body).await
}

async fn put(base: &str, path: &str, body: Value) -> (StatusCode, Value) {
    call(
        reqwest::Method::PUT,
        &format!("{base}{path}"),
        Some(TOKEN),
        Some(body),
    )
    .await
}

async fn post(base: &str, path: &str, body: Option<Value>) -> (StatusCode, Value) {
    call(
        reqwest::Method::POST,
        &format!("{base}{path}"),
        Some(TOKEN),
        body,
    )
    .await
}

async fn delete(base: &str, path: &str) -> (StatusCode, Value) {
    call(
        reqwest::Method::DELETE,
        &format!("{base}{path}"),
        Some(TOKEN),
        None,
    )
    .await
}

async fn get(base: &str, path: &str) -> (StatusCode, Value) {
    call(
        reqwest::Method::GET,
        &format!("{base}{path}"),
        Some(TOKEN),
        None,
    )
    .await
}

fn every_second(tenant: u64) -> Value {
    json!({"cron": "* * * * * *", "args": {"tenant": tenant, "db": {"password": SECRET}}})
}

/// Made, changed, paused, resumed and removed through the API while the node runs: each change
/// shows in what the handler saw (its arguments whole, the secret too), while every answer and
/// the audit trail hide the secret.
async fn instances_are_made_changed_paused_resumed_and_removed_through_the_api(db: &TestDb) {
    let log = Arc::new(Log::default());
    let (running, base) = iapi_node(db, "a", Some(TOKEN), &log).await;
    let path = "/api/tasks/iapi.sync/instances/t1";

    let (status, made) = put(&base, path, every_second(1)).await;
    assert_eq!(status, StatusCode::OK, "{made}");
    assert_eq!(made["task"], "iapi.sync");
    assert_eq!(made["key"], "t1");
    assert_eq!(
        made["args"],
        json!({"tenant": 1, "db": {"password": "***"}})
    );
    assert_eq!(made["paused"], false);
    assert!(!made.to_string().contains(SECRET), "{made}");
    wait_stepping(db, Duration::from_secs(60), "a run of t1", || async {
        !log.of(Some("t1")).is_empty()
    })
    .await;
    let first = &log.of(Some("t1"))[0];
    assert_eq!(
        first.args["db"]["password"], SECRET,
        "the handler reads them whole"
    );
    assert_eq!(first.args["tenant"], 1);

    // Changed in place: its runs after the change read the new arguments.
    let (status, changed) = put(&base, path, every_second(2)).await;
    assert_eq!(status, StatusCode::OK, "{changed}");
    assert_eq!(changed["args"]["tenant"], 2);
    wait_stepping(
        db,
        Duration::from_secs(60),
        "a run of t1 with tenant 2",
        || async { log.of(Some("t1")).iter().any(|r| r.args["tenant"] == 2) },
    )
    .await;

    // Paused alone: another instance goes on ticking while t1 runs no tick after the pause.
    let (status, other) = put(&base, "/api/tasks/iapi.sync/instances/t2", every_second(3)).await;
    assert_eq!(status, StatusCode::OK, "{other}");
    let (status, paused) = post(
        &base,
        &format!("{path}/pause"),
        Some(json!({"reason": "tenant on hold"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{paused}");
    assert_eq!(paused["paused"], true);
    assert_eq!(paused["pause"]["reason"], "tenant on hold");
    let paused_at = db.now();
    let t2_before = log.of(Some("t2")).len();
    wait_stepping(db, Duration::from_secs(60), "three ticks of t2", || async {
        log.of(Some("t2")).len() >= t2_before + 3
    })
    .await;
    let late = |since: DateTime<Utc>| {
        log.of(Some("t1"))
            .into_iter()
            .filter(|r| r.tick > since + TimeDelta::seconds(2))
            .count()
    };
    assert_eq!(late(paused_at), 0, "no tick of t1 while paused");
    let (status, resumed) = post(&base, &format!("{path}/resume"), None).await;
    assert_eq!(status, StatusCode::OK, "{resumed}");
    assert_eq!(resumed["paused"], false);
    let resumed_at = db.now();
    wait_stepping(db, Duration::from_secs(60), "t1 runs again", || async {
        log.of(Some("t1")).iter().any(|r| r.tick > resumed_at)
    })
    .await;

    // Removed: gone, no tick after, t2 goes on; removed once.
    let (status, removed) = delete(&base, path).await;
    assert_eq!(status, StatusCode::OK, "{removed}");
    assert_eq!(removed["removed"], true);
    let removed_at = db.now();
    assert_eq!(delete(&base, path).await.0, StatusCode::NOT_FOUND);
    let t2_before = log.of(Some("t2")).len();
    wait_stepping(
        db,
        Duration::from_secs(60),
        "three more ticks of t2",
        || async { log.of(Some("t2")).len() >= t2_before + 3 },
    )
    .await;
    running.stop().await;
    assert_eq!(late(removed_at), 0, "no tick of t1 after its removal");

    // The audit trail: who did what to which instance, the secret hidden.
    let audit = db.api().audit_log(200, None).await.unwrap();
    let actions: Vec<(String, String, String)> = audit
        .iter()
        .filter(|a| a.task == "iapi.sync")
        .map(|a| (a.action.clone(), a.detail.clone(), a.actor.clone()))
        .collect();
    for (action, detail) in [
        ("instance upsert", "t1 cron `* * * * * *` in UTC with args"),
        ("pause", "instance t1: tenant on hold"),
        ("resume", "instance t1"),
        ("instance remove", "t1"),
    ] {
        assert!(
            actions
                .iter()
                .any(|(a, d, who)| a == action && d.starts_with(detail) && who.contains("alice")),
            "{action} {detail}: {actions:?}"
        );
    }
    let upsert = audit
        .iter()
        .find(|a| a.action == "instance upsert")
        .unwrap();
    assert!(upsert.detail.contains(r#""password":"***""#), "{upsert:?}");
    assert!(
        audit.iter().all(|a| !a.detail.contains(SECRET)),
        "{audit:?}"
    );
}

/// A manual run of an instance with other arguments runs once with them (recorded with the
/// run, shown with the secret hidden) and its next scheduled run with its own; the task's own
/// row takes an override too.
async fn a_manual_run_with_other_arguments_runs_once_with_them(db: &TestDb) {
    let log = Arc::new(Log::default());
    let (running, base) = iapi_node(db, "a", Some(TOKEN), &log).await;
    let (status, made) = put(
        &base,
        "/api/tasks/iapi.sync/instances/m",
        json!({"cron": "* * * * * *", "args": {"tenant": 5}}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{made}");
    wait_stepping(
        db,
        Duration::from_secs(60),
        "a scheduled run of m",
        || async { !log.of(Some("m")).is_empty() },
    )
    .await;
    let override_args = json!({"tenant": 99, "token": SECRET});
    let (status, asked) = post(
        &base,
        "/api/tasks/iapi.sync/instances/m/trigger",
        Some(json!({"args": override_args})),
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{asked}");
    assert_eq!(asked["outcome"], "queued");
    assert_eq!(asked["key"], "m");
    assert_eq!(asked["args"], json!({"tenant": 99, "token": "***"}));
    let seen_override = |log: &Log| {
        log.of(Some("m"))
            .iter()
            .position(|r| r.args == override_args)
    };
    wait_stepping(
        db,
        Duration::from_secs(60),
        "the manual run, then a scheduled one with its own arguments",
        || async {
            seen_override(&log).is_some_and(|at| {
                log.of(Some("m"))[at + 1..]
                    .iter()
                    .any(|r| r.args == json!({"tenant": 5}))
            })
        },
    )
    .await;

    // The task's own row: its handler reads the override (it has no arguments of its own).
    let (status, asked) = post(
        &base,
        "/api/tasks/iapi.sync/trigger",
        Some(json!({"args": {"tenant": 7}})),
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{asked}");
    assert!(asked.get("key").is_none(), "{asked}");
    wait_stepping(
        db,
        Duration::from_secs(60),
        "the task's own manual run",
        || async { log.of(None).iter().any(|r| r.args == json!({"tenant": 7})) },
    )
    .await;
    // Without a body, as before: its own (none: JSON null).
    let (status, asked) = post(&base, "/api/tasks/iapi.sync/trigger", None).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{asked}");
    wait_stepping(
        db,
        Duration::from_secs(60),
        "a manual run with no arguments",
        || async { log.of(None).iter().any(|r| r.args.is_null()) },
    )
    .await;

    // Recorded with the runs, and shown with the secret hidden.
    let runs = db.runs(Some("iapi.sync")).await;
    let overridden: Vec<_> = runs.iter().filter(|r| r.args_override.is_some()).collect();
    assert_eq!(overridden.len(), 2, "{overridden:?}");
    let of_m = overridden
        .iter()
        .find(|r| r.instance_key.as_deref() == Some("m"))
        .expect("the instance's manual run");
    assert_eq!(
        serde_json::from_str::<Value>(of_m.args_override.as_deref().unwrap()).unwrap(),
        override_args
    );
    let (status, shown) = get(&base, &format!("/api/runs/{}", of_m.id)).await;
    running.stop().await;
    assert_eq!(status, StatusCode::OK, "{shown}");
    assert_eq!(shown["run"]["trigger"], "manual");
    assert_eq!(
        shown["run"]["args_override"],
        json!({"tenant": 99, "token": "***"})
    );
    assert!(!shown.to_string().contains(SECRET), "{shown}");
    // Once: exactly one run read the override.
    let with_override = log
        .of(Some("m"))
        .iter()
        .filter(|r| r.args == override_args)
        .count();
    assert_eq!(with_override, 1);
    let audit = db.api().audit_log(100, None).await.unwrap();
    let trigger = audit
        .iter()
        .find(|a| a.action == "trigger" && a.detail.starts_with("instance m"))
        .expect("the manual run audited");
    assert!(trigger.detail.contains(r#""token":"***""#), "{trigger:?}");
    assert!(!trigger.detail.contains(SECRET), "{trigger:?}");
}

/// Refusals, each with its reason: no operator token configured (403), none sent (401), a bad
/// key, cron or zone, arguments over 64 KiB or not an object body (400), an unknown task or
/// instance (404), a task with shards or a paused instance's manual run (409).
async fn what_the_api_refuses_it_says_why(db: &TestDb) {
    let log = Arc::new(Log::default());
    // A node without an operator token refuses every mutation.
    let (running, base) = iapi_node(db, "open", None, &log).await;
    let (status, body) = put(&base, "/api/tasks/iapi.sync/instances/k", every_second(1)).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    running.stop().await;

    let (running, base) = iapi_node(db, "a", Some(TOKEN), &log).await;
    let url = format!("{base}/api/tasks/iapi.sync/instances/k");
    let (status, body) = call(reqwest::Method::PUT, &url, None, Some(every_second(1))).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    let (status, body) = call(reqwest::Method::DELETE, &url, None, None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");

    let refusals = [
        (
            "/api/tasks/iapi.sync/instances/bad%20key",
            every_second(1),
            400,
            "instance key `bad key` is refused",
        ),
        (
            "/api/tasks/iapi.sync/instances/k",
            json!({"cron": "61 * * * *"}),
            400,
            "61",
        ),
        (
            "/api/tasks/iapi.sync/instances/k",
            json!({"cron": "* * * * *", "timezone": "Mars/Base"}),
            400,
            "Mars/Base",
        ),
        (
            "/api/tasks/iapi.sync/instances/k",
            json!({"cron": "* * * * *", "args": "x".repeat(70_000)}),
            400,
            "the most is 65536",
        ),
        (
            "/api/tasks/iapi.sync/instances/k",
            json!({"args": {}}),
            400,
            "cron",
        ),
        (
            "/api/tasks/iapi.nope/instances/k",
            every_second(1),
            404,
            "iapi.nope",
        ),
    ];
    for (path, body, code, says) in refusals {
        let (status, answer) = put(&base, path, body).await;
        assert_eq!(status.as_u16(), code, "{path}: {answer}");
        let message = answer["message"].as_str().unwrap_or_default();
        assert!(message.contains(says), "{path}: `{says}` in {answer}");
    }
    assert!(
        db.api().instances("iapi.sync").await.unwrap().is_empty(),
        "nothing written"
    );
    for (method, path) in [
        (
            reqwest::Method::DELETE,
            "/api/tasks/iapi.sync/instances/none",
        ),
        (
            reqwest::Method::POST,
            "/api/tasks/iapi.sync/instances/none/resume",
        ),
        (
            reqwest::Method::POST,
            "/api/tasks/iapi.sync/instances/none/trigger",
        ),
    ] {
        let (status, answer) = call(method, &format!("{base}{path}"), Some(TOKEN), None).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}: {answer}");
        assert!(
            answer["message"]
                .as_str()
                .unwrap()
                .contains("no instance `none`"),
            "{answer}"
        );
    }

    // A manual run's arguments: checked as an instance's; a paused instance is not run.
    let (status, _) = put(
        &base,
        "/api/tasks/iapi.sync/instances/k",
        json!({"cron": "0 0 0 1 1 *"}),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let big = json!({"args": {"blob": "x".repeat(70_000)}});
    let (status, answer) = post(&base, "/api/tasks/iapi.sync/instances/k/trigger", Some(big)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
    assert!(
        answer["message"].as_str().unwrap().contains("65536"),
        "{answer}"
    );
    let (status, answer) = post(
        &base,
        "/api/tasks/iapi.sync/trigger",
        Some(json!({"args": {"x": 1}, "other": 2})),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
    let (status, _) = post(
        &base,
        "/api/tasks/iapi.sync/instances/k/pause",
        Some(json!({"reason": "hold"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (status, answer) = post(&base, "/api/tasks/iapi.sync/instances/k/trigger", None).await;
    assert_eq!(status, StatusCode::CONFLICT, "{answer}");
    assert!(
        answer["message"].as_str().unwrap().contains("paused"),
        "{answer}"
    );
    running.stop().await;
    assert!(log.of(Some("k")).is_empty(), "{:?}", log.of(Some("k")));
}

/// `PUT /api/tasks/{name}/instances` with a list: the good instances written (and run, with
/// their arguments whole), each bad one refused with the status and reason its single `PUT`
/// would have had, in the order given; each written one audited on its own; a batch over the
/// cap, or without the operator's token, refused as a whole with nothing written.
async fn a_batch_writes_the_good_instances_and_refuses_each_bad_one_with_its_reason(db: &TestDb) {
    let log = Arc::new(Log::default());
    let path = "/api/tasks/iapi.sync/instances";
    // A node without an operator token refuses the batch.
    let (running, base) = iapi_node(db, "open", None, &log).await;
    let (status, body) = put(&base, path, json!([{"key": "b1", "cron": "* * * * *"}])).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    running.stop().await;

    let (running, base) = iapi_node(db, "a", Some(TOKEN), &log).await;
    let url = format!("{base}{path}");
    let batch = json!([{"key": "b1", "cron": "* * * * *"}]);
    let (status, body) = call(reqwest::Method::PUT, &url, None, Some(batch)).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    assert!(db.api().instances("iapi.sync").await.unwrap().is_empty());

    let yearly = "0 0 0 1 1 *";
    let batch = json!([
        {"key": "b1", "cron": "* * * * * *", "args": {"tenant": 1, "db": {"password": SECRET}}},
        {"key": "bad key", "cron": yearly},
        {"key": "b2", "cron": yearly, "timezone": "Asia/Shanghai"},
        {"key": "b3", "cron": "61 * * * *"},
        {"key": "b4", "cron": yearly, "timezone": "Mars/Base"},
        {"key": "b5", "cron": yearly, "args": "x".repeat(70_000)},
        {"key": "b6"},
        {"key": "b7", "cron": yearly, "args": {"tenant": 7}},
    ]);
    let (status, answer) = put(&base, path, batch).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["task"], "iapi.sync");
    assert_eq!(
        (answer["written"].as_u64(), answer["refused"].as_u64()),
        (Some(3), Some(5))
    );
    let results = answer["results"].as_array().unwrap();
    let expected: [(&str, u16, &str); 8] = [
        ("b1", 200, ""),
        ("bad key", 400, "instance key `bad key` is refused"),
        ("b2", 200, ""),
        ("b3", 400, "61"),
        ("b4", 400, "Mars/Base"),
        ("b5", 400, "the most is 65536"),
        ("b6", 400, "has no cron"),
        ("b7", 200, ""),
    ];
    assert_eq!(results.len(), expected.len(), "{answer}");
    for (result, (key, code, says)) in results.iter().zip(expected) {
        assert_eq!(result["key"], key, "{result}");
        assert_eq!(result["status"], code, "{result}");
        if code == 200 {
            assert_eq!(result["instance"]["enabled"], true, "{result}");
            assert!(result["message"].is_null(), "{result}");
        } else {
            assert_eq!(result["error"], "bad_request", "{result}");
            let message = result["message"].as_str().unwrap_or_default();
            assert!(message.contains(says), "{key}: `{says}` in {result}");
            assert!(result["instance"].is_null(), "{result}");
        }
    }
    assert_eq!(results[2]["instance"]["timezone"], "Asia/Shanghai");
    assert_eq!(
        results[0]["instance"]["args"],
        json!({"tenant": 1, "db": {"password": "***"}})
    );
    assert!(!answer.to_string().contains(SECRET), "{answer}");
    let keys: Vec<String> = db
        .api()
        .instances("iapi.sync")
        .await
        .unwrap()
        .into_iter()
        .map(|i| i.key)
        .collect();
    assert_eq!(keys, ["b1", "b2", "b7"], "the good written, the bad not");
    // A written one runs, its arguments whole.
    wait_stepping(db, Duration::from_secs(60), "a run of b1", || async {
        !log.of(Some("b1")).is_empty()
    })
    .await;
    assert_eq!(log.of(Some("b1"))[0].args["db"]["password"], SECRET);

    // A task refused as a whole is refused for each instance, with its status.
    for (task, code, says) in [("iapi.nope", 404, "iapi.nope")] {
        let batch = json!([{"key": "x1", "cron": yearly}, {"key": "x2", "cron": yearly}]);
        let (status, answer) = put(&base, &format!("/api/tasks/{task}/instances"), batch).await;
        assert_eq!(status, StatusCode::OK, "{answer}");
        assert_eq!(answer["written"], 0, "{answer}");
        for result in answer["results"].as_array().unwrap() {
            assert_eq!(result["status"], code, "{result}");
            assert!(
                result["message"].as_str().unwrap().contains(says),
                "{result}"
            );
        }
    }
    // Over the cap, or not a list: refused as a whole, nothing written.
    let too_many: Vec<Value> = (0..=1_000)
        .map(|i| json!({"key": format!("many-{i}"), "cron": yearly}))
        .collect();
    let (status, answer) = put(&base, path, Value::Array(too_many)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
    assert!(
        answer["message"].as_str().unwrap().contains("at most 1000"),
        "{answer}"
    );
    let (status, answer) = put(&base, path, json!({"key": "b9", "cron": yearly})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
    assert_eq!(db.api().instances("iapi.sync").await.unwrap().len(), 3);
    running.stop().await;

    // Audited: one entry per written instance, by alice, naming the batch; the secret hidden.
    let audit = db.api().audit_log(200, None).await.unwrap();
    let upserts: Vec<&str> = audit
        .iter()
        .filter(|a| a.action == "instance upsert" && a.task == "iapi.sync")
        .inspect(|a| assert!(a.actor.contains("alice"), "{a:?}"))
        .map(|a| a.detail.as_str())
        .collect();
    assert_eq!(upserts.len(), 3, "{upserts:?}");
    for key in ["b1", "b2", "b7"] {
        assert!(
            upserts
                .iter()
                .any(|d| d.starts_with(&format!("{key} cron")) && d.ends_with("in a batch of 8")),
            "{key}: {upserts:?}"
        );
    }
    assert!(
        audit.iter().all(|a| !a.detail.contains(SECRET)),
        "{audit:?}"
    );
}

/// The application binary's `instances` and `trigger` commands against the database while the
/// node runs: each writes what it names (audited), the handler reads the arguments whole, and
/// what they print hides the secret.
async fn the_instances_commands_write_and_run_instances(db: &TestDb) {
    let log = Arc::new(Log::default());
    let (running, _) = iapi_node(db, "a", Some(TOKEN), &log).await;
    let cli = |args: &[&str]| run_app(db, args);
    let args = format!(r#"{{"tenant": 11, "dsn": "postgres://app:{SECRET}@db/x"}}"#);
    let (code, out) = cli(&[
        "instances",
        "upsert",
        "iapi.sync",
        "c1",
        "--cron",
        "* * * * * *",
        "--timezone",
        "Asia/Shanghai",
        "--args",
        &args,
        "--actor",
        "ops-bob",
    ]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("wrote instance c1 of iapi.sync (by ops-bob)"),
        "{out}"
    );
    assert!(!out.contains(SECRET), "{out}");
    wait_stepping(db, Duration::from_secs(60), "a run of c1", || async {
        !log.of(Some("c1")).is_empty()
    })
    .await;
    assert_eq!(
        log.of(Some("c1"))[0].args["dsn"],
        format!("postgres://app:{SECRET}@db/x"),
        "the handler reads them whole"
    );

    let (code, out) = cli(&["instances", "list", "iapi.sync"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("c1") && out.contains("Asia/Shanghai"), "{out}");
    assert!(out.contains(r#""dsn":"***""#), "{out}");
    assert!(!out.contains(SECRET), "{out}");
    let (code, out) = cli(&["instances", "get", "iapi.sync", "c1", "--json"]);
    assert_eq!(code, 0, "{out}");
    let shown: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(shown["args"], json!({"tenant": 11, "dsn": "***"}));
    assert_eq!(shown["paused"], false);

    // A manual run with other arguments: once with them.
    let (code, out) = cli(&[
        "trigger",
        "iapi.sync",
        "--key",
        "c1",
        "--args",
        &format!(r#"{{"tenant": 77, "api_key": "{SECRET}"}}"#),
        "--actor",
        "ops-bob",
    ]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("instance c1 of iapi.sync"), "{out}");
    assert!(
        out.contains(r#""api_key":"***""#) && !out.contains(SECRET),
        "{out}"
    );
    wait_stepping(
        db,
        Duration::from_secs(60),
        "the manual run with tenant 77",
        || async { log.of(Some("c1")).iter().any(|r| r.args["tenant"] == 77) },
    )
    .await;
    let (code, out) = cli(&["trigger", "iapi.sync", "--args", "{nope"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("--args: the arguments are not JSON"), "{out}");

    // Pause, resume, remove; then it is gone.
    let (code, out) = cli(&[
        "instances",
        "pause",
        "iapi.sync",
        "c1",
        "--reason",
        "tenant moves",
        "--actor",
        "ops-bob",
    ]);
    assert_eq!(code, 0, "{out}");
    assert!(db.task("iapi.sync/c1").await.pause.is_some());
    let (code, out) = cli(&[
        "instances",
        "resume",
        "iapi.sync",
        "c1",
        "--actor",
        "ops-bob",
    ]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("resumed instance c1 of iapi.sync"), "{out}");
    let (code, out) = cli(&[
        "instances",
        "remove",
        "iapi.sync",
        "c1",
        "--actor",
        "ops-bob",
    ]);
    assert_eq!(code, 0, "{out}");
    let (code, out) = cli(&["instances", "get", "iapi.sync", "c1"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("has no instance `c1`"), "{out}");
    let (code, out) = cli(&[
        "instances",
        "upsert",
        "iapi.sync",
        "bad key",
        "--cron",
        "* * * * *",
    ]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("instance key `bad key` is refused"), "{out}");
    running.stop().await;

    let audit = db.api().audit_log(100, None).await.unwrap();
    for action in [
        "instance upsert",
        "trigger",
        "pause",
        "resume",
        "instance remove",
    ] {
        assert!(
            audit
                .iter()
                .any(|a| a.action == action && a.actor == "ops-bob" && a.task == "iapi.sync"),
            "{action}: {audit:?}"
        );
    }
    assert!(
        audit.iter().all(|a| !a.detail.contains(SECRET)),
        "{audit:?}"
    );
}

/// The application binary with `args` against `db`: its exit code and its output (stdout, then
/// stderr).
fn run_cli(db: &TestDb, args: &[&str]) -> (i32, String, String) {
    let out = app_output(db, args);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

/// `instances upsert-many TASK --file FILE`: a JSON list of the batch route's items, 1,205 of
/// them, written in batches of at most 1,000 (each audited `in a batch of N`), the good ones
/// written, each refused one listed with its place, key and reason, and the count said; with
/// `--json`, the same as one document. A task the store lacks, a file that cannot be read or is
/// not such a list: refused whole, nothing written, exit status 1.
async fn the_upsert_many_command_writes_a_file_in_batches_and_lists_each_refusal(db: &TestDb) {
    let log = Arc::new(Log::default());
    let (running, _) = iapi_node(db, "a", Some(TOKEN), &log).await;
    let dir = tempfile::tempdir().unwrap();
    let mut items: Vec<Value> = (0..1_200)
        .map(|i| json!({"key": format!("f-{i:04}"), "cron": "0 0 0 1 1 *"}))
        .collect();
    items[7]["timezone"] = json!("Asia/Shanghai");
    items[8]["args"] = json!({"tenant": 8, "password": SECRET});
    // Refused alone: a bad key (first batch), no cron and a bad zone (second batch).
    items.insert(3, json!({"key": "bad key", "cron": "0 0 0 1 1 *"}));
    items.insert(1_001, json!({"key": "no-cron"}));
    items.push(json!({"key": "mars", "cron": "0 0 0 1 1 *", "timezone": "Mars/Olympus"}));
    let file = dir.path().join("instances.json");
    std::fs::write(&file, serde_json::to_string(&items).unwrap()).unwrap();
    let path = file.to_str().unwrap();
    let (code, out, err) = run_cli(
        db,
        &[
            "instances",
            "upsert-many",
            "iapi.sync",
            "--file",
            path,
            "--actor",
            "ops-bob",
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("wrote 1200 of 1203 instances of iapi.sync (by ops-bob, in 2 batches)"),
        "{out}"
    );
    assert!(out.contains("refused 3:"), "{out}");
    for (place, key, why) in [
        (4, "bad key", "key"),
        (1_002, "no-cron", "cron"),
        (1_203, "mars", "Mars/Olympus"),
    ] {
        let line = out
            .lines()
            .find(|l| l.contains(&format!("#{place} `{key}`")))
            .unwrap_or_else(|| panic!("no line for #{place} {key}: {out}"));
        assert!(line.contains(why), "{line}");
    }
    assert!(!out.contains(SECRET), "{out}");
    let written = db.api().instances("iapi.sync").await.unwrap();
    assert_eq!(written.len(), 1_200);
    let seven = written.iter().find(|i| i.key == "f-0007").unwrap();
    assert_eq!(seven.timezone, "Asia/Shanghai");
    let eight = written.iter().find(|i| i.key == "f-0008").unwrap();
    assert!(
        eight.args.as_deref().unwrap().contains(SECRET),
        "stored whole"
    );
    let audit = db.api().audit_log(2_000, None).await.unwrap();
    let in_batch = |n: usize| {
        audit
            .iter()
            .filter(|a| a.action == "instance upsert" && a.actor == "ops-bob")
            .filter(|a| a.detail.ends_with(&format!("in a batch of {n}")))
            .count()
    };
    assert_eq!((in_batch(1_000), in_batch(203)), (999, 201), "two batches");

    // --json: one document.
    std::fs::write(
        &file,
        r#"[{"key": "j-1", "cron": "0 0 0 1 1 *"}, {"key": "j 2", "cron": "0 0 0 1 1 *"}]"#,
    )
    .unwrap();
    let (code, out, err) = run_cli(
        db,
        &[
            "instances",
            "upsert-many",
            "iapi.sync",
            "--file",
            path,
            "--json",
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
    let shown: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(shown["task"], "iapi.sync");
    assert_eq!(shown["written"], 1);
    assert_eq!(shown["batches"], 1);
    let refused = shown["refused"].as_array().unwrap();
    assert_eq!(refused.len(), 1, "{shown}");
    assert_eq!(refused[0]["place"], 2);
    assert_eq!(refused[0]["key"], "j 2");
    assert!(
        refused[0]["message"].as_str().unwrap().contains("key"),
        "{shown}"
    );

    // Refused whole: nothing written.
    let before = db.api().instances("iapi.sync").await.unwrap().len();
    let (code, _, err) = run_cli(
        db,
        &["instances", "upsert-many", "iapi.nope", "--file", path],
    );
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("iapi.nope"), "{err}");
    std::fs::write(&file, r#"{"key": "x"}"#).unwrap();
    let (code, _, err) = run_cli(
        db,
        &["instances", "upsert-many", "iapi.sync", "--file", path],
    );
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("instances.json"), "names the file: {err}");
    std::fs::write(&file, r#"[{"key": "x", "cron": "* * * * *", "every": 3}]"#).unwrap();
    let (code, _, err) = run_cli(
        db,
        &["instances", "upsert-many", "iapi.sync", "--file", path],
    );
    assert_eq!(code, 1, "an unknown field: {err}");
    assert!(err.contains("every"), "{err}");
    let missing = dir.path().join("missing.json");
    let (code, _, err) = run_cli(
        db,
        &[
            "instances",
            "upsert-many",
            "iapi.sync",
            "--file",
            missing.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("missing.json"), "{err}");
    assert_eq!(db.api().instances("iapi.sync").await.unwrap().len(), before);
    running.stop().await;
}
