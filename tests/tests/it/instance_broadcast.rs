//! Instances of a broadcast task (`shards = "nodes"`): an instance `task/key` runs each of its
//! ticks once on every node alive at it (rows `task/key[@node]`), never twice on a node; a node
//! that starts after the instance was made has its reconcile make its row and runs the ticks
//! after it joined; removing the instance removes every node's row. Judged by what the
//! handlers themselves recorded, never by timings.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use common::*;
use scheduler::config::ConfigDocument;
use scheduler::{Schedule, Shard, TaskContext, task};
use serde_json::json;

on_both_backends! {
    threads = 2;
    every_tick_of_a_broadcast_instance_runs_once_on_each_node,
}

/// One run as its handler saw it: key, tick, node, shard, broadcast?, args.
#[derive(Debug, Clone)]
struct Run {
    key: Option<String>,
    tick: DateTime<Utc>,
    node: String,
    shard: Shard,
    broadcast: bool,
    args: serde_json::Value,
}

#[derive(Default)]
struct Log {
    runs: Mutex<Vec<Run>>,
}

impl Log {
    /// Ticks of `key` that every one of `nodes` ran.
    fn whole_ticks(&self, key: &str, nodes: &[&str]) -> usize {
        let mut by_tick: BTreeMap<DateTime<Utc>, BTreeSet<String>> = BTreeMap::new();
        for r in self.runs.lock().unwrap().iter() {
            if r.key.as_deref() == Some(key) {
                by_tick.entry(r.tick).or_default().insert(r.node.clone());
            }
        }
        by_tick
            .values()
            .filter(|n| nodes.iter().all(|node| n.contains(*node)))
            .count()
    }
}

#[task(name = "ibcast.work", shards = "nodes")]
async fn ibcast_work(ctx: TaskContext) {
    let args = ctx.args::<serde_json::Value>().unwrap_or_default();
    ctx.state::<Arc<Log>>()
        .unwrap()
        .runs
        .lock()
        .unwrap()
        .push(Run {
            key: ctx.key().map(str::to_owned),
            tick: ctx.scheduled_at(),
            node: ctx.node_id().to_owned(),
            shard: ctx.shard(),
            broadcast: ctx.is_broadcast(),
            args,
        });
    tokio::time::sleep(Duration::from_millis(50)).await;
}

/// The task's own schedule: yearly (its instance is what runs).
fn config() -> ConfigDocument {
    doc(vec![entry("ibcast.work", "0 0 0 1 1 *")])
}

fn start_node(db: &TestDb, id: &str, log: &Arc<Log>) -> scheduler::Scheduler {
    node(db, id, tasks("ibcast."))
        .config_document(config())
        .poll_interval(Duration::from_millis(500))
        .state(Arc::clone(log))
        .build()
        .unwrap()
}

/// Two nodes, then a broadcast instance every second: each tick of it ran once on each node,
/// with its key and arguments, as a broadcast whose runs of a tick agree on the count and
/// differ in index; a third node started later gets its row from its reconcile and runs the
/// later ticks; the instance removed, no row of it is left enabled and it runs no more.
async fn every_tick_of_a_broadcast_instance_runs_once_on_each_node(db: &TestDb) {
    let log = Arc::new(Log::default());
    let first = start_node(db, "a", &log);
    let schedules = first.schedules();
    let mut running = vec![start(first), start(start_node(db, "b", &log))];
    wait_until(
        Duration::from_secs(60),
        "both nodes' rows of the task",
        || async {
            db.try_task("ibcast.work[@a]").await.is_some()
                && db.try_task("ibcast.work[@b]").await.is_some()
        },
    )
    .await;
    schedules
        .upsert(
            Schedule::new("ibcast.work", "t1")
                .cron("* * * * * *")
                .args(json!({"tenant": 1})),
        )
        .await
        .unwrap();
    assert_eq!(schedules.list("ibcast.work").await.unwrap().len(), 1);
    wait_until(
        Duration::from_secs(60),
        "three ticks on both nodes",
        || async { log.whole_ticks("t1", &["a", "b"]) >= 3 },
    )
    .await;
    // A node joining later: its reconcile makes its row of the instance.
    running.push(start(start_node(db, "c", &log)));
    wait_until(
        Duration::from_secs(60),
        "two ticks on all three nodes",
        || async { log.whole_ticks("t1", &["a", "b", "c"]) >= 2 },
    )
    .await;
    assert!(schedules.remove("ibcast.work", "t1").await.unwrap());
    // Runs of a tick claimed before the removal end; then none starts.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before = log.runs.lock().unwrap().len();
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        log.runs.lock().unwrap().len(),
        before,
        "no run after the removal"
    );
    for n in running {
        n.stop().await;
    }

    let runs = log.runs.lock().unwrap().clone();
    let mut seen: BTreeSet<(DateTime<Utc>, String)> = BTreeSet::new();
    let mut by_tick: BTreeMap<DateTime<Utc>, Vec<Shard>> = BTreeMap::new();
    for run in &runs {
        assert_eq!(run.key.as_deref(), Some("t1"), "{run:?}");
        assert_eq!(run.args, json!({"tenant": 1}), "{run:?}");
        assert!(run.broadcast, "{run:?}");
        assert!(
            seen.insert((run.tick, run.node.clone())),
            "a node ran a tick twice: {run:?}"
        );
        by_tick.entry(run.tick).or_default().push(run.shard);
    }
    for (tick, shards) in &by_tick {
        let totals: BTreeSet<u32> = shards.iter().map(|s| s.total).collect();
        assert_eq!(totals.len(), 1, "{tick}: one count per tick: {shards:?}");
        let indexes: BTreeSet<u32> = shards.iter().map(|s| s.index).collect();
        assert_eq!(
            indexes.len(),
            shards.len(),
            "{tick}: distinct indexes: {shards:?}"
        );
    }
    // The store's record: under the task, with the key, once per (tick, node).
    let mut stored: BTreeMap<(DateTime<Utc>, String), usize> = BTreeMap::new();
    for run in db.runs(Some("ibcast.work")).await {
        assert_eq!(run.instance_key.as_deref(), Some("t1"), "{run:?}");
        *stored
            .entry((run.scheduled_at, run.node_id.clone()))
            .or_default() += 1;
    }
    assert!(stored.values().all(|n| *n == 1), "{stored:?}");
    let left: Vec<_> = db
        .task_rows()
        .await
        .into_iter()
        .filter(|r| r.name.starts_with("ibcast.work/t1") && !r.removed)
        .collect();
    assert!(left.is_empty(), "rows of the removed instance: {left:?}");
}
