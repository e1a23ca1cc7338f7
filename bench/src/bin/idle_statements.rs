//! Database statements per minute of one idle node with 1,000 registered tasks, none due,
//! counted by the server (`pg_stat_statements`, so the cluster must preload it:
//! `scripts/bench idle_statements` starts such a throwaway cluster).

use std::time::Duration;

use scheduler::Scheduler;
use scheduler_bench::engine_support::*;
use sqlx::Row;
use tokio_util::sync::CancellationToken;

#[tokio::main]
async fn main() {
    let minutes: u64 = std::env::var("IDLE_MINUTES")
        .ok()
        .and_then(|m| m.parse().ok())
        .unwrap_or(3);
    let url = database_url();
    let pool = fresh_schema(&url, "bench_idle").await;
    sqlx::query("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        .execute(&pool)
        .await
        .expect("pg_stat_statements must be preloaded (scripts/bench starts such a cluster)");
    let registry = synthetic_registry("idle.", 1000);
    let doc = config_for(&registry, "0 0 1 1 *");
    let scheduler = Scheduler::builder()
        .store(pg_store(&url, "bench_idle"))
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
    sqlx::query("SELECT pg_stat_statements_reset()")
        .execute(&pool)
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(60 * minutes)).await;
    let rows = sqlx::query(
        "SELECT calls, left(regexp_replace(query, '\\s+', ' ', 'g'), 70) AS q FROM pg_stat_statements
         WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
           AND query NOT LIKE '%pg_stat_statements%'
         ORDER BY calls DESC",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    stop.cancel();
    node.await.unwrap().unwrap();
    let total: i64 = rows.iter().map(|r| r.get::<i64, _>("calls")).sum();
    println!(
        "idle node, 1,000 tasks registered, none due, {minutes} min: {total} statements = {:.1} per minute",
        total as f64 / minutes as f64
    );
    for r in &rows {
        println!(
            "  {:>5}  {}",
            r.get::<i64, _>("calls"),
            r.get::<String, _>("q")
        );
    }
}
