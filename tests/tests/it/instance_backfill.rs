//! Backfills of sharded and broadcast work: a backfill of a task with shards, or of an instance
//! of one, runs every shard of each tick of the range once (as the tick itself would have run);
//! a backfill of an instance of a broadcast task runs each tick once, 0 of 1, as its task's
//! backfill does (no record says which nodes were alive at a past tick). Judged by what the
//! handlers themselves recorded.

use crate::common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, DurationRound, TimeDelta, Utc};
use common::*;
use scheduler::testing::backfill::{BackfillRefusal, BackfillRequest};
use scheduler::testing::operate::{self, Actor};
use scheduler::testing::store::{BackfillCancel, BackfillRecord};
use scheduler::{Schedule, TaskContext, task};
use serde_json::json;

on_both_backends! {
    threads = 2;
    a_backfill_of_a_sharded_instance_or_task_runs_every_shard_of_each_tick_once,
    a_backfill_of_a_broadcast_instance_runs_each_tick_once,
    a_cancelled_backfill_of_a_sharded_instance_frees_every_shard_row,
    a_sharded_backfill_s_cap_counts_runs_and_its_ticks_name_their_shard,
}

/// One start: `(task, key, tick, shard index, shard total)`.
type Start = (String, Option<String>, DateTime<Utc>, u32, u32);

/// What the handlers recorded, a start each.
#[derive(Default)]
struct Log(Mutex<Vec<Start>>);

impl Log {
    fn push(&self, ctx: &TaskContext) {
        let shard = ctx.shard();
        self.0.lock().unwrap().push((
            ctx.task_name().to_owned(),
            ctx.key().map(str::to_owned),
            ctx.scheduled_at(),
            shard.index,
            shard.total,
        ));
    }

    /// How often each `(tick, shard, total)` of `task` (instance `key`) started, over `ticks`.
    fn starts(
        &self,
        task: &str,
        key: Option<&str>,
        ticks: &[DateTime<Utc>],
    ) -> BTreeMap<(DateTime<Utc>, u32, u32), usize> {
        let mut starts = BTreeMap::new();
        for (t, k, tick, index, total) in self.0.lock().unwrap().iter() {
            if t == task && k.as_deref() == key && ticks.contains(tick) {
                *starts.entry((*tick, *index, *total)).or_default() += 1;
            }
        }
        starts
    }
}

#[task(name = "ibackfill.work", shards = 3)]
async fn ibackfill_work(ctx: TaskContext) {
    ctx.state::<Arc<Log>>().unwrap().push(&ctx);
    tokio::time::sleep(Duration::from_millis(20)).await;
}

#[task(name = "ibackfill.each", shards = "nodes")]
async fn ibackfill_each(ctx: TaskContext) {
    ctx.state::<Arc<Log>>().unwrap().push(&ctx);
    tokio::time::sleep(Duration::from_millis(20)).await;
}

/// Three hourly ticks two days ago.
fn ticks() -> Vec<DateTime<Utc>> {
    let base = (Utc::now() - TimeDelta::days(2))
        .duration_trunc(TimeDelta::days(1))
        .unwrap();
    (0..3).map(|h| base + TimeDelta::hours(h)).collect()
}

/// Node `a`'s builder: `ibackfill.*` (both tasks hourly), handlers recording to `log`.
fn builder_a(db: &TestDb, log: &Arc<Log>) -> scheduler::SchedulerBuilder {
    let config = doc(vec![
        entry("ibackfill.work", "0 * * * *"),
        entry("ibackfill.each", "0 * * * *"),
    ]);
    node_with(db, "a", tasks("ibackfill."), config, log).poll_interval(Duration::from_millis(500))
}

/// Node `a` running `ibackfill.*` (both tasks hourly), started once their rows are written.
async fn node_a(db: &TestDb, log: &Arc<Log>) -> RunningNode {
    started(
        db,
        builder_a(db, log),
        &["ibackfill.work", "ibackfill.each"],
    )
    .await
}

/// Backfills every tick of `ticks` of `task` (a task or an instance `task/key`), unpaced, and
/// waits for it to be done.
async fn backfill(db: &TestDb, task: &str, ticks: &[DateTime<Utc>]) -> BackfillRecord {
    let request = BackfillRequest::new(task, ticks[0], ticks[ticks.len() - 1])
        .all(true)
        .pace(Duration::ZERO);
    let who = Actor::new("alice", "test");
    let plan = operate::backfill(db.api(), &request, &who)
        .await
        .unwrap()
        .expect("accepted");
    assert_eq!(plan.ticks, ticks, "{plan:?}");
    let id = plan.id.expect("recorded");
    let record = || async { db.api().backfill(id).await.unwrap().expect("recorded").0 };
    wait_until(Duration::from_secs(60), "the backfill is done", || async {
        record().await.state() == "done"
    })
    .await;
    record().await
}

