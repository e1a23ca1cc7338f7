//! The time from a missed tick to its `task.missed` event, PostgreSQL beside SQLite. One node
//! with one handler slot (`max_concurrent` 1): a blocker task holds the slot, so the victim,
//! due every 10 s (grace: half its interval, 5 s), cannot start. The event is raised by the
//! heartbeat's missed-run check (every heartbeat interval, 10 s by default), once the tick is
//! older than its grace; the figure is event receipt minus the tick (`expected_at`), so it lies
//! between the grace and the grace plus one heartbeat interval. One incident per round, each in
//! a fresh store, started at a random phase.
//!
//! `scripts/bench missed_event` (`BENCH_BACKENDS`; `MISSED_ROUNDS`, default 5).

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use scheduler::events::SchedulerEvent;
use scheduler::{Scheduler, TaskContext, TaskRegistry, task};
use scheduler_bench::engine_support::*;
use tokio_util::sync::CancellationToken;

#[task(name = "missed.blocker")]
async fn blocker(ctx: TaskContext) -> Result<(), scheduler::Interrupted> {
    ctx.cancelled().await;
    Err(ctx.interrupted())
}

#[task(name = "missed.victim")]
async fn victim() {}

/// (ms from tick to event, grace ms).
async fn round(backend: Backend, i: usize) -> (f64, u64) {
    // A random phase against the ticks and the heartbeat, which together set the figure.
    tokio::time::sleep(random_delay(Duration::from_secs(10))).await;
    let store = fresh_store(backend, &format!("bench_missed_{i}")).await;
    let registry = TaskRegistry::collect()
        .unwrap()
        .retain(|n| n.starts_with("missed."));
    let doc = scheduler::config::ConfigDocument {
        version: None,
        calendars: Default::default(),
        limits: Default::default(),
        tasks: [
            ("missed.blocker", "* * * * * *"),
            ("missed.victim", "*/10 * * * * *"),
        ]
        .into_iter()
        .map(|(name, cron)| scheduler::config::TaskConfig {
            name: name.into(),
            enabled: true,
            cron: cron.into(),
            timezone: None,
            ..Default::default()
        })
        .collect(),
    };
    let scheduler = Scheduler::builder()
        .store(Arc::clone(&store.counted))
        .node_id("bench")
        .registry(registry)
        .max_concurrent(1)
        .config_document(doc)
        .build()
        .unwrap();
    let mut events = scheduler.subscribe();
    let stop = CancellationToken::new();
    let s = stop.clone();
    let node = tokio::spawn(async move { scheduler.run_until(s.cancelled_owned()).await });
    let result = tokio::time::timeout(Duration::from_secs(90), async {
        loop {
            match events
                .recv()
                .await
                .map(scheduler::events::Event::into_inner)
            {
                Some(SchedulerEvent::Missed {
                    task,
                    expected_at,
                    grace_ms,
                }) if task == "missed.victim" => {
                    let ms = (Utc::now() - expected_at).num_microseconds().unwrap() as f64 / 1000.0;
                    break (ms, grace_ms);
                }
                Some(_) => {}
                None => panic!("event stream ended"),
            }
        }
    })
    .await
    .expect("no task.missed within 90 s");
    stop.cancel();
    node.await.unwrap().unwrap();
    if let Some(pool) = store.pg {
        pool.close().await;
    }
    result
}

#[tokio::main]
async fn main() {
    let rounds: usize = std::env::var("MISSED_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(5);
    println!(
        "| store | rounds | grace ms | tick -> task.missed p50 ms | min ms | max ms | load (1/5/15 min) |"
    );
    println!("|---|---|---|---|---|---|---|");
    for backend in backends() {
        let mut lat = Vec::new();
        let mut grace = 0;
        for i in 0..rounds {
            let (ms, g) = round(backend, i).await;
            lat.push(ms);
            grace = g;
        }
        println!(
            "| {} | {rounds} | {grace} | {:.0} | {:.0} | {:.0} | {} |",
            backend.name(),
            percentile(&mut lat, 50.0),
            percentile(&mut lat, 0.0),
            percentile(&mut lat, 100.0),
            load_average(),
        );
    }
}
