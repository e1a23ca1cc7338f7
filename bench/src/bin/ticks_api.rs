//! The cost of the dashboard's strips: `GET /api/ticks?count=30` over real HTTP for 1,000 tasks,
//! half every second and half yearly, each with stored history (100 seconds of runs for each
//! every-second task, 40 New Year's Days for each yearly one), so every strip reaches its 30
//! ticks: the yearly ones 30 years back. Timed from one keep-alive client, sequential requests;
//! the store operations each request makes are counted. The tasks are disabled, so the node runs
//! nothing meanwhile (their strips are computed all the same).
//!
//! `cargo run --release -p scheduler-bench --bin ticks_api` (`BENCH_BACKENDS=sqlite` or
//! `postgres` for one; PostgreSQL at DATABASE_URL).

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{Datelike, TimeZone, Utc};
use scheduler::Scheduler;
use scheduler::config::{ConfigDocument, TaskConfig};
use scheduler_bench::engine_support::*;
use sqlx::{Connection, SqliteConnection};
use tokio_util::sync::CancellationToken;

const TASKS: usize = 1_000;
const REQUESTS: usize = 30;
const SECONDS_OF_HISTORY: i64 = 100;
const YEARS_OF_HISTORY: i32 = 40;

fn cron(i: usize) -> &'static str {
    if i.is_multiple_of(2) {
        "* * * * * *"
    } else {
        "0 0 1 1 *"
    }
}

/// The history, as (task, tick) pairs: one succeeded run per tick.
fn history() -> Vec<(String, chrono::DateTime<Utc>)> {
    let now = Utc::now();
    let second = now.timestamp();
    let mut rows = Vec::new();
    for i in 0..TASKS {
        let name = format!("tk.{i:05}");
        if i.is_multiple_of(2) {
            for s in 1..=SECONDS_OF_HISTORY {
                rows.push((name.clone(), Utc.timestamp_opt(second - s, 0).unwrap()));
            }
        } else {
            for y in 0..YEARS_OF_HISTORY {
                let tick = Utc.with_ymd_and_hms(now.year() - y, 1, 1, 0, 0, 0).unwrap();
                rows.push((name.clone(), tick));
            }
        }
    }
    rows
}

async fn store_history(b: &BenchStore) {
    let rows = history();
    let t = Instant::now();
    match b.backend {
        Backend::Postgres => {
            let pool = b.pg.as_ref().unwrap();
            let (names, ticks): (Vec<String>, Vec<chrono::DateTime<Utc>>) =
                rows.into_iter().unzip();
            sqlx::query(
                "INSERT INTO scheduler_runs (task_name, scheduled_at, started_at, finished_at,
                                             status, node_id, lock_token, attempt, trigger)
                 SELECT n, t, t, t + interval '200 milliseconds', 'succeeded', 'history',
                        gen_random_uuid(), 1, 'schedule'
                 FROM unnest($1::text[], $2::timestamptz[]) AS h(n, t)",
            )
            .bind(&names)
            .bind(&ticks)
            .execute(pool)
            .await
            .unwrap();
        }
        Backend::Sqlite => {
            let path = std::env::var_os("BENCH_DIR")
                .map(std::path::PathBuf::from)
                .unwrap_or_else(std::env::temp_dir)
                .join("scheduler-bench-ticks_api/bench.db");
            // A plain connection: the store holding the file takes its lock, not the file.
            let mut conn = SqliteConnection::connect(&format!("sqlite://{}", path.display()))
                .await
                .unwrap();
            let mut tx = conn.begin().await.unwrap();
            for (i, (name, tick)) in rows.iter().enumerate() {
                let us = tick.timestamp_micros();
                sqlx::query(
                    "INSERT INTO scheduler_runs (task_name, scheduled_at, started_at, finished_at,
                                                 status, node_id, lock_token, attempt, trigger)
                     VALUES (?1, ?2, ?2, ?3, 'succeeded', 'history', ?4, 1, 'schedule')",
                )
                .bind(name)
                .bind(us)
                .bind(us + 200_000)
                .bind(format!("h{i}"))
                .execute(&mut *tx)
                .await
                .unwrap();
            }
            tx.commit().await.unwrap();
        }
    }
    eprintln!(
        "{}: history stored in {:.1} s",
        b.backend.name(),
        t.elapsed().as_secs_f64()
    );
}

async fn measure(backend: Backend) {
    let b = fresh_store(backend, "ticks_api").await;
    store_history(&b).await;
    let registry = synthetic_registry("tk.", TASKS);
    let config = ConfigDocument {
        version: None,
        calendars: Default::default(),
        limits: Default::default(),
        tasks: (0..TASKS)
            .map(|i| TaskConfig {
                name: format!("tk.{i:05}"),
                enabled: false,
                cron: cron(i).into(),
                timezone: None,
                ..Default::default()
            })
            .collect(),
    };
    let scheduler = Scheduler::builder()
        .store(Arc::clone(&b.counted))
        .node_id("bench-node")
        .registry(registry)
        .config_document(config)
        .admin_addr("127.0.0.1:0".parse().unwrap())
        .run_retention(Duration::from_secs(100 * 366 * 86_400))
        .build()
        .unwrap();
    let addr = scheduler.admin_addr().unwrap();
    let stop = CancellationToken::new();
    let s = stop.clone();
    let node = tokio::spawn(async move { scheduler.run_until(s.cancelled_owned()).await });
    while b.raw.task_states(None).await.unwrap().len() < TASKS {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(1)
        .build()
        .unwrap();
    let url = format!("http://{addr}/api/ticks?count=30");
    // Warm-up, and a check that every strip is full.
    let body = client.get(&url).send().await.unwrap().text().await.unwrap();
    let full = body.matches("\"task\":").count();
    let ticks = body.matches("\"outcome\":").count();
    eprintln!("{}: {full} strips, {ticks} ticks", backend.name());
    let mut ms = Vec::with_capacity(REQUESTS);
    let mut bytes = 0;
    b.calls.reset();
    for _ in 0..REQUESTS {
        let t = Instant::now();
        let r = client.get(&url).send().await.unwrap();
        assert!(r.status().is_success(), "{}", r.status());
        bytes = r.bytes().await.unwrap().len();
        ms.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    let calls = b.calls.snapshot();
    let per = |op: &str| calls.get(op).copied().unwrap_or(0) as f64 / REQUESTS as f64;
    let (p50, p99) = p50_p99(&mut ms);
    println!(
        "| {} | {TASKS} (500 every second, 500 yearly) | {ticks} | {p50:.1} | {p99:.1} | {bytes} | \
         {:.1} task_states, {:.1} latest_runs_per_task, {:.1} latest_skips_per_task | {} |",
        backend.name(),
        per("task_states"),
        per("latest_runs_per_task"),
        per("latest_skips_per_task"),
        load_average()
    );
    stop.cancel();
    node.await.unwrap().unwrap();
}

#[tokio::main]
async fn main() {
    println!(
        "| backend | tasks | ticks in the answer | p50 ms | p99 ms | bytes | store reads per request | load |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for backend in backends() {
        measure(backend).await;
    }
}
