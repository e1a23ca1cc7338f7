//! Broadcast tasks (`shards = "nodes"`): each tick runs once on every node alive at it, never
//! twice on a node and never on another node; a node killed mid-run has its run recorded lost
//! and not run elsewhere; a node that joins later runs only the ticks after it joined. Judged
//! by what the handlers themselves recorded (in memory for in-process nodes, in files for node
//! processes), never by timings.
//!
//! In-process nodes run on both backends (on SQLite several schedulers in one process are how
//! it runs "several nodes"); node processes (`test_node`, killed with SIGKILL) on PostgreSQL.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use common::*;
use scheduler::config::{ShardsEntry, TaskConfig};
use scheduler::testing::operate::{self, Actor};
use scheduler::testing::store::{RunRequest, RunStatus, Trigger};
use scheduler::{Shard, TaskContext, task};

on_both_backends! {
    threads = 2;
    two_nodes_run_every_tick_of_a_broadcast_once_each,
    a_lone_node_runs_each_tick_once_as_0_of_1,
    overlap_is_per_node_and_pause_and_manual_runs_cover_every_node,
    each_node_reconciles_its_own_row_and_a_task_no_longer_broadcast_disables_them,
    the_api_shows_a_broadcast_tick_with_each_nodes_run_and_the_task_running_while_a_node_runs;
    postgres_only:
        three_node_processes_run_every_tick_once_each,
        a_killed_nodes_run_is_lost_and_not_run_elsewhere,
        a_node_started_later_runs_only_the_ticks_after_it_joined,
}

/// One in-process run as its handler saw it: (node, tick, shard, broadcast?).
type SeenRun = (String, DateTime<Utc>, Shard, bool);

/// What the in-process handlers saw.
#[derive(Default)]
struct BroadcastLog {
    runs: Mutex<Vec<SeenRun>>,
}

impl BroadcastLog {
    fn push(&self, ctx: &TaskContext) {
        self.runs.lock().unwrap().push((
            ctx.node_id().to_owned(),
            ctx.scheduled_at(),
            ctx.shard(),
            ctx.is_broadcast(),
        ));
    }

    /// Ticks every one of `nodes` ran.
    fn whole_ticks(&self, nodes: usize) -> BTreeSet<DateTime<Utc>> {
        let mut by_tick: BTreeMap<DateTime<Utc>, BTreeSet<String>> = BTreeMap::new();
        for (node, tick, _, _) in self.runs.lock().unwrap().iter() {
            by_tick.entry(*tick).or_default().insert(node.clone());
        }
        by_tick
            .into_iter()
            .filter(|(_, n)| n.len() >= nodes)
            .map(|(t, _)| t)
            .collect()
    }
}

/// 2 shards by the attribute; the test's config makes it a broadcast (`shards: nodes`).
#[task(name = "bcast.pair", shards = 2)]
async fn bcast_pair(ctx: TaskContext) {
    tokio::time::sleep(Duration::from_millis(50)).await;
    ctx.state::<Arc<BroadcastLog>>().unwrap().push(&ctx);
}

/// A broadcast by the attribute.
#[task(name = "bcast.lone", shards = "nodes")]
async fn bcast_lone(ctx: TaskContext) {
    ctx.state::<Arc<BroadcastLog>>().unwrap().push(&ctx);
}

