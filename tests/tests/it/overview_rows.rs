//! What the task list (`GET /api/tasks`, the dashboard's overview rows) says of a task that
//! runs only through its instances (how many there are, how many run or fail, the latest run
//! among them, and that it fails when one of them does) and of a task whose due tick, or one
//! of whose instances' due tick, waits for its limit shared by tasks (the limit named, with its
//! holders); one task's answer (`GET /api/tasks/{name}`) says the same of it, from a read of
//! its own instances alone. Over real HTTP from a real node; the runs are judged by the
//! handlers' own record.

use crate::admin_support;
use crate::common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use common::*;
use reqwest::StatusCode;
use scheduler::{Schedule, TaskContext, task};
use serde_json::Value;
use tokio::sync::Notify;

on_both_backends! {
    threads = 2;
    a_task_run_only_through_its_instances_says_how_they_run,
    a_task_waiting_for_its_limit_names_it_in_the_task_list,
    a_task_whose_instance_waits_for_its_limit_says_so_in_its_row,
}

/// What the handlers recorded.
#[derive(Default)]
struct Seen {
    /// `ovr.fleet`'s runs by key: run ids, in order.
    fleet: Mutex<BTreeMap<String, Vec<i64>>>,
    /// `ovr.hold` has started.
    holding: Mutex<bool>,
    /// `ovr.hold` waits for this before it ends.
    release: Notify,
    /// `ovr.wait`'s run ids.
    waited: Mutex<Vec<i64>>,
    /// `ovr.iwait`'s runs: (key, run id).
    iwaited: Mutex<Vec<(String, i64)>>,
}

impl Seen {
    fn fleet_runs(&self, key: &str) -> Vec<i64> {
        self.fleet
            .lock()
            .unwrap()
            .get(key)
            .cloned()
            .unwrap_or_default()
    }
}

/// Runs only through its instances; instance `bad` fails.
#[task(name = "ovr.fleet")]
async fn ovr_fleet(ctx: TaskContext) -> Result<(), std::io::Error> {
    let seen = ctx.state::<Arc<Seen>>().unwrap();
    let key = ctx.key().unwrap_or("").to_owned();
    seen.fleet
        .lock()
        .unwrap()
        .entry(key.clone())
        .or_default()
        .push(ctx.run_id());
    if key == "bad" {
        return Err(std::io::Error::other("bad tenant"));
    }
    Ok(())
}

/// Holds `ovr-solo` until the test lets it go.
#[task(name = "ovr.hold", limit = "ovr-solo")]
async fn ovr_hold(ctx: TaskContext) {
    let seen = Arc::clone(ctx.state::<Arc<Seen>>().unwrap());
    *seen.holding.lock().unwrap() = true;
    seen.release.notified().await;
}

/// Every two seconds under `ovr-solo`.
#[task(name = "ovr.wait", limit = "ovr-solo")]
async fn ovr_wait(ctx: TaskContext) {
    let seen = ctx.state::<Arc<Seen>>().unwrap();
    seen.waited.lock().unwrap().push(ctx.run_id());
}

/// Never runs in these tests: its instances are only counted.
#[task(name = "ovr.many")]
async fn ovr_many() {}

/// Under `ovr-solo`, run through its instances.
#[task(name = "ovr.iwait", limit = "ovr-solo")]
async fn ovr_iwait(ctx: TaskContext) {
    let seen = ctx.state::<Arc<Seen>>().unwrap();
    let key = ctx.key().unwrap_or("").to_owned();
    seen.iwaited.lock().unwrap().push((key, ctx.run_id()));
}

async fn get(http: &reqwest::Client, url: String) -> Value {
    let r = http.get(&url).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK, "{url}");
    r.json().await.unwrap()
}

/// The task list, checked against its documented shape (`/openapi.json`).
async fn documented_list(http: &reqwest::Client, node: &AdminNode) -> Value {
    let doc = get(http, node.url("/openapi.json")).await;
    let list = get(http, node.url("/api/tasks")).await;
    admin_support::assert_documented(&doc, "get", "/api/tasks", StatusCode::OK, &list);
    list
}

