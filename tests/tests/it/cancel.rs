//! Cancelling a running run: from the admin API (`POST /api/runs/{id}/cancel`) and the command
//! line (`cancel RUN_ID`), whichever node runs it. The handler is told through
//! `ctx.cancelled()` and, if it ignores that, stopped by force after the grace; the run is
//! recorded `cancelled` with who asked, and its tick is not run again, not even when its node
//! dies after the request. A handler that finishes its work all the same is `succeeded`.
//!
//! Real node processes (`handler_node`), on PostgreSQL (two nodes: the request reaches the node
//! that runs the run) and on an SQLite file (the command line as another process beside the
//! node), judged by what their handlers recorded (`scheduler_tests::handler_records`) and by
//! the run history.

use crate::common;

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command};
use std::time::Duration;

use reqwest::StatusCode;
use scheduler::testing::store::{RunQuery, RunRecord, RunStatus};
use scheduler_tests::handler_records::{self, Kind, Record};
use serde_json::Value;

use common::*;

const TOKEN: &str = "cancel-test-token-0123456789";

/// A `handler_node` process, killed (SIGKILL) if the test leaves it running.
struct NodeProcess {
    id: String,
    child: Child,
    /// Its admin server, if it has one.
    admin: Option<String>,
}

impl NodeProcess {
    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for NodeProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The test's files (config, records) and how its nodes reach the store.
struct Scene {
    dir: PathBuf,
    url: String,
    schema: Option<String>,
}

impl Scene {
    fn new(tag: &str, db: Option<&TestDb>, tasks: &[&str]) -> Self {
        let dir = std::env::temp_dir().join(format!("scheduler-{tag}-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(dir.join("records")).unwrap();
        let entries: Vec<_> = tasks
            .iter()
            .map(|name| {
                // Yearly: each run is a manual one, triggered by the test.
                serde_json::json!({"name": name, "enabled": true, "cron": "0 0 1 1 *", "timezone": "UTC"})
            })
            .collect();
        std::fs::write(
            dir.join("tasks.json"),
            serde_json::json!({ "tasks": entries }).to_string(),
        )
        .unwrap();
        let (url, schema) = match db {
            Some(db) => (db.pg().url.clone(), Some(db.pg().schema.clone())),
            None => (format!("sqlite://{}", dir.join("s.db").display()), None),
        };
        Scene { dir, url, schema }
    }

    fn records(&self) -> Vec<Record> {
        handler_records::read_dir(&self.dir.join("records"))
    }

    fn of(&self, task: &str, kind: Kind) -> Vec<Record> {
        self.records()
            .into_iter()
            .filter(|r| r.kind == kind && r.task == task)
            .collect()
    }

    /// Starts a node; with `admin`, its admin server on a free loopback port.
    fn spawn(&self, id: &str, admin: bool) -> NodeProcess {
        let mut command = Command::new(env!("CARGO_BIN_EXE_handler_node"));
        command
            .env("DATABASE_URL", &self.url)
            .env("SCHEDULER_NODE_ID", id)
            .env("SCHEDULER_CONFIG", self.dir.join("tasks.json"))
            .env("SCHEDULER_CONFIG_POLL_INTERVAL", "1s")
            .env("SCHEDULER_POLL_INTERVAL", "500ms")
            .env("SCHEDULER_LOCK_LIFETIME", "2s")
            .env("SCHEDULER_SHUTDOWN_TIMEOUT", "1s")
            .env("HANDLER_RECORDS", self.dir.join("records"))
            .env("RUST_LOG", "error");
        if let Some(schema) = &self.schema {
            command.env("SCHEDULER_SCHEMA", schema);
        }
        let admin = admin.then(|| {
            let port = TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            let addr = format!("127.0.0.1:{port}");
            command
                .env("SCHEDULER_ADMIN_ADDR", &addr)
                .env("SCHEDULER_ADMIN_TOKEN", TOKEN);
            format!("http://{addr}")
        });
        NodeProcess {
            id: id.to_owned(),
            child: command.spawn().expect("start a handler_node"),
            admin,
        }
    }

    /// Runs the application's own `cancel` command against the store: (exit code, stdout,
    /// stderr).
    fn cli_cancel(&self, run_id: i64) -> (i32, String, String) {
        let mut command = Command::new(env!("CARGO_BIN_EXE_handler_node"));
        command
            .args(["cancel", &run_id.to_string(), "--actor", "ops-alice"])
            .args(["--database-url", &self.url])
            .env_remove("DATABASE_URL")
            .env_remove("SCHEDULER_DATABASE_URL");
        if let Some(schema) = &self.schema {
            command.args(["--schema", schema]);
        }
        let out = command.output().expect("run the cancel command");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8(out.stdout).unwrap(),
            String::from_utf8(out.stderr).unwrap(),
        )
    }
}

impl Drop for Scene {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The admin API of a node process.
struct Admin {
    base: String,
    http: reqwest::Client,
}

impl Admin {
    async fn of(node: &NodeProcess) -> Self {
        let admin = Admin {
            base: node.admin.clone().expect("a node with an admin server"),
            http: reqwest::Client::new(),
        };
        wait_until(
            Duration::from_secs(60),
            "the admin server answers",
            || async {
                admin
                    .http
                    .get(format!("{}/readyz", admin.base))
                    .send()
                    .await
                    .is_ok_and(|r| r.status() == StatusCode::OK)
            },
        )
        .await;
        admin
    }