/// A fast and a slow node (2.5 s per run) run a broadcast every second, the fast one serving
/// the admin API: a tick both ran is one entry of `GET /api/ticks` saying it is a broadcast's,
/// counted with both nodes, each run naming its node (index by node id), done, none pending or
/// not run; and `GET /api/tasks` shows the task running while a node's run goes on (the task's
/// own row is never locked: its nodes' rows are).
async fn the_api_shows_a_broadcast_tick_with_each_nodes_run_and_the_task_running_while_a_node_runs(
    db: &TestDb,
) {
    let spans = Arc::new(Spans::default());
    let config = doc(vec![entry("bcast.spans", "* * * * * *")]);
    let mut admin = None;
    let nodes: Vec<RunningNode> = ["fast", "slow"]
        .into_iter()
        .map(|id| {
            let mut b = node(db, id, tasks("bcast.spans"))
                .poll_interval(Duration::from_millis(500))
                .config_document(config.clone())
                .state(Arc::clone(&spans));
            if id == "fast" {
                b = b.admin_addr("127.0.0.1:0".parse().unwrap());
            }
            let scheduler = b.build().unwrap();
            if id == "fast" {
                admin = scheduler.admin_addr();
            }
            start(scheduler)
        })
        .collect();
    let addr = admin.expect("the fast node serves the admin API");
    let http = reqwest::Client::new();
    let get = |path: &'static str| {
        let http = http.clone();
        async move {
            let r = http
                .get(format!("http://{addr}{path}"))
                .send()
                .await
                .unwrap();
            // Not found until a node's reconcile created the task's row.
            if r.status() == reqwest::StatusCode::NOT_FOUND {
                return serde_json::Value::Null;
            }
            assert_eq!(r.status(), reqwest::StatusCode::OK, "{path}");
            r.json::<serde_json::Value>().await.unwrap()
        }
    };
    let whole = || async {
        get("/api/ticks?task=bcast.spans&count=60").await["tasks"][0]["ticks"]
            .as_array()?
            .iter()
            .find(|t| t["shards"]["done"] == 2 && t["shards"]["total"] == 2)
            .cloned()
    };
    wait_until(
        Duration::from_secs(120),
        "a tick both nodes ran, in the API",
        || async { whole().await.is_some() },
    )
    .await;
    let tick = whole().await.unwrap();
    assert_eq!(tick["outcome"], "succeeded", "{tick}");
    let shards = &tick["shards"];
    assert_eq!(
        (
            &shards["broadcast"],
            &shards["succeeded"],
            &shards["running"],
            &shards["pending"],
            &shards["not_run"]
        ),
        (
            &serde_json::json!(true),
            &serde_json::json!(2),
            &serde_json::json!(0),
            &serde_json::json!(0),
            &serde_json::json!(0)
        ),
        "{tick}"
    );
    let runs: Vec<(u64, &str)> = shards["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["index"].as_u64().unwrap(), r["node_id"].as_str().unwrap()))
        .collect();
    assert_eq!(runs, [(0, "fast"), (1, "slow")], "{tick}");
    // The handlers agree: each node ran that tick once.
    let at: DateTime<Utc> = tick["at"].as_str().unwrap().parse().unwrap();
    let ran: BTreeSet<String> = spans
        .runs
        .lock()
        .unwrap()
        .iter()
        .filter(|r| r.1 == at)
        .map(|r| r.0.clone())
        .collect();
    assert_eq!(ran, BTreeSet::from(["fast".into(), "slow".into()]));

    // The slow node runs 2.5 s of every few seconds: the task is shown running meanwhile.
    let running = || async {
        let tasks = get("/api/tasks").await;
        let task = tasks["tasks"]
            .as_array()?
            .iter()
            .find(|t| t["name"] == "bcast.spans")
            .cloned()?;
        task["state"]["lock"]["owner"].as_str().map(str::to_owned)
    };
    wait_until(
        Duration::from_secs(60),
        "the task shown running while a node runs it",
        || async { running().await.is_some() },
    )
    .await;
    let detail = || async {
        let d = get("/api/tasks/bcast.spans").await;
        d["task"]["state"]["lock"]["rows"].as_u64()
    };
    wait_until(
        Duration::from_secs(60),
        "the task's page shows it running while a node runs it",
        || async { detail().await.is_some_and(|rows| rows >= 1) },
    )
    .await;
    for n in nodes {
        n.stop().await;
    }
}

