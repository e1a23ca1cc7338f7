//! The web dashboard of a real node (SQLite file, admin server on a loopback port, over real
//! HTTP): `/` and every asset it loads are served with the strict Content-Security-Policy and
//! name no other origin; and `/api/ticks`, the strips the dashboard draws, says what became of
//! each expected tick as a task runs, is paused (its ticks `skipped`, `paused`) and resumed, and
//! that nightly and yearly tasks show their last 30 ticks from the stored history.
//! The page itself is tested in a browser by `scripts/dashboard-test`.

use crate::common;

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::time::Duration;

use reqwest::StatusCode;
use scheduler::{Scheduler, TaskRegistry, task};
use serde_json::{Value, json};

const TOKEN: &str = "dashboard-test-token-0123456789";

#[task(name = "dash.every_second")]
async fn every_second() {
    tracing::info!("ticked");
}

#[task(name = "dash.yearly")]
async fn yearly() {}

#[task(name = "dash.nightly")]
async fn nightly() {}

/// Four shards a tick; shard 3 fails every time.
#[task(name = "dash.sharded", shards = 4)]
async fn sharded(ctx: scheduler::TaskContext) -> Result<(), std::io::Error> {
    if ctx.shard().index == 3 {
        return Err(std::io::Error::other("shard 3 cannot reach its partition"));
    }
    Ok(())
}

struct Node {
    running: common::RunningNode,
    addr: SocketAddr,
    http: reqwest::Client,
    _dir: tempfile::TempDir,
}

impl Node {
    fn start() -> Self {
        Self::start_with(json!({"tasks": [
            {"name": "dash.every_second", "cron": "* * * * * *", "enabled": true},
            {"name": "dash.yearly", "cron": "0 0 1 1 *", "enabled": true},
        ]}))
    }

