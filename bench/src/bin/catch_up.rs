//! Catch-up after an outage: 1,000 every-second tasks (misfire `once`, the default) whose next
//! run is 10 minutes overdue when their node starts again. Reports how long until every task's
//! catch-up run had started, how many runs each task got for the missed 10 minutes (must be
//! one), how much of each catch-up run's lease was left when its handler started, and the
//! longest claim statements.
//!
//! **Lease left**, judged from outside the node: a trigger of the bench on `scheduler_runs`
//! notes, for every run a claim inserts, the claim transaction's start (`now()`) and the end of
//! its insert (`clock_timestamp()`); each handler notes when it started (this host's clock, the
//! database's too: same machine). The node's lease clock starts when it sends the claim, just
//! before the transaction starts, and it asks a handler to stop at the lease's warn deadline,
//! `lifetime - margin - grace` (16 s of the default 20 s) after that; so the lease left at the
//! handler's start is `transaction start + 16 s - handler start` (a slight overestimate, by the
//! round trip of `BEGIN`). Negative: the lease started already expired.
//!
//! `CATCHUP_SKIP` tasks (0) have misfire `skip`: their missed ticks are counted inside the claim
//! (the planning the lease clock already runs through), into skip records; the others keep
//! `once`. The worst case is overdue by as many ticks as the engine counts per task.
//!
//! `scripts/bench catch_up` (or with DATABASE_URL set:
//! `cargo run --release -p scheduler-bench --bin catch_up`). `CATCHUP_TASKS` (1000),
//! `CATCHUP_MINUTES` (10), `CATCHUP_SKIP` (0), `CATCHUP_SECONDS` (5: how long the restarted node
//! runs), `CATCHUP_ZONE` (the tasks' time zone; UTC by default).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use scheduler::__private::{Misfire, TaskDescriptor, TaskFuture, TaskOptions};
use scheduler::{Scheduler, TaskContext, TaskRegistry};
use scheduler_bench::engine_support::*;
use sqlx::Row;

const SCHEMA: &str = "bench_catch_up";
/// The lease's warn deadline for the default 20 s lifetime: lifetime - margin (2 s) - grace
/// (2 s), see the engine's watchdog.
const WARN_AFTER_MS: f64 = 16_000.0;

/// When each run's handler started (this host's clock), by run id.
#[derive(Default)]
struct Starts(Mutex<HashMap<i64, DateTime<Utc>>>);

fn noting_handler(ctx: TaskContext) -> TaskFuture {
    Box::pin(async move {
        let now = Utc::now();
        if let Ok(starts) = ctx.state::<Arc<Starts>>() {
            starts.0.lock().unwrap().insert(ctx.run_id(), now);
        }
        Ok(())
    })
}

/// `tasks` tasks `c.NNNNN`, the first `skip` of them with misfire `skip`.
fn registry(tasks: usize, skip: usize) -> TaskRegistry {
    let descriptors = (0..tasks).map(|i| {
        let name: &'static str = Box::leak(format!("c.{i:05}").into_boxed_str());
        let options = if i < skip {
            TaskOptions::DEFAULT.misfire(Misfire::Skip)
        } else {
            TaskOptions::DEFAULT
        };
        &*Box::leak(Box::new(TaskDescriptor {
            name,
            file: file!(),
            line: line!(),
            module_path: module_path!(),
            options,
            handler: noting_handler,
        }))
    });
    TaskRegistry::from_descriptors(descriptors).expect("unique names")
}

