//! The admin HTTP server of a real node, over real HTTP, against real PostgreSQL: every route of
//! `/openapi.json` answers with a documented status and a body of the documented shape; the
//! token rule; trigger, pause (surviving a reconcile), resume and the audit trail; the probes.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use reqwest::StatusCode;
use scheduler::{Scheduler, SchedulerBuilder, TaskContext, TaskRegistry, task};
use scheduler_tests::TestSchema;
use serde_json::{Value, json};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::admin_support;
use admin_support::assert_documented;

const TOKEN: &str = "test-admin-token-0123456789";

scheduler_tests::postgres_tests! {
    #[tokio::test]
    every_documented_route_answers_as_documented,
    mutations_without_the_right_token_are_refused,
    trigger_runs_and_pause_survives_a_reconcile_until_resumed,
    readyz_is_503_without_a_store_and_while_draining,
    reads_beyond_loopback_need_the_token,
}

/// Run ids the handlers saw, shared with them as state.
#[derive(Default)]
struct Seen {
    runs: Mutex<Vec<(String, i64)>>,
}

impl Seen {
    fn has_run(&self, id: i64) -> bool {
        self.runs.lock().unwrap().iter().any(|(_, r)| *r == id)
    }
    fn count(&self, task: &str) -> usize {
        self.runs
            .lock()
            .unwrap()
            .iter()
            .filter(|(t, _)| t == task)
            .count()
    }
}

fn seen(ctx: &TaskContext) -> &Arc<Seen> {
    ctx.state::<Arc<Seen>>()
        .expect("admin test nodes share Seen")
}

#[task(name = "admin.record")]
async fn admin_record(ctx: TaskContext) -> Result<(), std::convert::Infallible> {
    tracing::info!("admin.record ran");
    seen(&ctx)
        .runs
        .lock()
        .unwrap()
        .push((ctx.task_name().to_owned(), ctx.run_id()));
    Ok(())
}

/// Runs for 3 s whatever it is told (so a drain lasts that long).
#[task(name = "admin.slow")]
async fn admin_slow(ctx: TaskContext) -> Result<(), std::convert::Infallible> {
    seen(&ctx)
        .runs
        .lock()
        .unwrap()
        .push((ctx.task_name().to_owned(), ctx.run_id()));
    tokio::time::sleep(Duration::from_secs(3)).await;
    Ok(())
}

fn registry() -> TaskRegistry {
    TaskRegistry::collect()
        .unwrap()
        .retain(|n| n.starts_with("admin."))
}

/// A yearly schedule: tasks run only when triggered.
const YEARLY: &str = "0 0 1 1 *";

fn config_text(cron: &str) -> String {
    json!({"tasks": [
        {"name": "admin.record", "cron": cron, "enabled": true},
        {"name": "admin.slow", "cron": YEARLY, "enabled": true},
        {"name": "admin.unknown", "cron": YEARLY, "enabled": true},
    ]})
    .to_string()
}

struct Node {
    stop: CancellationToken,
    handle: JoinHandle<scheduler::Result<()>>,
    addr: SocketAddr,
    seen: Arc<Seen>,
    http: reqwest::Client,
    _dir: tempfile::TempDir,
    config: std::path::PathBuf,
}