/// Checks the in-process record: a node ran a tick at most once, an index of a tick was run at
/// most once, the runs of a tick agree on the total, every run knows it is a broadcast's; and
/// the store recorded each run once under the task's name with the handler's shard.
async fn judge_in_process(db: &TestDb, task: &str, log: &BroadcastLog) {
    let runs = log.runs.lock().unwrap().clone();
    let mut per_node: BTreeMap<(DateTime<Utc>, String), usize> = BTreeMap::new();
    let mut per_index: BTreeMap<(DateTime<Utc>, u32), usize> = BTreeMap::new();
    let mut totals: BTreeMap<DateTime<Utc>, BTreeSet<u32>> = BTreeMap::new();
    for (node, tick, shard, broadcast) in &runs {
        assert!(*broadcast, "ctx.is_broadcast() in {node}'s run of {tick}");
        assert!(shard.index < shard.total, "{shard:?}");
        *per_node.entry((*tick, node.clone())).or_default() += 1;
        *per_index.entry((*tick, shard.index)).or_default() += 1;
        totals.entry(*tick).or_default().insert(shard.total);
    }
    let twice: Vec<_> = per_node.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "a node ran a tick twice: {twice:?}");
    let twice: Vec<_> = per_index.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "an index of a tick ran twice: {twice:?}");
    let split: Vec<_> = totals.iter().filter(|(_, t)| t.len() > 1).collect();
    assert!(
        split.is_empty(),
        "runs of a tick disagree on the total: {split:?}"
    );

    let recorded = db.runs(Some(task)).await;
    let mut stored: BTreeMap<(DateTime<Utc>, u32), (usize, u32)> = BTreeMap::new();
    for run in &recorded {
        let e = stored
            .entry((run.scheduled_at, run.shard_index))
            .or_default();
        e.0 += 1;
        e.1 = run.shard_total;
    }
    assert!(stored.values().all(|(n, _)| *n == 1), "{stored:?}");
    for (_, tick, shard, _) in &runs {
        assert_eq!(
            stored.get(&(*tick, shard.index)).map(|e| e.1),
            Some(shard.total),
            "run of {tick} index {} recorded with its total",
            shard.index
        );
    }
}

/// Two nodes run a broadcast task (the config's `shards: nodes` over the attribute's 2) every
/// second: each tick both ran is run once by each, as index 0 and 1 of 2.
async fn two_nodes_run_every_tick_of_a_broadcast_once_each(db: &TestDb) {
    let log = Arc::new(BroadcastLog::default());
    let config = doc(vec![TaskConfig {
        shards: Some(ShardsEntry::Word("nodes".into())),
        ..entry("bcast.pair", "* * * * * *")
    }]);
    let nodes: Vec<RunningNode> = ["a", "b"]
        .into_iter()
        .map(|id| {
            start(
                node(db, id, tasks("bcast.pair"))
                    .poll_interval(Duration::from_millis(500))
                    .config_document(config.clone())
                    .state(Arc::clone(&log))
                    .build()
                    .unwrap(),
            )
        })
        .collect();
    wait_stepping(
        db,
        Duration::from_secs(120),
        "three ticks run on both nodes",
        || async { log.whole_ticks(2).len() >= 3 },
    )
    .await;
    for n in nodes {
        n.stop().await;
    }
    for tick in log.whole_ticks(2) {
        let shards: BTreeSet<(u32, u32)> = log
            .runs
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r.1 == tick)
            .map(|r| (r.2.index, r.2.total))
            .collect();
        assert_eq!(shards, BTreeSet::from([(0, 2), (1, 2)]), "tick {tick}");
    }
    judge_in_process(db, "bcast.pair", &log).await;
}

/// One node alone (SQLite's usual shape): each tick runs once, as 0 of 1.
async fn a_lone_node_runs_each_tick_once_as_0_of_1(db: &TestDb) {
    let log = Arc::new(BroadcastLog::default());
    let n = start(
        node(db, "alone", tasks("bcast.lone"))
            .poll_interval(Duration::from_millis(500))
            .config_document(doc(vec![entry("bcast.lone", "* * * * * *")]))
            .state(Arc::clone(&log))
            .build()
            .unwrap(),
    );
    wait_stepping(db, Duration::from_secs(120), "three ticks", || async {
        log.whole_ticks(1).len() >= 3
    })
    .await;
    n.stop().await;
    for (node, _, shard, _) in log.runs.lock().unwrap().iter() {
        assert_eq!(node, "alone");
        assert_eq!(*shard, Shard { index: 0, total: 1 });
    }
    judge_in_process(db, "bcast.lone", &log).await;
    // The task's own row is never run: every run is the node's.
    let runs = db.runs(Some("bcast.lone")).await;
    assert!(runs.iter().all(|r| r.node_id == "alone"));
}