    async fn cancel(&self, run_id: i64, token: Option<&str>) -> (StatusCode, Value) {
        let mut request = self
            .http
            .post(format!("{}/api/runs/{run_id}/cancel", self.base))
            .header("X-Scheduler-Actor", "alice");
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.unwrap();
        let status = response.status();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    async fn get(&self, path: &str) -> Value {
        let response = self
            .http
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK, "{path}");
        response.json().await.unwrap()
    }
}

/// Queues a manual run of `task` (as an operator would) and waits for its handler to start;
/// returns the handler's start record.
async fn run_now(db: &dyn scheduler::store::Store, scene: &Scene, task: &str) -> Record {
    let before = scene.of(task, Kind::Start).len();
    wait_until(
        Duration::from_secs(60),
        &format!("{task} is known"),
        || async { !db.task_states(Some(task)).await.unwrap().is_empty() },
    )
    .await;
    let who = scheduler::testing::operate::Actor::new("test", "test");
    scheduler::testing::operate::trigger(db, task, &who)
        .await
        .unwrap();
    wait_until(
        Duration::from_secs(60),
        &format!("{task} starts"),
        || async { scene.of(task, Kind::Start).len() > before },
    )
    .await;
    scene.of(task, Kind::Start).pop().unwrap()
}

async fn the_run(db: &dyn scheduler::store::Store, run_id: i64) -> RunRecord {
    db.run(run_id).await.unwrap().expect("the run is recorded")
}

/// Waits until run `run_id` has ended, and returns it.
async fn ended(db: &dyn scheduler::store::Store, run_id: i64) -> RunRecord {
    wait_until(Duration::from_secs(60), "the run ends", || async {
        the_run(db, run_id).await.status != RunStatus::Running
    })
    .await;
    the_run(db, run_id).await
}

/// Waits until the handler of `task` has written nothing for half a second (it was stopped, or
/// returned), and returns its records.
async fn handler_gone(scene: &Scene, task: &str) -> Vec<Record> {
    wait_until(Duration::from_secs(60), "the handler is gone", || async {
        let last = scene
            .records()
            .iter()
            .filter(|r| r.task == task)
            .map(|r| r.at_nanos)
            .max()
            .unwrap_or(0);
        handler_records::now_nanos().saturating_sub(last) > 500_000_000
    })
    .await;
    scene
        .records()
        .into_iter()
        .filter(|r| r.task == task)
        .collect()
}

/// The tick of a cancelled run is not run again: after well past a takeover (lock lifetime
/// 2 s) and a retry, the task has one run and its handler started once.
async fn assert_not_run_again(db: &dyn scheduler::store::Store, scene: &Scene, task: &str) {
    tokio::time::sleep(Duration::from_secs(6)).await;
    let starts = scene.of(task, Kind::Start);
    assert_eq!(starts.len(), 1, "the cancelled tick ran again: {starts:?}");
    let runs = db.runs(&RunQuery::latest(10).task(task)).await.unwrap();
    assert_eq!(runs.len(), 1, "{runs:?}");
}

mod on_postgres {
    use super::*;

