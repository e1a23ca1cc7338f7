//! A tick waiting for a limit shared by tasks, as the strips show it (`GET /api/ticks`, and an
//! instance's strip, `?ticks=` on its task's instances): `waiting`, naming the limit and its
//! holders, never `missed`; once the holder ends and the tick runs, the same tick shows its run.
//! Over real HTTP from a real node; the runs are judged by the handlers' own record.

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
    a_tick_waiting_for_its_limit_is_waiting_with_the_holders_then_shows_its_run,
}

/// What the handlers recorded.
#[derive(Default)]
struct Seen {
    /// `lstrip.hold` has started.
    holding: Mutex<bool>,
    /// `lstrip.hold` waits for this before it ends.
    release: Notify,
    /// `lstrip.wait`'s runs by row (`lstrip.wait`, or its instance's key): run id -> tick.
    runs: Mutex<BTreeMap<String, BTreeMap<i64, DateTime<Utc>>>>,
}

impl Seen {
    fn runs_of(&self, row: &str) -> BTreeMap<i64, DateTime<Utc>> {
        self.runs
            .lock()
            .unwrap()
            .get(row)
            .cloned()
            .unwrap_or_default()
    }
}

/// Holds `lstrip-solo` until the test lets it go.
#[task(name = "lstrip.hold", limit = "lstrip-solo")]
async fn lstrip_hold(ctx: TaskContext) {
    let seen = Arc::clone(ctx.state::<Arc<Seen>>().unwrap());
    *seen.holding.lock().unwrap() = true;
    seen.release.notified().await;
}

/// Every two seconds under `lstrip-solo` (and its instance under its task's limit).
#[task(name = "lstrip.wait", limit = "lstrip-solo")]
async fn lstrip_wait(ctx: TaskContext) {
    let seen = ctx.state::<Arc<Seen>>().unwrap();
    let row = ctx.key().unwrap_or("lstrip.wait").to_owned();
    seen.runs
        .lock()
        .unwrap()
        .entry(row)
        .or_default()
        .insert(ctx.run_id(), ctx.scheduled_at());
}

async fn get(http: &reqwest::Client, url: String) -> Value {
    let r = http.get(&url).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK, "{url}");
    r.json().await.unwrap()
}

fn at(tick: &Value) -> DateTime<Utc> {
    tick["at"].as_str().unwrap().parse().unwrap()
}

/// The task's strip and its instance `k`'s.
async fn strips(http: &reqwest::Client, node: &AdminNode) -> (Vec<Value>, Vec<Value>) {
    let tasks = get(http, node.url("/api/ticks?task=lstrip.wait&count=200")).await;
    let task = tasks["tasks"][0]["ticks"].as_array().unwrap().clone();
    let page = get(http, node.url("/api/tasks/lstrip.wait/instances?ticks=30")).await;
    let instance = page["instances"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["key"] == "k")
        .unwrap_or_else(|| panic!("no instance k: {page}"))["ticks"]
        .as_array()
        .unwrap_or_else(|| panic!("no strip: {page}"))
        .clone();
    (task, instance)
}

/// The first tick shown waiting, if one is.
fn first_waiting(strip: &[Value]) -> Option<&Value> {
    strip.iter().find(|t| t["outcome"] == "waiting")
}

/// A waiting tick names its limit and the run holding it.
fn names_the_holder(tick: &Value) -> bool {
    tick["waiting"]["limit"] == "lstrip-solo"
        && tick["waiting"]["holders"]
            .as_array()
            .is_some_and(|h| h.iter().any(|h| h["row"] == "lstrip.hold"))
}

/// `lstrip.hold` holds `lstrip-solo: 1`; `lstrip.wait` (every two seconds) and its instance `k`
/// (its own cron, its task's limit) wait for it. Both strips show their due tick `waiting`,
/// naming the limit and its holder, and no tick from it on `missed`; nothing ran it. Once the
/// holder ends, the handler runs that very tick, and the strips show it with that run.
async fn a_tick_waiting_for_its_limit_is_waiting_with_the_holders_then_shows_its_run(db: &TestDb) {
    let seen = Arc::new(Seen::default());
    let mut config = doc(vec![
        entry("lstrip.hold", "0 0 0 1 1 *"),
        entry("lstrip.wait", "*/2 * * * * *"),
    ]);
    config.limits = [("lstrip-solo".to_owned(), 1)].into();
    let builder = node_with(db, "a", tasks("lstrip."), config, &seen)
        .poll_interval(Duration::from_millis(500));
    let node = admin_node(db, builder, &["lstrip.hold", "lstrip.wait"]).await;
    let http = reqwest::Client::new();
    db.set_next_run(Some("lstrip.hold"), Some(db.now())).await;
    db.api().notify().await.unwrap();
    wait_stepping(db, Duration::from_secs(60), "the holder runs", || async {
        *seen.holding.lock().unwrap()
    })
    .await;
    node.schedules
        .upsert(Schedule::new("lstrip.wait", "k").cron("*/2 * * * * *"))
        .await
        .unwrap();
    wait_stepping(
        db,
        Duration::from_secs(90),
        "the task's and the instance's ticks shown waiting, naming the limit and its holder",
        || async {
            let (task, instance) = strips(&http, &node).await;
            [task, instance].iter().all(|strip| {
                first_waiting(strip).is_some_and(names_the_holder)
                    && strip.iter().filter(|t| t["outcome"] == "waiting").count() >= 2
            })
        },
    )
    .await;
    let (task, instance) = strips(&http, &node).await;
    let mut waited = Vec::new();
    for (row, strip) in [("lstrip.wait", &task), ("k", &instance)] {
        let first = first_waiting(strip).unwrap();
        let w = at(first);
        assert!(
            first["run_id"].is_null() && first["attempts"] == 0,
            "{first}"
        );
        assert!(first["waiting"]["since"].is_string(), "since when: {first}");
        for t in strip.iter().filter(|t| at(t) >= w) {
            assert_ne!(t["outcome"], "missed", "{row}: a waiting tick: {t}");
        }
        assert!(
            !seen.runs_of(row).values().any(|tick| *tick == w),
            "{row}: nothing ran the waiting tick"
        );
        waited.push((row, w));
    }

    seen.release.notify_one();
    wait_stepping(
        db,
        Duration::from_secs(90),
        "the waiting ticks run, and the strips show their runs",
        || async {
            let (task, instance) = strips(&http, &node).await;
            waited
                .iter()
                .zip([task, instance])
                .all(|((row, w), strip)| {
                    let Some((id, _)) = seen.runs_of(row).into_iter().find(|(_, t)| t == w) else {
                        return false;
                    };
                    strip.iter().any(|t| {
                        at(t) == *w
                            && t["run_id"] == id
                            && t["outcome"] != "waiting"
                            && t.get("waiting").is_none()
                    })
                })
        },
    )
    .await;
    node.running.stop().await;
}