/// A run's span as its handler saw it: (node, tick, started, ended).
type Span = (
    String,
    DateTime<Utc>,
    std::time::Instant,
    Option<std::time::Instant>,
);

/// Each run's span.
#[derive(Default)]
struct Spans {
    runs: Mutex<Vec<Span>>,
}

/// Node `slow` works 2.5 s per run, every other node 50 ms.
#[task(name = "bcast.spans", shards = "nodes")]
async fn bcast_spans(ctx: TaskContext) {
    let spans = ctx.state::<Arc<Spans>>().unwrap();
    let at = {
        let mut runs = spans.runs.lock().unwrap();
        runs.push((
            ctx.node_id().to_owned(),
            ctx.scheduled_at(),
            std::time::Instant::now(),
            None,
        ));
        runs.len() - 1
    };
    let ms = if ctx.node_id() == "slow" { 2_500 } else { 50 };
    tokio::time::sleep(Duration::from_millis(ms)).await;
    spans.runs.lock().unwrap()[at].3 = Some(std::time::Instant::now());
}

/// A slow node and a fast node run a broadcast task every second: the slow node never starts a
/// tick while its own run of an earlier one goes on, and the fast node is not held up by it
/// (it runs ticks while the slow one works). A pause stops both; a manual run after the resume
/// runs once on each node, as 0 and 1 of 2.
async fn overlap_is_per_node_and_pause_and_manual_runs_cover_every_node(db: &TestDb) {
    let spans = Arc::new(Spans::default());
    let config = doc(vec![entry("bcast.spans", "* * * * * *")]);
    let nodes: Vec<RunningNode> = ["fast", "slow"]
        .into_iter()
        .map(|id| {
            start(
                node(db, id, tasks("bcast.spans"))
                    .poll_interval(Duration::from_millis(500))
                    .config_document(config.clone())
                    .state(Arc::clone(&spans))
                    .build()
                    .unwrap(),
            )
        })
        .collect();
    let ended = |node: &str| {
        spans
            .runs
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r.0 == node && r.3.is_some())
            .count()
    };
    wait_until(
        Duration::from_secs(120),
        "two runs of the slow node ended",
        || async { ended("slow") >= 2 },
    )
    .await;
    {
        let runs = spans.runs.lock().unwrap();
        let slow: Vec<_> = runs.iter().filter(|r| r.0 == "slow").collect();
        for pair in slow.windows(2) {
            let ended = pair[0]
                .3
                .expect("an earlier run ended before a later one started");
            assert!(
                ended <= pair[1].2,
                "the slow node started {} while its run of {} went on",
                pair[1].1,
                pair[0].1
            );
        }
        let first = slow[0];
        let during = runs
            .iter()
            .filter(|r| r.0 == "fast" && r.2 > first.2 && r.2 < first.3.unwrap())
            .count();
        assert!(during >= 1, "the fast node ran while the slow one worked");
    }

    let ops = Actor::new("ops", "test");
    assert!(
        operate::pause(db.api(), "bcast.spans", &ops, "maintenance", None)
            .await
            .unwrap()
    );
    assert!(matches!(
        operate::trigger(db.api(), "bcast.spans", &ops)
            .await
            .unwrap(),
        RunRequest::Paused(_)
    ));
    // Runs under way finish (those claimed just before the pause too, whose handlers may not
    // have started yet: the store still holds them running); then none starts while paused.
    wait_until(
        Duration::from_secs(30),
        "the runs under way ended",
        || async {
            spans.runs.lock().unwrap().iter().all(|r| r.3.is_some())
                && db
                    .api()
                    .runs(
                        &scheduler::testing::store::RunQuery::latest(100)
                            .status(RunStatus::Running),
                    )
                    .await
                    .unwrap()
                    .is_empty()
        },
    )
    .await;
    let before = spans.runs.lock().unwrap().len();
    // Three ticks' time (on SQLite three steps of the clock, each claimed by both nodes).
    db.elapse(Duration::from_secs(3)).await;
    assert_eq!(
        spans.runs.lock().unwrap().len(),
        before,
        "no run started while the task was paused"
    );
    operate::resume(db.api(), "bcast.spans", &ops)
        .await
        .unwrap();
    assert_eq!(
        operate::trigger(db.api(), "bcast.spans", &ops)
            .await
            .unwrap(),
        RunRequest::Queued
    );
    let manual = || async {
        db.runs(Some("bcast.spans"))
            .await
            .into_iter()
            .filter(|r| r.trigger == Trigger::Manual)
            .collect::<Vec<_>>()
    };
    wait_until(
        Duration::from_secs(60),
        "a manual run on each node",
        || async { manual().await.len() >= 2 },
    )
    .await;
    for n in nodes {
        n.stop().await;
    }
    let manual = manual().await;
    let on: BTreeSet<(String, u32, u32)> = manual
        .iter()
        .map(|r| (r.node_id.clone(), r.shard_index, r.shard_total))
        .collect();
    assert_eq!(
        on,
        BTreeSet::from([("fast".to_owned(), 0, 2), ("slow".to_owned(), 1, 2)]),
        "{manual:?}"
    );
}

