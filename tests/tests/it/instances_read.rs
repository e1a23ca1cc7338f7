//! The instances of a task as the admin API and the dashboard show them, over real HTTP from a
//! real node: the list (filtered by key, paged, with each instance's latest runs), one
//! instance, the task list's count of them, the run history filtered by key and naming each
//! run's key, and the dashboard's page reading them. What the API says ran is judged against
//! what the handlers themselves recorded.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use reqwest::StatusCode;
use scheduler::{Schedule, Schedules, TaskContext, task};
use serde_json::{Value, json};

on_both_backends! {
    threads = 2;
    the_api_lists_a_tasks_instances_with_their_runs,
    the_run_history_filters_by_key_and_names_each_runs_key,
}

/// Runs the handler saw: (key, run id).
#[derive(Default)]
struct Ran(Mutex<Vec<(Option<String>, i64)>>);

impl Ran {
    fn of(&self, key: &str) -> BTreeSet<i64> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter(|(k, _)| k.as_deref() == Some(key))
            .map(|(_, id)| *id)
            .collect()
    }
}

#[task(name = "iread.sync")]
async fn iread_sync(ctx: TaskContext) -> Result<(), scheduler::ArgsError> {
    let _: Option<Value> = ctx.args()?;
    let ran = ctx.state::<Arc<Ran>>().unwrap();
    ran.0
        .lock()
        .unwrap()
        .push((ctx.key().map(str::to_owned), ctx.run_id()));
    Ok(())
}

struct Node {
    running: RunningNode,
    addr: SocketAddr,
    schedules: Schedules,
    http: reqwest::Client,
}

impl Node {
    async fn start(db: &TestDb, ran: &Arc<Ran>) -> Self {
        let config = doc(vec![entry("iread.sync", "0 0 0 1 1 *")]);
        let builder = node_with(db, "reader", tasks("iread."), config, ran)
            .poll_interval(Duration::from_millis(500));
        let AdminNode {
            running,
            addr,
            schedules,
        } = admin_node(db, builder, &["iread.sync"]).await;
        Node {
            running,
            addr,
            schedules,
            http: reqwest::Client::new(),
        }
    }

    /// A read: open on a loopback address.
    async fn get(&self, path: &str) -> (StatusCode, Value) {
        let r = self
            .http
            .get(format!("http://{}{path}", self.addr))
            .send()
            .await
            .unwrap();
        let status = r.status();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    async fn text(&self, path: &str) -> String {
        let r = self
            .http
            .get(format!("http://{}{path}", self.addr))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK, "{path}");
        r.text().await.unwrap()
    }
}

fn every_second(key: &str, tenant: u64) -> Schedule {
    Schedule::new("iread.sync", key)
        .cron("* * * * * *")
        .timezone("Asia/Shanghai")
        .args(json!({ "tenant": tenant }))
}

fn keys(page: &Value) -> Vec<String> {
    page["instances"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["key"].as_str().unwrap().to_owned())
        .collect()
}

