//! Jitter: many instances of one task on one tick start spread over their jitter window, each at
//! its own offset, never before it, and each tick of each instance runs once across two nodes.
//! Judged by what the handlers themselves recorded (their tick and their start, on the clock the
//! nodes decide by), never by timings: a start's lower bound (its offset) is the rule itself;
//! the upper bound is generous (a start a window late would mean the jitter was added twice).
//! Which window a row takes, and that every writer of a next run writes its start at its offset,
//! are `jitter_starts`' (which shares the handlers' record below).

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Timelike, Utc};
use common::*;
use scheduler::config::ConfigDocument;
use scheduler::testing::clock::TestClock;
use scheduler::testing::jitter::start_of;
use scheduler::{Schedule, ScheduleSpec, TaskContext, task};

on_both_backends! {
    threads = 2;
    two_hundred_instances_start_inside_their_windows_once_per_tick_across_two_nodes,
}

/// Every ten seconds: two ticks come within half a minute of wall time on PostgreSQL.
pub(crate) const CRON: &str = "*/10 * * * * *";
/// The attribute's window, which the first half of the instances take.
pub(crate) const TASK_WINDOW: Duration = Duration::from_secs(4);
/// The window of the second half, set on each instance.
pub(crate) const OWN_WINDOW: Duration = Duration::from_secs(6);
/// How late past its window a start may come before the test calls it wrong: a claim that ran
/// slowly on a loaded machine is not jitter's fault; a start a whole window late is.
pub(crate) const SLACK: Duration = Duration::from_secs(8);

/// One run as its handler saw it: key, tick, start (on the nodes' clock), node.
pub(crate) type Seen = (String, DateTime<Utc>, DateTime<Utc>, String);

/// What the handlers saw, and the clock the nodes decide by (none on PostgreSQL: the wall clock).
pub(crate) struct JitterLog {
    pub(crate) runs: Mutex<Vec<Seen>>,
    pub(crate) clock: Option<TestClock>,
}

impl JitterLog {
    fn now(&self) -> DateTime<Utc> {
        self.clock.as_ref().map_or_else(Utc::now, TestClock::now)
    }
}

/// What a handler of these tests saw: its key (none: ""), tick and start, on its node.
pub(crate) fn record(ctx: &TaskContext) {
    let log = ctx.state::<Arc<JitterLog>>().unwrap();
    let start = log.now();
    log.runs.lock().unwrap().push((
        ctx.key().unwrap_or_default().to_owned(),
        ctx.scheduled_at(),
        start,
        ctx.node_id().to_owned(),
    ));
}

#[task(name = "jit.sync", jitter = "4s")]
async fn jit_sync(ctx: TaskContext) {
    record(&ctx);
}

fn config() -> ConfigDocument {
    // The task's own schedule: yearly (its instances are what runs).
    doc(vec![entry("jit.sync", "0 0 0 1 1 *")])
}

/// The window instance `i` starts within: the attribute's for the first half, its own after.
fn window_of(i: usize, n: usize) -> Duration {
    if i < n / 2 { TASK_WINDOW } else { OWN_WINDOW }
}

async fn two_hundred_instances_start_inside_their_windows_once_per_tick_across_two_nodes(
    db: &TestDb,
) {
    spread(db, 200).await;
}

