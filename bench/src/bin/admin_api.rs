//! Admin API latency over real HTTP: a node with its admin server on 127.0.0.1:0, 1,000
//! registered tasks and 1,000,000 run rows, on PostgreSQL (a fresh schema of DATABASE_URL; rows
//! by `generate_series`) and on an SQLite file in the temp directory (rows by a recursive CTE).
//! Timed from one keep-alive client, `REQUESTS` sequential requests per route: the task list,
//! one task, and the runs query with each filter, first page and a deep cursor page (50 runs a
//! page). Then the plan of each runs query: `EXPLAIN (ANALYZE, BUFFERS)` on PostgreSQL (the
//! custom plan of the prepared statement), `EXPLAIN QUERY PLAN` on SQLite. The load average is
//! printed with each table (the machine is shared).
//!
//! `scripts/bench admin_api` (or with DATABASE_URL set:
//! `cargo run --release -p scheduler-bench --bin admin_api`; `ADMIN_API_BACKENDS=sqlite` for one).

use std::sync::Arc;
use std::time::{Duration, Instant};

use scheduler::Scheduler;
use scheduler::store::{PgStore, SqliteStore, Store};
use scheduler_bench::engine_support::*;
use sqlx::Connection;
use tokio_util::sync::CancellationToken;

const TASKS: usize = 1_000;
const ROWS: i64 = 1_000_000;
const REQUESTS: usize = 200;
/// Every row starts one second after the previous one, from here (unix seconds): the history
/// ends an hour ago (and the node keeps a year of it, so none is pruned meanwhile).
static BASE: std::sync::LazyLock<i64> =
    std::sync::LazyLock::new(|| chrono::Utc::now().timestamp() - ROWS - 3_600);
const SCHEMA: &str = "bench_admin_api";

/// Generated rows: task `api.{i % 1000:05}`; status failed every 50th, timed_out every 500th
/// (offset 1), else succeeded; trigger manual every 1000th (offset 3), retry every 100th
/// (offset 7), else schedule.
const PG_ROWS: &str = "
INSERT INTO scheduler_runs (task_name, scheduled_at, started_at, finished_at, status, node_id,
                            lock_token, attempt, trigger, triggered_by)
SELECT 'api.' || lpad((i % 1000)::text, 5, '0'),
       to_timestamp($1 + i), to_timestamp($1 + i), to_timestamp($1 + i + 1),
       CASE WHEN i % 50 = 0 THEN 'failed' WHEN i % 500 = 1 THEN 'timed_out' ELSE 'succeeded' END,
       'bench-node', gen_random_uuid(),
       CASE WHEN i % 100 = 7 THEN 2 ELSE 1 END,
       CASE WHEN i % 1000 = 3 THEN 'manual' WHEN i % 100 = 7 THEN 'retry' ELSE 'schedule' END,
       CASE WHEN i % 1000 = 3 THEN 'ops' END
FROM generate_series(1, $2) AS i";

const SQLITE_ROWS: &str = "
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?2)
INSERT INTO scheduler_runs (task_name, scheduled_at, started_at, finished_at, status, node_id,
                            lock_token, attempt, trigger, triggered_by)
SELECT 'api.' || substr('0000' || (i % 1000), -5),
       (?1 + i) * 1000000, (?1 + i) * 1000000, (?1 + i + 1) * 1000000,
       CASE WHEN i % 50 = 0 THEN 'failed' WHEN i % 500 = 1 THEN 'timed_out' ELSE 'succeeded' END,
       'bench-node', lower(hex(randomblob(16))),
       CASE WHEN i % 100 = 7 THEN 2 ELSE 1 END,
       CASE WHEN i % 1000 = 3 THEN 'manual' WHEN i % 100 = 7 THEN 'retry' ELSE 'schedule' END,
       CASE WHEN i % 1000 = 3 THEN 'ops' END
FROM n";

const PG_RUNS_QUERY: &str =
    include_str!("../../../scheduler/src/store/postgres/queries/runs_query.sql");
const SQLITE_RUNS_QUERY: &str =
    include_str!("../../../scheduler/src/store/sqlite/queries/runs_query.sql");
const SQLITE_BY_TASK: &str =
    include_str!("../../../scheduler/src/store/sqlite/queries/runs_by_task.sql");
const SQLITE_BY_STATUS: &str =
    include_str!("../../../scheduler/src/store/sqlite/queries/runs_by_status.sql");
const SQLITE_BY_TRIGGER: &str =
    include_str!("../../../scheduler/src/store/sqlite/queries/runs_by_trigger.sql");
const SQLITE_BY_TIME: &str =
    include_str!("../../../scheduler/src/store/sqlite/queries/runs_by_time.sql");

/// One runs query of the API: its label, and its filters (task, status, trigger, since, until,
/// before-id).
struct Filter {
    label: &'static str,
    task: Option<&'static str>,
    status: Option<&'static str>,
    trigger: Option<&'static str>,
    range: Option<(i64, i64)>,
    before: Option<i64>,
}