    /// A node running the `dash.*` tasks per `config` (a config document).
    fn start_with(config_doc: Value) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("tasks.json");
        std::fs::write(&config, config_doc.to_string()).unwrap();
        let scheduler = Scheduler::builder()
            .database_url(format!("sqlite://{}", dir.path().join("s.db").display()))
            .registry(
                TaskRegistry::collect()
                    .unwrap()
                    .retain(|n| n.starts_with("dash.")),
            )
            .node_id("dashboard")
            .config(config.to_str().unwrap())
            .config_poll_interval(Duration::from_millis(200))
            .poll_interval(Duration::from_secs(1))
            .admin_addr("127.0.0.1:0".parse().unwrap())
            .admin_token(TOKEN)
            .build()
            .unwrap();
        let addr = scheduler.admin_addr().unwrap();
        Node {
            running: common::start(scheduler),
            addr,
            http: reqwest::Client::new(),
            _dir: dir,
        }
    }

    async fn ready(self) -> Self {
        wait_until("the node is ready", || async {
            self.get("/readyz").await.status() == StatusCode::OK
        })
        .await;
        self
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    async fn get(&self, path: &str) -> reqwest::Response {
        self.http.get(self.url(path)).send().await.unwrap()
    }

    async fn json(&self, path: &str) -> Value {
        let r = self.get(path).await;
        assert_eq!(r.status(), StatusCode::OK, "{path}");
        r.json().await.unwrap()
    }

    async fn post(&self, path: &str, body: Value) -> StatusCode {
        self.http
            .post(self.url(path))
            .bearer_auth(TOKEN)
            .json(&body)
            .send()
            .await
            .unwrap()
            .status()
    }

    async fn stop(self) {
        self.running.stop().await;
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

fn assert_secured(path: &str, r: &reqwest::Response) {
    let csp = r.headers()["content-security-policy"].to_str().unwrap();
    for part in [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "connect-src 'self'",
        "frame-ancestors 'none'",
    ] {
        assert!(csp.contains(part), "{path}: {csp} lacks {part}");
    }
    assert!(!csp.contains("unsafe"), "{path}: {csp}");
    assert_eq!(r.headers()["x-content-type-options"], "nosniff", "{path}");
}

/// The asset paths a text refers to: `/assets/NAME` and module imports `./NAME`.
fn referenced(text: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for (prefix, end) in [("/assets/", '"'), ("from \"./", '"')] {
        for (i, _) in text.match_indices(prefix) {
            let rest = &text[i + prefix.len()..];
            if let Some(name) = rest.split(end).next()
                && !name.is_empty()
                && !name.contains(['$', '{', ' '])
            {
                found.insert(name.to_owned());
            }
        }
    }
    found
}

#[tokio::test]
async fn the_page_and_its_assets_are_served_under_a_strict_csp_and_name_no_other_origin() {
    let node = Node::start().ready().await;
    let r = node.get("/").await;
    assert_eq!(r.status(), StatusCode::OK);
    assert_secured("/", &r);
    assert!(
        r.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/html")
    );
    let html = r.text().await.unwrap();
    assert!(
        html.contains(r#"<script type="module" src="/assets/app.js">"#),
        "{html}"
    );
    assert!(
        !html.contains("<script>") && !html.contains("style="),
        "nothing inline"
    );

    // Everything the page loads, transitively, is served, secured, and names no other origin.
    let mut todo: Vec<String> = referenced(&html).into_iter().collect();
    let mut seen = BTreeSet::new();
    while let Some(name) = todo.pop() {
        if !seen.insert(name.clone()) {
            continue;
        }
        let path = format!("/assets/{name}");
        let r = node.get(&path).await;
        assert_eq!(r.status(), StatusCode::OK, "{path}");
        assert_secured(&path, &r);
        let kind = r.headers()["content-type"].to_str().unwrap().to_owned();
        let expected = match name.rsplit('.').next().unwrap() {
            "js" => "text/javascript",
            "css" => "text/css",
            "svg" => "image/svg+xml",
            other => panic!("unexpected asset type {other}"),
        };
        assert!(kind.starts_with(expected), "{path}: {kind}");
        let text = r.text().await.unwrap();
        let without_svg_namespace = text.replace("http://www.w3.org/2000/svg", "");
        for origin in ["http://", "https://", "//cdn", "@import", "eval("] {
            assert!(
                !without_svg_namespace.contains(origin),
                "{path} names {origin}"
            );
        }
        todo.extend(referenced(&text));
    }
    for name in [
        "app.js",
        "dashboard.css",
        "overview.js",
        "task.js",
        "actions.js",
    ] {
        assert!(seen.contains(name), "{name} is loaded: {seen:?}");
    }

    let r = node.get("/assets/nope.js").await;
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    assert_secured("/assets/nope.js", &r);
    assert_eq!(r.json::<Value>().await.unwrap()["error"], "not_found");
    // The API's document describes the API, not the page.
    let doc = node.json("/openapi.json").await;
    assert!(doc["paths"].get("/").is_none());

    // A client that asks gets gzip (the task list of a big deployment is large JSON); one that
    // does not gets the plain body.
    for path in ["/api/tasks", "/assets/overview.js"] {
        let r = node
            .http
            .get(node.url(path))
            .header("accept-encoding", "gzip")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK, "{path}");
        assert_eq!(r.headers()["content-encoding"], "gzip", "{path}");
        if path.starts_with("/assets/") {
            assert_secured(path, &r);
        }
        let body = r.bytes().await.unwrap();
        assert_eq!(&body[..2], &[0x1f, 0x8b], "{path}: a gzip stream");
        let plain = node.get(path).await;
        assert!(plain.headers().get("content-encoding").is_none(), "{path}");
    }
    node.stop().await;
}

/// The `dash.every_second` strip's ticks.
async fn strip(node: &Node) -> Vec<Value> {
    let ticks = node
        .json("/api/ticks?task=dash.every_second&count=200")
        .await;
    assert_eq!(ticks["tasks"].as_array().unwrap().len(), 1, "{ticks}");
    ticks["tasks"][0]["ticks"].as_array().unwrap().clone()
}

fn count(ticks: &[Value], outcome: &str, reason: Option<&str>) -> usize {
    ticks
        .iter()
        .filter(|t| t["outcome"] == outcome && t["reason"].as_str() == reason)
        .count()
}

#[tokio::test]
async fn expected_ticks_say_what_became_of_each_through_a_pause() {
    let node = Node::start().ready().await;
    wait_until("three succeeded ticks", || async {
        count(&strip(&node).await, "succeeded", None) >= 3
    })
    .await;
    let ticks = strip(&node).await;
    let first = &ticks[0];
    assert!(first["run_id"].is_i64(), "{first}");
    assert_eq!(first["trigger"], "schedule");
    assert!(first["duration_seconds"].as_f64().unwrap() >= 0.0);
    assert!(first["late_seconds"].as_f64().unwrap() >= 0.0);
    let ats: Vec<&str> = ticks.iter().map(|t| t["at"].as_str().unwrap()).collect();
    assert!(ats.windows(2).all(|w| w[0] < w[1]), "oldest first: {ats:?}");

    // Paused: its ticks are skipped (`paused`) while the pause lasts, with no run.
    assert_eq!(
        node.post(
            "/api/tasks/dash.every_second/pause",
            json!({"reason": "dashboard test"})
        )
        .await,
        StatusCode::OK
    );
    wait_until("two ticks skipped while paused", || async {
        count(&strip(&node).await, "skipped", Some("paused")) >= 2
    })
    .await;
    for t in strip(&node)
        .await
        .iter()
        .filter(|t| t["reason"] == "paused")
    {
        assert!(t["run_id"].is_null() && t["attempts"] == 0, "{t}");
    }

    // Resumed: the store records those ticks as skipped, and the strip still says so; the task
    // runs again.
    assert_eq!(
        node.post("/api/tasks/dash.every_second/resume", json!({}))
            .await,
        StatusCode::OK
    );
    let paused_while = count(&strip(&node).await, "skipped", Some("paused"));
    let succeeded_before = count(&strip(&node).await, "succeeded", None);
    wait_until("runs after the resume", || async {
        count(&strip(&node).await, "succeeded", None) > succeeded_before + 1
    })
    .await;
    let after = strip(&node).await;
    assert!(
        count(&after, "skipped", Some("paused")) >= paused_while,
        "the recorded skips stand for the paused ticks: {after:?}"
    );
    assert_eq!(count(&after, "missed", None), 0, "{after:?}");

    // A yearly task has no expected tick yet, and its strip is complete.
    let all = node.json("/api/ticks").await;
    let yearly = all["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["task"] == "dash.yearly")
        .unwrap();
    assert_eq!(yearly["ticks"], json!([]), "{yearly}");
    assert_eq!(yearly["complete"], true);
    // Bad input is a clear 400, an unknown task a 404.
    let r = node.get("/api/ticks?count=201").await;
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert!(
        r.json::<Value>().await.unwrap()["message"]
            .as_str()
            .unwrap()
            .contains("`count`: 201 is out of range; accepted: from 1 to 200")
    );
    assert_eq!(
        node.get("/api/ticks?task=nope").await.status(),
        StatusCode::NOT_FOUND
    );
    node.stop().await;
}

/// A sharded task's tick is one entry of its strip, folded from its shards (a shard failed:
/// the tick failed), listing each shard's latest run with its node; the task is listed once by
/// `/api/tasks` (its shards' rows are not tasks), and each run says which shard it ran.
#[tokio::test]
async fn a_sharded_tick_is_one_mark_of_the_strip_with_its_shards() {
    let node = Node::start_with(json!({"tasks": [
        {"name": "dash.sharded", "cron": "* * * * * *", "enabled": true, "shards": 5},
    ]}))
    .ready()
    .await;
    let ticks = || async {
        node.json("/api/ticks?task=dash.sharded&count=200").await["tasks"][0]["ticks"]
            .as_array()
            .unwrap()
            .clone()
    };
    wait_until("two ticks whose every shard ended", || async {
        ticks()
            .await
            .iter()
            .filter(|t| t["shards"]["done"] == 5)
            .count()
            >= 2
    })
    .await;
    let strip = ticks().await;
    let ats: Vec<&str> = strip.iter().map(|t| t["at"].as_str().unwrap()).collect();
    assert!(
        ats.windows(2).all(|w| w[0] < w[1]),
        "one entry per tick, not per shard: {ats:?}"
    );
    let done = strip.iter().find(|t| t["shards"]["done"] == 5).unwrap();
    assert_eq!(done["outcome"], "failed", "shard 3 failed: {done}");
    let shards = &done["shards"];
    assert_eq!(
        (
            &shards["total"],
            &shards["succeeded"],
            &shards["failed"],
            &shards["running"],
            &shards["pending"]
        ),
        (&json!(5), &json!(4), &json!(1), &json!(0), &json!(0)),
        "{done}"
    );
    let runs = shards["runs"].as_array().unwrap();
    let indexes: Vec<u64> = runs.iter().map(|r| r["index"].as_u64().unwrap()).collect();
    assert_eq!(indexes, [0, 1, 2, 3, 4], "{done}");
    for r in runs {
        let failed = r["index"] == 3;
        assert_eq!(
            r["status"],
            if failed { "failed" } else { "succeeded" },
            "{r}"
        );
        assert_eq!(r["node_id"], "dashboard", "{r}");
        assert_eq!(r["attempts"], 1, "{r}");
        assert!(r["late_seconds"].as_f64().unwrap() >= 0.0, "{r}");
    }
    assert_eq!(
        done["run_id"], runs[3]["run_id"],
        "the run shown is the failed shard's"
    );
    // Each shard's run is a run of the task, saying which shard it ran.
    let id = runs[2]["run_id"].as_i64().unwrap();
    let run = &node.json(&format!("/api/runs/{id}")).await["run"];
    assert_eq!(
        (&run["task"], &run["shard_index"], &run["shard_total"]),
        (&json!("dash.sharded"), &json!(2), &json!(5)),
        "{run}"
    );
    assert_eq!(run["scheduled_at"], done["at"]);
    // The task is listed once, in both lists, and its shards' rows not at all.
    for (path, key) in [("/api/tasks", "name"), ("/api/ticks", "task")] {
        let listed = node.json(path).await;
        let names: Vec<&str> = listed["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t[key].as_str().unwrap())
            .filter(|n| n.starts_with("dash.sharded"))
            .collect();
        assert_eq!(names, ["dash.sharded"], "{path}");
    }
    node.stop().await;
}

/// `ticks` succeeded runs of `task`, one per tick, the newest first.
async fn store_history(
    store: &scheduler::store::SqliteStore,
    task: &str,
    ticks: impl Iterator<Item = chrono::DateTime<chrono::Utc>>,
) {
    for (i, tick) in ticks.enumerate() {
        let us = tick.timestamp_micros();
        sqlx::query(
            "INSERT INTO scheduler_runs (task_name, scheduled_at, started_at, finished_at, status,
                                         node_id, lock_token, attempt, trigger)
             VALUES (?1, ?2, ?2, ?3, 'succeeded', 'history', ?4, 1, 'schedule')",
        )
        .bind(task)
        .bind(us)
        .bind(us + 2_000_000)
        .bind(format!("{task}-{i}"))
        .execute(store.pool())
        .await
        .unwrap();
    }
}

#[tokio::test]
async fn nightly_and_yearly_strips_show_their_last_30_ticks_from_the_stored_history() {
    use chrono::{Datelike, TimeZone, Utc};
    use scheduler::store::Store;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    let store = scheduler::store::SqliteStore::builder(&db)
        .connect()
        .unwrap();
    store.migrate().await.unwrap();
    // 40 nights at 03:00 and 40 New Year's Days of history, older than any week.
    let now = Utc::now();
    let last_night = Utc
        .with_ymd_and_hms(now.year(), now.month(), now.day(), 3, 0, 0)
        .unwrap();
    let last_night = if last_night > now {
        last_night - chrono::Duration::days(1)
    } else {
        last_night
    };
    store_history(
        &store,
        "dash.nightly",
        (0..40).map(|d| last_night - chrono::Duration::days(d)),
    )
    .await;
    store_history(
        &store,
        "dash.yearly",
        (0..40).map(|y| Utc.with_ymd_and_hms(now.year() - y, 1, 1, 0, 0, 0).unwrap()),
    )
    .await;
    drop(store);

    let config = dir.path().join("tasks.json");
    std::fs::write(
        &config,
        json!({"tasks": [
            {"name": "dash.nightly", "cron": "0 3 * * *", "enabled": true},
            {"name": "dash.yearly", "cron": "0 0 1 1 *", "enabled": true},
        ]})
        .to_string(),
    )
    .unwrap();
    let scheduler = Scheduler::builder()
        .database_url(format!("sqlite://{}", db.display()))
        .registry(
            TaskRegistry::collect()
                .unwrap()
                .retain(|n| n == "dash.nightly" || n == "dash.yearly"),
        )
        .node_id("history")
        .config(config.to_str().unwrap())
        // Keep the history: a run of 40 years ago is not pruned at start.
        .run_retention(Duration::from_secs(100 * 366 * 86_400))
        .admin_addr("127.0.0.1:0".parse().unwrap())
        .admin_token(TOKEN)
        .build()
        .unwrap();
    let addr = scheduler.admin_addr().unwrap();
    let node = Node {
        running: common::start(scheduler),
        addr,
        http: reqwest::Client::new(),
        _dir: dir,
    }
    .ready()
    .await;
    wait_until("both tasks listed", || async {
        node.json("/api/ticks").await["tasks"]
            .as_array()
            .unwrap()
            .len()
            == 2
    })
    .await;
    let all = node.json("/api/ticks?count=30").await;
    for strip in all["tasks"].as_array().unwrap() {
        let ticks = strip["ticks"].as_array().unwrap();
        assert_eq!(ticks.len(), 30, "{strip}");
        assert!(
            ticks.iter().all(|t| t["outcome"] == "succeeded"),
            "every stored tick, none missed: {strip}"
        );
        assert_eq!(strip["complete"], true, "{strip}");
    }
    let yearly = &all["tasks"][1];
    assert_eq!(yearly["task"], "dash.yearly");
    let first: chrono::DateTime<chrono::Utc> =
        yearly["ticks"][0]["at"].as_str().unwrap().parse().unwrap();
    assert_eq!(
        first.year(),
        now.year() - 29,
        "thirty New Year's Days back: {yearly}"
    );
    node.stop().await;
}