/// `n` instances of one task every ten seconds on two nodes, half on the attribute's window and
/// half on their own: two ticks of each ran once, each start at or after its tick plus its
/// offset and inside its window (with slack), the offsets spread over the windows.
async fn spread(db: &TestDb, n: usize) {
    let log = Arc::new(JitterLog {
        runs: Mutex::default(),
        clock: db.clock().cloned(),
    });
    let builders =
        ["a", "b"].map(|id| node_with(db, id, tasks("jit."), config(), &log).max_concurrent(n));
    let running = started_all(db, builders, &["jit.sync"]).await;
    let schedules = running[0].schedules.clone();
    let spec = ScheduleSpec::parse(CRON, "UTC").unwrap();
    let key = |i: usize| format!("tenant-{i:04}");
    let mut windows = BTreeMap::new();
    for i in 0..n {
        let mut schedule = Schedule::new("jit.sync", key(i)).cron(CRON);
        if window_of(i, n) == OWN_WINDOW {
            schedule = schedule.jitter(OWN_WINDOW);
        }
        let written = schedules.upsert(schedule).await.unwrap();
        // Its first start, as written: its tick plus its offset in its window.
        let tick = written.next_tick.expect("a next tick");
        let row = format!("jit.sync/{}", key(i));
        assert_eq!(
            written.next_run_at,
            Some(start_of(&row, &spec, tick, window_of(i, n))),
            "{row}"
        );
        windows.insert(key(i), window_of(i, n));
    }
    let upserted_at = db.now();

    // Two ticks of every instance after the upserts, on both nodes.
    let enough = || {
        let runs = log.runs.lock().unwrap();
        let mut per_key: BTreeMap<&str, usize> = BTreeMap::new();
        for r in runs.iter().filter(|r| r.1 > upserted_at) {
            *per_key.entry(r.0.as_str()).or_default() += 1;
        }
        let nodes: BTreeSet<&str> = runs.iter().map(|r| r.3.as_str()).collect();
        per_key.len() == n && per_key.values().all(|c| *c >= 2) && nodes.len() == 2
    };
    wait_stepping(
        db,
        Duration::from_secs(180),
        "two ticks of every instance, on both nodes",
        || async { enough() },
    )
    .await;
    for node in running {
        node.stop().await;
    }

    let runs = log.runs.lock().unwrap().clone();
    let mut once: BTreeMap<(String, DateTime<Utc>), usize> = BTreeMap::new();
    let mut offsets = BTreeSet::new();
    let mut latest = Duration::ZERO;
    for (key, tick, started, _) in &runs {
        *once.entry((key.clone(), *tick)).or_default() += 1;
        assert!(
            tick.second() % 10 == 0 && tick.nanosecond() == 0,
            "the run serves the tick itself, not its start: {tick}"
        );
        let window = windows[key];
        let due = start_of(&format!("jit.sync/{key}"), &spec, *tick, window);
        assert!(
            due >= *tick && due < *tick + TimeDelta::from_std(window).unwrap(),
            "{key} {tick}: its start {due} inside its window"
        );
        assert!(
            *started >= due,
            "{key} {tick}: started at {started}, before its start {due}"
        );
        let late = TimeDelta::from_std(window + SLACK).unwrap();
        assert!(
            *started <= *tick + late,
            "{key} {tick}: started at {started}, past its window {window:?} and {SLACK:?}"
        );
        let offset = (due - *tick).to_std().unwrap();
        latest = latest.max(offset);
        offsets.insert(offset);
    }
    let twice: Vec<_> = once.iter().filter(|(_, c)| **c > 1).collect();
    assert!(twice.is_empty(), "ticks run twice: {twice:?}");
    // Spread: the offsets cover the windows, every half second of the shorter one hit (at
    // least 100 instances a tick on it: an empty half second would take a broken hash).
    let halves: BTreeSet<u128> = offsets.iter().map(|o| o.as_millis() / 500).collect();
    let every_half = (0..(TASK_WINDOW.as_millis() / 500)).all(|h| halves.contains(&h));
    assert!(every_half, "half seconds hit: {halves:?}");
    assert!(
        latest >= TASK_WINDOW * 4 / 5,
        "the latest offset: {latest:?}"
    );
    // The store's record agrees: one started run per tick of each instance, at or after its
    // start (a run claimed as its node stopped is handed back unstarted, and has no start).
    let mut stored: BTreeMap<(String, DateTime<Utc>), usize> = BTreeMap::new();
    for run in db.runs(Some("jit.sync")).await {
        let Some(started) = run.started_at else {
            continue;
        };
        let key = run.instance_key.clone().expect("an instance's run");
        let due = start_of(
            &format!("jit.sync/{key}"),
            &spec,
            run.scheduled_at,
            windows[&key],
        );
        assert!(
            started >= due,
            "{key}: recorded start {started} before {due}"
        );
        *stored.entry((key, run.scheduled_at)).or_default() += 1;
    }
    assert!(stored.values().all(|c| *c == 1), "{stored:?}");
}

/// The same with 1,000 instances, on SQLite's test clock (a slow test: `--ignored`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "slow: 1,000 instances"]
async fn a_thousand_instances_start_inside_their_windows() {
    let db = TestDb::sqlite("jitter_thousand").await;
    spread(&db, 1_000).await;
    db.cleanup().await;
}
