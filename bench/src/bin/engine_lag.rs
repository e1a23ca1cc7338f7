//! Schedule lag (handler start minus scheduled tick) on one node, read from `scheduler_runs`:
//! one task every second, and 1,000 tasks due on the same tick.
//!
//! `scripts/bench engine_lag` (or with DATABASE_URL set:
//! `cargo run --release -p scheduler-bench --bin engine_lag`).

#[path = "../engine_support.rs"]
mod engine_support;

use std::sync::Arc;
use std::time::Duration;

use engine_support::*;
use scheduler::Scheduler;
use tokio_util::sync::CancellationToken;

async fn scenario(
    label: &str,
    schema: &str,
    tasks: usize,
    cron: &str,
    ticks: i64,
    max_concurrent: usize,
) {
    let url = database_url();
    let pool = fresh_schema(&url, schema).await;
    let registry = synthetic_registry("lag.", tasks);
    let doc = config_for(&registry, cron);
    let lags = Arc::new(Lags::default());
    let scheduler = Scheduler::builder()
        .store(pg_store(&url, schema))
        .node_id("bench")
        .registry(registry)
        .max_concurrent(max_concurrent)
        .config_document(doc)
        .state(Arc::clone(&lags))
        .build()
        .unwrap();
    let stop = CancellationToken::new();
    let s = stop.clone();
    let node = tokio::spawn(async move { scheduler.run_until(s.cancelled_owned()).await });
    // Skip the first tick (connections warming up), then measure `ticks` ticks.
    let want = (tasks as i64) * (ticks + 1);
    loop {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let done: i64 =
            sqlx::query_scalar("SELECT count(*) FROM scheduler_runs WHERE status = 'succeeded'")
                .fetch_one(&pool)
                .await
                .unwrap();
        if done >= want {
            break;
        }
    }
    stop.cancel();
    node.await.unwrap().unwrap();
    let mut db_lags: Vec<f64> = sqlx::query_scalar(
        "SELECT (extract(epoch FROM started_at - scheduled_at) * 1000)::float8 FROM scheduler_runs
         WHERE scheduled_at > (SELECT min(scheduled_at) FROM scheduler_runs) ORDER BY id",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    let mut handler_lags = lags.0.lock().unwrap().clone();
    let skip = tasks.min(handler_lags.len());
    handler_lags.drain(..skip);
    println!(
        "| {label} | {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} |",
        db_lags.len(),
        percentile(&mut db_lags, 50.0),
        percentile(&mut db_lags, 99.0),
        percentile(&mut db_lags, 100.0),
        percentile(&mut handler_lags, 50.0),
        percentile(&mut handler_lags, 99.0),
    );
    pool.close().await;
}

/// `(key, label, schema, tasks, cron, ticks, max_concurrent)`; `LAG_SCENARIO=key` runs one.
const SCENARIOS: &[(&str, &str, &str, usize, &str, i64, usize)] = &[
    (
        "one",
        "1 task, every second, 60 ticks",
        "bench_lag_one",
        1,
        "* * * * * *",
        60,
        100,
    ),
    (
        "1k",
        "1,000 tasks due on the same tick, every 5 s, 6 ticks, max_concurrent 100",
        "bench_lag_1k",
        1000,
        "*/5 * * * * *",
        6,
        100,
    ),
    (
        "1k-wide",
        "1,000 tasks due on the same tick, every 5 s, 6 ticks, max_concurrent 1000 (default)",
        "bench_lag_1k_wide",
        1000,
        "*/5 * * * * *",
        6,
        1000,
    ),
];

#[tokio::main]
async fn main() {
    if std::env::var_os("RUST_LOG").is_some() {
        scheduler::init_tracing();
    }
    let only = std::env::var("LAG_SCENARIO").ok();
    println!("| scenario | runs | p50 ms | p99 ms | max ms | handler p50 ms | handler p99 ms |");
    println!("|---|---|---|---|---|---|---|");
    for &(key, label, schema, tasks, cron, ticks, max_concurrent) in SCENARIOS {
        if only.as_deref().is_none_or(|o| o == key) {
            scenario(label, schema, tasks, cron, ticks, max_concurrent).await;
        }
    }
}
