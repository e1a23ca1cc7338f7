//! Instances the config document declares of a task with shards and of a broadcast task: an
//! instance `task/key` of a task with N shards runs each of its ticks as N shard runs (rows
//! `task/key`, `task/key[i]`), one of a broadcast task once on every node (rows
//! `task/key[@node]`, each node's made by its own reconcile), as an instance made at run time
//! does (`instance_shards`, `instance_broadcast`). One that leaves the document is disabled,
//! every row of it kept, and runs no more. Judged by what the handlers themselves recorded.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use common::*;
use scheduler::{TaskContext, task};
use serde_json::{Value, json};

on_both_backends! {
    threads = 2;
    config_instances_of_sharded_and_broadcast_tasks_run_each_shard_once_and_leave_with_the_config,
}

/// One run as its handler saw it: task, key, tick, shard index and count, node, tenant.
#[derive(Debug, Clone)]
struct Run {
    task: &'static str,
    key: Option<String>,
    tick: DateTime<Utc>,
    index: u32,
    total: u32,
    node: String,
    tenant: u64,
}

#[derive(Default)]
struct Log(Mutex<Vec<Run>>);

impl Log {
    fn of(&self, task: &str, key: &str) -> Vec<Run> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r.task == task && r.key.as_deref() == Some(key))
            .cloned()
            .collect()
    }

    /// Ticks of `key` of `task` after `since` with every one of `parts` (shard indexes, or nodes).
    fn whole_ticks(&self, task: &str, key: &str, since: DateTime<Utc>, parts: usize) -> usize {
        let mut by_tick: BTreeMap<DateTime<Utc>, BTreeSet<String>> = BTreeMap::new();
        for r in self.of(task, key).into_iter().filter(|r| r.tick > since) {
            let part = if task == BROADCAST {
                r.node
            } else {
                r.index.to_string()
            };
            by_tick.entry(r.tick).or_default().insert(part);
        }
        by_tick.values().filter(|p| p.len() == parts).count()
    }
}

const SHARDED: &str = "cishard.work";
const BROADCAST: &str = "cishard.every";

fn note(ctx: &TaskContext, task: &'static str) {
    let tenant = ctx
        .args::<Value>()
        .ok()
        .and_then(|a| a["tenant"].as_u64())
        .unwrap_or(0);
    ctx.state::<Arc<Log>>()
        .unwrap()
        .0
        .lock()
        .unwrap()
        .push(Run {
            task,
            key: ctx.key().map(str::to_owned),
            tick: ctx.scheduled_at(),
            index: ctx.shard().index,
            total: ctx.shard().total,
            node: ctx.node_id().to_owned(),
            tenant,
        });
}

#[task(name = "cishard.work", shards = 3)]
async fn cishard_work(ctx: TaskContext) {
    note(&ctx, SHARDED);
}

#[task(name = "cishard.every", shards = "nodes")]
async fn cishard_every(ctx: TaskContext) {
    note(&ctx, BROADCAST);
}

/// The document: both tasks yearly (their instances are what runs), each with `keys`
/// declared every second, tenant 7.
fn text(keys: &[&str]) -> String {
    let instances: Vec<Value> = keys
        .iter()
        .map(|k| json!({"key": k, "cron": "* * * * * *", "args": {"tenant": 7}}))
        .collect();
    json!({"tasks": [
        {"name": SHARDED, "enabled": true, "cron": "0 0 0 1 1 *", "instances": instances},
        {"name": BROADCAST, "enabled": true, "cron": "0 0 0 1 1 *", "instances": instances},
    ]})
    .to_string()
}

fn replace(path: &std::path::Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// Two nodes on one config file declaring `t1` and `t2` of both tasks: each tick of each runs
/// as its three shards (once each, each told its index of 3) and once on each node, with its
/// arguments. `t1` leaves the file: every row of it is disabled, kept, and no tick of it after
/// runs, while `t2` runs on.
async fn config_instances_of_sharded_and_broadcast_tasks_run_each_shard_once_and_leave_with_the_config(
    db: &TestDb,
) {
    let log = Arc::new(Log::default());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tasks.json");
    replace(&path, &text(&["t1", "t2"]));
    let mut running = Vec::new();
    for id in ["a", "b"] {
        let builder = node(db, id, tasks("cishard."))
            .config(path.to_str().unwrap())
            .config_poll_interval(Duration::from_millis(200))
            .poll_interval(Duration::from_millis(500))
            .state(Arc::clone(&log));
        running.push(start(builder.build().unwrap()));
    }
    let never = DateTime::<Utc>::MIN_UTC;
    wait_stepping(
        db,
        Duration::from_secs(120),
        "three whole ticks of each",
        || async {
            ["t1", "t2"].iter().all(|k| {
                log.whole_ticks(SHARDED, k, never, 3) >= 3
                    && log.whole_ticks(BROADCAST, k, never, 2) >= 3
            })
        },
    )
    .await;

    replace(&path, &text(&["t2"]));
    let t1_rows = |rows: Vec<scheduler::testing::store::TaskRow>| -> Vec<_> {
        rows.into_iter()
            .filter(|r| {
                r.name.starts_with(&format!("{SHARDED}/t1"))
                    || r.name.starts_with(&format!("{BROADCAST}/t1"))
            })
            .collect()
    };
    wait_until(
        Duration::from_secs(60),
        "every row of t1 disabled",
        || async { t1_rows(db.task_rows().await).iter().all(|r| !r.enabled) },
    )
    .await;
    let disabled_at = db.now();
    wait_stepping(
        db,
        Duration::from_secs(120),
        "three more whole ticks of t2",
        || async {
            log.whole_ticks(SHARDED, "t2", disabled_at, 3) >= 3
                && log.whole_ticks(BROADCAST, "t2", disabled_at, 2) >= 3
        },
    )
    .await;
    for n in running {
        n.stop().await;
    }

    // Kept: the own rows and every shard's and node's.
    let mut kept: Vec<String> = t1_rows(db.task_rows().await)
        .into_iter()
        .map(|r| r.name)
        .collect();
    kept.sort();
    assert_eq!(
        kept,
        [
            format!("{BROADCAST}/t1"),
            format!("{BROADCAST}/t1[@a]"),
            format!("{BROADCAST}/t1[@b]"),
            format!("{SHARDED}/t1"),
            format!("{SHARDED}/t1[1]"),
            format!("{SHARDED}/t1[2]"),
        ]
    );
    let late = disabled_at + TimeDelta::seconds(1);
    for task in [SHARDED, BROADCAST] {
        assert!(
            log.of(task, "t1").iter().all(|r| r.tick <= late),
            "{task}/t1 ran after it left the document"
        );
        for key in ["t1", "t2"] {
            let mut seen = BTreeSet::new();
            for run in log.of(task, key) {
                assert_eq!(run.tenant, 7, "{run:?}");
                let part = if task == SHARDED {
                    assert_eq!(run.total, 3, "{run:?}");
                    run.index.to_string()
                } else {
                    run.node.clone()
                };
                assert!(
                    seen.insert((run.tick, part)),
                    "a shard of a tick ran twice: {run:?}"
                );
            }
        }
    }
}
