//! The per-run log capture's cost on a chatty handler: one handler logs 2,000 `info!` lines
//! inside its run (captured: formatted, the first 500 kept, the rest counted), then the same
//! 2,000 lines from a task outside the run's span (not captured: the layer only looks for a
//! run), through the same subscriber (`scheduler::run_log_layer()` behind an `info` filter, no
//! other output). Reported: time per line and per 2,000 lines, median of the runs. The store is
//! an SQLite file in the temp directory (the flusher writes off the handler's path).
//!
//! `cargo run --release -p scheduler-bench --bin run_log_cost`

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use scheduler::config::{ConfigDocument, TaskConfig};
use scheduler::store::{SqliteStore, Store};
use scheduler::testing::operate::{self, Actor};
use scheduler::testing::store::{RunQuery, RunRequest, RunStatus};
use scheduler::{Scheduler, TaskContext, TaskRegistry, task};
use tokio_util::sync::CancellationToken;

const LINES: usize = 2_000;
const RUNS: usize = 30;

/// (captured, not captured) time of each run's 2,000 lines.
type Times = Arc<Mutex<Vec<(Duration, Duration)>>>;

#[task(name = "bench.chatty")]
async fn chatty(ctx: TaskContext) {
    let started = Instant::now();
    for i in 0..LINES {
        tracing::info!(i, user = "advertiser-42", "synced a page of the report");
    }
    let captured = started.elapsed();
    let plain = tokio::spawn(async {
        let started = Instant::now();
        for i in 0..LINES {
            tracing::info!(i, user = "advertiser-42", "synced a page of the report");
        }
        started.elapsed()
    })
    .await
    .unwrap();
    ctx.state::<Times>()
        .unwrap()
        .lock()
        .unwrap()
        .push((captured, plain));
}

#[tokio::main]
async fn main() {
    use tracing_subscriber::prelude::*;
    tracing_subscriber::registry()
        .with(tracing_subscriber::EnvFilter::new("info"))
        .with(scheduler::run_log_layer())
        .init();
    let path = std::env::temp_dir().join(format!("run_log_cost-{}.db", std::process::id()));
    let store: Arc<dyn Store> = Arc::new(SqliteStore::builder(&path).connect().unwrap());
    store.migrate().await.unwrap();
    let times = Times::default();
    let scheduler = Scheduler::builder()
        .store(Arc::clone(&store))
        .registry(TaskRegistry::collect().unwrap())
        .config_document(ConfigDocument {
            version: None,
            calendars: Default::default(),
            limits: Default::default(),
            tasks: vec![TaskConfig {
                name: "bench.chatty".into(),
                enabled: true,
                cron: "0 0 1 1 *".into(),
                timezone: None,
                ..Default::default()
            }],
        })
        .state(Arc::clone(&times))
        .build()
        .unwrap();
    let stop = CancellationToken::new();
    let s = stop.clone();
    let node = tokio::spawn(async move { scheduler.run_until(s.cancelled_owned()).await });
    let who = Actor::new("bench", "bench");
    for done in 0..=RUNS {
        loop {
            match operate::trigger(store.as_ref(), "bench.chatty", &who)
                .await
                .unwrap()
            {
                RunRequest::Queued => break,
                _ => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        }
        loop {
            let ended = store
                .runs(&RunQuery::latest(1000).status(RunStatus::Succeeded))
                .await
                .unwrap()
                .len();
            if ended > done {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    stop.cancel();
    node.await.unwrap().unwrap();
    let last = store.runs(&RunQuery::latest(1)).await.unwrap()[0].id;
    let kept: i32 = store
        .run_log(last)
        .await
        .unwrap()
        .iter()
        .map(|c| c.lines)
        .sum();
    drop(store);
    let _ = std::fs::remove_file(&path);
    let mut times = times.lock().unwrap().clone();
    times.remove(0); // warm-up
    let median = |mut v: Vec<Duration>| {
        v.sort();
        v[v.len() / 2]
    };
    let captured = median(times.iter().map(|t| t.0).collect());
    let plain = median(times.iter().map(|t| t.1).collect());
    let per_line = |d: Duration| d.as_nanos() as f64 / LINES as f64;
    println!(
        "{} runs of {LINES} info! lines each; stored log of a run: {kept} lines",
        times.len()
    );
    println!(
        "inside the run (captured):     {:>8.0} ns/line, {:>6.2} ms per {LINES} lines",
        per_line(captured),
        captured.as_secs_f64() * 1e3
    );
    println!(
        "outside the run (not captured): {:>7.0} ns/line, {:>6.2} ms per {LINES} lines",
        per_line(plain),
        plain.as_secs_f64() * 1e3
    );
}
