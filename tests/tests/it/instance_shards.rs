//! Instances of a sharded task: an instance `task/key` of a task with N shards runs each of its
//! ticks as N shard runs (rows `task/key`, `task/key[1]`, ...), with the rules of a sharded
//! task: each shard of each tick once across the nodes, spread over them, no shard of a tick
//! before every shard of the tick before it ended. Removing the instance removes every shard
//! row (a run in flight finishes); changing its cron moves every row; pausing it holds every
//! row. Judged by what the handlers themselves recorded (in order, in memory), never by
//! timings.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use common::*;
use scheduler::config::{ConfigDocument, ShardsEntry, TaskConfig};
use scheduler::testing::operate::{self, Actor};
use scheduler::testing::store::RunStatus;
use scheduler::{Schedule, SchedulerBuilder, Shard, TaskContext, task};
use serde::Deserialize;
use serde_json::json;

on_both_backends! {
    threads = 2;
    every_shard_of_every_tick_of_an_instance_runs_once_spread_over_two_nodes,
    a_removed_instance_runs_no_more_shards_and_its_runs_in_flight_finish,
    changing_or_pausing_an_instance_moves_or_holds_every_shard_row,
    an_instance_follows_its_task_down_to_fewer_shards,
    a_batch_writes_every_shard_row_of_each_instance,
}

/// The shards of `ishard.work`.
const SHARDS: u32 = 3;

/// One handler's view of its run: key, tick, shard, node, tenant, when it started.
#[derive(Debug, Clone)]
struct Run {
    key: Option<String>,
    tick: DateTime<Utc>,
    shard: Shard,
    node: String,
    tenant: u64,
    at: DateTime<Utc>,
}

/// What the handlers recorded, in the order it happened: `(started, run)` for a start, `(false,
/// run)` for an end.
struct Log {
    events: Mutex<Vec<(bool, Run)>>,
    /// A run of the key `hold` waits until this is true.
    release: tokio::sync::watch::Sender<bool>,
}

impl Default for Log {
    fn default() -> Self {
        Self {
            events: Mutex::default(),
            release: tokio::sync::watch::channel(false).0,
        }
    }
}

impl Log {
    fn starts(&self, key: &str) -> Vec<Run> {
        self.events
            .lock()
            .unwrap()
            .iter()
            .filter(|(start, r)| *start && r.key.as_deref() == Some(key))
            .map(|(_, r)| r.clone())
            .collect()
    }

    /// Ticks of `key` whose every shard ended.
    fn whole_ticks(&self, key: &str) -> usize {
        let mut ended: BTreeMap<DateTime<Utc>, BTreeSet<u32>> = BTreeMap::new();
        for (start, r) in self.events.lock().unwrap().iter() {
            if !*start && r.key.as_deref() == Some(key) {
                ended.entry(r.tick).or_default().insert(r.shard.index);
            }
        }
        ended
            .values()
            .filter(|s| s.len() == SHARDS as usize)
            .count()
    }
}

#[derive(Deserialize)]
struct Tenant {
    tenant: u64,
}

