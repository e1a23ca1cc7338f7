//! What the policies cost: lag and store calls (and, on PostgreSQL, server-counted statements)
//! per run of one task every second, with a timeout, retries, both, or neither configured by its
//! `#[task]` attribute. Every run succeeds: this is the price of having the policy, not of using
//! it. One task at a time, PostgreSQL beside SQLite.
//!
//! `scripts/bench policy_cost` (`BENCH_BACKENDS`, `POLICY_TICKS`, default 30).

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use scheduler::{Scheduler, TaskContext, TaskRegistry, task};
use scheduler_bench::engine_support::*;
use tokio_util::sync::CancellationToken;

fn record(ctx: &TaskContext) {
    let lag = (Utc::now() - ctx.scheduled_at())
        .num_microseconds()
        .unwrap_or(i64::MAX) as f64
        / 1000.0;
    if let Ok(lags) = ctx.state::<Arc<Lags>>() {
        lags.0.lock().unwrap().push(lag);
    }
}

#[task(name = "policy.none")]
async fn no_policy(ctx: TaskContext) {
    record(&ctx);
}

#[task(name = "policy.timeout", timeout = "30s")]
async fn with_timeout(ctx: TaskContext) {
    record(&ctx);
}

#[task(name = "policy.retries", retries = 3, backoff = "1s")]
async fn with_retries(ctx: TaskContext) {
    record(&ctx);
}

#[task(name = "policy.both", timeout = "30s", retries = 3, backoff = "1s")]
async fn with_both(ctx: TaskContext) {
    record(&ctx);
}

const VARIANTS: &[(&str, &str)] = &[
    ("policy.none", "none"),
    ("policy.timeout", "`timeout = \"30s\"`"),
    ("policy.retries", "`retries = 3, backoff = \"1s\"`"),
    (
        "policy.both",
        "`timeout = \"30s\", retries = 3, backoff = \"1s\"`",
    ),
];

async fn variant(
    backend: Backend,
    task_name: &'static str,
    label: &str,
    ticks: usize,
    counter: Option<&PgStatements>,
) {
    let counter = counter.filter(|_| backend == Backend::Postgres);
    let schema = format!("bench_{}", task_name.replace('.', "_"));
    let store = fresh_store(backend, &schema).await;
    let registry = TaskRegistry::collect()
        .unwrap()
        .retain(|name| name == task_name);
    let doc = config_for(&registry, "* * * * * *");
    let lags = Arc::new(Lags::default());
    let scheduler = Scheduler::builder()
        .store(Arc::clone(&store.counted))
        .node_id("bench")
        .registry(registry)
        .config_document(doc)
        .state(Arc::clone(&lags))
        .build()
        .unwrap();
    let stop = CancellationToken::new();
    let s = stop.clone();
    let node = tokio::spawn(async move { scheduler.run_until(s.cancelled_owned()).await });
    // After the first run (start-up done), count from zero for `ticks` runs.
    let wait_runs = async |n: usize| {
        while lags.0.lock().unwrap().len() < n {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    wait_runs(1).await;
    store.calls.reset();
    if let Some(c) = counter {
        c.reset().await;
    }
    wait_runs(1 + ticks).await;
    let calls = store.calls.total();
    let statements = match counter {
        Some(c) => Some(c.count().await),
        None => None,
    };
    stop.cancel();
    node.await.unwrap().unwrap();
    let runs = store.raw.recent_runs(None, 1000).await.unwrap();
    let first = runs.iter().map(|r| r.scheduled_at).min().unwrap();
    let mut db_lags: Vec<f64> = runs
        .iter()
        .filter(|r| r.scheduled_at > first)
        .filter_map(|r| r.started_at.map(|s| s - r.scheduled_at))
        .map(|lag| lag.num_microseconds().unwrap() as f64 / 1000.0)
        .collect();
    let (p50, p99) = p50_p99(&mut db_lags);
    let per_run = |n: f64| format!("{:.1}", n / ticks as f64);
    println!(
        "| {} | {label} | {} | {p50:.1} | {p99:.1} | {} | {} | {} |",
        backend.name(),
        db_lags.len(),
        per_run(calls as f64),
        statements.map_or("n/a".into(), |n| per_run(n as f64)),
        load_average(),
    );
    if let Some(pool) = store.pg {
        pool.close().await;
    }
}

#[tokio::main]
async fn main() {
    let ticks: usize = std::env::var("POLICY_TICKS")
        .ok()
        .and_then(|t| t.parse().ok())
        .unwrap_or(30);
    let counter = if backends().contains(&Backend::Postgres) {
        let admin = sqlx::PgPool::connect(&database_url()).await.unwrap();
        let c = PgStatements::find(&admin).await;
        if c.is_none() {
            eprintln!("pg_stat_statements is not preloaded: statement counts read n/a");
        }
        c
    } else {
        None
    };
    println!(
        "| store | policy | runs | lag p50 ms | lag p99 ms | store calls per run | PostgreSQL statements per run | load (1/5/15 min) |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for &(task_name, label) in VARIANTS {
        for backend in backends() {
            variant(backend, task_name, label, ticks, counter.as_ref()).await;
        }
    }
}
