//! The run history at 10 million rows: claim and finish latency beside an empty history, and
//! retention pruning in its real batches while a node runs.
//!
//! Four windows of one node with `HISTORY_TASKS` no-op tasks every second:
//! - A: empty `scheduler_runs`;
//! - B: after filling `scheduler_runs` to `HISTORY_ROWS` finished runs spread over
//!   `HISTORY_DAYS` (one set-based `INSERT ... SELECT generate_series`, a log chunk for one run
//!   in `HISTORY_LOG_EVERY`), then `VACUUM (ANALYZE)` and a checkpoint (the state autovacuum
//!   reaches on its own; done here so that it does not run inside window B), `sync` and a
//!   pause (the kernel's writeback of the fill stays out of window B too);
//! - B2: the same window once more (B's inserts took the free space vacuum had recorded);
//! - C: the store's `prune_history` (the engine's batch size) with a retention of
//!   `HISTORY_RETENTION_DAYS`, while the node runs.
//!
//! Per window, from `pg_stat_statements` (reset after a warm-up): calls, mean and longest time
//! of the claim select, the claim apply and the outcome batch (`finish_runs`), and in C of each
//! pruning statement (one statement is one batch: the time its row locks are held); and the
//! handlers' own lag (start minus tick). Also the plans (`EXPLAIN (ANALYZE, BUFFERS)`) of the
//! claim select and of one pruning batch at full size, and how many old runs pruning left.
//!
//! `scripts/bench history` (a throwaway cluster preloading `pg_stat_statements`; about 10
//! minutes, so not in the default list), or with DATABASE_URL set:
//! `cargo run --release -p scheduler-bench --bin history`. Knobs: `HISTORY_TASKS` (1000),
//! `HISTORY_SECONDS` per window (60), `HISTORY_ROWS` (10000000), `HISTORY_DAYS` (60),
//! `HISTORY_LOG_EVERY` (10), `HISTORY_RETENTION_DAYS` (42), `HISTORY_SETTLE` seconds of pause
//! after the fill's `sync` (60), `HISTORY_KEEP=1` leaves the schema, `HISTORY_FILL=engine`
//! fills as the engine writes: running runs in chunks of 1,000, each chunk then finished by an
//! `UPDATE` (slower; the default inserts finished runs directly).

use std::sync::Arc;
use std::time::{Duration, Instant};

use scheduler::Scheduler;
use scheduler_bench::engine_support::*;
use sqlx::Row;
use tokio_util::sync::CancellationToken;

const SCHEMA: &str = "bench_history";
/// The engine's batch (`engine/maintenance.rs`, `PRUNE_BATCH`).
const PRUNE_BATCH: u32 = 5_000;
/// Longer than any history here: the node's own pruning (at start-up) deletes nothing.
const NODE_RETENTION: Duration = Duration::from_secs(3650 * 24 * 3600);
const WARM_UP: Duration = Duration::from_secs(5);

const CLAIM_DUE: &str = include_str!("../../../scheduler/src/store/postgres/queries/claim_due.sql");
const CLAIM_APPLY: &str =
    include_str!("../../../scheduler/src/store/postgres/queries/claim_apply.sql");
const FINISH_RUNS: &str =
    include_str!("../../../scheduler/src/store/postgres/queries/finish_runs.sql");
const PRUNE_RUNS: &str =
    include_str!("../../../scheduler/src/store/postgres/queries/prune_runs.sql");

fn node(url: &str, tasks: usize, lags: Arc<Lags>) -> Scheduler {
    let registry = synthetic_registry("h.", tasks);
    let doc = config_for(&registry, "* * * * * *");
    Scheduler::builder()
        .store(pg_store(url, SCHEMA))
        .node_id("history")
        .registry(registry)
        .config_document(doc)
        .run_retention(NODE_RETENTION)
        .state(lags)
        .build()
        .unwrap()
}

/// A running node; `stop` ends it.
struct Running {
    stop: CancellationToken,
    handle: tokio::task::JoinHandle<scheduler::Result<()>>,
    lags: Arc<Lags>,
}