/// Each node's reconcile creates its own row of a broadcast task (pinned to it, taking the
/// task's pause), the task's own row is pinned to no node; a cron change reaches every node's
/// row; a document that makes the task an ordinary one again disables the nodes' rows (kept)
/// and unpins the task's row.
async fn each_node_reconciles_its_own_row_and_a_task_no_longer_broadcast_disables_them(
    db: &TestDb,
) {
    use scheduler::testing::reconciler::Reconciler;
    let reconciler = |node: &str| {
        Reconciler::new(
            db.node_store(2),
            tasks("bcast.lone"),
            chrono_tz::Tz::UTC,
            node,
        )
    };
    let broadcast = doc(vec![entry("bcast.lone", "0 0 * * * *")]);
    reconciler("a").reconcile(&broadcast).await.unwrap();
    let ops = Actor::new("ops", "test");
    assert!(
        operate::pause(db.api(), "bcast.lone", &ops, "quiet", None)
            .await
            .unwrap()
    );
    reconciler("b").reconcile(&broadcast).await.unwrap();
    let rows = |rows: Vec<scheduler::testing::store::TaskRow>| {
        rows.into_iter()
            .map(|r| (r.name, r.node_pin, r.enabled, r.paused, r.cron))
            .collect::<Vec<_>>()
    };
    let hourly = "0 0 * * * *".to_owned();
    assert_eq!(
        rows(db.task_rows().await),
        [
            (
                "bcast.lone".into(),
                Some(String::new()),
                true,
                true,
                hourly.clone()
            ),
            (
                "bcast.lone[@a]".into(),
                Some("a".into()),
                true,
                true,
                hourly.clone()
            ),
            (
                "bcast.lone[@b]".into(),
                Some("b".into()),
                true,
                true,
                hourly.clone()
            ),
        ]
    );
    let minutely = "0 * * * * *".to_owned();
    reconciler("a")
        .reconcile(&doc(vec![entry("bcast.lone", &minutely)]))
        .await
        .unwrap();
    assert!(db.task_rows().await.iter().all(|r| r.cron == minutely));
    reconciler("a")
        .reconcile(&doc(vec![TaskConfig {
            shards: Some(ShardsEntry::Count(1)),
            ..entry("bcast.lone", &minutely)
        }]))
        .await
        .unwrap();
    assert_eq!(
        rows(db.task_rows().await),
        [
            ("bcast.lone".into(), None, true, true, minutely.clone()),
            (
                "bcast.lone[@a]".into(),
                Some("a".into()),
                false,
                true,
                minutely.clone()
            ),
            (
                "bcast.lone[@b]".into(),
                Some("b".into()),
                false,
                true,
                minutely.clone()
            ),
        ]
    );
}

// ---- node processes (PostgreSQL) -----------------------------------------------------------

/// One line of a `test_node` broadcast record.
#[derive(Debug, Clone)]
struct Line {
    kind: String,
    tick: i64,
    index: u32,
    total: u32,
    node: String,
    broadcast: bool,
}

