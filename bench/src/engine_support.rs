//! Shared by the engine benchmarks: synthetic task registries, percentiles, and the stores: a
//! fresh PostgreSQL schema or a fresh SQLite file per scenario, each behind a call counter.

use std::sync::Mutex;

use chrono::Utc;
use scheduler::__private::{TaskDescriptor, TaskFuture, TaskOptions};
use scheduler::{TaskContext, TaskRegistry};

/// A numeric knob from the environment (`default` when unset; a value that is not a number
/// stops the benchmark).
pub fn knob(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .map(|v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{name} must be a number"))
        })
        .unwrap_or(default)
}

/// Runs `scheduler` for `d`, then stops it and waits for it to be done.
pub async fn run_for(scheduler: scheduler::Scheduler, d: std::time::Duration) {
    let stop = tokio_util::sync::CancellationToken::new();
    let s = stop.clone();
    let handle = tokio::spawn(async move { scheduler.run_until(s.cancelled_owned()).await });
    tokio::time::sleep(d).await;
    stop.cancel();
    handle.await.unwrap().unwrap();
}

/// Handler-observed lags in milliseconds (handler start minus scheduled tick).
#[derive(Default)]
pub struct Lags(pub Mutex<Vec<f64>>);

fn recording_handler(ctx: TaskContext) -> TaskFuture {
    Box::pin(async move {
        let lag = (Utc::now() - ctx.scheduled_at())
            .num_microseconds()
            .unwrap_or(i64::MAX) as f64
            / 1000.0;
        if let Ok(lags) = ctx.state::<std::sync::Arc<Lags>>() {
            lags.0.lock().unwrap().push(lag);
        }
        Ok(())
    })
}

/// `n` tasks named `{prefix}{i:05}`, all with a no-op handler that records its lag.
/// Descriptors are leaked: a benchmark builds its registry once.
pub fn synthetic_registry(prefix: &str, n: usize) -> TaskRegistry {
    registry_with(prefix, n, recording_handler)
}

/// `n` tasks named `{prefix}{i:05}`, all with `handler`.
pub fn registry_with(
    prefix: &str,
    n: usize,
    handler: fn(TaskContext) -> TaskFuture,
) -> TaskRegistry {
    let descriptors = (0..n).map(|i| {
        let name: &'static str = Box::leak(format!("{prefix}{i:05}").into_boxed_str());
        &*Box::leak(Box::new(TaskDescriptor {
            name,
            file: file!(),
            line: line!(),
            module_path: module_path!(),
            options: TaskOptions::DEFAULT,
            handler,
        }))
    });
    TaskRegistry::from_descriptors(descriptors).expect("unique names")
}

/// A config enabling every task of `registry` on `cron`.
pub fn config_for(registry: &TaskRegistry, cron: &str) -> scheduler::config::ConfigDocument {
    scheduler::config::ConfigDocument {
        version: None,
        calendars: Default::default(),
        limits: Default::default(),
        tasks: registry
            .names()
            .map(|name| scheduler::config::TaskConfig {
                name: name.into(),
                enabled: true,
                cron: cron.into(),
                timezone: None,
                ..Default::default()
            })
            .collect(),
    }
}

/// The `p`-th percentile (0-100) of `values`, nearest-rank.
pub fn percentile(values: &mut [f64], p: f64) -> f64 {
    assert!(!values.is_empty());
    values.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let rank = ((p / 100.0) * values.len() as f64).ceil().max(1.0) as usize;
    values[rank - 1]
}

pub fn database_url() -> String {
    std::env::var("DATABASE_URL")
        .expect("DATABASE_URL is not set: run the benchmarks with scripts/bench")
}

/// A fresh schema for one benchmark scenario.
pub async fn fresh_schema(url: &str, name: &str) -> sqlx::PgPool {
    let admin = sqlx::PgPool::connect(url)
        .await
        .expect("connect to DATABASE_URL");
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "DROP SCHEMA IF EXISTS {name} CASCADE"
    )))
    .execute(&admin)
    .await
    .unwrap();
    admin.close().await;
    let store = scheduler::store::PgStore::connect_lazy(url, name, 4).unwrap();
    use scheduler::store::Store;
    store.migrate().await.unwrap();
    store.pool().clone()
}

/// The PostgreSQL store of one benchmark schema, with the default pool.
pub fn pg_store(url: &str, schema: &str) -> std::sync::Arc<dyn scheduler::store::Store> {
    std::sync::Arc::new(
        scheduler::store::PgStore::builder(url)
            .schema(schema)
            .connect_lazy()
            .unwrap(),
    )
}

/// The backends a benchmark compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Postgres,
    Sqlite,
}

impl Backend {
    pub fn name(self) -> &'static str {
        match self {
            Backend::Postgres => "PostgreSQL",
            Backend::Sqlite => "SQLite",
        }
    }
}

