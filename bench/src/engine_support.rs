//! Shared by the engine benchmarks: synthetic task registries, percentiles, and the database.

#![allow(dead_code)]

use std::sync::Mutex;

use chrono::Utc;
use scheduler::__private::{TaskDescriptor, TaskFuture, TaskOptions};
use scheduler::{TaskContext, TaskRegistry};

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
        tasks: registry
            .names()
            .map(|name| scheduler::config::TaskConfig {
                name: name.into(),
                enabled: true,
                cron: cron.into(),
                timezone: None,
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
