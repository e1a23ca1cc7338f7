//! Instances of a task whose shard count changes after they were made: the task's reconcile
//! brings every instance to the new count (a count that grows gets each instance its new shard
//! rows, made as the instance's: its key, arguments, schedule, pause), in batches, without the
//! instances being written again. Judged by what the handlers themselves recorded and by the
//! rows.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use common::*;
use scheduler::config::{ConfigDocument, ShardsEntry, TaskConfig};
use scheduler::testing::operate::{self, Actor};
use scheduler::{Schedule, Shard, TaskContext, task};
use serde::Deserialize;
use serde_json::json;

on_both_backends! {
    threads = 2;
    every_instance_follows_its_task_up_to_more_shards,
    a_plain_task_made_sharded_shards_its_instances,
    an_instance_follows_its_task_to_a_broadcast_and_back,
    a_task_enabled_with_more_shards_runs_every_shard_of_its_instances,
}

/// How many yearly instances the growth reaches besides the running ones: more than a batch of
/// the reconcile's writes (`scheduler::store` writes a reconcile's rows 1,000 to a statement).
const YEARLY: usize = 1_100;

/// One handler's view of its run.
#[derive(Debug, Clone)]
struct Run {
    key: String,
    tick: DateTime<Utc>,
    shard: Shard,
    broadcast: bool,
    tenant: u64,
}

/// What the handlers recorded, in order: `(started, run)`.
#[derive(Default)]
struct Log(Mutex<Vec<(bool, Run)>>);

impl Log {
    fn len(&self) -> usize {
        self.0.lock().unwrap().len()
    }

    /// The events from `from` on.
    fn since(&self, from: usize) -> Vec<(bool, Run)> {
        self.0.lock().unwrap()[from..].to_vec()
    }

    /// Ticks of `key` from event `from` on whose shards `0..total` all ended, each told `total`.
    fn whole_ticks(&self, from: usize, key: &str, total: u32) -> usize {
        let mut ended: BTreeMap<DateTime<Utc>, BTreeSet<u32>> = BTreeMap::new();
        for (start, r) in self.since(from) {
            if !start && r.key == key && r.shard.total == total {
                ended.entry(r.tick).or_default().insert(r.shard.index);
            }
        }
        ended.values().filter(|s| s.len() == total as usize).count()
    }
}

#[derive(Deserialize)]
struct Tenant {
    tenant: u64,
}

/// Records its start and its end.
#[task(name = "ireshard.work", shards = 3)]
async fn ireshard_work(ctx: TaskContext) -> Result<(), scheduler::ArgsError> {
    let Tenant { tenant } = ctx.args()?;
    let run = Run {
        key: ctx.key().unwrap_or_default().to_owned(),
        tick: ctx.scheduled_at(),
        shard: ctx.shard(),
        broadcast: ctx.is_broadcast(),
        tenant,
    };
    let log = ctx.state::<Arc<Log>>().unwrap();
    log.0.lock().unwrap().push((true, run.clone()));
    tokio::time::sleep(Duration::from_millis(50)).await;
    log.0.lock().unwrap().push((false, run));
    Ok(())
}

/// The document giving `ireshard.work` `shards` shards (yearly: its instances are what runs).
fn with_shards(shards: i64) -> ConfigDocument {
    sharded(ShardsEntry::Count(shards))
}

fn sharded(shards: ShardsEntry) -> ConfigDocument {
    doc(vec![TaskConfig {
        shards: Some(shards),
        ..entry("ireshard.work", "0 0 0 1 1 *")
    }])
}

fn instance(key: &str, cron: &str, tenant: u64) -> Schedule {
    Schedule::new("ireshard.work", key)
        .cron(cron)
        .args(json!({ "tenant": tenant }))
}

/// Node `a` running `ireshard.*` under `document`, started once the task's row is in the store.
async fn node_a(db: &TestDb, document: ConfigDocument, log: &Arc<Log>) -> RunningNode {
    let builder = node_with(db, "a", tasks("ireshard."), document, log)
        .poll_interval(Duration::from_millis(500));
    started(db, builder, &["ireshard.work"]).await
}

/// Waits until every instance of `keys` has had `ticks` whole ticks of `total` shards from
/// event `from` on, by the handlers' own record.
async fn wait_whole_ticks(log: &Log, from: usize, keys: &[&str], total: u32, ticks: usize) {
    wait_until(
        Duration::from_secs(90),
        &format!("{ticks} whole tick(s) of {total} shards of each of {keys:?} from event {from}"),
        || async {
            keys.iter()
                .all(|key| log.whole_ticks(from, key, total) >= ticks)
        },
    )
    .await;
}