/// Records its start and its end; a run of the key `hold` waits to be let go.
#[task(name = "ishard.work", shards = 3)]
async fn ishard_work(ctx: TaskContext) -> Result<(), scheduler::ArgsError> {
    let at = Utc::now();
    let Tenant { tenant } = ctx.args()?;
    let log = ctx.state::<Arc<Log>>().unwrap();
    let run = Run {
        key: ctx.key().map(str::to_owned),
        tick: ctx.scheduled_at(),
        shard: ctx.shard(),
        node: ctx.node_id().to_owned(),
        tenant,
        at,
    };
    log.events.lock().unwrap().push((true, run.clone()));
    if ctx.key() == Some("hold") {
        let mut release = log.release.subscribe();
        let _ = release.wait_for(|go| *go).await;
    } else {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    log.events.lock().unwrap().push((false, run));
    Ok(())
}

/// The task's own schedule: yearly (its instances are what runs).
fn config() -> ConfigDocument {
    doc(vec![entry("ishard.work", "0 0 0 1 1 *")])
}

fn every_second(key: &str, tenant: u64) -> Schedule {
    Schedule::new("ishard.work", key)
        .cron("* * * * * *")
        .args(json!({ "tenant": tenant }))
}

/// Node `id` running `ishard.*` under `document`, its handlers sharing `log`.
fn ishard_node(
    db: &TestDb,
    id: &str,
    document: ConfigDocument,
    log: &Arc<Log>,
) -> SchedulerBuilder {
    node_with(db, id, tasks("ishard."), document, log).poll_interval(Duration::from_millis(500))
}

/// Node `a` running `ishard.*` by [`config`], started once the task's row is in the store.
async fn node_a(db: &TestDb, log: &Arc<Log>) -> RunningNode {
    started(db, ishard_node(db, "a", config(), log), &["ishard.work"]).await
}

/// The store rows of instance `key` (its shards' too), by name.
async fn rows_of(db: &TestDb, key: &str) -> Vec<scheduler::testing::store::TaskRow> {
    let own = format!("ishard.work/{key}");
    let shard = format!("ishard.work/{key}[");
    db.task_rows()
        .await
        .into_iter()
        .filter(|r| r.name == own || r.name.starts_with(&shard))
        .collect()
}

/// By the handlers' own record: each (key, tick, shard) started once, with the task's shard
/// count, none before its tick, and no shard of a tick of a key started before every shard of
/// every earlier tick of that key had ended.
fn each_shard_once_in_tick_order(log: &Log) {
    let events = log.events.lock().unwrap().clone();
    let mut started: BTreeSet<(String, DateTime<Utc>, u32)> = BTreeSet::new();
    let mut ended: BTreeSet<(String, DateTime<Utc>, u32)> = BTreeSet::new();
    for (start, run) in &events {
        let key = run.key.clone().expect("every run is an instance's");
        let id = (key.clone(), run.tick, run.shard.index);
        assert_eq!(run.shard.total, SHARDS, "the task's shard count: {run:?}");
        assert!(run.shard.index < SHARDS, "{run:?}");
        if !*start {
            ended.insert(id);
            continue;
        }
        assert!(run.at >= run.tick, "started before its tick: {run:?}");
        assert!(started.insert(id.clone()), "started twice: {run:?}");
        // Every shard of every earlier tick of this key that ran had ended.
        let open: Vec<_> = started
            .iter()
            .filter(|(k, tick, _)| *k == key && *tick < run.tick)
            .filter(|s| !ended.contains(*s))
            .collect();
        assert!(open.is_empty(), "{run:?} started while {open:?} ran");
    }
}

/// Two nodes run an instance of a task of 3 shards every second: every shard of every tick ran
/// once, with the instance's key and arguments and its shard, no tick began before the one
/// before it had ended, both nodes ran some, and the store recorded each run under the task
/// with the instance's key and its shard.
async fn every_shard_of_every_tick_of_an_instance_runs_once_spread_over_two_nodes(db: &TestDb) {
    let log = Arc::new(Log::default());
    let builders = ["a", "b"].map(|id| ishard_node(db, id, config(), &log));
    let running = started_all(db, builders, &["ishard.work"]).await;
    let schedules = running[0].schedules.clone();
    let written = schedules.upsert(every_second("t1", 1)).await.unwrap();
    assert_eq!(written.key, "t1");
    let both = |log: &Log| {
        let nodes: BTreeSet<String> = log.starts("t1").into_iter().map(|r| r.node).collect();
        nodes.len() == 2
    };
    // Wall time, not `wait_stepping`: the spread grace that lets the other node take its shares
    // runs on Tokio's clock, so steps faster than it fold ticks before their shards spread.
    wait_until(
        Duration::from_secs(120),
        "three whole ticks, shards on both nodes",
        || async { log.whole_ticks("t1") >= 3 && both(&log) },
    )
    .await;
    for n in running {
        n.stop().await;
    }
    each_shard_once_in_tick_order(&log);
    let starts = log.starts("t1");
    assert!(starts.iter().all(|r| r.tenant == 1), "its own arguments");
    let shards: BTreeSet<u32> = starts.iter().map(|r| r.shard.index).collect();
    assert_eq!(shards, (0..SHARDS).collect(), "every shard ran");

    // The store's record agrees: one run per shard of a tick, under the task's name, with the
    // instance's key.
    let mut stored: BTreeMap<(DateTime<Utc>, u32), usize> = BTreeMap::new();
    for run in db.runs(Some("ishard.work")).await {
        assert_eq!(run.instance_key.as_deref(), Some("t1"), "{run:?}");
        assert_eq!(run.shard_total, SHARDS, "{run:?}");
        *stored
            .entry((run.scheduled_at, run.shard_index))
            .or_default() += 1;
    }
    assert!(stored.values().all(|n| *n == 1), "{stored:?}");
    for run in &starts {
        assert!(
            stored.contains_key(&(run.tick, run.shard.index)),
            "run {run:?} recorded"
        );
    }
    // One instance in the list, not one per shard.
    let list = schedules.list("ishard.work").await.unwrap();
    assert_eq!(list.len(), 1, "{list:?}");
}

/// An instance of 3 shards removed while its shards' runs of a tick are in flight: those runs
/// finish and are recorded, no later tick of it starts (while another instance of the task goes
/// on ticking), and its rows are gone.
async fn a_removed_instance_runs_no_more_shards_and_its_runs_in_flight_finish(db: &TestDb) {
    let log = Arc::new(Log::default());
    let running = node_a(db, &log).await;
    let schedules = running.schedules.clone();
    schedules.upsert(every_second("hold", 7)).await.unwrap();
    assert_eq!(rows_of(db, "hold").await.len(), SHARDS as usize);
    wait_until(Duration::from_secs(60), "a held run started", || async {
        !log.starts("hold").is_empty()
    })
    .await;
    assert!(schedules.remove("ishard.work", "hold").await.unwrap());
    assert_eq!(schedules.get("ishard.work", "hold").await.unwrap(), None);
    assert!(
        !schedules.remove("ishard.work", "hold").await.unwrap(),
        "removed once"
    );
    let in_flight = log.starts("hold").len();
    log.release.send_replace(true);
    wait_until(
        Duration::from_secs(60),
        "the held runs recorded",
        || async {
            let runs = db.runs(Some("ishard.work")).await;
            runs.iter()
                .filter(|r| r.instance_key.as_deref() == Some("hold"))
                .filter(|r| r.status == RunStatus::Succeeded)
                .count()
                >= in_flight
        },
    )
    .await;
    // Another instance's ticks go on: three whole ticks of it after the held runs ended.
    schedules.upsert(every_second("other", 8)).await.unwrap();
    wait_until(
        Duration::from_secs(60),
        "three whole ticks of another instance",
        || async { log.whole_ticks("other") >= 3 },
    )
    .await;
    running.stop().await;
    each_shard_once_in_tick_order(&log);
    let held = log.starts("hold");
    assert_eq!(held.len(), in_flight, "no shard started after the removal");
    let ticks: BTreeSet<DateTime<Utc>> = held.iter().map(|r| r.tick).collect();
    assert_eq!(ticks.len(), 1, "one tick of it ran: {held:?}");
    let recorded: Vec<_> = db
        .runs(Some("ishard.work"))
        .await
        .into_iter()
        .filter(|r| r.instance_key.as_deref() == Some("hold"))
        .collect();
    assert_eq!(recorded.len(), in_flight, "{recorded:?}");
    assert!(
        recorded.iter().all(|r| r.status == RunStatus::Succeeded),
        "{recorded:?}"
    );
    let left: Vec<_> = rows_of(db, "hold")
        .await
        .into_iter()
        .filter(|r| !r.removed)
        .collect();
    assert!(left.is_empty(), "rows of the removed instance: {left:?}");
}

/// Changing an instance's cron moves the next run of every shard row to the new schedule;
/// pausing the instance pauses every shard row (no shard starts while it is paused, by the
/// handlers' own record), and resuming it resumes every one.
async fn changing_or_pausing_an_instance_moves_or_holds_every_shard_row(db: &TestDb) {
    let log = Arc::new(Log::default());
    let running = node_a(db, &log).await;
    let schedules = running.schedules.clone();
    // Yearly, then every second: the change moves every row to the next second.
    schedules
        .upsert(
            Schedule::new("ishard.work", "t1")
                .cron("0 0 0 1 1 *")
                .args(json!({"tenant": 1})),
        )
        .await
        .unwrap();
    let rows = rows_of(db, "t1").await;
    assert_eq!(rows.len(), SHARDS as usize, "{rows:?}");
    let yearly = rows[0].next_run_at;
    assert!(rows.iter().all(|r| r.next_run_at == yearly), "{rows:?}");
    let changed = schedules.upsert(every_second("t1", 1)).await.unwrap();
    let rows = rows_of(db, "t1").await;
    assert!(
        rows.iter()
            .all(|r| r.cron == "* * * * * *" && r.next_run_at == changed.next_run_at),
        "every row moved to {:?}: {rows:?}",
        changed.next_run_at
    );
    wait_until(Duration::from_secs(60), "two whole ticks", || async {
        log.whole_ticks("t1") >= 2
    })
    .await;

    let ops = Actor::new("ops", "test");
    assert!(
        operate::pause(db.api(), "ishard.work/t1", &ops, "tenant on hold", None)
            .await
            .unwrap()
    );
    let rows = rows_of(db, "t1").await;
    assert!(rows.iter().all(|r| r.paused), "every row paused: {rows:?}");
    // Runs under way (claimed before the pause) end; then none starts.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before = log.starts("t1").len();
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        log.starts("t1").len(),
        before,
        "no shard started while paused"
    );

    operate::resume(db.api(), "ishard.work/t1", &ops)
        .await
        .unwrap()
        .expect("its pause ended");
    let rows = rows_of(db, "t1").await;
    assert!(
        rows.iter().all(|r| !r.paused),
        "every row resumed: {rows:?}"
    );
    let whole = log.whole_ticks("t1");
    wait_until(
        Duration::from_secs(60),
        "two whole ticks after the resume",
        || async { log.whole_ticks("t1") >= whole + 2 },
    )
    .await;
    running.stop().await;
    each_shard_once_in_tick_order(&log);
}