/// Task `name`'s row in the task list.
async fn task_row(http: &reqwest::Client, node: &AdminNode, name: &str) -> Value {
    let list = get(http, node.url("/api/tasks")).await;
    list["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("no task {name}: {list}"))
        .clone()
}

/// `ovr.fleet` never fires itself; its instances `a`, `bad` and `idle` never fire either. `a`
/// is made due and runs (succeeds), then `bad` (fails); `idle` never runs. The task's row says
/// it has 3 instances, none running, 1 failing, 2 that ran, and its latest instance run is
/// `bad`'s, failed, started (claimed) between that run's tick and its handler's start (the run
/// its handler made); the task's own last result stays empty, and the task fails (`failing`:
/// one of its instances failed its last run). A task without instances says nothing of them
/// and does not fail. One task's answer says what its entry in the list says of its
/// instances, read from its own instances alone: the store's read for `ovr.fleet` has its 3,
/// for `ovr.many` (5 instances, none ran) its 5, for `ovr.hold` (none) nothing.
async fn a_task_run_only_through_its_instances_says_how_they_run(db: &TestDb) {
    let seen = Arc::new(Seen::default());
    let mut config = doc(vec![
        entry("ovr.fleet", "0 0 0 1 1 *"),
        entry("ovr.hold", "0 0 0 1 1 *"),
        entry("ovr.many", "0 0 0 1 1 *"),
    ]);
    config.limits = [("ovr-solo".to_owned(), 1)].into();
    let builder =
        node_with(db, "a", tasks("ovr."), config, &seen).poll_interval(Duration::from_millis(500));
    let node = admin_node(db, builder, &["ovr.fleet", "ovr.hold", "ovr.many"]).await;
    let http = reqwest::Client::new();
    for key in ["a", "bad", "idle"] {
        node.schedules
            .upsert(Schedule::new("ovr.fleet", key).cron("0 0 0 1 1 *"))
            .await
            .unwrap();
    }
    let many: Vec<String> = (0..5).map(|i| format!("m{i}")).collect();
    for key in &many {
        node.schedules
            .upsert(Schedule::new("ovr.many", key.as_str()).cron("0 0 0 1 1 *"))
            .await
            .unwrap();
    }
    rows_written(db, &["ovr.fleet/a", "ovr.fleet/bad", "ovr.fleet/idle"]).await;
    rows_written(db, &["ovr.many/m4"]).await;

    for key in ["a", "bad"] {
        let row = format!("ovr.fleet/{key}");
        db.set_next_run(Some(&row), Some(db.now())).await;
        db.api().notify().await.unwrap();
        wait_stepping(
            db,
            Duration::from_secs(60),
            &format!("instance {key} ran and its row says how it ended"),
            || async {
                !seen.fleet_runs(key).is_empty()
                    && db
                        .try_task(&row)
                        .await
                        .is_some_and(|t| t.last_finished_at.is_some() && t.lock_owner.is_none())
            },
        )
        .await;
    }

    let bad_run = seen.fleet_runs("bad")[0];
    let run = get(&http, node.url(&format!("/api/runs/{bad_run}"))).await["run"].clone();
    let fleet = task_row(&http, &node, "ovr.fleet").await;
    assert_eq!(fleet["instances"], 3, "{fleet}");
    assert!(fleet["state"]["last_result"].is_null(), "{fleet}");
    let summary = &fleet["instance_runs"];
    assert_eq!(summary["running"], 0, "{fleet}");
    assert_eq!(summary["failing"], 1, "{fleet}");
    assert_eq!(summary["ran"], 2, "{fleet}");
    // Every instance has the task's yearly cron: their next run is its.
    assert_eq!(
        summary["next_run_at"], fleet["state"]["next_run_at"],
        "{fleet}"
    );
    let latest = &summary["latest"];
    assert_eq!(latest["key"], "bad", "{fleet}");
    assert_eq!(latest["result"], "failed", "{fleet}");
    // The row records its run's claim (between its tick and its handler's start) and end.
    let time = |v: &Value| v.as_str().unwrap().parse::<DateTime<Utc>>().unwrap();
    let started = time(&latest["started_at"]);
    assert!(
        time(&run["scheduled_at"]) <= started && started <= time(&run["started_at"]),
        "{fleet} / {run}"
    );
    assert!(time(&latest["finished_at"]) >= started, "{fleet}");

    // Its own row never ran, yet one of its instances failed its last run: it fails.
    assert_eq!(fleet["failing"], true, "{fleet}");

    documented_list(&http, &node).await;
    let hold = task_row(&http, &node, "ovr.hold").await;
    assert_eq!(hold["instances"], 0, "{hold}");
    assert!(hold.get("instance_runs").is_none(), "{hold}");
    assert_eq!(hold["failing"], false, "{hold}");

    // One task's answer says what its entry in the list says of its instances.
    for name in ["ovr.fleet", "ovr.hold", "ovr.many"] {
        let listed = task_row(&http, &node, name).await;
        let one = get(&http, node.url(&format!("/api/tasks/{name}"))).await["task"].clone();
        for field in ["instances", "instance_runs", "failing"] {
            assert_eq!(one.get(field), listed.get(field), "{name}.{field}: {one}");
        }
    }
    assert_eq!(task_row(&http, &node, "ovr.many").await["instances"], 5);

    // The read behind it is scoped to the task: its own instances' summary, nothing of the
    // others'; the same as its entry in the read for every task.
    let store = db.api();
    let every = store.instance_summaries(None).await.unwrap();
    let tasks_read: Vec<&str> = every.iter().map(|s| s.task.as_str()).collect();
    assert_eq!(tasks_read, ["ovr.fleet", "ovr.many"], "{every:?}");
    for s in &every {
        let one = store
            .instance_summaries(Some(s.task.as_str()))
            .await
            .unwrap();
        assert_eq!(one, std::slice::from_ref(s), "{}", s.task);
    }
    assert_eq!(every[1].instances, 5, "{every:?}");
    assert!(
        store
            .instance_summaries(Some("ovr.hold"))
            .await
            .unwrap()
            .is_empty()
    );
    node.running.stop().await;
}

/// `ovr.hold` holds `ovr-solo: 1`; `ovr.wait` (every two seconds) waits for it. Its row in the
/// task list names the limit it waits for, its size and its holder, while nothing ran it; the
/// holder's row names none. Once the holder ends, the waiting tick runs and the row no longer
/// says it waits.
async fn a_task_waiting_for_its_limit_names_it_in_the_task_list(db: &TestDb) {
    let seen = Arc::new(Seen::default());
    let mut config = doc(vec![
        entry("ovr.hold", "0 0 0 1 1 *"),
        entry("ovr.wait", "*/2 * * * * *"),
    ]);
    config.limits = [("ovr-solo".to_owned(), 1)].into();
    let builder =
        node_with(db, "a", tasks("ovr."), config, &seen).poll_interval(Duration::from_millis(500));
    let node = admin_node(db, builder, &["ovr.hold", "ovr.wait"]).await;
    let http = reqwest::Client::new();
    db.set_next_run(Some("ovr.hold"), Some(db.now())).await;
    db.api().notify().await.unwrap();
    wait_stepping(db, Duration::from_secs(60), "the holder runs", || async {
        *seen.holding.lock().unwrap()
    })
    .await;
    let ran_before = seen.waited.lock().unwrap().len();

    wait_stepping(
        db,
        Duration::from_secs(90),
        "ovr.wait's row names the limit it waits for",
        || async {
            let row = task_row(&http, &node, "ovr.wait").await;
            row["state"]["waiting"]["limit"] == "ovr-solo"
        },
    )
    .await;
    let list = documented_list(&http, &node).await;
    let row = list["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "ovr.wait")
        .unwrap()
        .clone();
    let waiting = &row["state"]["waiting"];
    assert_eq!(waiting["size"], 1, "{row}");
    assert_eq!(waiting["held"], 1, "{row}");
    assert!(waiting["since"].is_string(), "{row}");
    assert!(
        waiting["holders"]
            .as_array()
            .is_some_and(|h| h.iter().any(|h| h["row"] == "ovr.hold")),
        "{row}"
    );
    assert_eq!(
        seen.waited.lock().unwrap().len(),
        ran_before,
        "nothing ran ovr.wait while it waited"
    );
    let hold = task_row(&http, &node, "ovr.hold").await;
    assert!(hold["state"].get("waiting").is_none(), "{hold}");

    seen.release.notify_one();
    wait_stepping(
        db,
        Duration::from_secs(90),
        "ovr.wait runs, and its row no longer says it waits",
        || async {
            let ran = seen.waited.lock().unwrap().len() > ran_before;
            ran && task_row(&http, &node, "ovr.wait").await["state"]
                .get("waiting")
                .is_none()
        },
    )
    .await;
    node.running.stop().await;
}

/// `ovr.hold` holds `ovr-solo: 1`; `ovr.iwait` (yearly, under `ovr-solo`) has an instance `k`
/// every two seconds, under its task's limit. The task's own row never waits, yet its row in
/// the task list says it waits: the limit, its size, its holder, the row that waits
/// (`ovr.iwait/k`) and how many of its rows wait (1), while nothing ran `k`; one task's answer
/// says the same. Once the holder ends, `k` runs and the row no longer says it waits.
async fn a_task_whose_instance_waits_for_its_limit_says_so_in_its_row(db: &TestDb) {
    let seen = Arc::new(Seen::default());
    let mut config = doc(vec![
        entry("ovr.hold", "0 0 0 1 1 *"),
        entry("ovr.iwait", "0 0 0 1 1 *"),
    ]);
    config.limits = [("ovr-solo".to_owned(), 1)].into();
    let builder =
        node_with(db, "a", tasks("ovr."), config, &seen).poll_interval(Duration::from_millis(500));
    let node = admin_node(db, builder, &["ovr.hold", "ovr.iwait"]).await;
    let http = reqwest::Client::new();
    db.set_next_run(Some("ovr.hold"), Some(db.now())).await;
    db.api().notify().await.unwrap();
    wait_stepping(db, Duration::from_secs(60), "the holder runs", || async {
        *seen.holding.lock().unwrap()
    })
    .await;
    node.schedules
        .upsert(Schedule::new("ovr.iwait", "k").cron("*/2 * * * * *"))
        .await
        .unwrap();

    wait_stepping(
        db,
        Duration::from_secs(90),
        "ovr.iwait's row names the limit its instance waits for",
        || async {
            let row = task_row(&http, &node, "ovr.iwait").await;
            row["state"]["waiting"]["limit"] == "ovr-solo"
        },
    )
    .await;
    let list = documented_list(&http, &node).await;
    let row = list["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "ovr.iwait")
        .unwrap()
        .clone();
    let waiting = &row["state"]["waiting"];
    assert_eq!(waiting["row"], "ovr.iwait/k", "{row}");
    assert_eq!(waiting["rows"], 1, "{row}");
    assert_eq!(waiting["size"], 1, "{row}");
    assert_eq!(waiting["held"], 1, "{row}");
    assert!(waiting["since"].is_string(), "{row}");
    assert!(
        waiting["holders"]
            .as_array()
            .is_some_and(|h| h.iter().any(|h| h["row"] == "ovr.hold")),
        "{row}"
    );
    assert!(
        db.try_task("ovr.iwait")
            .await
            .is_some_and(|t| t.last_run_at.is_none()),
        "the task's own row never ran"
    );
    assert!(
        seen.iwaited.lock().unwrap().is_empty(),
        "nothing ran ovr.iwait/k while it waited"
    );
    let one = get(&http, node.url("/api/tasks/ovr.iwait")).await;
    assert_eq!(one["task"]["state"]["waiting"], *waiting, "{one}");
    let hold = task_row(&http, &node, "ovr.hold").await;
    assert!(hold["state"].get("waiting").is_none(), "{hold}");

    seen.release.notify_one();
    wait_stepping(
        db,
        Duration::from_secs(90),
        "ovr.iwait/k runs, and its task's row no longer says it waits",
        || async {
            let ran = seen.iwaited.lock().unwrap().iter().any(|(k, _)| k == "k");
            ran && task_row(&http, &node, "ovr.iwait").await["state"]
                .get("waiting")
                .is_none()
        },
    )
    .await;
    node.running.stop().await;
}
