//! Making instances wakes the nodes only when it must: an instance due sooner than everything
//! the nodes running its task wait for tells them at once (its first tick is not left to the
//! poll), and one due no sooner than another row of its task says nothing (the nodes wake for
//! that row and then see it). Judged by what the handlers recorded, and on PostgreSQL by the
//! notifications a listener of the store's channel received.

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Timelike, Utc};
use common::*;
use scheduler::{Schedule, Schedules, TaskContext, task};

on_both_backends! {
    threads = 2;
    an_instance_made_while_the_node_sleeps_runs_from_its_first_tick,
    every_shard_of_a_sharded_instance_made_while_the_node_sleeps_runs_its_first_tick;
    postgres_only: instances_due_no_sooner_than_a_sibling_wake_no_node,
}

/// Each run's key and tick, as its handler saw them.
#[derive(Default)]
struct Seen(Mutex<Vec<(String, DateTime<Utc>)>>);

impl Seen {
    fn ticks_of(&self, key: &str) -> Vec<DateTime<Utc>> {
        let runs = self.0.lock().unwrap();
        runs.iter().filter(|r| r.0 == key).map(|r| r.1).collect()
    }
}

#[task(name = "wake.sync")]
async fn wake_sync(ctx: TaskContext) {
    let seen = ctx.state::<Arc<Seen>>().unwrap();
    let key = ctx.key().unwrap_or_default().to_owned();
    seen.0.lock().unwrap().push((key, ctx.scheduled_at()));
}

/// The requests (a finished run's release notifies with a payload of its own) `listener` gets
/// within `within`.
async fn requests(listener: &mut sqlx::postgres::PgListener, within: Duration) -> usize {
    let mut got = 0;
    let deadline = tokio::time::Instant::now() + within;
    while let Ok(Ok(n)) = tokio::time::timeout_at(deadline, listener.recv()).await {
        got += usize::from(n.payload() == "request");
    }
    got
}

/// Records each shard's run as `key#index`.
#[task(name = "wake.sharded", shards = 2)]
async fn wake_sharded(ctx: TaskContext) {
    let seen = ctx.state::<Arc<Seen>>().unwrap();
    let key = format!("{}#{}", ctx.key().unwrap_or_default(), ctx.shard().index);
    seen.0.lock().unwrap().push((key, ctx.scheduled_at()));
}

const YEARLY: &str = "0 0 0 1 1 *";

/// A node running `wake.*` that polls only every `poll` (so that what it runs on time, it ran
/// because it was woken or because it woke for another row), started once its task's row is in
/// the store; the handle to make instances with.
async fn sleepy_node(db: &TestDb, poll: Duration, seen: &Arc<Seen>) -> (Schedules, RunningNode) {
    let config = doc(vec![
        entry("wake.sync", YEARLY),
        entry("wake.sharded", YEARLY),
    ]);
    let builder = node_with(db, "a", tasks("wake."), config, seen).poll_interval(poll);
    let running = started(db, builder, &["wake.sync", "wake.sharded"]).await;
    (running.schedules.clone(), running)
}