impl Running {
    fn start(url: &str, tasks: usize) -> Self {
        let lags = Arc::new(Lags::default());
        let scheduler = node(url, tasks, Arc::clone(&lags));
        let stop = CancellationToken::new();
        let s = stop.clone();
        let handle = tokio::spawn(async move { scheduler.run_until(s.cancelled_owned()).await });
        Running { stop, handle, lags }
    }

    /// Forgets the lags recorded so far (the warm-up).
    fn clear_lags(&self) {
        self.lags.0.lock().unwrap().clear();
    }

    async fn stop(self) -> Vec<f64> {
        self.stop.cancel();
        self.handle.await.unwrap().unwrap();
        std::mem::take(&mut *self.lags.0.lock().unwrap())
    }
}

/// One statement's figures from `pg_stat_statements`: calls, mean ms, longest ms, total ms,
/// and in all its calls: shared blocks read (not in shared buffers) and dirtied, full-page
/// images written to the WAL, WAL bytes.
#[derive(Default, Clone, Copy)]
struct Stmt {
    calls: i64,
    mean: f64,
    max: f64,
    total: f64,
    read: i64,
    dirtied: i64,
    fpi: i64,
    wal: f64,
}

/// `pg_stat_statements` of the bench's database, reset and read by statement text.
struct Stats {
    pool: sqlx::PgPool,
}

impl Stats {
    async fn reset(&self) {
        sqlx::query("SELECT pg_stat_statements_reset()")
            .execute(&self.pool)
            .await
            .unwrap();
    }

    /// The figures of the statements whose text starts like `sql` (its first line: the query
    /// files start with a comment of their own).
    async fn of(&self, sql: &str) -> Stmt {
        let head = sql.lines().next().unwrap();
        let rows = sqlx::query(
            "SELECT query, calls, total_exec_time::float8 AS total, max_exec_time::float8 AS max,
                    shared_blks_read AS read, shared_blks_dirtied AS dirtied, wal_fpi AS fpi,
                    wal_bytes::float8 AS wal
             FROM pg_stat_statements
             WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())",
        )
        .fetch_all(&self.pool)
        .await
        .unwrap();
        let mut s = Stmt::default();
        for r in rows
            .iter()
            .filter(|r| r.get::<String, _>("query").starts_with(head))
        {
            s.calls += r.get::<i64, _>("calls");
            s.total += r.get::<f64, _>("total");
            s.max = s.max.max(r.get::<f64, _>("max"));
            s.read += r.get::<i64, _>("read");
            s.dirtied += r.get::<i64, _>("dirtied");
            s.fpi += r.get::<i64, _>("fpi");
            s.wal += r.get::<f64, _>("wal");
        }
        if s.calls > 0 {
            s.mean = s.total / s.calls as f64;
        }
        s
    }
}

/// Blocks read from outside shared buffers and found in them, per table and index of the schema
/// (`pg_statio_user_tables` / `_indexes`), to diff around a window.
async fn statio(pool: &sqlx::PgPool) -> std::collections::BTreeMap<String, (i64, i64)> {
    let rows = sqlx::query(
        "SELECT relname AS name, coalesce(heap_blks_read, 0) AS read, coalesce(heap_blks_hit, 0) AS hit
         FROM pg_statio_user_tables WHERE schemaname = $1
         UNION ALL
         SELECT indexrelname, coalesce(idx_blks_read, 0), coalesce(idx_blks_hit, 0)
         FROM pg_statio_user_indexes WHERE schemaname = $1",
    )
    .bind(SCHEMA)
    .fetch_all(pool)
    .await
    .unwrap();
    rows.iter()
        .map(|r| (r.get("name"), (r.get("read"), r.get("hit"))))
        .collect()
}

/// A window's figures.
struct Window {
    label: String,
    load: String,
    runs: usize,
    lag: (f64, f64, f64),
    select: Stmt,
    apply: Stmt,
    finish: Stmt,
}

