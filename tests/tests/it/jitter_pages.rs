//! Jitter as operators read it, for a page of many instances: every scheduled run of a page of
//! the run history (`GET /api/runs?limit=500`) over 200 instances with mixed windows gives its
//! tick's start, and so do the latest runs of the instance list (`GET
//! /api/tasks/{task}/instances?runs=N`) and of one instance (`.../instances/{key}`); the rows
//! that place a page are read in a bounded number of store reads, whatever the page holds (not
//! one per task and one per instance), and so are the runs and skip records of the instances'
//! strips (`?ticks=N`). The reads are counted by a layer over the node's real
//! store (`StoreLayer::observe`); the runs are those the handlers themselves recorded.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use common::*;
use reqwest::StatusCode;
use scheduler::store::Store;
use scheduler::testing::jitter::start_of;
use scheduler::testing::store::StoreLayer;
use scheduler::{Schedule, ScheduleSpec, TaskContext, task};
use serde_json::Value;

on_both_backends! {
    threads = 2;
    a_page_of_many_instances_is_placed_in_a_bounded_number_of_reads,
}

/// Every ten seconds (a page of 500 runs holds two ticks of every instance).
const CRON: &str = "*/10 * * * * *";
/// The attribute's window, which every third instance takes.
const TASK_WINDOW: Duration = Duration::from_secs(1);
/// How many instances.
const INSTANCES: usize = 200;
/// The most reads of task and instance rows one page may take.
const READS: u64 = 2;

/// The window instance `i` has: the task's, or one of two of its own.
fn window_of(i: usize) -> Option<Duration> {
    match i % 3 {
        0 => None,
        1 => Some(Duration::from_millis(500)),
        _ => Some(Duration::from_millis(2500)),
    }
}

fn key(i: usize) -> String {
    format!("tenant-{i:03}")
}

/// The keys whose handler ran, with how many times.
#[derive(Default)]
struct Ran(Mutex<BTreeMap<String, usize>>);

#[task(name = "jpage.sync", jitter = "1s")]
async fn jpage_sync(ctx: TaskContext) {
    let ran = ctx.state::<Arc<Ran>>().unwrap();
    let key = ctx.key().unwrap_or_default().to_owned();
    *ran.0.lock().unwrap().entry(key).or_default() += 1;
}

/// The node's store, with the reads of task and instance rows counted (the node's own loops
/// make none of them: only the admin API's routes do).
struct RowReads {
    inner: Arc<dyn Store>,
    reads: Mutex<BTreeMap<&'static str, u64>>,
    /// The reads of runs and skip records the instances' strips make (the node's own loops
    /// make none of them either).
    strip_reads: Mutex<BTreeMap<&'static str, u64>>,
}

impl RowReads {
    fn total(&self) -> u64 {
        self.reads.lock().unwrap().values().sum()
    }
    fn reset(&self) {
        self.reads.lock().unwrap().clear();
        self.strip_reads.lock().unwrap().clear();
    }
}

impl StoreLayer for RowReads {
    fn inner(&self) -> &dyn Store {
        &*self.inner
    }

    fn observe(&self, operation: &'static str) {
        let row_read = matches!(
            operation,
            "task_states" | "task_states_named" | "instance" | "instances_named" | "instances"
        );
        if row_read {
            *self.reads.lock().unwrap().entry(operation).or_default() += 1;
        }
        if matches!(
            operation,
            "latest_runs_per_instance" | "latest_skips_per_task"
        ) {
            *self
                .strip_reads
                .lock()
                .unwrap()
                .entry(operation)
                .or_default() += 1;
        }
    }
}

async fn get(addr: SocketAddr, path: &str) -> Value {
    let r = reqwest::get(format!("http://{addr}{path}")).await.unwrap();
    assert_eq!(r.status(), StatusCode::OK, "{path}");
    r.json().await.unwrap()
}

/// Checks every run of `runs` (views' JSON, all scheduled runs of instances): its `starts_at` is
/// its tick's start in its instance's window. Returns the keys seen.
fn check_starts(runs: &[Value], windows: &BTreeMap<String, Duration>, source: &str) -> Vec<String> {
    let spec = ScheduleSpec::parse(CRON, "UTC").unwrap();
    let mut keys = Vec::new();
    for run in runs {
        assert_eq!(run["trigger"], "schedule", "{source}: {run}");
        let key = run["instance_key"].as_str().unwrap().to_owned();
        let tick: DateTime<Utc> = run["scheduled_at"].as_str().unwrap().parse().unwrap();
        let starts_at: DateTime<Utc> = run["starts_at"]
            .as_str()
            .unwrap_or_else(|| panic!("{source}: no starts_at: {run}"))
            .parse()
            .unwrap();
        let row = format!("jpage.sync/{key}");
        assert_eq!(
            starts_at,
            start_of(&row, &spec, tick, windows[&key]),
            "{source}: {run}"
        );
        keys.push(key);
    }
    keys
}