    /// The run goes on node b; node a's admin server cancels it: the request reaches b (by
    /// NOTIFY), the handler sees `ctx.cancelled()` and returns, and the run is `cancelled` by
    /// the token's holder, audited, and not run again although its task reruns interrupted runs.
    /// A second cancel is a 409, an unknown run a 404, no token a 401.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_cancel_through_the_api_of_one_node_stops_the_run_on_another() {
        let db = TestDb::postgres("cancel_api").await;
        let scene = Scene::new("cancel_api", Some(&db), &["misbehave.cooperative"]);
        let _b = scene.spawn("b", false);
        let started = run_now(db.api(), &scene, "misbehave.cooperative").await;
        assert_eq!(started.node, "b");
        let a = scene.spawn("a", true);
        let admin = Admin::of(&a).await;
        assert_eq!(a.id, "a");

        let (status, _) = admin.cancel(started.run_id, None).await;
        assert_eq!(
            status,
            StatusCode::UNAUTHORIZED,
            "a mutation needs the token"
        );
        let (status, body) = admin.cancel(started.run_id, Some(TOKEN)).await;
        assert_eq!(status, StatusCode::ACCEPTED, "{body}");
        assert_eq!(body["outcome"], "requested", "{body}");
        assert_eq!(body["run"]["id"], started.run_id, "{body}");
        assert_eq!(body["run"]["node_id"], "b", "{body}");
        assert_eq!(body["grace_seconds"], 10, "{body}");
        let asker = body["run"]["cancel_requested_by"]
            .as_str()
            .expect("who asked")
            .to_owned();
        assert!(asker.contains("alice"), "{body}");

        let run = ended(db.api(), started.run_id).await;
        assert_eq!(run.status, RunStatus::Cancelled, "{run:?}");
        assert_eq!(run.cancel_requested_by.as_deref(), Some(asker.as_str()));
        let error = run.error.clone().unwrap_or_default();
        assert!(
            error.starts_with(&format!("cancelled by {asker}")),
            "{error}"
        );
        let records = handler_gone(&scene, "misbehave.cooperative").await;
        assert!(
            records.iter().any(|r| r.kind == Kind::End),
            "the handler saw ctx.cancelled() and returned: {records:?}"
        );
        assert_not_run_again(db.api(), &scene, "misbehave.cooperative").await;

        let (status, body) = admin.cancel(started.run_id, Some(TOKEN)).await;
        assert_eq!(status, StatusCode::CONFLICT, "{body}");
        assert!(
            body["message"].as_str().unwrap().contains("ended already"),
            "{body}"
        );
        let (status, _) = admin.cancel(started.run_id + 1000, Some(TOKEN)).await;
        assert_eq!(status, StatusCode::NOT_FOUND);

        let audit = admin.get("/api/audit").await;
        let entries: Vec<&Value> = audit["entries"]
            .as_array()
            .expect("entries")
            .iter()
            .filter(|e| e["action"] == "cancel")
            .collect();
        assert_eq!(entries.len(), 1, "{audit}");
        assert_eq!(entries[0]["task"], "misbehave.cooperative");
        assert_eq!(entries[0]["actor"], asker.as_str());
        let shown = admin.get(&format!("/api/runs/{}", started.run_id)).await;
        assert_eq!(shown["run"]["status"], "cancelled", "{shown}");
        assert_eq!(shown["run"]["cancel_requested_by"], asker.as_str());
        db.cleanup().await;
    }