fn lag_of(mut lags: Vec<f64>) -> (usize, (f64, f64, f64)) {
    if lags.is_empty() {
        return (0, (f64::NAN, f64::NAN, f64::NAN));
    }
    let (p50, p99) = p50_p99(&mut lags);
    let max = lags.iter().cloned().fold(f64::MIN, f64::max);
    (lags.len(), (p50, p99, max))
}

async fn window_of(label: &str, stats: &Stats, lags: Vec<f64>) -> Window {
    let (runs, lag) = lag_of(lags);
    Window {
        label: label.into(),
        load: load_average(),
        runs,
        lag,
        select: stats.of(CLAIM_DUE).await,
        apply: stats.of(CLAIM_APPLY).await,
        finish: stats.of(FINISH_RUNS).await,
    }
}

/// One window of the node: warm-up, reset, `seconds` measured.
async fn measure(label: &str, url: &str, tasks: usize, seconds: u64, stats: &Stats) -> Window {
    let node = Running::start(url, tasks);
    tokio::time::sleep(WARM_UP).await;
    stats.reset().await;
    node.clear_lags();
    let before = statio(&stats.pool).await;
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    let lags = node.stop().await;
    // The statistics collector reports with a delay of up to a second.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after = statio(&stats.pool).await;
    let mut io: Vec<(String, i64, i64)> = after
        .iter()
        .map(|(name, (read, hit))| {
            let (r0, h0) = before.get(name).copied().unwrap_or((0, 0));
            (name.clone(), read - r0, hit - h0)
        })
        .filter(|(_, read, hit)| read + hit > 0)
        .collect();
    io.sort_by_key(|(_, read, hit)| -(read + hit));
    eprintln!("[history] {label}: blocks read / hit per relation in the window:");
    for (name, read, hit) in io.iter().take(12) {
        eprintln!("[history]   {name}: {read} / {hit}");
    }
    window_of(label, stats, lags).await
}

fn print_windows(windows: &[Window]) {
    println!(
        "| window | load avg (1/5/15) | runs | lag p50 / p99 / max ms | claim select calls, mean / max ms | \
         claim apply calls, mean / max ms | outcome batch calls, mean / max ms |"
    );
    println!("|---|---|---|---|---|---|---|");
    let f = |s: &Stmt| format!("{}, {:.2} / {:.1}", s.calls, s.mean, s.max);
    let mut io = Vec::new();
    for w in windows {
        let per = |s: &Stmt| {
            let n = s.calls.max(1) as f64;
            format!(
                "{:.0} / {:.0} / {:.0} / {:.0}",
                s.read as f64 / n,
                s.dirtied as f64 / n,
                s.fpi as f64 / n,
                s.wal / n / 1024.0
            )
        };
        io.push(format!(
            "| {} | {} | {} | {} |",
            w.label,
            per(&w.select),
            per(&w.apply),
            per(&w.finish)
        ));
        println!(
            "| {} | {} | {} | {:.0} / {:.0} / {:.0} | {} | {} | {} |",
            w.label,
            w.load,
            w.runs,
            w.lag.0,
            w.lag.1,
            w.lag.2,
            f(&w.select),
            f(&w.apply),
            f(&w.finish)
        );
    }
    println!(
        "\nper call: shared blocks read / dirtied / WAL full-page images / WAL KiB\n\
         | window | claim select | claim apply | outcome batch |\n|---|---|---|---|"
    );
    for line in io {
        println!("{line}");
    }
}

async fn count(pool: &sqlx::PgPool, sql: &'static str) -> i64 {
    sqlx::query_scalar(sql).fetch_one(pool).await.unwrap()
}