/// A node polling once a minute, its task yearly: an instance every two seconds, made while it
/// sleeps, runs its first tick (it is due sooner than anything the node waits for, so the
/// node is told); then one due at a second a few seconds on, later than the first's next tick,
/// runs too (the node is not told, wakes for the first instance and reads it then). Neither
/// waits for the poll.
async fn an_instance_made_while_the_node_sleeps_runs_from_its_first_tick(db: &TestDb) {
    let seen = Arc::new(Seen::default());
    let (schedules, running) = sleepy_node(db, Duration::from_secs(60), &seen).await;
    schedules
        .upsert(Schedule::new("wake.sync", "far").cron(YEARLY))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;

    schedules
        .upsert(Schedule::new("wake.sync", "soon").cron("*/2 * * * * *"))
        .await
        .unwrap();
    wait_until(
        Duration::from_secs(20),
        "the first tick of `soon` (the poll is a minute away)",
        || async { !seen.ticks_of("soon").is_empty() },
    )
    .await;

    // Due at one second five to six seconds on: after `soon`'s next tick, at most two away.
    let at = (db.now() + chrono::TimeDelta::seconds(6))
        .with_nanosecond(0)
        .unwrap();
    let later = schedules
        .upsert(Schedule::new("wake.sync", "later").cron(format!("{} * * * * *", at.second())))
        .await
        .unwrap();
    let first = later.next_run_at.expect("a next run");
    wait_until(
        Duration::from_secs(20),
        "the first tick of `later` (the poll is a minute away)",
        || async { !seen.ticks_of("later").is_empty() },
    )
    .await;
    running.stop().await;

    assert_eq!(seen.ticks_of("later"), [first], "its first tick, once");
    assert!(seen.ticks_of("far").is_empty());
}

/// On PostgreSQL the nodes are told by a notification on the store's channel: instances due
/// no sooner than their task's own row (all yearly), one at a time or in a batch, send none;
/// one due sooner sends one, and it runs.
async fn instances_due_no_sooner_than_a_sibling_wake_no_node() {
    let db = TestDb::postgres("instances_due_no_sooner_than_a_sibling_wake_no_node").await;
    told_only_when_sooner(&db).await;
    db.cleanup().await;
}

async fn told_only_when_sooner(db: &TestDb) {
    let TestDb::Postgres { store, schema } = db else {
        unreachable!("PostgreSQL only")
    };
    let seen = Arc::new(Seen::default());
    let (schedules, running) = sleepy_node(db, Duration::from_secs(60), &seen).await;
    let mut listener = sqlx::postgres::PgListener::connect(&schema.url)
        .await
        .unwrap();
    listener.listen(store.notify_channel()).await.unwrap();
    for key in ["far1", "far2", "far3"] {
        schedules
            .upsert(Schedule::new("wake.sync", key).cron(YEARLY))
            .await
            .unwrap();
    }
    let batch = ["far4", "far5", "far6"].map(|k| Schedule::new("wake.sync", k).cron(YEARLY));
    for answer in schedules.upsert_many(batch).await.unwrap() {
        answer.unwrap();
    }
    assert_eq!(
        requests(&mut listener, Duration::from_secs(2)).await,
        0,
        "instances due with their task's own row tell no node"
    );

    schedules
        .upsert(Schedule::new("wake.sync", "soon").cron("*/2 * * * * *"))
        .await
        .unwrap();
    assert_eq!(
        requests(&mut listener, Duration::from_secs(1)).await,
        1,
        "an instance due sooner than everything tells the nodes"
    );
    wait_until(
        Duration::from_secs(20),
        "the first tick of `soon` (the poll is a minute away)",
        || async { !seen.ticks_of("soon").is_empty() },
    )
    .await;
    running.stop().await;
}

/// A node polling once a minute: an instance of a task with two shards, every two seconds,
/// made while the node sleeps, runs both shards of its first tick (its shard rows, written with
/// it, are not "another row of its task" the node would wake for).
async fn every_shard_of_a_sharded_instance_made_while_the_node_sleeps_runs_its_first_tick(
    db: &TestDb,
) {
    let seen = Arc::new(Seen::default());
    let (schedules, running) = sleepy_node(db, Duration::from_secs(60), &seen).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let made = schedules
        .upsert(Schedule::new("wake.sharded", "s").cron("*/2 * * * * *"))
        .await
        .unwrap();
    let first = made.next_run_at.expect("a next run");
    wait_until(
        Duration::from_secs(20),
        "both shards of the instance's first tick (the poll is a minute away)",
        || async { seen.ticks_of("s#0").contains(&first) && seen.ticks_of("s#1").contains(&first) },
    )
    .await;
    running.stop().await;
}