/// A one-hour window in the middle of the history (3,600 rows).
fn window() -> (i64, i64) {
    (*BASE + 500_000, *BASE + 503_600)
}
/// A cursor deep in the history: only 10,000 rows are older.
const DEEP: i64 = 10_000;

fn filters() -> Vec<Filter> {
    let f = |label, task, status, trigger, range, before| Filter {
        label,
        task,
        status,
        trigger,
        range,
        before,
    };
    vec![
        f("none", None, None, None, None, None),
        f("none, deep page", None, None, None, None, Some(DEEP)),
        f("task", Some("api.00042"), None, None, None, None),
        f(
            "task, deep page",
            Some("api.00042"),
            None,
            None,
            None,
            Some(DEEP),
        ),
        f("status=failed", None, Some("failed"), None, None, None),
        f(
            "status=failed, deep page",
            None,
            Some("failed"),
            None,
            None,
            Some(DEEP),
        ),
        f("trigger=manual", None, None, Some("manual"), None, None),
        f(
            "trigger=manual, deep page",
            None,
            None,
            Some("manual"),
            None,
            Some(DEEP),
        ),
        f("time range (1 h)", None, None, None, Some(window()), None),
        f(
            "time range (1 h), deep page",
            None,
            None,
            None,
            Some(window()),
            Some(window().0 - *BASE + 1_800),
        ),
    ]
}