/// Three instances running every second: the list has them by key with their schedule,
/// arguments, owner and state, filtered by a key's part (case ignored) and paged; each one's
/// latest runs are runs its handler made with its key; one instance reads alone; the task list
/// and the task say how many it has; an unknown task or key is a 404.
async fn the_api_lists_a_tasks_instances_with_their_runs(db: &TestDb) {
    let ran = Arc::new(Ran::default());
    let node = Node::start(db, &ran).await;
    for (key, tenant) in [("tenant-1", 1), ("tenant-2", 2), ("other_3", 3)] {
        node.schedules
            .upsert(every_second(key, tenant))
            .await
            .unwrap();
    }
    wait_stepping(db, Duration::from_secs(90), "two runs of each", || async {
        ["tenant-1", "tenant-2", "other_3"]
            .iter()
            .all(|k| ran.of(k).len() >= 2)
    })
    .await;

    let (status, page) = node.get("/api/tasks/iread.sync/instances?runs=5").await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert_eq!(keys(&page), ["other_3", "tenant-1", "tenant-2"], "{page}");
    assert_eq!(page["next_cursor"], Value::Null);
    let first = &page["instances"][1];
    assert_eq!(first["task"], "iread.sync");
    assert_eq!(first["cron"], "* * * * * *");
    assert_eq!(first["timezone"], "Asia/Shanghai");
    assert_eq!(first["args"], json!({"tenant": 1}));
    assert_eq!(first["source"], "runtime");
    assert_eq!(first["enabled"], true);
    assert_eq!(first["paused"], false);
    assert_eq!(first["removed"], false);
    assert!(first["next_run_at"].is_string(), "{first}");
    // No jitter: the next run starts on the tick it serves.
    assert_eq!(first["next_tick"], first["next_run_at"], "{first}");
    assert!(first["last_run"]["started_at"].is_string(), "{first}");
    // Each instance's latest runs are runs its handler made under its key, and nothing else.
    for instance in page["instances"].as_array().unwrap() {
        let key = instance["key"].as_str().unwrap();
        let runs = instance["recent_runs"].as_array().unwrap();
        assert!(!runs.is_empty(), "{instance}");
        assert!(runs.len() <= 5);
        wait_until(Duration::from_secs(30), "the handler's record", || async {
            let handled = ran.of(key);
            runs.iter()
                .all(|r| handled.contains(&r["id"].as_i64().unwrap()))
        })
        .await;
        for r in runs {
            assert_eq!(r["instance_key"], key, "{r}");
            assert_eq!(r["task"], "iread.sync");
        }
    }

    // Filtered by a part of the key, ASCII case ignored; `_` is no wildcard.
    let (_, page) = node.get("/api/tasks/iread.sync/instances?key=TENANT").await;
    assert_eq!(keys(&page), ["tenant-1", "tenant-2"]);
    let (_, page) = node.get("/api/tasks/iread.sync/instances?key=r_").await;
    assert_eq!(keys(&page), ["other_3"]);
    let (_, page) = node.get("/api/tasks/iread.sync/instances?key=r-").await;
    assert_eq!(keys(&page), Vec::<String>::new());
    // Paged by key.
    let (_, page) = node.get("/api/tasks/iread.sync/instances?limit=2").await;
    assert_eq!(keys(&page), ["other_3", "tenant-1"]);
    assert_eq!(page["next_cursor"], "tenant-1");
    let (_, page) = node
        .get("/api/tasks/iread.sync/instances?limit=2&cursor=tenant-1")
        .await;
    assert_eq!(keys(&page), ["tenant-2"]);
    assert_eq!(page["next_cursor"], Value::Null);
    let (status, _) = node.get("/api/tasks/iread.sync/instances?limit=0").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);

    // One instance.
    let (status, one) = node.get("/api/tasks/iread.sync/instances/tenant-2").await;
    assert_eq!(status, StatusCode::OK, "{one}");
    assert_eq!(one["key"], "tenant-2");
    assert_eq!(one["args"], json!({"tenant": 2}));
    let runs = one["recent_runs"].as_array().unwrap();
    assert!(!runs.is_empty());
    wait_until(Duration::from_secs(30), "the handler's record", || async {
        let handled = ran.of("tenant-2");
        runs.iter()
            .all(|r| handled.contains(&r["id"].as_i64().unwrap()))
    })
    .await;
    let (status, body) = node.get("/api/tasks/iread.sync/instances/nobody").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert_eq!(body["error"], "not_found");
    let (status, _) = node.get("/api/tasks/iread.nothing/instances").await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // The task list and the task count them; the task is listed once.
    let (_, list) = node.get("/api/tasks").await;
    let tasks: Vec<&Value> = list["tasks"].as_array().unwrap().iter().collect();
    assert_eq!(tasks.len(), 1, "{list}");
    assert_eq!(tasks[0]["name"], "iread.sync");
    assert_eq!(tasks[0]["instances"], 3);
    let (_, detail) = node.get("/api/tasks/iread.sync").await;
    assert_eq!(detail["task"]["instances"], 3);

    // A removed instance leaves the list and the count.
    assert!(
        node.schedules
            .remove("iread.sync", "other_3")
            .await
            .unwrap()
    );
    wait_until(Duration::from_secs(30), "the removal seen", || async {
        let (_, page) = node.get("/api/tasks/iread.sync/instances").await;
        keys(&page) == ["tenant-1", "tenant-2"]
    })
    .await;
    let (_, detail) = node.get("/api/tasks/iread.sync").await;
    assert_eq!(detail["task"]["instances"], 2);

    // The dashboard's task page reads them (its script asks the list, with each one's runs).
    let page = node.text("/assets/task.js").await;
    assert!(
        page.contains("./instances.js"),
        "the task page draws its instances"
    );
    let script = node.text("/assets/instances.js").await;
    assert!(script.contains("/instances?"), "read from the list of them");
    assert!(script.contains("instance-filter"), "filterable by key");
    assert!(script.contains("tickStrip"), "each with its strip");
    node.running.stop().await;
}

/// Two instances running: `GET /api/runs?task=&key=` lists only the runs of that key, every one
/// of them a run its handler made under that key, and the task's history names each run's key;
/// a key without a task is a 400.
async fn the_run_history_filters_by_key_and_names_each_runs_key(db: &TestDb) {
    let ran = Arc::new(Ran::default());
    let node = Node::start(db, &ran).await;
    for (key, tenant) in [("a", 1), ("b", 2)] {
        node.schedules
            .upsert(every_second(key, tenant))
            .await
            .unwrap();
    }
    wait_stepping(
        db,
        Duration::from_secs(90),
        "three runs of each",
        || async { ran.of("a").len() >= 3 && ran.of("b").len() >= 3 },
    )
    .await;
    let handled_a = ran.of("a");
    let (status, page) = node.get("/api/runs?task=iread.sync&key=a&limit=500").await;
    assert_eq!(status, StatusCode::OK, "{page}");
    let listed: BTreeSet<i64> = page["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            assert_eq!(r["instance_key"], "a", "{r}");
            r["id"].as_i64().unwrap()
        })
        .collect();
    assert!(
        handled_a.is_subset(&listed),
        "every run of `a` its handler made is listed"
    );
    // And only runs its handler made under `a` (a run listed as it starts is in the handler's
    // record a moment later).
    wait_until(Duration::from_secs(30), "the handler's record", || async {
        listed.is_subset(&ran.of("a"))
    })
    .await;

    // The task's history: every run with its key.
    let (_, page) = node.get("/api/runs?task=iread.sync&limit=500").await;
    let mut by_key: BTreeMap<String, usize> = BTreeMap::new();
    for r in page["runs"].as_array().unwrap() {
        *by_key
            .entry(r["instance_key"].as_str().unwrap_or("").to_owned())
            .or_default() += 1;
    }
    assert!(by_key.get("a").is_some_and(|n| *n >= 3), "{by_key:?}");
    assert!(by_key.get("b").is_some_and(|n| *n >= 3), "{by_key:?}");

    let (status, body) = node.get("/api/runs?key=a").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    node.running.stop().await;
}
