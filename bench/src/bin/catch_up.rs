//! Catch-up after an outage: 1,000 every-second tasks (misfire `once`, the default) whose next
//! run is 10 minutes overdue when their node starts again. Reports how long until every task's
//! catch-up run had started, how many runs each task got for the missed 10 minutes (must be
//! one), and the longest claim statements.
//!
//! `scripts/bench catch_up` (or with DATABASE_URL set:
//! `cargo run --release -p scheduler-bench --bin catch_up`). `CATCHUP_TASKS` (1000),
//! `CATCHUP_MINUTES` (10).

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use scheduler::Scheduler;
use scheduler_bench::engine_support::*;
use sqlx::Row;
use tokio_util::sync::CancellationToken;

const SCHEMA: &str = "bench_catch_up";

fn node(url: &str, tasks: usize) -> Scheduler {
    let registry = synthetic_registry("c.", tasks);
    let doc = config_for(&registry, "* * * * * *");
    Scheduler::builder()
        .store(pg_store(url, SCHEMA))
        .node_id("catch-up")
        .registry(registry)
        .config_document(doc)
        .state(Arc::new(Lags::default()))
        .build()
        .unwrap()
}

async fn run_for(scheduler: Scheduler, d: Duration) {
    let stop = CancellationToken::new();
    let s = stop.clone();
    let handle = tokio::spawn(async move { scheduler.run_until(s.cancelled_owned()).await });
    tokio::time::sleep(d).await;
    stop.cancel();
    handle.await.unwrap().unwrap();
}

#[tokio::main]
async fn main() {
    let env = |name: &str, default: usize| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let tasks = env("CATCHUP_TASKS", 1000);
    let minutes = env("CATCHUP_MINUTES", 10) as i64;
    let url = database_url();
    let pool = fresh_schema(&url, SCHEMA).await;
    // Statement statistics, if the server preloads them (scripts/bench), from the default schema.
    let admin = sqlx::PgPool::connect(&url).await.unwrap();
    let stats = sqlx::query("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        .execute(&admin)
        .await
        .is_ok();
    // Create the tasks (a node runs briefly), then move the clock of every task back: as if
    // every node had been down for `minutes`.
    run_for(node(&url, tasks), Duration::from_secs(3)).await;
    sqlx::query(
        "UPDATE scheduler_tasks SET next_run_at = now() - $1 * interval '1 minute',
                last_scheduled_at = now() - $1 * interval '1 minute' - interval '1 second'",
    )
    .bind(minutes as f64)
    .execute(&pool)
    .await
    .unwrap();
    if stats {
        sqlx::query("SELECT pg_stat_statements_reset()")
            .execute(&admin)
            .await
            .unwrap();
    }
    let restart: DateTime<Utc> = sqlx::query_scalar("SELECT now()")
        .fetch_one(&pool)
        .await
        .unwrap();
    run_for(node(&url, tasks), Duration::from_secs(5)).await;
    // The catch-up run of each task is its first run after the restart.
    let row = sqlx::query(
        "WITH first AS (
             SELECT task_name, min(started_at) AS started_at
             FROM scheduler_runs WHERE started_at >= $1 GROUP BY task_name)
         SELECT count(*) AS tasks,
                (extract(epoch FROM max(started_at) - $1) * 1000)::float8 AS all_ms,
                (extract(epoch FROM min(started_at) - $1) * 1000)::float8 AS first_ms,
                (extract(epoch FROM max(started_at) - min(started_at)) * 1000)::float8 AS spread_ms
         FROM first",
    )
    .bind(restart)
    .fetch_one(&pool)
    .await
    .unwrap();
    let per_task: Vec<i64> = sqlx::query_scalar(
        "SELECT count(*) FROM scheduler_runs
         WHERE started_at >= $1 AND scheduled_at < $1 GROUP BY task_name",
    )
    .bind(restart)
    .fetch_all(&pool)
    .await
    .unwrap();
    println!(
        "{tasks} every-second tasks, {minutes} min overdue, one node restarted at {} UTC",
        restart.format("%H:%M:%S")
    );
    println!(
        "| tasks caught up | restart -> first run ms | restart -> every task's first run ms | \
         first -> last ms | runs per task for the outage (min..max) |"
    );
    println!("|---|---|---|---|---|");
    println!(
        "| {} | {:.0} | {:.0} | {:.0} | {}..{} |",
        row.get::<i64, _>("tasks"),
        row.get::<Option<f64>, _>("first_ms").unwrap_or(f64::NAN),
        row.get::<Option<f64>, _>("all_ms").unwrap_or(f64::NAN),
        row.get::<Option<f64>, _>("spread_ms").unwrap_or(f64::NAN),
        per_task.iter().min().unwrap_or(&0),
        per_task.iter().max().unwrap_or(&0),
    );
    if stats {
        let rows = sqlx::query(
            "SELECT calls, max_exec_time::float8 AS max_ms, mean_exec_time::float8 AS mean_ms,
                    left(regexp_replace(query, '\\s+', ' ', 'g'), 60) AS q
             FROM pg_stat_statements WHERE query LIKE '%claim%' OR query LIKE '%Lock up to%'
             ORDER BY max_exec_time DESC LIMIT 5",
        )
        .fetch_all(&admin)
        .await
        .unwrap();
        for r in rows {
            println!(
                "  {:>5} calls, max {:>7.1} ms, mean {:>6.1} ms  {}",
                r.get::<i64, _>("calls"),
                r.get::<f64, _>("max_ms"),
                r.get::<f64, _>("mean_ms"),
                r.get::<String, _>("q")
            );
        }
    }
}