fn rfc3339(unix: i64) -> String {
    chrono::DateTime::from_timestamp(unix, 0)
        .unwrap()
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

impl Filter {
    fn url_path(&self) -> String {
        let mut q = vec!["limit=50".to_owned()];
        if let Some(t) = self.task {
            q.push(format!("task={t}"));
        }
        if let Some(s) = self.status {
            q.push(format!("status={s}"));
        }
        if let Some(t) = self.trigger {
            q.push(format!("trigger={t}"));
        }
        if let Some((a, b)) = self.range {
            q.push(format!("since={}&until={}", rfc3339(a), rfc3339(b)));
        }
        if let Some(c) = self.before {
            q.push(format!("cursor={c}"));
        }
        format!("/api/runs?{}", q.join("&"))
    }
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

async fn time_route(client: &reqwest::Client, base: &str, path: &str) -> (f64, f64, usize) {
    let url = format!("{base}{path}");
    let mut bytes = 0;
    // Warm-up: the connection, the prepared statements, the pages.
    for _ in 0..5 {
        let r = client.get(&url).send().await.unwrap();
        assert!(r.status().is_success(), "{path}: {}", r.status());
        bytes = r.bytes().await.unwrap().len();
    }
    let mut ms = Vec::with_capacity(REQUESTS);
    for _ in 0..REQUESTS {
        let t = Instant::now();
        let r = client.get(&url).send().await.unwrap();
        assert!(r.status().is_success(), "{path}: {}", r.status());
        let body = r.bytes().await.unwrap();
        ms.push(t.elapsed().as_secs_f64() * 1000.0);
        bytes = body.len();
    }
    (percentile(&mut ms, 50.0), percentile(&mut ms, 99.0), bytes)
}

async fn measure(backend: &str, store: Arc<dyn Store>) {
    let registry = synthetic_registry("api.", TASKS);
    let scheduler = Scheduler::builder()
        .store(Arc::clone(&store))
        .node_id("bench-node")
        .registry(registry.clone())
        .config_document(config_for(&registry, "0 0 1 1 *"))
        .admin_addr("127.0.0.1:0".parse().unwrap())
        .run_retention(Duration::from_secs(365 * 86_400))
        .build()
        .unwrap();
    let addr = scheduler.admin_addr().unwrap();
    let stop = CancellationToken::new();
    let s = stop.clone();
    let node = tokio::spawn(async move { scheduler.run_until(s.cancelled_owned()).await });
    while store.task_states(None).await.unwrap().len() < TASKS {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(1)
        .build()
        .unwrap();
    let base = format!("http://{addr}");
    println!("### {backend}: {TASKS} tasks, {ROWS} runs, {REQUESTS} requests per route\n");
    println!("load average before: {}\n", load_average());
    println!("| route | p50 ms | p99 ms | response bytes |");
    println!("|---|---|---|---|");
    let mut routes = vec![
        (
            "GET /api/tasks (1,000 tasks)".to_owned(),
            "/api/tasks".to_owned(),
        ),
        (
            "GET /api/tasks/api.00042".to_owned(),
            "/api/tasks/api.00042".to_owned(),
        ),
    ];
    for f in filters() {
        routes.push((format!("GET /api/runs, {}", f.label), f.url_path()));
    }
    for (label, path) in routes {
        let (p50, p99, bytes) = time_route(&client, &base, &path).await;
        println!("| {label} | {p50:.2} | {p99:.2} | {bytes} |");
    }
    println!("\nload average after: {}\n", load_average());
    stop.cancel();
    node.await.unwrap().unwrap();
}

async fn postgres() {
    let url = database_url();
    fresh_schema(&url, SCHEMA).await.close().await;
    // One connection of its own: the store's pool limits statements to its operation timeout.
    let mut conn = sqlx::PgConnection::connect(&url).await.unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "SET search_path TO {SCHEMA}; SET statement_timeout = 0"
    )))
    .execute(&mut conn)
    .await
    .unwrap();
    let t = Instant::now();
    sqlx::query(PG_ROWS)
        .bind(*BASE as f64)
        .bind(ROWS)
        .execute(&mut conn)
        .await
        .unwrap();
    sqlx::query("VACUUM ANALYZE scheduler_runs")
        .execute(&mut conn)
        .await
        .unwrap();
    eprintln!(
        "postgres: {ROWS} rows in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    let store: Arc<dyn Store> = Arc::new(PgStore::connect_lazy(&url, SCHEMA, 8).unwrap());
    measure("PostgreSQL", Arc::clone(&store)).await;

    println!("#### PostgreSQL plans (`EXPLAIN (ANALYZE, BUFFERS)`, custom plan)\n");
    for f in filters() {
        let since = f.range.map(|r| rfc3339(r.0));
        let until = f.range.map(|r| rfc3339(r.1));
        let sql = format!(
            "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) {}",
            PG_RUNS_QUERY
                .lines()
                .filter(|l| !l.starts_with("--"))
                .collect::<Vec<_>>()
                .join("\n")
        );
        let rows: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
            .bind(f.task)
            .bind(f.status)
            .bind(f.trigger)
            .bind(since.map(|s| chrono::DateTime::parse_from_rfc3339(&s).unwrap()))
            .bind(until.map(|s| chrono::DateTime::parse_from_rfc3339(&s).unwrap()))
            .bind(f.before)
            .bind(50i64)
            .fetch_all(&mut conn)
            .await
            .unwrap();
        println!("{}:\n```\n{}\n```\n", f.label, rows.join("\n"));
    }
    conn.close().await.unwrap();
}

async fn sqlite() {
    let path = std::env::temp_dir().join(format!("admin_api-{}.db", std::process::id()));
    let sqlite = SqliteStore::builder(&path).connect().unwrap();
    sqlite.migrate().await.unwrap();
    let t = Instant::now();
    sqlx::query(SQLITE_ROWS)
        .bind(*BASE)
        .bind(ROWS)
        .execute(sqlite.pool())
        .await
        .unwrap();
    sqlx::query("ANALYZE").execute(sqlite.pool()).await.unwrap();
    eprintln!("sqlite: {ROWS} rows in {:.1} s", t.elapsed().as_secs_f64());
    let pool = sqlite.pool().clone();
    let store: Arc<dyn Store> = Arc::new(sqlite);
    measure("SQLite", Arc::clone(&store)).await;

    println!("#### SQLite plans (`EXPLAIN QUERY PLAN`)\n");
    let mut conn = pool.acquire().await.unwrap();
    for f in filters() {
        // The query the store picks for these filters (see its `runs`).
        let sql = if f.task.is_some() {
            SQLITE_BY_TASK
        } else if f.range.is_some() {
            SQLITE_BY_TIME
        } else if f.status.is_some() {
            SQLITE_BY_STATUS
        } else if f.trigger.is_some() {
            SQLITE_BY_TRIGGER
        } else {
            SQLITE_RUNS_QUERY
        };
        let sql = format!("EXPLAIN QUERY PLAN {sql}");
        let rows: Vec<(i64, i64, i64, String)> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(f.task)
            .bind(f.status)
            .bind(f.trigger)
            .bind(f.range.map(|r| r.0 * 1_000_000))
            .bind(f.range.map(|r| r.1 * 1_000_000))
            .bind(f.before)
            .bind(50i64)
            .fetch_all(&mut *conn)
            .await
            .unwrap();
        let plan: Vec<String> = rows.into_iter().map(|r| r.3).collect();
        println!("{}: `{}`\n", f.label, plan.join("; "));
    }
    drop(conn);
    drop(pool);
    drop(store);
    for suffix in ["", "-wal", "-shm", ".lock"] {
        let mut p = path.clone().into_os_string();
        p.push(suffix);
        let _ = std::fs::remove_file(p);
    }
}

#[tokio::main]
async fn main() {
    let backends = std::env::var("ADMIN_API_BACKENDS").unwrap_or_else(|_| "postgres,sqlite".into());
    for backend in backends.split(',') {
        match backend.trim() {
            "postgres" => postgres().await,
            "sqlite" => sqlite().await,
            other => panic!("unknown backend `{other}` (postgres, sqlite)"),
        }
    }
}