/// A node runs an instance of the task's 3 shards; restarted with a document giving the task 2,
/// its reconcile disables the instance's third shard row and brings the count of the other two
/// down: every tick after the restart is 2 runs, shards 0 and 1 of 2 (by the handlers' own
/// record), and the rows say so.
async fn an_instance_follows_its_task_down_to_fewer_shards(db: &TestDb) {
    let log = Arc::new(Log::default());
    let running = node_a(db, &log).await;
    let schedules = running.schedules.clone();
    schedules.upsert(every_second("t1", 1)).await.unwrap();
    wait_until(
        Duration::from_secs(60),
        "a whole tick of 3 shards",
        || async { log.whole_ticks("t1") >= 1 },
    )
    .await;
    running.stop().await;
    let before = log.events.lock().unwrap().len();
    let two = doc(vec![TaskConfig {
        shards: Some(ShardsEntry::Count(2)),
        ..entry("ishard.work", "0 0 0 1 1 *")
    }]);
    let running = start(ishard_node(db, "a", two, &log).build().unwrap());
    let after = |log: &Log| -> Vec<(bool, Run)> { log.events.lock().unwrap()[before..].to_vec() };
    let whole_of_two = |log: &Log| {
        let mut ended: BTreeMap<DateTime<Utc>, BTreeSet<u32>> = BTreeMap::new();
        for (start, r) in after(log) {
            if !start {
                ended.entry(r.tick).or_default().insert(r.shard.index);
            }
        }
        ended.values().filter(|s| s.len() == 2).count()
    };
    wait_until(
        Duration::from_secs(60),
        "three whole ticks of 2 shards after the restart",
        || async { whole_of_two(&log) >= 3 },
    )
    .await;
    running.stop().await;
    let runs = after(&log);
    assert!(
        runs.iter()
            .all(|(_, r)| r.shard.total == 2 && r.shard.index < 2),
        "every run after the restart is shard 0 or 1 of 2: {runs:?}"
    );
    let rows = rows_of(db, "t1").await;
    for row in &rows {
        if row.name.ends_with("[2]") {
            assert!(!row.enabled, "the third shard's row disabled: {row:?}");
        } else {
            assert_eq!(row.shards, 2, "{row:?}");
        }
    }
    assert_eq!(rows.len(), 3, "{rows:?}");
}