    /// `cancel RUN_ID` on the command line, for a handler that ignores `ctx.cancelled()`: it
    /// is stopped by force after the grace, recorded `cancelled` saying so, and not run again.
    /// Asked again, the command says the run has ended; asked for an unknown run, it says so.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_cancel_from_the_command_line_stops_a_handler_that_ignores_it_by_force() {
        let db = TestDb::postgres("cancel_cli").await;
        let scene = Scene::new("cancel_cli", Some(&db), &["misbehave.deaf"]);
        let _a = scene.spawn("a", false);
        let _b = scene.spawn("b", false);
        let started = run_now(db.api(), &scene, "misbehave.deaf").await;

        let (code, stdout, stderr) = scene.cli_cancel(started.run_id);
        assert_eq!(code, 0, "{stdout}{stderr}");
        assert!(
            stdout.contains(&format!("asked run {}", started.run_id)),
            "{stdout}"
        );
        assert!(stdout.contains("ops-alice"), "{stdout}");
        assert_eq!(
            the_run(db.api(), started.run_id)
                .await
                .cancel_requested_by
                .as_deref(),
            Some("ops-alice")
        );

        let run = ended(db.api(), started.run_id).await;
        assert_eq!(run.status, RunStatus::Cancelled, "{run:?}");
        let error = run.error.clone().unwrap_or_default();
        assert!(error.starts_with("cancelled by ops-alice"), "{error}");
        assert!(error.contains("was stopped"), "{error}");
        let records = handler_gone(&scene, "misbehave.deaf").await;
        assert!(
            !records.iter().any(|r| r.kind == Kind::End),
            "the handler never returned on its own: it was stopped"
        );
        assert_not_run_again(db.api(), &scene, "misbehave.deaf").await;

        let (code, _, stderr) = scene.cli_cancel(started.run_id);
        assert_eq!(code, 1, "{stderr}");
        assert!(stderr.contains("has ended already (cancelled"), "{stderr}");
        let (code, _, stderr) = scene.cli_cancel(started.run_id + 1000);
        assert_eq!(code, 1, "{stderr}");
        assert!(stderr.contains("no run with id"), "{stderr}");
        db.cleanup().await;
    }

    /// An isolated run (`isolation = "process"`) whose handler ignores the request (SIGTERM) is
    /// killed after the grace: recorded `cancelled`, saying its process was killed, not run
    /// again, and the node goes on.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_cancelled_isolated_run_that_ignores_it_is_killed_after_the_grace() {
        let db = TestDb::postgres("cancel_iso").await;
        let scene = Scene::new("cancel_iso", Some(&db), &["misbehave.iso.deaf"]);
        let mut node = scene.spawn("a", false);
        let started = run_now(db.api(), &scene, "misbehave.iso.deaf").await;
        assert_ne!(
            started.pid,
            node.child.id(),
            "the scenario: the handler runs in a process of its own"
        );
        let who = scheduler::testing::operate::Actor::new("alice", "test");
        scheduler::testing::operate::cancel(db.api(), started.run_id, &who)
            .await
            .unwrap();
        let run = ended(db.api(), started.run_id).await;
        assert_eq!(run.status, RunStatus::Cancelled, "{run:?}");
        let error = run.error.clone().unwrap_or_default();
        assert!(error.starts_with("cancelled by alice"), "{error}");
        assert!(error.contains("was stopped"), "{error}");
        assert!(error.contains("SIGKILL"), "{error}");
        handler_gone(&scene, "misbehave.iso.deaf").await;
        assert!(
            node.child.try_wait().unwrap().is_none(),
            "the node outlives its killed child"
        );
        assert_not_run_again(db.api(), &scene, "misbehave.iso.deaf").await;
        db.cleanup().await;
    }