/// `BENCH_BACKENDS` (`postgres`, `sqlite`, or both comma-separated; default both).
pub fn backends() -> Vec<Backend> {
    let list = std::env::var("BENCH_BACKENDS").unwrap_or_else(|_| "postgres,sqlite".into());
    list.split(',')
        .map(|b| match b.trim() {
            "postgres" => Backend::Postgres,
            "sqlite" => Backend::Sqlite,
            other => panic!("BENCH_BACKENDS: unknown backend `{other}` (postgres, sqlite)"),
        })
        .collect()
}

/// One scenario's store: `counted` goes to the scheduler, `raw` is for reading results (not
/// counted), `pg` is the schema's pool on PostgreSQL.
pub struct BenchStore {
    pub backend: Backend,
    pub counted: std::sync::Arc<dyn scheduler::store::Store>,
    pub raw: std::sync::Arc<dyn scheduler::store::Store>,
    pub calls: std::sync::Arc<crate::counting_store::Calls>,
    pub pg: Option<sqlx::PgPool>,
}

/// Where SQLite files go: `BENCH_DIR` (scripts/bench: under the cargo target dir, on disk),
/// else the temp dir.
fn bench_dir() -> std::path::PathBuf {
    std::env::var_os("BENCH_DIR")
        .map(Into::into)
        .unwrap_or_else(std::env::temp_dir)
}

/// A fresh, migrated store named `name` on `backend`: a PostgreSQL schema, or an SQLite file
/// (default settings: WAL, `synchronous = NORMAL`) in a fresh directory.
pub async fn fresh_store(backend: Backend, name: &str) -> BenchStore {
    use scheduler::store::Store;
    let (raw, pg): (std::sync::Arc<dyn Store>, _) = match backend {
        Backend::Postgres => {
            let url = database_url();
            let pool = fresh_schema(&url, name).await;
            (pg_store(&url, name), Some(pool))
        }
        Backend::Sqlite => {
            let dir = bench_dir().join(format!("scheduler-bench-{name}"));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).expect("create the SQLite bench dir");
            let store = scheduler::store::SqliteStore::builder(dir.join("bench.db"))
                .connect()
                .expect("open the SQLite bench file");
            store.migrate().await.unwrap();
            (std::sync::Arc::new(store), None)
        }
    };
    let (counted, calls) = crate::counting_store::CountingStore::wrap(std::sync::Arc::clone(&raw));
    BenchStore {
        backend,
        counted,
        raw,
        calls,
        pg,
    }
}

/// Median and p99 of `values`, formatted `p50 / p99`.
pub fn p50_p99(values: &mut [f64]) -> (f64, f64) {
    (percentile(values, 50.0), percentile(values, 99.0))
}

/// The machine's load averages (`/proc/loadavg`), recorded with each figure.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

/// A pseudo-random duration in `[0, max)`, to start rounds at random phases of the clock (a
/// round that starts right after the previous one ended would be locked to the same phase of
/// the ticks and the heartbeat).
pub fn random_delay(max: std::time::Duration) -> std::time::Duration {
    use std::hash::{BuildHasher, Hasher};
    let r = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    max.mul_f64((r % 1_000_000) as f64 / 1_000_000.0)
}

/// The server's statement counter (`pg_stat_statements`) of `pool`'s database, wherever the
/// extension was created (its schema is read from the catalog, so a pool whose `search_path` is
/// a benchmark schema finds it too). `None` if the server does not preload the module.
pub struct PgStatements {
    pool: sqlx::PgPool,
    schema: String,
}

impl PgStatements {
    pub async fn find(pool: &sqlx::PgPool) -> Option<Self> {
        let _ = sqlx::query("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            .execute(pool)
            .await;
        let schema: String = sqlx::query_scalar(
            "SELECT extnamespace::regnamespace::text FROM pg_extension
             WHERE extname = 'pg_stat_statements'",
        )
        .fetch_optional(pool)
        .await
        .ok()??;
        let me = PgStatements {
            pool: pool.clone(),
            schema,
        };
        me.reset().await.then_some(me)
    }
    pub async fn reset(&self) -> bool {
        let sql = format!("SELECT {}.pg_stat_statements_reset()", self.schema);
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
            .execute(&self.pool)
            .await
            .is_ok()
    }
    /// Statements since the last reset, the counter's own excluded.
    pub async fn count(&self) -> i64 {
        let sql = format!(
            "SELECT coalesce(sum(calls), 0)::int8 FROM {}.pg_stat_statements
             WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
               AND query NOT LIKE '%pg_stat_statements%'",
            self.schema
        );
        sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
            .fetch_one(&self.pool)
            .await
            .unwrap()
    }

    /// Calls per statement text (whitespace folded, first 70 characters), most called first.
    pub async fn by_query(&self) -> Vec<(i64, String)> {
        let sql = format!(
            "SELECT calls, left(regexp_replace(query, '\\s+', ' ', 'g'), 70) FROM {}.pg_stat_statements
             WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
               AND query NOT LIKE '%pg_stat_statements%'
             ORDER BY calls DESC",
            self.schema
        );
        sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .fetch_all(&self.pool)
            .await
            .unwrap()
    }
}