/// Restarts node `a` under `document` and stops it after three whole ticks of `total` shards of
/// each instance of `tenants`; every run from the restart on is checked by [`each_shard_once`].
/// Returns the event the restart's runs start at.
async fn three_ticks_after_restart(
    db: &TestDb,
    document: ConfigDocument,
    log: &Arc<Log>,
    total: u32,
    tenants: &BTreeMap<&str, u64>,
) -> usize {
    let from = log.len();
    let running = node_a(db, document, log).await;
    let keys: Vec<&str> = tenants.keys().copied().collect();
    wait_whole_ticks(log, from, &keys, total, 3).await;
    running.stop().await;
    each_shard_once(log, from, total, tenants);
    from
}

/// The store rows of instance `key` (its shards' too), by name.
async fn rows_of(db: &TestDb, key: &str) -> Vec<scheduler::testing::store::TaskRow> {
    let own = format!("ireshard.work/{key}");
    let shard = format!("{own}[");
    db.task_rows()
        .await
        .into_iter()
        .filter(|r| r.name == own || r.name.starts_with(&shard))
        .collect()
}

/// By the handlers' own record from event `from` on: every run told `total` shards, each
/// (key, tick, shard) started once, with its instance's own arguments (`tenant`); and the
/// whole log never started a (key, tick, shard) twice.
fn each_shard_once(log: &Log, from: usize, total: u32, tenants: &BTreeMap<&str, u64>) {
    let mut started = BTreeSet::new();
    for (start, run) in log.since(0) {
        if start {
            let id = (run.key.clone(), run.tick, run.shard.index);
            assert!(started.insert(id), "started twice: {run:?}");
        }
    }
    for (start, run) in log.since(from) {
        assert_eq!(run.shard.total, total, "{run:?}");
        assert!(run.shard.index < total, "{run:?}");
        if start {
            assert_eq!(Some(&run.tenant), tenants.get(run.key.as_str()), "{run:?}");
        }
    }
}

/// Instances made while the task had 2 shards (two every second, one paused, and more than a
/// batch of yearly ones); the node restarts with a document giving the task 3: its reconcile
/// gives every instance its third shard's row (the instance's arguments, schedule and pause)
/// and the count 3 on every row, and from then on every tick of the running instances is
/// shards 0, 1 and 2 of 3, each once, by the handlers' own record.
async fn every_instance_follows_its_task_up_to_more_shards(db: &TestDb) {
    let log = Arc::new(Log::default());
    let running = node_a(db, with_shards(2), &log).await;
    let schedules = &running.schedules;
    let yearly: Vec<Schedule> = (0..YEARLY)
        .map(|i| instance(&format!("y{i:04}"), "0 0 0 1 1 *", 9))
        .collect();
    for batch in yearly.chunks(500) {
        let answers = schedules.upsert_many(batch.to_vec()).await.unwrap();
        assert!(answers.iter().all(Result::is_ok), "{answers:?}");
    }
    schedules
        .upsert(instance("hold", "0 0 0 1 1 *", 5))
        .await
        .unwrap();
    let ops = Actor::new("ops", "test");
    assert!(
        operate::pause(db.api(), "ireshard.work/hold", &ops, "on hold", None)
            .await
            .unwrap()
    );
    for (key, tenant) in [("g1", 1), ("g2", 2)] {
        schedules
            .upsert(instance(key, "* * * * * *", tenant))
            .await
            .unwrap();
    }
    assert_eq!(rows_of(db, "g1").await.len(), 2);
    wait_whole_ticks(&log, 0, &["g1", "g2"], 2, 1).await;
    running.stop().await;

    let tenants = BTreeMap::from([("g1", 1), ("g2", 2)]);
    three_ticks_after_restart(db, with_shards(3), &log, 3, &tenants).await;

    // Every instance has its three rows, each of 3 shards, on its schedule; the paused one's
    // new row is paused with it.
    let rows = db.task_rows().await;
    let mut by_instance: BTreeMap<&str, Vec<&scheduler::testing::store::TaskRow>> = BTreeMap::new();
    for row in rows.iter().filter(|r| r.name.starts_with("ireshard.work/")) {
        let group = scheduler::testing::shard::group_row(&row.name);
        by_instance.entry(group).or_default().push(row);
    }
    assert_eq!(by_instance.len(), YEARLY + 3, "{:?}", by_instance.keys());
    for (group, rows) in &by_instance {
        let names: BTreeSet<&str> = rows.iter().map(|r| r.name.as_str()).collect();
        let wanted: BTreeSet<String> = [0, 1, 2]
            .map(|i| scheduler::testing::shard::row_name(group, i))
            .into();
        assert_eq!(
            names,
            wanted.iter().map(String::as_str).collect(),
            "{rows:?}"
        );
        assert!(rows.iter().all(|r| r.shards == 3 && r.enabled), "{rows:?}");
        if group.contains("/y") || group.ends_with("/hold") {
            let next = rows[0].next_run_at;
            assert!(rows.iter().all(|r| r.next_run_at == next), "{rows:?}");
        }
        let paused = group.ends_with("/hold");
        assert!(rows.iter().all(|r| r.paused == paused), "{rows:?}");
    }
}

