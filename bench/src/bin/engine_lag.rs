//! Schedule lag (handler start minus scheduled tick) on one node, PostgreSQL beside SQLite: one
//! task every second, and 1,000 tasks due on the same tick. Lags come from the run records
//! (`started_at - scheduled_at`: the handler's measured start and the tick, both on the store's
//! clock), read through the `Store` API
//! so both backends are measured the same way; store calls per run are counted by
//! `CountingStore`.
//!
//! `scripts/bench engine_lag` (or with DATABASE_URL set:
//! `cargo run --release -p scheduler-bench --bin engine_lag`). `BENCH_BACKENDS=sqlite` needs no
//! PostgreSQL; `LAG_SCENARIO=one|1k|1k-wide` runs one scenario.

use std::sync::Arc;
use std::time::Duration;

use scheduler::Scheduler;
use scheduler_bench::engine_support::*;
use tokio_util::sync::CancellationToken;

struct Scenario {
    key: &'static str,
    label: &'static str,
    tasks: usize,
    cron: &'static str,
    ticks: usize,
    max_concurrent: usize,
}

async fn scenario(backend: Backend, sc: &Scenario) {
    let schema = format!("bench_lag_{}", sc.key.replace('-', "_"));
    let store = fresh_store(backend, &schema).await;
    let registry = synthetic_registry("lag.", sc.tasks);
    let doc = config_for(&registry, sc.cron);
    let lags = Arc::new(Lags::default());
    let scheduler = Scheduler::builder()
        .store(Arc::clone(&store.counted))
        .node_id("bench")
        .registry(registry)
        .max_concurrent(sc.max_concurrent)
        .config_document(doc)
        .state(Arc::clone(&lags))
        .build()
        .unwrap();
    let stop = CancellationToken::new();
    let s = stop.clone();
    let node = tokio::spawn(async move { scheduler.run_until(s.cancelled_owned()).await });
    // Skip the first tick (connections warming up), then measure `ticks` ticks.
    let want = sc.tasks * (sc.ticks + 1);
    let mut counted_from = None;
    loop {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let seen = lags.0.lock().unwrap().len();
        if counted_from.is_none() && seen >= sc.tasks {
            // Count store calls from the end of the first tick on.
            store.calls.reset();
            counted_from = Some(seen);
        }
        if seen >= want {
            break;
        }
    }
    let calls = store.calls.total();
    stop.cancel();
    node.await.unwrap().unwrap();
    let runs = store
        .raw
        .recent_runs(None, (want * 2) as i64)
        .await
        .unwrap();
    let first_tick = runs.iter().map(|r| r.scheduled_at).min().unwrap();
    let mut db_lags: Vec<f64> = runs
        .iter()
        .filter(|r| r.scheduled_at > first_tick)
        .filter_map(|r| r.started_at.map(|s| s - r.scheduled_at))
        .map(|lag| lag.num_microseconds().unwrap() as f64 / 1000.0)
        .collect();
    let mut handler_lags = lags.0.lock().unwrap().clone();
    handler_lags.drain(..sc.tasks.min(handler_lags.len()));
    let measured_runs = want - counted_from.unwrap_or(0);
    println!(
        "| {} | {} | {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.2} | {} |",
        backend.name(),
        sc.label,
        db_lags.len(),
        percentile(&mut db_lags, 50.0),
        percentile(&mut db_lags, 99.0),
        percentile(&mut db_lags, 100.0),
        percentile(&mut handler_lags, 50.0),
        percentile(&mut handler_lags, 99.0),
        calls as f64 / measured_runs.max(1) as f64,
        load_average(),
    );
    if let Some(pool) = store.pg {
        pool.close().await;
    }
}

const SCENARIOS: &[Scenario] = &[
    Scenario {
        key: "one",
        label: "1 task, every second, 60 ticks",
        tasks: 1,
        cron: "* * * * * *",
        ticks: 60,
        max_concurrent: 100,
    },
    Scenario {
        key: "1k",
        label: "1,000 tasks due on the same tick, every 5 s, 6 ticks, max_concurrent 100",
        tasks: 1000,
        cron: "*/5 * * * * *",
        ticks: 6,
        max_concurrent: 100,
    },
    Scenario {
        key: "1k-wide",
        label: "1,000 tasks due on the same tick, every 5 s, 6 ticks, max_concurrent 1000",
        tasks: 1000,
        cron: "*/5 * * * * *",
        ticks: 6,
        max_concurrent: 1000,
    },
];

#[tokio::main]
async fn main() {
    if std::env::var_os("RUST_LOG").is_some() {
        scheduler::init_tracing();
    }
    let only = std::env::var("LAG_SCENARIO").ok();
    println!(
        "| store | scenario | runs | p50 ms | p99 ms | max ms | handler p50 ms | handler p99 ms | store calls per run | load (1/5/15 min) |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for sc in SCENARIOS {
        if only.as_deref().is_none_or(|o| o == sc.key) {
            for backend in backends() {
                scenario(backend, sc).await;
            }
        }
    }
}