fn read_lines(dir: &Path) -> Vec<Line> {
    let mut lines = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap_or_default();
        for l in text.lines() {
            let f: Vec<&str> = l.split(' ').collect();
            // A line cut short by a SIGKILL is not a record.
            if f.len() != 7 || !matches!(f[6], "true" | "false") {
                continue;
            }
            lines.push(Line {
                kind: f[0].to_owned(),
                tick: f[1].parse().unwrap(),
                index: f[2].parse().unwrap(),
                total: f[3].parse().unwrap(),
                node: f[4].to_owned(),
                broadcast: f[6] == "true",
            });
        }
    }
    lines
}

/// Per tick: the starts (node, index, total) recorded.
fn starts_by_tick(lines: &[Line]) -> BTreeMap<i64, Vec<(String, u32, u32)>> {
    let mut by_tick: BTreeMap<i64, Vec<(String, u32, u32)>> = BTreeMap::new();
    for l in lines.iter().filter(|l| l.kind == "start") {
        by_tick
            .entry(l.tick)
            .or_default()
            .push((l.node.clone(), l.index, l.total));
    }
    by_tick
}

/// What must never happen, whatever the timing: a node starting a tick twice, two runs of a
/// tick with the same index, runs of a tick disagreeing on the total, an index out of range, a
/// run that does not know it is a broadcast's.
fn assert_never(lines: &[Line]) {
    for l in lines {
        assert!(l.broadcast, "{l:?}");
        assert!(l.index < l.total, "{l:?}");
    }
    for (tick, starts) in starts_by_tick(lines) {
        let nodes: BTreeSet<&str> = starts.iter().map(|s| s.0.as_str()).collect();
        assert_eq!(
            nodes.len(),
            starts.len(),
            "a node started tick {tick} twice: {starts:?}"
        );
        let indexes: BTreeSet<u32> = starts.iter().map(|s| s.1).collect();
        assert_eq!(
            indexes.len(),
            starts.len(),
            "an index of {tick} ran twice: {starts:?}"
        );
        let totals: BTreeSet<u32> = starts.iter().map(|s| s.2).collect();
        assert_eq!(
            totals.len(),
            1,
            "runs of {tick} disagree on the total: {starts:?}"
        );
    }
}

/// Ticks run by every one of `nodes`, each as a distinct index of `nodes.len()`.
fn whole_ticks(lines: &[Line], nodes: &[&str]) -> BTreeSet<i64> {
    starts_by_tick(lines)
        .into_iter()
        .filter(|(_, starts)| {
            starts.len() == nodes.len()
                && nodes.iter().all(|n| starts.iter().any(|s| s.0 == *n))
                && starts.iter().all(|s| s.2 as usize == nodes.len())
        })
        .map(|(t, _)| t)
        .collect()
}

fn broadcast_config(dir: &Path) -> PathBuf {
    let config = dir.join("tasks.json");
    std::fs::write(
        &config,
        r#"{"tasks":[{"name":"bcast.work","enabled":true,"cron":"* * * * * *","timezone":"UTC"}]}"#,
    )
    .unwrap();
    config
}

/// Starts a `test_node` process on `db` running `bcast.work` per `config`.
fn spawn_node(
    db: &TestDb,
    id: &str,
    config: &Path,
    records: &Path,
    sleep_ms: u64,
) -> std::process::Child {
    std::process::Command::new(env!("CARGO_BIN_EXE_test_node"))
        .env("DATABASE_URL", &db.pg().url)
        .env("SCHEDULER_SCHEMA", &db.pg().schema)
        .env("SCHEDULER_NODE_ID", id)
        .env("SCHEDULER_LOCK_LIFETIME", "2s")
        .env("SCHEDULER_POLL_INTERVAL", "500ms")
        .env("SCHEDULER_CONFIG", config)
        .env("BROADCAST_RECORD_DIR", records)
        .env("BROADCAST_SLEEP_MS", sleep_ms.to_string())
        .env("RUST_LOG", "warn")
        .spawn()
        .expect("start a node process")
}

fn kill(mut child: std::process::Child) {
    let _ = child.kill();
    let _ = child.wait();
}

fn records_dir(dir: &tempfile::TempDir) -> PathBuf {
    let records = dir.path().join("records");
    std::fs::create_dir_all(&records).unwrap();
    records
}