/// 200 instances every ten seconds, a third on their task's window and the others on one of
/// two windows of their own: a page of 500 runs places every run of every instance on it at its
/// own window's start in at most two reads of rows; the instance list's latest runs and one
/// instance's are placed alike.
async fn a_page_of_many_instances_is_placed_in_a_bounded_number_of_reads(db: &TestDb) {
    let ran = Arc::new(Ran::default());
    let store = Arc::new(RowReads {
        inner: db.node_store(4),
        reads: Mutex::default(),
        strip_reads: Mutex::default(),
    });
    // The task's own schedule: yearly (its instances are what runs).
    let config = doc(vec![entry("jpage.sync", "0 0 0 1 1 *")]);
    let builder = node_with(db, "a", tasks("jpage."), config, &ran)
        .store(Arc::clone(&store) as Arc<dyn Store>)
        .max_concurrent(INSTANCES);
    let AdminNode {
        running,
        addr,
        schedules,
    } = admin_node(db, builder, &["jpage.sync"]).await;
    let mut windows = BTreeMap::new();
    let batch = (0..INSTANCES).map(|i| {
        let schedule = Schedule::new("jpage.sync", key(i)).cron(CRON);
        match window_of(i) {
            Some(own) => schedule.jitter(own),
            None => schedule,
        }
    });
    for answer in schedules.upsert_many(batch).await.unwrap() {
        answer.unwrap();
    }
    for i in 0..INSTANCES {
        windows.insert(key(i), window_of(i).unwrap_or(TASK_WINDOW));
    }
    wait_stepping(
        db,
        Duration::from_secs(120),
        "two runs of every instance",
        || async {
            let ran = ran.0.lock().unwrap();
            ran.len() == INSTANCES && ran.values().all(|n| *n >= 2)
        },
    )
    .await;

    // The run history: a page of 500 runs (at least one tick of every instance).
    store.reset();
    let page = get(addr, "/api/runs?limit=500").await;
    let reads = store.total();
    let runs = page["runs"].as_array().unwrap();
    let keys: BTreeSet<String> = check_starts(runs, &windows, "/api/runs")
        .into_iter()
        .collect();
    assert_eq!(keys.len(), INSTANCES, "every instance on the page");
    assert!(
        reads <= READS,
        "{reads} reads of rows for a page of {} runs: {:?}",
        runs.len(),
        store.reads.lock().unwrap()
    );

    // The instance list's latest runs: two of each.
    store.reset();
    let list = get(addr, "/api/tasks/jpage.sync/instances?runs=2&limit=1000").await;
    let reads = store.total();
    let instances = list["instances"].as_array().unwrap();
    assert_eq!(instances.len(), INSTANCES);
    let mut listed = 0;
    for instance in instances {
        let key = instance["key"].as_str().unwrap();
        let recent = instance["recent_runs"].as_array().unwrap();
        assert_eq!(recent.len(), 2, "{instance}");
        let seen = check_starts(recent, &windows, "the instance list");
        assert!(seen.iter().all(|k| k == key), "{instance}");
        listed += recent.len();
    }
    // Its task's row and its instances' rows: the reads the list makes without runs, and one
    // read more for the rows of its runs.
    assert!(
        reads <= READS + 1,
        "{reads} reads of rows for {listed} runs: {:?}",
        store.reads.lock().unwrap()
    );

    // Every instance's strip of expected ticks, each with its runs: one read of their runs and
    // one of their skip records (one cron, one class of window), whatever their number.
    store.reset();
    let list = get(addr, "/api/tasks/jpage.sync/instances?ticks=10&limit=1000").await;
    let instances = list["instances"].as_array().unwrap();
    assert_eq!(instances.len(), INSTANCES);
    for instance in instances {
        let ticks = instance["ticks"].as_array().unwrap();
        let ran = ticks.iter().filter(|t| t["run_id"].is_i64()).count();
        assert!(ran >= 2, "{instance}");
    }
    let reads = store.strip_reads.lock().unwrap().clone();
    assert_eq!(
        reads,
        BTreeMap::from([
            ("latest_runs_per_instance", 1),
            ("latest_skips_per_task", 1)
        ]),
        "the strips of {INSTANCES} instances"
    );
    assert!(store.total() <= READS, "{:?}", store.reads.lock().unwrap());

    // One instance's latest runs.
    for i in 0..3 {
        let one = get(addr, &format!("/api/tasks/jpage.sync/instances/{}", key(i))).await;
        let recent = one["recent_runs"].as_array().unwrap();
        assert!(recent.len() >= 2, "{one}");
        check_starts(recent, &windows, "one instance");
    }
    running.stop().await;
}