/// The ticks of `[ticks[0], last]` a default backfill of `task` would run (a dry run).
async fn dry_run(db: &TestDb, task: &str, ticks: &[DateTime<Utc>]) -> Vec<DateTime<Utc>> {
    let request = BackfillRequest::new(task, ticks[0], ticks[ticks.len() - 1]).dry_run(true);
    let who = Actor::new("alice", "test");
    let plan = operate::backfill(db.api(), &request, &who).await.unwrap();
    plan.expect("accepted").ticks
}

/// Every shard of each tick of the range, once: `(tick, shard, 3) -> 1` for each of them.
fn every_shard_once(ticks: &[DateTime<Utc>]) -> BTreeMap<(DateTime<Utc>, u32, u32), usize> {
    ticks
        .iter()
        .flat_map(|tick| (0..3).map(move |index| ((*tick, index, 3), 1)))
        .collect()
}

/// A backfill of an instance of a task of 3 shards runs shards 0, 1 and 2 of each tick of its
/// range once each, with the instance's key; so does a backfill of the task itself, with none.
async fn a_backfill_of_a_sharded_instance_or_task_runs_every_shard_of_each_tick_once(db: &TestDb) {
    let log = Arc::new(Log::default());
    let running = node_a(db, &log).await;
    running
        .schedules
        .upsert(
            Schedule::new("ibackfill.work", "t1")
                .cron("0 * * * *")
                .args(json!({})),
        )
        .await
        .unwrap();
    let t = ticks();
    let done = backfill(db, "ibackfill.work/t1", &t).await;
    assert_eq!(
        log.starts("ibackfill.work", Some("t1"), &t),
        every_shard_once(&t),
        "the instance's shards of each tick"
    );
    assert_eq!(
        (done.progress.total, done.progress.succeeded),
        (9, 9),
        "{done:?}"
    );
    // By default a backfill leaves out the ticks every shard of which succeeded, its own: the
    // instance's (not its task's), the task's (not its instances').
    assert!(dry_run(db, "ibackfill.work/t1", &t).await.is_empty());
    assert_eq!(dry_run(db, "ibackfill.work", &t).await, t);
    let done = backfill(db, "ibackfill.work", &t).await;
    assert!(dry_run(db, "ibackfill.work", &t).await.is_empty());
    assert_eq!(
        log.starts("ibackfill.work", None, &t),
        every_shard_once(&t),
        "the task's shards of each tick"
    );
    assert_eq!(
        (done.progress.total, done.progress.succeeded),
        (9, 9),
        "{done:?}"
    );
    running.stop().await;
}

/// A backfill of an instance of a broadcast task runs each tick of its range once, 0 of 1, with
/// the instance's key, as a backfill of the task does.
async fn a_backfill_of_a_broadcast_instance_runs_each_tick_once(db: &TestDb) {
    let log = Arc::new(Log::default());
    let running = node_a(db, &log).await;
    running
        .schedules
        .upsert(
            Schedule::new("ibackfill.each", "b1")
                .cron("0 * * * *")
                .args(json!({})),
        )
        .await
        .unwrap();
    let t = ticks();
    let once: BTreeMap<_, usize> = t.iter().map(|tick| ((*tick, 0, 1), 1)).collect();
    let done = backfill(db, "ibackfill.each/b1", &t).await;
    assert_eq!(log.starts("ibackfill.each", Some("b1"), &t), once);
    assert_eq!((done.progress.total, done.progress.succeeded), (3, 3));
    let done = backfill(db, "ibackfill.each", &t).await;
    assert_eq!(log.starts("ibackfill.each", None, &t), once);
    assert_eq!((done.progress.total, done.progress.succeeded), (3, 3));
    running.stop().await;
}

/// A backfill of an instance of 3 shards paced an hour apart: each shard runs the first tick
/// (each shard row paces its own), the rest wait; another backfill of the instance is refused
/// while any of its rows waits; a cancel drops the 6 runs left and frees every row, so the next
/// backfill is taken and runs every shard of its tick.
async fn a_cancelled_backfill_of_a_sharded_instance_frees_every_shard_row(db: &TestDb) {
    let log = Arc::new(Log::default());
    let running = node_a(db, &log).await;
    running
        .schedules
        .upsert(
            Schedule::new("ibackfill.work", "c1")
                .cron("0 * * * *")
                .args(json!({})),
        )
        .await
        .unwrap();
    let t = ticks();
    let who = Actor::new("alice", "test");
    let slow = BackfillRequest::new("ibackfill.work/c1", t[0], t[2])
        .all(true)
        .pace(Duration::from_secs(3600));
    let slow = operate::backfill(db.api(), &slow, &who)
        .await
        .unwrap()
        .expect("accepted")
        .id
        .unwrap();
    let first = every_shard_once(&t[..1]);
    wait_until(
        Duration::from_secs(60),
        "each shard ran the first tick",
        || async { log.starts("ibackfill.work", Some("c1"), &t) == first },
    )
    .await;
    let again = BackfillRequest::new("ibackfill.work/c1", t[0], t[0]).all(true);
    assert_eq!(
        operate::backfill(db.api(), &again, &who).await.unwrap(),
        Err(BackfillRefusal::Busy(slow))
    );
    let cancelled = operate::cancel_backfill(db.api(), slow, &who)
        .await
        .unwrap();
    let BackfillCancel::Cancelled { dropped, .. } = cancelled else {
        panic!("cancelled: {cancelled:?}");
    };
    assert_eq!(dropped, 6);
    let done = backfill(db, "ibackfill.work/c1", &t[1..2]).await;
    assert_eq!((done.progress.total, done.progress.succeeded), (3, 3));
    let mut expected = first;
    expected.extend(every_shard_once(&t[1..2]));
    assert_eq!(log.starts("ibackfill.work", Some("c1"), &t), expected);
    running.stop().await;
}