/// `upsert_many` writes every shard row of each instance of the batch, each grouped under its
/// own instance and carrying the task's count, and the list shows one entry per instance.
async fn a_batch_writes_every_shard_row_of_each_instance(db: &TestDb) {
    let log = Arc::new(Log::default());
    let running = node_a(db, &log).await;
    let schedules = running.schedules.clone();
    let yearly = |key: &str| {
        Schedule::new("ishard.work", key)
            .cron("0 0 0 1 1 *")
            .args(json!({"tenant": 1}))
    };
    let answers = schedules
        .upsert_many([yearly("b1"), yearly("b2")])
        .await
        .unwrap();
    assert!(answers.iter().all(Result::is_ok), "{answers:?}");
    for key in ["b1", "b2"] {
        let rows = rows_of(db, key).await;
        let names: Vec<&str> = rows.iter().map(|r| r.name.as_str()).collect();
        let own = format!("ishard.work/{key}");
        assert_eq!(
            names,
            [own.clone(), format!("{own}[1]"), format!("{own}[2]")],
            "{rows:?}"
        );
        assert!(
            rows.iter()
                .all(|r| r.shards == SHARDS && r.enabled && r.next_run_at == rows[0].next_run_at),
            "{rows:?}"
        );
    }
    let keys: Vec<String> = schedules
        .list("ishard.work")
        .await
        .unwrap()
        .into_iter()
        .map(|i| i.key)
        .collect();
    assert_eq!(keys, ["b1", "b2"]);
    running.stop().await;
}
