//! The strip of an instance, as the admin API gives it to the dashboard (`?ticks=` on the list
//! of a task's instances and on one instance): its latest expected ticks by its own schedule and
//! jitter, each with the run that served it or, while it waits for its limit, `waiting`, as a
//! task's strip (`GET /api/ticks`).
//! Over real HTTP from a real node; what the strips say ran is judged against what the handler
//! itself recorded.

use crate::common;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use common::*;
use reqwest::StatusCode;
use scheduler::{Schedule, TaskContext, task};
use serde_json::Value;

on_both_backends! {
    threads = 2;
    an_instances_strip_shows_each_expected_tick_with_its_run_or_waiting,
}

/// The runs the handler saw, by key: run id -> the tick it served.
#[derive(Default)]
struct Ran(Mutex<BTreeMap<String, BTreeMap<i64, DateTime<Utc>>>>);

impl Ran {
    fn of(&self, key: &str) -> BTreeMap<i64, DateTime<Utc>> {
        self.0.lock().unwrap().get(key).cloned().unwrap_or_default()
    }
}

#[task(name = "istrip.sync")]
async fn istrip_sync(ctx: TaskContext) {
    let ran = ctx.state::<Arc<Ran>>().unwrap();
    ran.0
        .lock()
        .unwrap()
        .entry(ctx.key().unwrap_or_default().to_owned())
        .or_default()
        .insert(ctx.run_id(), ctx.scheduled_at());
}

async fn get(http: &reqwest::Client, addr: SocketAddr, path: &str) -> Value {
    let r = http
        .get(format!("http://{addr}{path}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK, "{path}");
    r.json().await.unwrap()
}

/// Every two seconds, by its own cron (its task's is yearly).
fn every_two_seconds(key: &str) -> Schedule {
    Schedule::new("istrip.sync", key)
        .cron("*/2 * * * * *")
        .timezone("Asia/Shanghai")
}

/// The instance `key` of a page of instances.
fn instance<'a>(page: &'a Value, key: &str) -> &'a Value {
    page["instances"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["key"] == key)
        .unwrap_or_else(|| panic!("no instance {key}: {page}"))
}

fn ticks(instance: &Value) -> Vec<Value> {
    instance["ticks"]
        .as_array()
        .unwrap_or_else(|| panic!("no strip: {instance}"))
        .clone()
}

fn outcomes(ticks: &[Value], outcome: &str) -> usize {
    ticks.iter().filter(|t| t["outcome"] == outcome).count()
}

fn at(tick: &Value) -> DateTime<Utc> {
    tick["at"].as_str().unwrap().parse().unwrap()
}