/// An instance made while its task had no shards (one row): a document giving the task 3
/// shards gives the instance its shard rows at the reconcile, and every tick after it is
/// shards 0, 1 and 2 of 3, each once.
async fn a_plain_task_made_sharded_shards_its_instances(db: &TestDb) {
    let log = Arc::new(Log::default());
    let running = node_a(db, with_shards(1), &log).await;
    running
        .schedules
        .upsert(instance("p1", "* * * * * *", 4))
        .await
        .unwrap();
    assert_eq!(rows_of(db, "p1").await.len(), 1);
    wait_whole_ticks(&log, 0, &["p1"], 1, 1).await;
    running.stop().await;

    let tenants = BTreeMap::from([("p1", 4)]);
    three_ticks_after_restart(db, with_shards(3), &log, 3, &tenants).await;
    let rows = rows_of(db, "p1").await;
    assert_eq!(rows.len(), 3, "{rows:?}");
    assert!(rows.iter().all(|r| r.shards == 3 && r.enabled), "{rows:?}");
}

/// An instance made while its task had 2 shards: a document making the task a broadcast makes
/// the instance one at the reconcile (its own row held, never run; this node's row made; its
/// shard row disabled), every tick after it one run on the lone node, 0 of 1; a document giving
/// the task 3 shards again makes it a sharded instance of 3 (its node row disabled), each shard
/// of each tick once. By the handlers' own record.
async fn an_instance_follows_its_task_to_a_broadcast_and_back(db: &TestDb) {
    let log = Arc::new(Log::default());
    let tenants = BTreeMap::from([("b1", 6)]);
    let running = node_a(db, with_shards(2), &log).await;
    running
        .schedules
        .upsert(instance("b1", "* * * * * *", 6))
        .await
        .unwrap();
    wait_whole_ticks(&log, 0, &["b1"], 2, 1).await;
    running.stop().await;

    let nodes = ShardsEntry::Word("nodes".into());
    let before = three_ticks_after_restart(db, sharded(nodes), &log, 1, &tenants).await;
    assert!(
        log.since(before).iter().all(|(_, r)| r.broadcast),
        "{:?}",
        log.since(before)
    );
    let rows = rows_of(db, "b1").await;
    let row = |name: &str| rows.iter().find(|r| r.name == name).expect(name);
    assert_eq!(
        row("ireshard.work/b1").node_pin.as_deref(),
        Some(""),
        "{rows:?}"
    );
    assert_eq!(
        row("ireshard.work/b1[@a]").node_pin.as_deref(),
        Some("a"),
        "{rows:?}"
    );
    assert!(!row("ireshard.work/b1[1]").enabled, "{rows:?}");

    let back = three_ticks_after_restart(db, with_shards(3), &log, 3, &tenants).await;
    assert!(log.since(back).iter().all(|(_, r)| !r.broadcast));
    let rows = rows_of(db, "b1").await;
    for row in &rows {
        if row.name.ends_with("[@a]") {
            assert!(!row.enabled, "the node row disabled: {row:?}");
        } else {
            assert!(
                row.enabled && row.shards == 3 && row.node_pin.is_none(),
                "{row:?}"
            );
        }
    }
}

/// An instance made while its task was disabled with 2 shards: a document enabling the task with
/// 3 enables every row of the instance, its new one too, and every tick after it is shards 0, 1
/// and 2 of 3, each once.
async fn a_task_enabled_with_more_shards_runs_every_shard_of_its_instances(db: &TestDb) {
    let log = Arc::new(Log::default());
    let mut disabled = with_shards(2);
    disabled.tasks[0].enabled = false;
    let running = node_a(db, disabled, &log).await;
    running
        .schedules
        .upsert(instance("e1", "* * * * * *", 3))
        .await
        .unwrap();
    let rows = rows_of(db, "e1").await;
    assert!(
        rows.len() == 2 && rows.iter().all(|r| !r.enabled),
        "{rows:?}"
    );
    running.stop().await;
    assert_eq!(log.len(), 0, "nothing ran while the task was disabled");

    three_ticks_after_restart(db, with_shards(3), &log, 3, &BTreeMap::from([("e1", 3)])).await;
    let rows = rows_of(db, "e1").await;
    assert_eq!(rows.len(), 3, "{rows:?}");
    assert!(rows.iter().all(|r| r.shards == 3 && r.enabled), "{rows:?}");
}
