//! HOT lock renewals: one node runs `RENEWALS_TASKS` (10,000) tasks every 10 s whose handlers
//! sleep `RENEWALS_HANDLER_MS` (6,000), longer than the renew interval (1 s: lock lifetime 5 s),
//! so every run's lock is renewed about five times. Reports the updates of `scheduler_tasks`
//! (`pg_stat_user_tables`: all, and how many were HOT), the rows the renewals updated
//! (`pg_stat_statements`), and the table's size.
//!
//! The schema is the current one (migration 0006: no index on `lock_expires_at`, fillfactor 50)
//! unless `RENEWALS_SCHEMA=old` puts back what it replaced (the index on `lock_expires_at`,
//! fillfactor 100); `RENEWALS_FILLFACTOR=N` tries another fillfactor. Either way the table is
//! rewritten (`CLUSTER`) after the tasks are created, as the migration does.
//!
//! `scripts/bench renewals` (or with DATABASE_URL set:
//! `cargo run --release -p scheduler-bench --bin renewals`). `RENEWALS_SECONDS` (40): how long
//! the node runs.

use std::time::Duration;

use scheduler::__private::TaskFuture;
use scheduler::Scheduler;
use scheduler::TaskContext;
use scheduler_bench::engine_support::*;
use sqlx::Row;

const SCHEMA: &str = "bench_renewals";

fn sleeping_handler(_ctx: TaskContext) -> TaskFuture {
    Box::pin(async move {
        let ms = std::env::var("RENEWALS_HANDLER_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(6_000);
        tokio::time::sleep(Duration::from_millis(ms)).await;
        Ok(())
    })
}

fn node(url: &str, tasks: usize, cron: &str) -> Scheduler {
    let registry = registry_with("r.", tasks, sleeping_handler);
    let doc = config_for(&registry, cron);
    Scheduler::builder()
        .store(pg_store(url, SCHEMA))
        .node_id("renewals")
        .registry(registry)
        .config_document(doc)
        .lock_lifetime(Duration::from_secs(5))
        .max_concurrent(tasks)
        .build()
        .unwrap()
}

async fn table_stats(pool: &sqlx::PgPool) -> (i64, i64) {
    let row = sqlx::query(
        "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables
         WHERE schemaname = $1 AND relname = 'scheduler_tasks'",
    )
    .bind(SCHEMA)
    .fetch_one(pool)
    .await
    .unwrap();
    (row.get(0), row.get(1))
}

#[tokio::main]
async fn main() {
    let env = |name: &str, default: usize| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let tasks = env("RENEWALS_TASKS", 10_000);
    let seconds = env("RENEWALS_SECONDS", 40) as u64;
    let old = std::env::var("RENEWALS_SCHEMA").is_ok_and(|v| v == "old");
    let fillfactor = std::env::var("RENEWALS_FILLFACTOR")
        .ok()
        .and_then(|v| v.parse::<u32>().ok());
    let url = database_url();
    let pool = fresh_schema(&url, SCHEMA).await;
    let admin = sqlx::PgPool::connect(&url).await.unwrap();
    let stats = sqlx::query("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        .execute(&admin)
        .await
        .is_ok();
    // Create the task rows (yearly: no run yet), then shape the table as asked and rewrite it.
    run_for(node(&url, tasks, "0 0 1 1 *"), Duration::from_secs(3)).await;
    let mut shape = String::new();
    if old {
        shape.push_str(&format!(
            "DROP INDEX {SCHEMA}.scheduler_tasks_lock_owner_idx;
             CREATE INDEX scheduler_tasks_locked_idx ON {SCHEMA}.scheduler_tasks (lock_expires_at)
                 WHERE lock_token IS NOT NULL;
             ALTER TABLE {SCHEMA}.scheduler_tasks SET (fillfactor = 100);"
        ));
    }
    if let Some(f) = fillfactor {
        shape.push_str(&format!(
            "ALTER TABLE {SCHEMA}.scheduler_tasks SET (fillfactor = {f});"
        ));
    }
    shape.push_str(&format!(
        "CLUSTER {SCHEMA}.scheduler_tasks USING scheduler_tasks_pkey;
         ANALYZE {SCHEMA}.scheduler_tasks;"
    ));
    sqlx::raw_sql(sqlx::AssertSqlSafe(shape))
        .execute(&admin)
        .await
        .unwrap();
    let options: Option<Vec<String>> =
        sqlx::query_scalar("SELECT reloptions FROM pg_class WHERE oid = $1::regclass")
            .bind(format!("{SCHEMA}.scheduler_tasks"))
            .fetch_one(&admin)
            .await
            .unwrap();
    let indexes: Vec<String> = sqlx::query_scalar(
        "SELECT indexname FROM pg_indexes WHERE schemaname = $1 AND tablename = 'scheduler_tasks'
         ORDER BY 1",
    )
    .bind(SCHEMA)
    .fetch_all(&admin)
    .await
    .unwrap();
    if stats {
        sqlx::query("SELECT pg_stat_statements_reset()")
            .execute(&admin)
            .await
            .unwrap();
    }
    // The node's connections are closed: their statistics are flushed.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = table_stats(&admin).await;
    run_for(
        node(&url, tasks, "*/10 * * * * *"),
        Duration::from_secs(seconds),
    )
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after = table_stats(&admin).await;
    let (updates, hot) = (after.0 - before.0, after.1 - before.1);
    let runs: i64 =
        sqlx::query_scalar("SELECT count(*) FROM scheduler_runs WHERE trigger = 'schedule'")
            .fetch_one(&pool)
            .await
            .unwrap();
    let size: String = sqlx::query_scalar("SELECT pg_size_pretty(pg_table_size($1::regclass))")
        .bind(format!("{SCHEMA}.scheduler_tasks"))
        .fetch_one(&admin)
        .await
        .unwrap();
    println!(
        "{tasks} tasks every 10 s, handlers {} ms, lock lifetime 5 s (renewed every 1 s), {seconds} s, \
         load average {}",
        env("RENEWALS_HANDLER_MS", 6_000),
        load_average()
    );
    println!("scheduler_tasks options {options:?}, indexes {indexes:?}");
    println!("| runs | task updates | HOT | HOT % | renewal statements, rows | table size after |");
    println!("|---|---|---|---|---|---|");
    let renewals = if stats {
        let row = sqlx::query(
            "SELECT coalesce(sum(calls), 0)::int8, coalesce(sum(rows), 0)::int8,
                    coalesce(sum(total_exec_time), 0)::float8
             FROM pg_stat_statements WHERE query LIKE '%Extend the locks node%'",
        )
        .fetch_one(&admin)
        .await
        .unwrap();
        let (calls, rows, ms): (i64, i64, f64) = (row.get(0), row.get(1), row.get(2));
        format!("{calls}, {rows} ({ms:.0} ms in all)")
    } else {
        "n/a".into()
    };
    println!(
        "| {runs} | {updates} | {hot} | {:.1}% | {renewals} | {size} |",
        100.0 * hot as f64 / updates.max(1) as f64
    );
}