/// The cap counts runs, each shard's: the 3 ticks of an instance of a task of 3 shards are 9
/// runs, refused under a cap of 8 and taken under a cap of 9. Through the admin API the same for
/// the task itself, its plan saying 9 runs; the API's entries of the backfill's ticks name each
/// one's shard: by the handlers' record, every shard of each tick ran once, each entry's run
/// being the run of its shard.
async fn a_sharded_backfill_s_cap_counts_runs_and_its_ticks_name_their_shard(db: &TestDb) {
    const TOKEN: &str = "instance-backfill-admin-token-0123";
    let log = Arc::new(Log::default());
    let builder = builder_a(db, &log).admin_token(TOKEN);
    let admin = admin_node(db, builder, &["ibackfill.work", "ibackfill.each"]).await;
    admin
        .schedules
        .upsert(
            Schedule::new("ibackfill.work", "m1")
                .cron("0 * * * *")
                .args(json!({})),
        )
        .await
        .unwrap();
    let t = ticks();
    let who = Actor::new("alice", "test");
    let capped = |cap: u32| {
        BackfillRequest::new("ibackfill.work/m1", t[0], t[2])
            .all(true)
            .dry_run(true)
            .max_runs(cap)
    };
    let refused = operate::backfill(db.api(), &capped(8), &who).await.unwrap();
    assert!(
        matches!(refused, Err(BackfillRefusal::OverCap { max_runs: 8, .. })),
        "{refused:?}"
    );
    let taken = operate::backfill(db.api(), &capped(9), &who).await.unwrap();
    assert_eq!(taken.expect("within the cap").ticks, t);

    let client = reqwest::Client::new();
    let url = admin.url("/api/tasks/ibackfill.work/backfill");
    let ask = |cap: u32| {
        let body = json!({"from": t[0], "to": t[2], "all": true, "max_runs": cap, "pace_ms": 0});
        let request = client.post(url.clone()).bearer_auth(TOKEN).json(&body);
        async move {
            let response = request.send().await.unwrap();
            let status = response.status().as_u16();
            (status, response.json::<serde_json::Value>().await.unwrap())
        }
    };
    let (status, body) = ask(8).await;
    assert_eq!(status, 400, "{body}");
    assert!(body.to_string().contains("cap of 8"), "{body}");
    let (status, plan) = ask(9).await;
    assert_eq!((status, &plan["runs"]), (201, &json!(9)), "{plan}");
    let id = plan["id"].as_i64().unwrap();
    let detail = || async {
        let url = admin.url(&format!("/api/backfills/{id}"));
        let response = client.get(url).send().await.unwrap();
        response.json::<serde_json::Value>().await.unwrap()
    };
    wait_until(Duration::from_secs(60), "the backfill is done", || async {
        detail().await["backfill"]["state"] == "done"
    })
    .await;
    assert_eq!(
        log.starts("ibackfill.work", None, &t),
        every_shard_once(&t),
        "the handlers ran every shard of each tick once"
    );
    let detail = detail().await;
    let mut named = BTreeMap::new();
    for entry in detail["ticks"].as_array().unwrap() {
        let tick: DateTime<Utc> = serde_json::from_value(entry["tick"].clone()).unwrap();
        let index = entry["shard_index"].as_u64().expect("its shard") as u32;
        let total = entry["shard_total"].as_u64().expect("its shard count") as u32;
        *named.entry((tick, index, total)).or_insert(0) += 1;
        let run = entry["run_id"].as_i64().expect("run");
        let run = db.api().run(run).await.unwrap().expect("recorded");
        assert_eq!(
            (run.scheduled_at, run.shard_index, run.shard_total),
            (tick, index, total),
            "{entry}"
        );
    }
    assert_eq!(named, every_shard_once(&t), "{detail}");
    admin.running.stop().await;
}