fn node(url: &str, tasks: usize, skip: usize, starts: Arc<Starts>) -> Scheduler {
    let registry = registry(tasks, skip);
    let mut doc = config_for(&registry, "* * * * * *");
    let zone = std::env::var("CATCHUP_ZONE").ok();
    for task in &mut doc.tasks {
        task.timezone.clone_from(&zone);
    }
    Scheduler::builder()
        .store(pg_store(url, SCHEMA))
        .node_id("catch-up")
        .registry(registry)
        .config_document(doc)
        .state(starts)
        .build()
        .unwrap()
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
    let skip = env("CATCHUP_SKIP", 0).min(tasks);
    let seconds = env("CATCHUP_SECONDS", 5) as u64;
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
    run_for(
        node(&url, tasks, skip, Arc::default()),
        Duration::from_secs(3),
    )
    .await;
    // Every run a claim inserts: the claim transaction's start and the end of its insert.
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "CREATE TABLE {SCHEMA}.bench_claims (run_id int8, xact_start timestamptz,
                                             inserted timestamptz);
         CREATE FUNCTION {SCHEMA}.bench_note_claim() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN
             INSERT INTO {SCHEMA}.bench_claims SELECT id, now(), clock_timestamp() FROM new_runs;
             RETURN NULL;
         END $$;
         CREATE TRIGGER bench_note_claim AFTER INSERT ON {SCHEMA}.scheduler_runs
             REFERENCING NEW TABLE AS new_runs
             FOR EACH STATEMENT EXECUTE FUNCTION {SCHEMA}.bench_note_claim();"
    )))
    .execute(&pool)
    .await
    .unwrap();
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
    let starts = Arc::new(Starts::default());
    run_for(
        node(&url, tasks, skip, Arc::clone(&starts)),
        Duration::from_secs(seconds),
    )
    .await;
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
        "{tasks} every-second tasks in {} ({skip} misfire `skip`, the others `once`), {minutes} \
         min overdue, one node restarted at {} UTC, load average {}",
        std::env::var("CATCHUP_ZONE").unwrap_or_else(|_| "UTC".into()),
        restart.format("%H:%M:%S"),
        load_average()
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
    // The lease left at each catch-up run's handler start (runs of ticks before the restart).
    let claims = sqlx::query(
        "SELECT c.run_id, c.xact_start, c.inserted, r.status
         FROM bench_claims AS c JOIN scheduler_runs AS r ON r.id = c.run_id
         WHERE r.scheduled_at < $1",
    )
    .bind(restart)
    .fetch_all(&pool)
    .await
    .unwrap();
    let starts = std::mem::take(&mut *starts.0.lock().unwrap());
    let (mut left, mut in_claim, mut not_started) = (Vec::new(), Vec::new(), 0usize);
    let mut statuses: HashMap<String, usize> = HashMap::new();
    for c in &claims {
        let xact: DateTime<Utc> = c.get("xact_start");
        let inserted: DateTime<Utc> = c.get("inserted");
        *statuses.entry(c.get("status")).or_default() += 1;
        in_claim.push((inserted - xact).num_microseconds().unwrap_or(0) as f64 / 1000.0);
        match starts.get(&c.get::<i64, _>("run_id")) {
            Some(start) => left.push(
                WARN_AFTER_MS - (*start - xact).num_microseconds().unwrap_or(0) as f64 / 1000.0,
            ),
            None => not_started += 1,
        }
    }
    if left.is_empty() {
        println!("no catch-up run started");
    } else {
        let mut used: Vec<f64> = left.iter().map(|l| WARN_AFTER_MS - l).collect();
        let (p50, p99) = p50_p99(&mut used);
        let min_left = left.iter().cloned().fold(f64::INFINITY, f64::min);
        let in_claim_max = in_claim.iter().cloned().fold(0.0, f64::max);
        let mut statuses: Vec<_> = statuses.into_iter().collect();
        statuses.sort();
        println!(
            "| catch-up runs | claim start -> handler start ms, p50 / p99 / max | lease left at \
             handler start, min (of 16,000 ms to the warn deadline) | claim start -> run row \
             inserted, max ms | handler not started | run status |"
        );
        println!("|---|---|---|---|---|---|");
        println!(
            "| {} | {p50:.0} / {p99:.0} / {:.0} | {min_left:.0} ms | {in_claim_max:.0} | \
             {not_started} | {statuses:?} |",
            claims.len(),
            WARN_AFTER_MS - min_left,
        );
    }
    let skipped = sqlx::query(
        "SELECT count(*) AS records, coalesce(sum(ticks), 0)::int8 AS ticks,
                count(*) FILTER (WHERE NOT exact) AS inexact
         FROM scheduler_skips WHERE recorded_at >= $1",
    )
    .bind(restart)
    .fetch_one(&pool)
    .await
    .unwrap();
    println!(
        "skip records since the restart: {} ({} ticks, {} of them 'at least')",
        skipped.get::<i64, _>("records"),
        skipped.get::<i64, _>("ticks"),
        skipped.get::<i64, _>("inexact")
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