/// Three node processes run a broadcast task every second: once all three run, every tick is
/// run by each of them once, as indexes 0, 1 and 2 of 3, and nothing runs twice. (A node so
/// late that its misfire policy folded a tick into its late run of an earlier one has that
/// tick recorded as skipped on its row: that is accounted for, not a miss.)
async fn three_node_processes_run_every_tick_once_each() {
    let db = TestDb::postgres("bcastthree").await;
    let dir = tempfile::tempdir().unwrap();
    let records = records_dir(&dir);
    let config = broadcast_config(dir.path());
    let ids = ["n1", "n2", "n3"];
    let nodes: Vec<_> = ids
        .iter()
        .map(|id| spawn_node(&db, id, &config, &records, 200))
        .collect();
    wait_until(
        Duration::from_secs(180),
        "five ticks run by all three nodes",
        || async { whole_ticks(&read_lines(&records), &ids).len() >= 5 },
    )
    .await;
    for n in nodes {
        kill(n);
    }
    let lines = read_lines(&records);
    assert_never(&lines);
    // From the first tick all three ran to the last one, every node ran every tick, or its
    // row recorded the tick skipped (folded by its misfire policy into a late run).
    let whole = whole_ticks(&lines, &ids);
    let (first, last) = (*whole.first().unwrap(), *whole.last().unwrap());
    let started: BTreeSet<(i64, &str)> = lines
        .iter()
        .filter(|l| l.kind == "start")
        .map(|l| (l.tick, l.node.as_str()))
        .collect();
    let mut missed = Vec::new();
    let mut folded = 0;
    for node in ids {
        let skips = db.skips(&format!("bcast.work[@{node}]")).await;
        for tick in (first..=last).step_by(1000) {
            if started.contains(&(tick, node)) {
                continue;
            }
            let skipped = skips.iter().any(|s| {
                s.first_tick.timestamp_millis() <= tick && tick <= s.last_tick.timestamp_millis()
            });
            if skipped {
                folded += 1;
            } else {
                missed.push((tick, node));
            }
        }
    }
    assert!(
        missed.is_empty(),
        "ticks a node neither ran nor skipped: {missed:?}"
    );
    eprintln!(
        "ticks {first}..={last}: {} whole, {folded} (tick, node) folded by misfire",
        whole.len()
    );
    // The store agrees: one run per (tick, index), under the task's name.
    let runs = db.runs(Some("bcast.work")).await;
    let mut stored: BTreeMap<(i64, u32), usize> = BTreeMap::new();
    for run in &runs {
        *stored
            .entry((run.scheduled_at.timestamp_millis(), run.shard_index))
            .or_default() += 1;
    }
    assert!(stored.values().all(|n| *n == 1), "{stored:?}");
    db.cleanup().await;
}