impl Node {
    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    async fn get(&self, path: &str) -> (StatusCode, Value) {
        let r = self
            .http
            .get(self.url(path))
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap();
        let status = r.status();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    async fn post(&self, path: &str, body: Option<Value>) -> (StatusCode, Value) {
        let mut r = self
            .http
            .post(self.url(path))
            .bearer_auth(TOKEN)
            .header("X-Scheduler-Actor", "alice");
        if let Some(body) = body {
            r = r.json(&body);
        }
        let r = r.send().await.unwrap();
        let status = r.status();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    async fn put(&self, path: &str, body: Value) -> (StatusCode, Value) {
        let r = self
            .http
            .put(self.url(path))
            .bearer_auth(TOKEN)
            .header("X-Scheduler-Actor", "alice")
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = r.status();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    async fn delete(&self, path: &str) -> (StatusCode, Value) {
        let r = self
            .http
            .delete(self.url(path))
            .bearer_auth(TOKEN)
            .header("X-Scheduler-Actor", "alice")
            .send()
            .await
            .unwrap();
        let status = r.status();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    async fn stop(self) {
        self.stop.cancel();
        tokio::time::timeout(Duration::from_secs(60), self.handle)
            .await
            .expect("node stops within a minute")
            .unwrap()
            .expect("node ran without error");
    }
}

fn builder(db: &TestSchema, id: &str) -> SchedulerBuilder {
    let store = scheduler::store::PgStore::connect_lazy(&db.url, &db.schema, 4).unwrap();
    Scheduler::builder()
        .store(Arc::new(store))
        .node_id(id)
        .registry(registry())
        .lock_lifetime(Duration::from_secs(3))
        .poll_interval(Duration::from_secs(2))
        .heartbeat_interval(Duration::from_secs(1))
        .shutdown_timeout(Duration::from_secs(10))
        .admin_addr("127.0.0.1:0".parse().unwrap())
}

fn start(builder: SchedulerBuilder) -> Node {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("tasks.json");
    std::fs::write(&config, config_text(YEARLY)).unwrap();
    let seen = Arc::new(Seen::default());
    let scheduler = builder
        .config(config.to_str().unwrap())
        .config_poll_interval(Duration::from_millis(200))
        .state(Arc::clone(&seen))
        .build()
        .unwrap();
    let addr = scheduler
        .admin_addr()
        .expect("the admin server is configured");
    assert_ne!(
        addr.port(),
        0,
        "the bound port is known before the node runs"
    );
    let stop = CancellationToken::new();
    let s = stop.clone();
    let handle = tokio::spawn(async move { scheduler.run_until(s.cancelled_owned()).await });
    Node {
        stop,
        handle,
        addr,
        seen,
        http: reqwest::Client::new(),
        _dir: dir,
        config,
    }
}

/// Waits up to a minute for `check`.
async fn wait_until<F, Fut>(what: &str, check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    scheduler_tests::wait_until(Duration::from_secs(60), what, check).await;
}

async fn ready(node: &Node) {
    wait_until("the node is ready", || async {
        node.get("/readyz").await.0 == StatusCode::OK
    })
    .await;
}

async fn every_documented_route_answers_as_documented() {
    let db = TestSchema::new("admin_routes").await;
    let node = start(builder(&db, "routes").admin_token(TOKEN));
    ready(&node).await;
    let doc: Value = node
        .http
        .get(node.url("/openapi.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(doc["openapi"].as_str().unwrap().starts_with("3.1"), "{doc}");

    // The document lists exactly these routes (it is generated from the router itself, so no
    // route exists that it lacks).
    let routes: BTreeSet<(String, String)> = doc["paths"]
        .as_object()
        .unwrap()
        .iter()
        .flat_map(|(path, ops)| {
            ops.as_object()
                .unwrap()
                .keys()
                .filter(|m| ["get", "post", "put", "delete", "patch"].contains(&m.as_str()))
                .map(move |m| (m.clone(), path.clone()))
        })
        .collect();
    let expected: BTreeSet<(String, String)> = [
        ("get", "/api/tasks"),
        ("get", "/api/tasks/{name}"),
        ("get", "/api/tasks/{name}/instances"),
        ("get", "/api/tasks/{name}/instances/{key}"),
        ("get", "/api/ticks"),
        ("post", "/api/tasks/{name}/trigger"),
        ("post", "/api/tasks/{name}/pause"),
        ("post", "/api/tasks/{name}/resume"),
        ("post", "/api/runs/{id}/cancel"),
        ("post", "/api/tasks/{name}/backfill"),
        ("get", "/api/backfills"),
        ("get", "/api/backfills/{id}"),
        ("post", "/api/backfills/{id}/cancel"),
        ("get", "/api/runs"),
        ("get", "/api/runs/{id}"),
        ("get", "/api/nodes"),
        ("get", "/api/config"),
        ("get", "/api/audit"),
        ("get", "/api/deliveries"),
        ("get", "/api/limits"),
        ("get", "/api/incidents"),
        ("get", "/api/snoozes"),
        ("post", "/api/tasks/{name}/snooze"),
        ("delete", "/api/tasks/{name}/snooze"),
        ("put", "/api/tasks/{name}/instances"),
        ("put", "/api/tasks/{name}/instances/{key}"),
        ("delete", "/api/tasks/{name}/instances/{key}"),
        ("post", "/api/tasks/{name}/instances/{key}/pause"),
        ("post", "/api/tasks/{name}/instances/{key}/resume"),
        ("post", "/api/tasks/{name}/instances/{key}/trigger"),
        ("get", "/healthz"),
        ("get", "/readyz"),
        ("get", "/metrics"),
        ("get", "/openapi.json"),
    ]
    .into_iter()
    .map(|(m, p)| (m.to_owned(), p.to_owned()))
    .collect();
    assert_eq!(routes, expected);

    // A run to look at.
    let (status, body) = node.post("/api/tasks/admin.record/trigger", None).await;
    assert_documented(&doc, "post", "/api/tasks/{name}/trigger", status, &body);
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    wait_until("the triggered run", || async {
        node.seen.count("admin.record") == 1
    })
    .await;
    let run_id = node.seen.runs.lock().unwrap()[0].1;
    wait_until("the run recorded as finished", || async {
        node.get(&format!("/api/runs/{run_id}")).await.1["run"]["finished_at"].is_string()
    })
    .await;

    let mut called = BTreeSet::new();
    let mut call = async |method: &str, template: &str, path: &str, body: Option<Value>| {
        let (status, value) = match method {
            "get" => node.get(path).await,
            "delete" => node.delete(path).await,
            "put" => node.put(path, body.unwrap_or(Value::Null)).await,
            _ => node.post(path, body).await,
        };
        assert_documented(&doc, method, template, status, &value);
        called.insert((method.to_owned(), template.to_owned()));
        (status, value)
    };
    let ok = StatusCode::OK;
    assert_eq!(call("get", "/api/tasks", "/api/tasks", None).await.0, ok);
    let (s, task) = call(
        "get",
        "/api/tasks/{name}",
        "/api/tasks/admin.record?count=3&runs=5",
        None,
    )
    .await;
    assert_eq!(s, ok);
    assert_eq!(task["next_fire_times"].as_array().unwrap().len(), 3);
    assert_eq!(task["recent_runs"][0]["id"], run_id);
    assert_eq!(
        task["task"]["cron_in_words"],
        "at 00:00 on day 1 of the month in January"
    );
    assert_eq!(task["task"]["origin"]["kind"], "config");
    assert!(
        task["task"]["policy"]["defined_at"]
            .as_str()
            .unwrap()
            .contains("admin.rs")
    );
    assert_eq!(
        call("get", "/api/tasks/{name}", "/api/tasks/nope", None)
            .await
            .0,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        call(
            "get",
            "/api/tasks/{name}",
            "/api/tasks/admin.record?count=0",
            None
        )
        .await
        .0,
        StatusCode::BAD_REQUEST
    );
    // Instances: none yet (the documented shapes of one are checked in `instances_read`).
    let (s, page) = call(
        "get",
        "/api/tasks/{name}/instances",
        "/api/tasks/admin.record/instances?key=x&runs=3",
        None,
    )
    .await;
    assert_eq!((s, page["instances"].as_array().unwrap().len()), (ok, 0));
    assert_eq!(
        call(
            "get",
            "/api/tasks/{name}/instances/{key}",
            "/api/tasks/admin.record/instances/tenant-1",
            None
        )
        .await
        .0,
        StatusCode::NOT_FOUND
    );
    let (s, ticks) = call("get", "/api/ticks", "/api/ticks?count=5", None).await;
    assert_eq!(s, ok);
    let strip = ticks["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["task"] == "admin.record")
        .expect("a strip per task");
    assert_eq!(
        strip["ticks"][0]["outcome"], "succeeded",
        "the manual run is a mark of its own: {strip}"
    );
    assert_eq!(strip["ticks"][0]["trigger"], "manual");
    assert_eq!(
        call("get", "/api/ticks", "/api/ticks?task=nope", None)
            .await
            .0,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        call("get", "/api/ticks", "/api/ticks?count=0", None)
            .await
            .0,
        StatusCode::BAD_REQUEST
    );
    let (s, page) = call(
        "get",
        "/api/runs",
        "/api/runs?task=admin.record&status=succeeded&trigger=manual&since=2000-01-01T00:00:00Z&limit=1",
        None,
    )
    .await;
    assert_eq!(s, ok);
    assert_eq!(page["runs"][0]["id"], run_id);
    let cursor = page["next_cursor"]
        .as_i64()
        .expect("a full page has a cursor");
    let (_, older) = call(
        "get",
        "/api/runs",
        &format!("/api/runs?cursor={cursor}"),
        None,
    )
    .await;
    assert!(older["runs"].as_array().unwrap().is_empty(), "{older}");
    assert_eq!(
        call("get", "/api/runs", "/api/runs?status=sleeping", None)
            .await
            .0,
        StatusCode::BAD_REQUEST
    );
    let (s, run) = call(
        "get",
        "/api/runs/{id}",
        &format!("/api/runs/{run_id}"),
        None,
    )
    .await;
    assert_eq!(s, ok);
    assert_eq!(run["run"]["trigger"], "manual");
    assert_eq!(run["run"]["triggered_by"], "alice (admin-token)");
    assert_eq!(
        call("get", "/api/runs/{id}", "/api/runs/999999999", None)
            .await
            .0,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        call("get", "/api/runs/{id}", "/api/runs/abc", None).await.0,
        StatusCode::BAD_REQUEST
    );
    // (A running run's cancel is `cancel::*`'s: real nodes, judged by their handlers.)
    let (s, refused) = call(
        "post",
        "/api/runs/{id}/cancel",
        &format!("/api/runs/{run_id}/cancel"),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::CONFLICT, "an ended run: {refused}");
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .contains("has ended already (succeeded)"),
        "{refused}"
    );
    assert_eq!(
        call(
            "post",
            "/api/runs/{id}/cancel",
            "/api/runs/999999999/cancel",
            None
        )
        .await
        .0,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        call(
            "post",
            "/api/runs/{id}/cancel",
            "/api/runs/abc/cancel",
            None
        )
        .await
        .0,
        StatusCode::BAD_REQUEST
    );
    let (s, nodes) = call("get", "/api/nodes", "/api/nodes", None).await;
    assert_eq!(s, ok);
    assert_eq!(nodes["nodes"][0]["node_id"], "routes");
    assert_eq!(nodes["nodes"][0]["this_node"], true);
    let (s, config) = call("get", "/api/config", "/api/config", None).await;
    assert_eq!(s, ok);
    assert_eq!(config["document"]["tasks"].as_array().unwrap().len(), 3);
    let refused = &config["last_reconcile"]["refused"];
    assert_eq!(refused[0]["task"], "admin.unknown", "{config:#}");
    assert!(config["source"].as_str().unwrap().contains("tasks.json"));
    assert_eq!(
        call("get", "/api/audit", "/api/audit?limit=10", None)
            .await
            .0,
        ok
    );
    assert_eq!(
        call("get", "/api/deliveries", "/api/deliveries", None)
            .await
            .0,
        ok
    );
    let (s, limits) = call("get", "/api/limits", "/api/limits", None).await;
    assert_eq!(s, ok);
    assert!(limits["limits"].is_array(), "{limits}");
    let (s, paused) = call(
        "post",
        "/api/tasks/{name}/pause",
        "/api/tasks/admin.record/pause",
        Some(json!({"reason": "checking routes"})),
    )
    .await;
    assert_eq!(s, ok, "{paused}");
    assert_eq!(
        call(
            "post",
            "/api/tasks/{name}/pause",
            "/api/tasks/admin.record/pause",
            Some(json!({"reason": ""}))
        )
        .await
        .0,
        StatusCode::BAD_REQUEST
    );
    assert_eq!(
        call(
            "post",
            "/api/tasks/{name}/pause",
            "/api/tasks/admin.record/pause",
            Some(json!({"reason": "late", "until": "2001-01-01T00:00:00Z"}))
        )
        .await
        .0,
        StatusCode::CONFLICT
    );
    assert_eq!(
        call(
            "post",
            "/api/tasks/{name}/trigger",
            "/api/tasks/admin.record/trigger",
            None
        )
        .await
        .0,
        StatusCode::CONFLICT
    );
    assert_eq!(
        call(
            "post",
            "/api/tasks/{name}/resume",
            "/api/tasks/admin.record/resume",
            None
        )
        .await
        .0,
        ok
    );
    assert_eq!(
        call(
            "post",
            "/api/tasks/{name}/resume",
            "/api/tasks/nope/resume",
            None
        )
        .await
        .0,
        StatusCode::NOT_FOUND
    );
    let until = (chrono::Utc::now() + chrono::TimeDelta::hours(1)).to_rfc3339();
    let (s, snoozed) = call(
        "post",
        "/api/tasks/{name}/snooze",
        "/api/tasks/admin.record/snooze",
        Some(json!({"reason": "checking routes", "until": until})),
    )
    .await;
    assert_eq!(s, ok, "{snoozed}");
    assert_eq!(
        call(
            "post",
            "/api/tasks/{name}/snooze",
            "/api/tasks/admin.record/snooze",
            Some(json!({"reason": "late", "until": "2001-01-01T00:00:00Z"}))
        )
        .await
        .0,
        StatusCode::CONFLICT
    );
    assert_eq!(
        call(
            "post",
            "/api/tasks/{name}/snooze",
            "/api/tasks/nope/snooze",
            Some(json!({"reason": "x", "until": until}))
        )
        .await
        .0,
        StatusCode::NOT_FOUND
    );
    let (s, snoozes) = call("get", "/api/snoozes", "/api/snoozes", None).await;
    assert_eq!(s, ok);
    assert_eq!(snoozes["snoozes"][0]["task"], "admin.record", "{snoozes}");
    let (s, incidents) = call("get", "/api/incidents", "/api/incidents?state=open", None).await;
    assert_eq!(s, ok);
    assert_eq!(incidents["snoozes"][0]["reason"], "checking routes");
    assert_eq!(
        call("get", "/api/incidents", "/api/incidents?limit=0", None)
            .await
            .0,
        StatusCode::BAD_REQUEST
    );
    let (s, lifted) = call(
        "delete",
        "/api/tasks/{name}/snooze",
        "/api/tasks/admin.record/snooze",
        None,
    )
    .await;
    assert_eq!(s, ok);
    assert_eq!(lifted["ended"]["reason"], "checking routes");
    assert_eq!(
        call(
            "delete",
            "/api/tasks/{name}/snooze",
            "/api/tasks/nope/snooze",
            None
        )
        .await
        .0,
        StatusCode::NOT_FOUND
    );
    let (s, plan) = call(
        "post",
        "/api/tasks/{name}/backfill",
        "/api/tasks/admin.record/backfill",
        Some(
            json!({"from": "2020-01-01T00:00:00Z", "to": "2022-12-31T00:00:00Z", "dry_run": true}),
        ),
    )
    .await;
    assert_eq!(s, ok, "{plan}");
    assert_eq!(plan["runs"], 3, "{plan}");
    assert_eq!(
        call("get", "/api/backfills", "/api/backfills?limit=5", None)
            .await
            .0,
        ok
    );
    assert_eq!(
        call("get", "/api/backfills/{id}", "/api/backfills/4711", None)
            .await
            .0,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        call(
            "post",
            "/api/backfills/{id}/cancel",
            "/api/backfills/4711/cancel",
            None
        )
        .await
        .0,
        StatusCode::NOT_FOUND
    );
    // Instances (their behaviour is `instances_api::*`'s); paused, so nothing runs here.
    let instance = "/api/tasks/{name}/instances/{key}";
    let (s, made) = call(
        "put",
        instance,
        "/api/tasks/admin.record/instances/r1",
        Some(json!({"cron": YEARLY, "args": {"tenant": 1, "password": "x"}})),
    )
    .await;
    assert_eq!(s, ok, "{made}");
    assert_eq!(made["args"], json!({"tenant": 1, "password": "***"}));
    assert_eq!(
        call(
            "put",
            instance,
            "/api/tasks/admin.record/instances/bad%20key",
            Some(json!({"cron": YEARLY}))
        )
        .await
        .0,
        StatusCode::BAD_REQUEST
    );
    // A batch: each instance answered on its own (the behaviour is `instances_api::*`'s).
    let (s, batch) = call(
        "put",
        "/api/tasks/{name}/instances",
        "/api/tasks/admin.record/instances",
        Some(json!([{"key": "r2", "cron": YEARLY}, {"key": "bad key", "cron": YEARLY}])),
    )
    .await;
    assert_eq!(s, ok, "{batch}");
    assert_eq!(
        (batch["written"].clone(), batch["refused"].clone()),
        (json!(1), json!(1))
    );
    assert_eq!(batch["results"][1]["status"], 400, "{batch}");
    assert_eq!(
        call(
            "put",
            "/api/tasks/{name}/instances",
            "/api/tasks/admin.record/instances",
            Some(json!({"key": "r3"}))
        )
        .await
        .0,
        StatusCode::BAD_REQUEST
    );
    let (s, paused) = call(
        "post",
        "/api/tasks/{name}/instances/{key}/pause",
        "/api/tasks/admin.record/instances/r1/pause",
        Some(json!({"reason": "checking routes"})),
    )
    .await;
    assert_eq!(s, ok, "{paused}");
    assert_eq!(
        call(
            "post",
            "/api/tasks/{name}/instances/{key}/trigger",
            "/api/tasks/admin.record/instances/r1/trigger",
            Some(json!({"args": {"tenant": 2}}))
        )
        .await
        .0,
        StatusCode::CONFLICT
    );
    assert_eq!(
        call(
            "post",
            "/api/tasks/{name}/instances/{key}/resume",
            "/api/tasks/admin.record/instances/r1/resume",
            None
        )
        .await
        .0,
        ok
    );
    assert_eq!(
        call(
            "delete",
            instance,
            "/api/tasks/admin.record/instances/r1",
            None
        )
        .await
        .0,
        ok
    );
    assert_eq!(
        call(
            "delete",
            instance,
            "/api/tasks/admin.record/instances/r1",
            None
        )
        .await
        .0,
        StatusCode::NOT_FOUND
    );

    assert_eq!(call("get", "/healthz", "/healthz", None).await.0, ok);
    assert_eq!(call("get", "/readyz", "/readyz", None).await.0, ok);
    assert_eq!(
        call("get", "/openapi.json", "/openapi.json", None).await.0,
        ok
    );

    let metrics = node.http.get(node.url("/metrics")).send().await.unwrap();
    assert_eq!(metrics.status(), ok);
    assert!(
        metrics.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/openmetrics-text")
    );
    let text = metrics.text().await.unwrap();
    assert!(text.contains(r#"scheduler_task_runs_total{task="admin.record",outcome="succeeded",trigger="manual"} 1"#), "{text}");
    called.insert(("get".to_owned(), "/metrics".to_owned()));

    assert_eq!(called, expected, "every documented route was called");

    // Paths and methods the document lacks do not exist.
    let (s, body) = node.get("/api/secret").await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    assert_eq!(body["error"], "not_found");
    let r = node
        .http
        .delete(node.url("/api/tasks"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED);

    node.stop().await;
    db.cleanup().await;
}

async fn mutations_without_the_right_token_are_refused() {
    let db = TestSchema::new("admin_auth").await;
    // No token configured: every mutation is refused, whatever is sent.
    let node = start(builder(&db, "tokenless"));
    ready(&node).await;
    for auth in [None, Some(TOKEN)] {
        let mut r = node.http.post(node.url("/api/tasks/admin.record/trigger"));
        if let Some(t) = auth {
            r = r.bearer_auth(t);
        }
        let r = r.send().await.unwrap();
        assert_eq!(r.status(), StatusCode::FORBIDDEN);
        let body: Value = r.json().await.unwrap();
        assert_eq!(body["error"], "forbidden");
        assert!(
            body["message"]
                .as_str()
                .unwrap()
                .contains("SCHEDULER_ADMIN_TOKEN")
        );
    }
    // Reads are open on loopback.
    let r = node.http.get(node.url("/api/tasks")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    node.stop().await;

    let node = start(builder(&db, "tokened").admin_token(TOKEN));
    ready(&node).await;
    for auth in [
        None,
        Some("Bearer wrong-token-0123456789"),
        Some("Basic abc"),
    ] {
        let mut r = node.http.post(node.url("/api/tasks/admin.record/pause"));
        if let Some(a) = auth {
            r = r.header("authorization", a);
        }
        let r = r.json(&json!({"reason": "x"})).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED, "{auth:?}");
        let body: Value = r.json().await.unwrap();
        assert_eq!(body["error"], "unauthorized");
        assert!(!body["message"].as_str().unwrap().contains(TOKEN));
    }
    let (_, task) = node.get("/api/tasks/admin.record").await;
    assert!(task["task"]["state"]["pause"].is_null(), "{task}");
    // The tick beside the start (no jitter here: the same instant, or none).
    let state = &task["task"]["state"];
    assert!(state.get("next_tick").is_some(), "{task}");
    assert_eq!(state["next_tick"], state["next_run_at"], "{task}");
    let (_, audit) = node.get("/api/audit").await;
    assert!(audit["entries"].as_array().unwrap().is_empty(), "{audit}");
    assert_eq!(node.seen.count("admin.record"), 0);
    node.stop().await;
    db.cleanup().await;
}

async fn trigger_runs_and_pause_survives_a_reconcile_until_resumed() {
    let db = TestSchema::new("admin_ops").await;
    let node = start(builder(&db, "ops").admin_token(TOKEN));
    ready(&node).await;

    let (s, body) = node.post("/api/tasks/admin.record/trigger", None).await;
    assert_eq!(s, StatusCode::ACCEPTED, "{body}");
    wait_until("the handler ran", || async {
        node.seen.count("admin.record") == 1
    })
    .await;
    let run_id = node.seen.runs.lock().unwrap()[0].1;
    assert!(node.seen.has_run(run_id));
    let (_, page) = node.get("/api/runs?task=admin.record&trigger=manual").await;
    assert_eq!(page["runs"][0]["id"], run_id, "{page}");

    let (s, body) = node
        .post(
            "/api/tasks/admin.record/pause",
            Some(json!({"reason": "upstream is down"})),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{body}");
    assert_eq!(body["pause"]["by"], "alice (admin-token)");

    // The config changes (every minute now): the reconcile applies it and keeps the pause.
    std::fs::write(&node.config, config_text("* * * * *")).unwrap();
    wait_until("the new config reconciled", || async {
        let (_, config) = node.get("/api/config").await;
        config["last_reconcile"]["updated"]
            .as_array()
            .is_some_and(|u| u.iter().any(|t| t == "admin.record"))
    })
    .await;
    let (_, config) = node.get("/api/config").await;
    assert!(
        config["last_reconcile"]["paused"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t == "admin.record"),
        "the reconcile reports the pause: {config:#}"
    );
    let (_, task) = node.get("/api/tasks/admin.record").await;
    assert_eq!(task["task"]["cron"], "* * * * *");
    assert_eq!(task["task"]["cron_in_words"], "every minute");
    assert_eq!(
        task["task"]["state"]["pause"]["reason"], "upstream is down",
        "{task:#}"
    );
    let (_, list) = node.get("/api/tasks").await;
    let listed = list["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "admin.record")
        .unwrap();
    assert_eq!(listed["state"]["pause"]["reason"], "upstream is down");

    let (s, body) = node.post("/api/tasks/admin.record/resume", None).await;
    assert_eq!(s, StatusCode::OK, "{body}");
    assert_eq!(body["ended"]["reason"], "upstream is down");
    let (_, task) = node.get("/api/tasks/admin.record").await;
    assert!(task["task"]["state"]["pause"].is_null(), "{task:#}");
    assert!(task["task"]["origin"]["refused"].is_null(), "{task:#}");

    // An invalid entry is refused; the task view says why and keeps the last valid schedule.
    std::fs::write(&node.config, config_text("61 * * * *")).unwrap();
    wait_until("the refusal shows in the task view", || async {
        let (_, task) = node.get("/api/tasks/admin.record").await;
        task["task"]["origin"]["refused"]
            .as_str()
            .is_some_and(|r| r.contains("minute"))
    })
    .await;
    let (_, task) = node.get("/api/tasks/admin.record").await;
    assert_eq!(task["task"]["cron"], "* * * * *", "{task:#}");

    let (_, audit) = node.get("/api/audit").await;
    let entries = audit["entries"].as_array().unwrap();
    let actions: Vec<_> = entries
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["resume", "pause", "trigger"], "{audit:#}");
    for e in entries {
        assert_eq!(e["actor"], "alice (admin-token)");
        assert_eq!(e["task"], "admin.record");
        assert!(
            e["source"].as_str().unwrap().starts_with("http@127.0.0.1:"),
            "{e}"
        );
    }
    assert!(
        entries[1]["detail"]
            .as_str()
            .unwrap()
            .contains("upstream is down")
    );
    node.stop().await;
    db.cleanup().await;
}

async fn readyz_is_503_without_a_store_and_while_draining() {
    // A store nobody listens on: alive, not ready, and the API says the store failed.
    let db = TestSchema::new("admin_ready").await;
    let dead = scheduler::store::PgStore::connect_lazy(
        "postgres://postgres@127.0.0.1:1/none",
        "public",
        2,
    )
    .unwrap();
    let node = start(
        Scheduler::builder()
            .store(Arc::new(dead))
            .node_id("storeless")
            .registry(registry())
            .admin_addr("127.0.0.1:0".parse().unwrap())
            .admin_token(TOKEN),
    );
    let (s, _) = node.get("/healthz").await;
    assert_eq!(s, StatusCode::OK);
    let (s, body) = node.get("/readyz").await;
    assert_eq!(s, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(body["store_reachable"], false);
    assert_eq!(body["ready"], false);
    let (s, body) = node.get("/api/tasks").await;
    assert_eq!(s, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(body["error"], "unavailable");
    node.stop().await;

    // A healthy node turns unready as soon as it drains (a handler keeps the drain going).
    let node = start(builder(&db, "drainer").admin_token(TOKEN));
    ready(&node).await;
    let (s, _) = node.post("/api/tasks/admin.slow/trigger", None).await;
    assert_eq!(s, StatusCode::ACCEPTED);
    wait_until("the slow handler started", || async {
        node.seen.count("admin.slow") == 1
    })
    .await;
    let (_, nodes) = node.get("/api/nodes").await;
    assert_eq!(
        nodes["nodes"][0]["running_tasks"],
        json!(["admin.slow"]),
        "{nodes:#}"
    );
    assert_eq!(nodes["nodes"][0]["running"], 1, "{nodes:#}");
    node.stop.cancel();
    wait_until("readyz says draining", || async {
        let (s, body) = node.get("/readyz").await;
        s == StatusCode::SERVICE_UNAVAILABLE && body["draining"] == true
    })
    .await;
    node.stop().await;
    db.cleanup().await;
}

async fn reads_beyond_loopback_need_the_token() {
    let db = TestSchema::new("admin_remote").await;
    let anywhere: SocketAddr = "0.0.0.0:0".parse().unwrap();
    for token in [Some(TOKEN), None] {
        let mut b = builder(&db, "remote").admin_addr(anywhere);
        if let Some(t) = token {
            b = b.admin_token(t);
        }
        let mut node = start(b);
        node.addr = SocketAddr::from(([127, 0, 0, 1], node.addr.port()));
        ready(&node).await;
        let r = node.http.get(node.url("/readyz")).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::OK, "probes stay open");
        for path in ["/api/tasks", "/metrics"] {
            let r = node.http.get(node.url(path)).send().await.unwrap();
            let expected = match token {
                Some(_) => StatusCode::UNAUTHORIZED,
                None => StatusCode::FORBIDDEN,
            };
            assert_eq!(r.status(), expected, "{path} without a token");
        }
        let (s, _) = node.get("/api/tasks").await;
        let expected = match token {
            Some(_) => StatusCode::OK,
            None => StatusCode::UNAUTHORIZED,
        };
        assert_eq!(s, expected, "with a token");
        node.stop().await;
    }
    db.cleanup().await;
}

#[test]
fn the_admin_settings_of_the_environment() {
    let lookup = |vars: &'static [(&'static str, &'static str)]| {
        move |name: &str| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
        }
    };
    let error = SchedulerBuilder::from_lookup(lookup(&[("SCHEDULER_ADMIN_TOKEN", TOKEN)]))
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("only applies with SCHEDULER_ADMIN_ADDR"),
        "{error}"
    );
    assert!(!error.contains(TOKEN), "{error}");
    let error = SchedulerBuilder::from_lookup(lookup(&[("SCHEDULER_ADMIN_ADDR", "9870")]))
        .unwrap_err()
        .to_string();
    assert!(
        error.starts_with("invalid setting `SCHEDULER_ADMIN_ADDR`"),
        "{error}"
    );
    assert!(
        SchedulerBuilder::from_lookup(lookup(&[
            ("SCHEDULER_ADMIN_ADDR", "127.0.0.1:0"),
            ("SCHEDULER_ADMIN_TOKEN", TOKEN),
        ]))
        .is_ok()
    );
}

/// The viewer token of the environment: only with an address, and never the admin token's
/// value (refused at build, naming the variable, never showing the value).
#[tokio::test]
async fn the_viewer_token_of_the_environment() {
    const VIEWER: &str = "test-viewer-token-0123456789";
    let lookup = |vars: Vec<(&'static str, &'static str)>| {
        move |name: &str| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
        }
    };
    let error =
        SchedulerBuilder::from_lookup(lookup(vec![("SCHEDULER_ADMIN_VIEWER_TOKEN", VIEWER)]))
            .unwrap_err()
            .to_string();
    assert!(
        error.contains("SCHEDULER_ADMIN_VIEWER_TOKEN")
            && error.contains("only applies with SCHEDULER_ADMIN_ADDR"),
        "{error}"
    );
    assert!(!error.contains(VIEWER), "{error}");
    let build = |viewer: &'static str| {
        let store = scheduler::store::PgStore::connect_lazy(
            "postgres://postgres@127.0.0.1:1/x",
            "public",
            2,
        )
        .unwrap();
        SchedulerBuilder::from_lookup(lookup(vec![
            ("SCHEDULER_ADMIN_ADDR", "127.0.0.1:0"),
            ("SCHEDULER_ADMIN_TOKEN", TOKEN),
            ("SCHEDULER_ADMIN_VIEWER_TOKEN", viewer),
        ]))
        .unwrap()
        .store(Arc::new(store))
        .registry(registry())
        .build()
    };
    let error = build(TOKEN).unwrap_err().to_string();
    assert!(
        error.contains("SCHEDULER_ADMIN_VIEWER_TOKEN") && error.contains("must differ"),
        "{error}"
    );
    assert!(!error.contains(TOKEN), "{error}");
    let error = build("short").unwrap_err().to_string();
    assert!(
        error.contains("SCHEDULER_ADMIN_VIEWER_TOKEN") && error.contains("16"),
        "{error}"
    );
    assert!(build(VIEWER).is_ok());
}

#[tokio::test]
async fn a_short_token_is_refused_at_build() {
    let store =
        scheduler::store::PgStore::connect_lazy("postgres://postgres@127.0.0.1:1/x", "public", 2)
            .unwrap();
    let error = Scheduler::builder()
        .store(Arc::new(store))
        .registry(registry())
        .admin_addr("127.0.0.1:0".parse().unwrap())
        .admin_token("secret")
        .build()
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("SCHEDULER_ADMIN_TOKEN") && error.contains("16"),
        "{error}"
    );
    assert!(!error.contains("secret"), "{error}");
}

#[tokio::test]
async fn an_address_in_use_is_a_start_up_error() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();
    let store =
        scheduler::store::PgStore::connect_lazy("postgres://postgres@127.0.0.1:1/x", "public", 2)
            .unwrap();
    let error = Scheduler::builder()
        .store(Arc::new(store))
        .registry(registry())
        .admin_addr(addr)
        .build()
        .unwrap_err()
        .to_string();
    assert!(error.contains("SCHEDULER_ADMIN_ADDR"), "{error}");
    assert!(error.contains(&addr.to_string()), "{error}");
}