/// The plan of one pruning batch, as the engine's prepared statement gets it after its first
/// executions (a generic plan) and as a first execution does (a custom plan, the values known).
/// `from` is the batch's lower bound on the finish time (`NULL`: the first batch of a pass).
async fn explain_prune(pool: &sqlx::PgPool, retention_ms: i64, from: &str) {
    for mode in ["force_custom_plan", "force_generic_plan"] {
        let mut conn = pool.acquire().await.unwrap();
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
            "SET plan_cache_mode = {mode}; \
             PREPARE prune_batch(int8, int8, timestamptz) AS {PRUNE_RUNS}"
        )))
        .execute(&mut *conn)
        .await
        .unwrap();
        let mut tx = sqlx::Acquire::begin(&mut *conn).await.unwrap();
        let started = Instant::now();
        let plan: Vec<String> = sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
            "EXPLAIN (ANALYZE, BUFFERS) EXECUTE prune_batch({retention_ms}, {PRUNE_BATCH}, {from})"
        )))
        .fetch_all(&mut *tx)
        .await
        .unwrap()
        .iter()
        .map(|r| r.get::<String, _>(0))
        .collect();
        let took = started.elapsed();
        tx.rollback().await.unwrap();
        sqlx::raw_sql("DEALLOCATE prune_batch; RESET plan_cache_mode")
            .execute(&mut *conn)
            .await
            .unwrap();
        println!(
            "\nprune batch ({mode}, from {from}, rolled back, {:.0} ms):\n{}",
            took.as_secs_f64() * 1000.0,
            plan.join("\n")
        );
    }
}

