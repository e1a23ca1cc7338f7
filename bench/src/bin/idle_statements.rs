//! Database work of one idle node with 1,000 registered tasks, none due, PostgreSQL beside
//! SQLite. Counted two ways: store calls by method (`CountingStore`, the same on both backends:
//! each call is one transaction or one read), and on PostgreSQL the statements the server ran
//! (`pg_stat_statements`, so the cluster must preload it: `scripts/bench idle_statements` starts
//! such a throwaway cluster).
//!
//! `IDLE_MINUTES` (default 3), `BENCH_BACKENDS`.

use std::sync::Arc;
use std::time::Duration;

use scheduler::Scheduler;
use scheduler_bench::engine_support::*;
use tokio_util::sync::CancellationToken;

async fn idle(backend: Backend, minutes: u64) {
    let store = fresh_store(backend, "bench_idle").await;
    let pg = store.pg.clone();
    let counter =
        match &pg {
            Some(pool) => Some(PgStatements::find(pool).await.expect(
                "pg_stat_statements must be preloaded (scripts/bench starts such a cluster)",
            )),
            None => None,
        };
    let registry = synthetic_registry("idle.", 1000);
    let doc = config_for(&registry, "0 0 1 1 *");
    let scheduler = Scheduler::builder()
        .store(Arc::clone(&store.counted))
        .node_id("idle")
        .registry(registry)
        .config_document(doc)
        .build()
        .unwrap();
    let stop = CancellationToken::new();
    let s = stop.clone();
    let node = tokio::spawn(async move { scheduler.run_until(s.cancelled_owned()).await });
    // Let start-up (migrations, first reconcile) finish, then count from zero.
    tokio::time::sleep(Duration::from_secs(5)).await;
    store.calls.reset();
    if let Some(c) = &counter {
        c.reset().await;
    }
    tokio::time::sleep(Duration::from_secs(60 * minutes)).await;
    let calls = store.calls.snapshot();
    let statements = match &counter {
        Some(c) => Some(c.by_query().await),
        None => None,
    };
    stop.cancel();
    node.await.unwrap().unwrap();
    let per_min = |n: u64| n as f64 / minutes as f64;
    let total: u64 = calls.values().sum();
    println!(
        "{}: idle node, 1,000 tasks registered, none due, {minutes} min (load {}):",
        backend.name(),
        load_average()
    );
    println!("  store calls: {total} = {:.1} per minute", per_min(total));
    for (method, n) in &calls {
        println!("  {n:>5}  {method}");
    }
    if let Some(rows) = statements {
        let total: i64 = rows.iter().map(|(n, _)| n).sum();
        println!(
            "  server statements (pg_stat_statements): {total} = {:.1} per minute",
            per_min(total as u64)
        );
        for (n, q) in &rows {
            println!("  {n:>5}  {q}");
        }
    }
    if let Some(pool) = pg {
        pool.close().await;
    }
}

#[tokio::main]
async fn main() {
    let minutes: u64 = std::env::var("IDLE_MINUTES")
        .ok()
        .and_then(|m| m.parse().ok())
        .unwrap_or(3);
    for backend in backends() {
        idle(backend, minutes).await;
    }
}