/// A node process is SIGKILLed mid-run (its handler never ends): the other nodes keep running
/// theirs; once its lock expires its run is recorded lost, and no other node runs it (its index
/// of that tick is started by the victim alone); once its heartbeat is stale, ticks count only
/// the survivors.
async fn a_killed_nodes_run_is_lost_and_not_run_elsewhere() {
    let db = TestDb::postgres("bcastkill").await;
    let dir = tempfile::tempdir().unwrap();
    let records = records_dir(&dir);
    let config = broadcast_config(dir.path());
    let survivors: Vec<_> = ["s1", "s2"]
        .into_iter()
        .map(|id| spawn_node(&db, id, &config, &records, 200))
        .collect();
    wait_until(
        Duration::from_secs(120),
        "a tick run by both survivors",
        || async { !whole_ticks(&read_lines(&records), &["s1", "s2"]).is_empty() },
    )
    .await;
    // The victim's handler sleeps for an hour: its run ends only with its process.
    let victim = spawn_node(&db, "victim", &config, &records, 3_600_000);
    wait_until(
        Duration::from_secs(120),
        "the victim runs a tick, counted with both survivors",
        || async {
            read_lines(&records)
                .iter()
                .any(|l| l.node == "victim" && l.kind == "start" && l.total == 3)
        },
    )
    .await;
    kill(victim);
    let killed_at = Utc::now().timestamp_millis();
    let victim_runs: Vec<Line> = read_lines(&records)
        .into_iter()
        .filter(|l| l.node == "victim")
        .collect();
    assert!(
        victim_runs.iter().all(|l| l.kind == "start"),
        "{victim_runs:?}"
    );
    wait_until(
        Duration::from_secs(180),
        "the victim's run recorded lost, and three ticks run by the two survivors alone",
        || async {
            let lost = db
                .runs(Some("bcast.work"))
                .await
                .iter()
                .any(|r| r.node_id == "victim" && r.status == RunStatus::Lost);
            lost && whole_ticks(&read_lines(&records), &["s1", "s2"])
                .iter()
                .filter(|t| **t > killed_at)
                .count()
                >= 3
        },
    )
    .await;
    for n in survivors {
        kill(n);
    }
    let lines = read_lines(&records);
    assert_never(&lines);
    // The survivors kept running theirs while the victim's run hung and after it died.
    let hung = victim_runs.iter().map(|l| l.tick).min().unwrap();
    for s in ["s1", "s2"] {
        assert!(
            lines
                .iter()
                .any(|l| l.node == s && l.kind == "end" && l.tick > hung),
            "{s} ran ticks after the victim's run began"
        );
    }
    // No one else ran the victim's index of the ticks it was counted in.
    for v in &victim_runs {
        let others: Vec<&Line> = lines
            .iter()
            .filter(|l| l.tick == v.tick && l.index == v.index && l.node != "victim")
            .collect();
        assert!(
            others.is_empty(),
            "the victim's run of {} ran elsewhere: {others:?}",
            v.tick
        );
    }
    // The store: the victim's runs are lost, not rerun (no other run of its tick and index).
    let runs = db.runs(Some("bcast.work")).await;
    for v in &victim_runs {
        let of_it: Vec<_> = runs
            .iter()
            .filter(|r| r.scheduled_at.timestamp_millis() == v.tick && r.shard_index == v.index)
            .collect();
        assert_eq!(of_it.len(), 1, "{of_it:?}");
        assert_eq!(of_it[0].node_id, "victim");
        assert_eq!(of_it[0].status, RunStatus::Lost, "{:?}", of_it[0].error);
    }
    db.cleanup().await;
}

/// Two node processes run a broadcast task; a third starts later: it runs no tick before it
/// started, and from its first tick on every tick counts three nodes.
async fn a_node_started_later_runs_only_the_ticks_after_it_joined() {
    let db = TestDb::postgres("bcastjoin").await;
    let dir = tempfile::tempdir().unwrap();
    let records = records_dir(&dir);
    let config = broadcast_config(dir.path());
    let mut nodes: Vec<_> = ["n1", "n2"]
        .into_iter()
        .map(|id| spawn_node(&db, id, &config, &records, 200))
        .collect();
    wait_until(
        Duration::from_secs(120),
        "three ticks run by the first two nodes",
        || async { whole_ticks(&read_lines(&records), &["n1", "n2"]).len() >= 3 },
    )
    .await;
    let spawned_at = Utc::now().timestamp_millis();
    nodes.push(spawn_node(&db, "late", &config, &records, 200));
    wait_until(
        Duration::from_secs(120),
        "three ticks run by all three nodes",
        || async { whole_ticks(&read_lines(&records), &["n1", "n2", "late"]).len() >= 3 },
    )
    .await;
    for n in nodes {
        kill(n);
    }
    let lines = read_lines(&records);
    assert_never(&lines);
    let late: Vec<i64> = lines
        .iter()
        .filter(|l| l.node == "late" && l.kind == "start")
        .map(|l| l.tick)
        .collect();
    assert!(
        late.iter().all(|t| *t > spawned_at),
        "the late node ran a tick from before it started ({spawned_at}): {late:?}"
    );
    let joined = *late.iter().min().unwrap();
    let before: Vec<_> = starts_by_tick(&lines)
        .into_iter()
        .filter(|(t, _)| *t < joined)
        .filter(|(_, s)| s.iter().any(|s| s.2 != 2))
        .collect();
    assert!(
        before.is_empty(),
        "ticks before it joined counted it: {before:?}"
    );
    db.cleanup().await;
}
