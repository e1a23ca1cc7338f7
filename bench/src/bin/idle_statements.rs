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
use sqlx::Row;
use tokio_util::sync::CancellationToken;

async fn idle(backend: Backend, minutes: u64) {
    let store = fresh_store(backend, "bench_idle").await;
    let pg = store.pg.clone();
    if let Some(pool) = &pg {
        sqlx::query("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            .execute(pool)
            .await
            .expect("pg_stat_statements must be preloaded (scripts/bench starts such a cluster)");
    }
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
    if let Some(pool) = &pg {
        sqlx::query("SELECT pg_stat_statements_reset()")
            .execute(pool)
            .await
            .unwrap();
    }
    tokio::time::sleep(Duration::from_secs(60 * minutes)).await;
    let calls = store.calls.snapshot();
    let statements = match &pg {
        Some(pool) => Some(
            sqlx::query(
                "SELECT calls, left(regexp_replace(query, '\\s+', ' ', 'g'), 70) AS q
                 FROM pg_stat_statements
                 WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
                   AND query NOT LIKE '%pg_stat_statements%'
                 ORDER BY calls DESC",
            )
            .fetch_all(pool)
            .await
            .unwrap(),
        ),
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
        let total: i64 = rows.iter().map(|r| r.get::<i64, _>("calls")).sum();
        println!(
            "  server statements (pg_stat_statements): {total} = {:.1} per minute",
            per_min(total as u64)
        );
        for r in &rows {
            println!(
                "  {:>5}  {}",
                r.get::<i64, _>("calls"),
                r.get::<String, _>("q")
            );
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