    /// The node running a cancelled run dies (SIGKILL) before the grace is over: the other node
    /// finds its lock expired, records the run `cancelled`, and does not run the tick again
    /// (its task would rerun a run whose node died).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_cancelled_run_whose_node_dies_is_not_run_again() {
        let db = TestDb::postgres("cancel_dies").await;
        let scene = Scene::new("cancel_dies", Some(&db), &["misbehave.deaf"]);
        let mut nodes = [scene.spawn("a", false), scene.spawn("b", false)];
        let started = run_now(db.api(), &scene, "misbehave.deaf").await;
        let who = scheduler::testing::operate::Actor::new("alice", "test");
        let asked = scheduler::testing::operate::cancel(db.api(), started.run_id, &who)
            .await
            .unwrap();
        assert!(
            matches!(
                asked,
                scheduler::testing::store::CancelRequest::Requested(_)
            ),
            "{asked:?}"
        );
        // Within the grace: the handler ignores the request, so its node has not ended it.
        let runner = nodes.iter_mut().find(|n| n.id == started.node).unwrap();
        runner.kill();
        assert_eq!(
            the_run(db.api(), started.run_id).await.status,
            RunStatus::Running,
            "the scenario: the node died before it recorded the run"
        );

        let run = ended(db.api(), started.run_id).await;
        assert_eq!(run.status, RunStatus::Cancelled, "{run:?}");
        let error = run.error.clone().unwrap_or_default();
        assert!(error.starts_with("cancelled by alice"), "{error}");
        assert!(error.contains("stopped renewing the lock"), "{error}");
        assert_not_run_again(db.api(), &scene, "misbehave.deaf").await;
        db.cleanup().await;
    }
}

/// On an SQLite file: the command line cancels from another process beside the node (which
/// sees the change by the file), the admin API from inside it. A handler that finishes its work
/// after the request returns `Ok`, and is `succeeded`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_sqlite_a_cancel_from_the_command_line_and_the_api_reaches_the_node() {
    let scene = Scene::new(
        "cancel_sqlite",
        None,
        &["misbehave.cooperative", "misbehave.finishes_anyway"],
    );
    let node = scene.spawn("solo", true);
    let admin = Admin::of(&node).await;
    let store = scheduler::store::SqliteStore::builder(scene.dir.join("s.db"))
        .operator()
        .connect()
        .unwrap();
    let store: &dyn scheduler::store::Store = &store;

    let started = run_now(store, &scene, "misbehave.cooperative").await;
    let (code, stdout, stderr) = scene.cli_cancel(started.run_id);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let run = ended(store, started.run_id).await;
    assert_eq!(run.status, RunStatus::Cancelled, "{run:?}");
    assert_eq!(run.cancel_requested_by.as_deref(), Some("ops-alice"));
    assert!(
        scene
            .of("misbehave.cooperative", Kind::End)
            .iter()
            .any(|r| r.run_id == started.run_id),
        "the handler saw ctx.cancelled() and returned"
    );

    let started = run_now(store, &scene, "misbehave.finishes_anyway").await;
    let (status, body) = admin.cancel(started.run_id, Some(TOKEN)).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let run = ended(store, started.run_id).await;
    assert_eq!(
        run.status,
        RunStatus::Succeeded,
        "it returned Ok: its work is done ({run:?})"
    );
    assert!(
        run.cancel_requested_by.is_some(),
        "the request stays on record"
    );
    let (status, _) = admin.cancel(started.run_id, Some(TOKEN)).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_not_run_again_on(store, &scene).await;
    drop(node);
}

/// Neither SQLite task ran its cancelled tick again.
async fn assert_not_run_again_on(db: &dyn scheduler::store::Store, scene: &Scene) {
    tokio::time::sleep(Duration::from_secs(3)).await;
    for task in ["misbehave.cooperative", "misbehave.finishes_anyway"] {
        let starts = scene.of(task, Kind::Start);
        assert_eq!(starts.len(), 1, "{task} ran again: {starts:?}");
        let runs = db.runs(&RunQuery::latest(10).task(task)).await.unwrap();
        assert_eq!(runs.len(), 1, "{runs:?}");
    }
}