#[tokio::main]
async fn main() {
    let tasks = knob("HISTORY_TASKS", 1000) as usize;
    let seconds = knob("HISTORY_SECONDS", 60);
    let rows = knob("HISTORY_ROWS", 10_000_000) as i64;
    let days = knob("HISTORY_DAYS", 60) as i64;
    let log_every = knob("HISTORY_LOG_EVERY", 10).max(1) as i64;
    let retention_days = knob("HISTORY_RETENTION_DAYS", 42);
    let settle = knob("HISTORY_SETTLE", 60);
    let keep = std::env::var("HISTORY_KEEP").is_ok_and(|v| v == "1");
    let url = database_url();
    let admin = sqlx::PgPool::connect(&url).await.expect("connect");
    sqlx::query("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        .execute(&admin)
        .await
        .expect("pg_stat_statements must be preloaded (scripts/bench starts such a cluster)");
    let stats = Stats {
        pool: admin.clone(),
    };
    fresh_schema(&url, SCHEMA).await.close().await;
    // The bench's own pool on the schema, without the store's statement timeout (the fill and
    // VACUUM take minutes).
    let options: sqlx::postgres::PgConnectOptions = url.parse().expect("DATABASE_URL");
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(2)
        .connect_with(options.options([("search_path", SCHEMA)]))
        .await
        .expect("connect");
    let version: String = count_text(&admin, "SHOW server_version").await;
    let buffers: String = count_text(&admin, "SHOW shared_buffers").await;
    println!(
        "{tasks} every-second tasks, one node; {rows} rows over {days} days; PostgreSQL \
         {version}, shared_buffers {buffers}; load {}",
        load_average()
    );
    let mut windows = Vec::new();

    // A: an empty history (the node creates the tasks in its warm-up).
    sqlx::query("CHECKPOINT").execute(&admin).await.unwrap();
    windows.push(measure("A: empty history", &url, tasks, seconds, &stats).await);
    print_windows(&windows);

    // Fill: finished runs, oldest first (ids grow with time, as the engine writes them),
    // spread evenly over `days` up to now, across the tasks; 2% failed, 0.1% lost, the
    // rest succeeded; a log chunk for one run in `log_every`.
    // `HISTORY_FILL=engine`: each chunk is inserted as running runs and then finished by an
    // UPDATE, as the engine writes them (claim, then finish: the finished version of a row
    // lands on another page, the running one is left dead), in chunks of 1,000 like a claim.
    let as_engine = std::env::var("HISTORY_FILL").is_ok_and(|v| v == "engine");
    let started = Instant::now();
    let chunk = if as_engine { 1_000i64 } else { 1_000_000i64 };
    let mut from = 1i64;
    while from <= rows {
        let to = (from + chunk - 1).min(rows);
        let last: Option<i64> = sqlx::query_scalar(
            "WITH ins AS (
             INSERT INTO scheduler_runs (task_name, scheduled_at, started_at, finished_at, status,
                                         node_id, lock_token, error)
             SELECT 'h.' || lpad((g % $3)::text, 5, '0'), at, at + interval '2 ms',
                    CASE WHEN NOT $6 THEN at + interval '7 ms' END,
                    CASE WHEN $6 THEN 'running' WHEN g % 1000 = 0 THEN 'lost'
                         WHEN g % 50 = 0 THEN 'failed' ELSE 'succeeded' END,
                    'history-fill', gen_random_uuid(),
                    CASE WHEN NOT $6 AND g % 50 = 0 THEN 'handler returned an error' END
             FROM generate_series($1::int8, $2::int8) AS g,
                  LATERAL (SELECT now() - $4 * interval '1 day'
                                  + (g::float8 / $5) * $4 * interval '1 day' AS at) AS t
             RETURNING id)
             SELECT max(id) FROM ins",
        )
        .bind(from)
        .bind(to)
        .bind(tasks as i64)
        .bind(days as f64)
        .bind(rows as f64)
        .bind(as_engine)
        .fetch_one(&pool)
        .await
        .unwrap();
        if as_engine {
            sqlx::query(
                "UPDATE scheduler_runs
                 SET finished_at = started_at + interval '5 ms',
                     status = CASE WHEN id % 1000 = 0 THEN 'lost' WHEN id % 50 = 0 THEN 'failed'
                                   ELSE 'succeeded' END,
                     error = CASE WHEN id % 50 = 0 THEN 'handler returned an error' END
                 WHERE id BETWEEN $1 AND $2",
            )
            .bind(last.unwrap_or(0) - (to - from))
            .bind(last.unwrap_or(0))
            .execute(&pool)
            .await
            .unwrap();
        }
        if !as_engine || to % 1_000_000 == 0 || to == rows {
            eprintln!(
                "[history] {to} rows, {:.0} s",
                started.elapsed().as_secs_f64()
            );
        }
        from = to + 1;
    }
    let fill_runs = started.elapsed();
    let started = Instant::now();
    let logs = sqlx::query(
        "INSERT INTO scheduler_run_logs (run_id, seq, text, lines)
         SELECT id, 0, 'INFO starting\nINFO done\n', 2 FROM scheduler_runs
         WHERE node_id = 'history-fill' AND id % $1 = 0",
    )
    .bind(log_every)
    .execute(&pool)
    .await
    .unwrap()
    .rows_affected();
    let fill_logs = started.elapsed();
    let started = Instant::now();
    sqlx::raw_sql("VACUUM (ANALYZE) scheduler_runs, scheduler_run_logs")
        .execute(&pool)
        .await
        .unwrap();
    let vacuum = started.elapsed();
    let started = Instant::now();
    sqlx::query("CHECKPOINT").execute(&admin).await.unwrap();
    let checkpoint = started.elapsed();
    // Let the kernel write back what the fill dirtied (gigabytes), so that window B does not
    // run beside it: `sync`, then a pause.
    let started = Instant::now();
    let _ = std::process::Command::new("sync").status();
    let sync = started.elapsed();
    eprintln!(
        "[history] sync {:.0} s, settling {settle} s; load {}",
        sync.as_secs_f64(),
        load_average()
    );
    tokio::time::sleep(Duration::from_secs(settle)).await;
    let size: String = count_text(
        &pool,
        "SELECT pg_size_pretty(pg_total_relation_size('scheduler_runs'))",
    )
    .await;
    let total = count(&pool, "SELECT count(*) FROM scheduler_runs").await;
    println!(
        "\nfill: {total} runs ({size} with indexes) in {:.0} s, {logs} log chunks in {:.0} s, \
         VACUUM (ANALYZE) {:.0} s, CHECKPOINT {:.0} s, sync {:.0} s and {settle} s pause; load {}",
        fill_runs.as_secs_f64(),
        fill_logs.as_secs_f64(),
        vacuum.as_secs_f64(),
        checkpoint.as_secs_f64(),
        sync.as_secs_f64(),
        load_average()
    );

    // B: the same window over the full history, right after its vacuum; B2: once more, after
    // B's inserts took the free space that vacuum recorded in pages all over the history (a
    // page with room for one more run takes one; each costs a read and a full-page image).
    windows.push(measure(&format!("B: {rows} runs"), &url, tasks, seconds, &stats).await);
    windows.push(measure("B2: the same, next window", &url, tasks, seconds, &stats).await);
    print_windows(&windows);

    // The plans at full size, the node stopped.
    let select_plan = {
        let mut tx = pool.begin().await.unwrap();
        // Every task due, as at a tick (rolled back).
        sqlx::query("UPDATE scheduler_tasks SET next_run_at = now() - interval '1 second'")
            .execute(&mut *tx)
            .await
            .unwrap();
        let plan: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
            "EXPLAIN (ANALYZE, BUFFERS) {CLAIM_DUE}"
        )))
        .bind(1000i64)
        .bind(0i64) // no claim ahead: what is due now
        .fetch_all(&mut *tx)
        .await
        .unwrap();
        tx.rollback().await.unwrap();
        plan.join("\n")
    };
    println!("\nclaim select at full size (all {tasks} due, rolled back):\n{select_plan}");
    let retention_ms = (retention_days * 24 * 3600 * 1000) as i64;
    explain_prune(&pool, retention_ms, "NULL").await;

    // C: pruning through the store, in the engine's batches, with the node running.
    let retention = Duration::from_secs(retention_days * 24 * 3600);
    let old_sql = "SELECT count(*) FROM scheduler_runs WHERE finished_at < now() - $1::int8 * interval '1 millisecond'";
    let old: i64 = sqlx::query_scalar(old_sql)
        .bind(retention_ms)
        .fetch_one(&pool)
        .await
        .unwrap();
    let node = Running::start(&url, tasks);
    tokio::time::sleep(WARM_UP).await;
    stats.reset().await;
    node.clear_lags();
    let store = pg_store(&url, SCHEMA);
    let started = Instant::now();
    let pruned = store.prune_history(retention, PRUNE_BATCH).await.unwrap();
    let prune_took = started.elapsed();
    let batches = stats.of(PRUNE_RUNS).await;
    let lags = node.stop().await;
    windows.push(window_of("C: pruning", &stats, lags).await);
    let left: i64 = sqlx::query_scalar(old_sql)
        .bind(retention_ms)
        .fetch_one(&pool)
        .await
        .unwrap();
    println!(
        "\npruning (retention {retention_days} days, batch {PRUNE_BATCH}): {old} runs older, \
         {pruned} pruned in {:.1} s by prune_history; {} batches (statements), mean {:.1} ms, \
         longest {:.1} ms, total {:.1} s; older runs left after: {left}; load {}",
        prune_took.as_secs_f64(),
        batches.calls,
        batches.mean,
        batches.max,
        batches.total / 1000.0,
        load_average()
    );
    print_windows(&windows);
    // The first batch of the next pass (it steps over the index entries of the runs deleted
    // above until vacuum removes them), and a later batch, bounded where its previous one
    // stopped (a minute before the cutoff here).
    explain_prune(&pool, retention_ms, "NULL").await;
    let bound = format!("(now() - interval '{retention_days} days' - interval '1 minute')");
    explain_prune(&pool, retention_ms, &bound).await;

    pool.close().await;
    if !keep {
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
            "DROP SCHEMA IF EXISTS {SCHEMA} CASCADE"
        )))
        .execute(&admin)
        .await
        .unwrap();
    }
}

async fn count_text(pool: &sqlx::PgPool, sql: &'static str) -> String {
    sqlx::query_scalar(sql).fetch_one(pool).await.unwrap()
}