/// Two instances every two seconds: `ran` runs on (with a jitter window of its own), `held`
/// runs, then names a limit no document declares and so runs no more. The strip of each (in the
/// page of instances and alone) is its expected ticks by its own cron, oldest first: `ran`'s
/// are runs its handler made for those very ticks, each as late as its run started after its
/// tick's start (the tick shifted by its jitter), none missed; `held`'s runs are its handler's,
/// and its ticks after them are `waiting` for that limit (not declared: no size), with no run.
async fn an_instances_strip_shows_each_expected_tick_with_its_run_or_waiting(db: &TestDb) {
    let ran = Arc::new(Ran::default());
    let config = doc(vec![entry("istrip.sync", "0 0 0 1 1 *")]);
    let builder = node_with(db, "strips", tasks("istrip."), config, &ran)
        .poll_interval(Duration::from_millis(500));
    let AdminNode {
        running,
        addr,
        schedules,
    } = admin_node(db, builder, &["istrip.sync"]).await;
    let http = reqwest::Client::new();
    schedules
        .upsert(every_two_seconds("ran").jitter("1500ms"))
        .await
        .unwrap();
    schedules.upsert(every_two_seconds("held")).await.unwrap();
    wait_stepping(db, Duration::from_secs(90), "runs of both", || async {
        ran.of("ran").len() >= 2 && !ran.of("held").is_empty()
    })
    .await;
    // `held` waits for a limit no document declares: its ticks get no run, they wait.
    schedules
        .upsert(every_two_seconds("held").limit("istrip-undeclared"))
        .await
        .unwrap();
    let path = "/api/tasks/istrip.sync/instances?ticks=30&runs=30";
    wait_stepping(
        db,
        Duration::from_secs(120),
        "held's ticks waiting, ran's run",
        || async {
            let page = get(&http, addr, path).await;
            outcomes(&ticks(instance(&page, "held")), "waiting") >= 2
                && outcomes(&ticks(instance(&page, "ran")), "succeeded") >= 3
        },
    )
    .await;
    let page = get(&http, addr, path).await;

    // `ran`: every tick on its own cron, oldest first; each run shown is its handler's run of
    // that tick, as late as it started after the tick's start (`starts_at` of the same run).
    let ran_view = instance(&page, "ran");
    let strip = ticks(ran_view);
    assert!(strip.len() <= 30, "{ran_view}");
    let ats: Vec<DateTime<Utc>> = strip.iter().map(at).collect();
    assert!(ats.windows(2).all(|w| w[0] < w[1]), "oldest first: {ats:?}");
    assert!(
        ats.iter().all(|t| t.timestamp() % 2 == 0),
        "its own cron: {ats:?}"
    );
    assert_eq!(outcomes(&strip, "missed"), 0, "{ran_view}");
    let runs: BTreeMap<i64, &Value> = ran_view["recent_runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["id"].as_i64().unwrap(), r))
        .collect();
    let mut placed = 0;
    for tick in strip.iter().filter(|t| t["outcome"] == "succeeded") {
        let id = tick["run_id"].as_i64().unwrap();
        wait_until(Duration::from_secs(30), "the handler's record", || async {
            ran.of("ran").contains_key(&id)
        })
        .await;
        assert_eq!(
            ran.of("ran")[&id],
            at(tick),
            "the run served the tick: {tick}"
        );
        assert_eq!(tick["trigger"], "schedule", "{tick}");
        if let Some(run) = runs.get(&id) {
            let started: DateTime<Utc> = run["started_at"].as_str().unwrap().parse().unwrap();
            let starts: DateTime<Utc> = run["starts_at"].as_str().unwrap().parse().unwrap();
            let late = (started - starts).num_milliseconds() as f64 / 1000.0;
            let shown = tick["late_seconds"].as_f64().unwrap();
            assert!(
                (shown - late.max(0.0)).abs() < 0.002,
                "late from its jittered start ({late}): {tick}"
            );
            placed += 1;
        }
    }
    assert!(placed >= 3, "{ran_view}");

    // `held`: its runs are its handler's; the ticks after the last wait, with no run, naming
    // the limit (undeclared: no size), none missed.
    let held = instance(&page, "held");
    let strip = ticks(held);
    let handled = ran.of("held");
    let last_run = strip
        .iter()
        .filter(|t| t["run_id"].is_i64())
        .map(|t| {
            let id = t["run_id"].as_i64().unwrap();
            assert_eq!(handled.get(&id), Some(&at(t)), "its handler's run: {t}");
            at(t)
        })
        .max();
    assert_eq!(outcomes(&strip, "missed"), 0, "{held}");
    let waiting: Vec<&Value> = strip.iter().filter(|t| t["outcome"] == "waiting").collect();
    assert!(waiting.len() >= 2, "{held}");
    for t in &waiting {
        assert!(t["run_id"].is_null() && t["attempts"] == 0, "{t}");
        assert_eq!(t["waiting"]["limit"], "istrip-undeclared", "{t}");
        assert!(t["waiting"]["size"].is_null(), "{t}");
        assert!(at(t).timestamp() % 2 == 0, "its own cron: {t}");
        assert!(last_run.is_none_or(|last| at(t) > last), "{held}");
        assert!(
            !handled.values().any(|tick| *tick == at(t)),
            "no run of a waiting tick: {t}"
        );
    }

    // One instance reads its strip alike.
    let one = get(
        &http,
        addr,
        "/api/tasks/istrip.sync/instances/held?ticks=30",
    )
    .await;
    let alone = ticks(&one);
    assert!(outcomes(&alone, "waiting") >= waiting.len(), "{one}");
    assert_eq!(one["ticks_complete"], true, "{one}");
    // Without `ticks`, no strip.
    let plain = get(&http, addr, "/api/tasks/istrip.sync/instances").await;
    assert!(instance(&plain, "held").get("ticks").is_none(), "{plain}");
    // The dashboard asks for the strips and draws each instance's ticks as a task's.
    let script = http
        .get(format!("http://{addr}/assets/instances.js"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(script.contains("ticks: String("), "asks for the strips");
    assert!(script.contains("tickStrip(i.ticks"), "draws them");
    running.stop().await;
}
