//! Reconciling a config of 10,000 tasks: the first reconcile (every row created), an unchanged
//! re-reconcile (must write nothing: checked by the rows' `xmin`), and a reconcile where 100
//! schedules changed.
//!
//! `scripts/bench reconcile` (or with DATABASE_URL set:
//! `cargo run --release -p scheduler-bench --bin reconcile`).

use std::sync::Arc;
use std::time::Instant;

use scheduler::config::{ConfigDocument, TaskConfig};
use scheduler::store::{PgStore, Store};
use scheduler::testing::reconciler::Reconciler;
use scheduler_bench::engine_support::*;

const TASKS: usize = 10_000;
const ROUNDS: usize = 5;

fn document(registry: &scheduler::TaskRegistry, changed: usize) -> ConfigDocument {
    const CRONS: [&str; 5] = [
        "*/5 * * * *",
        "0 */5 * * * *",
        "30 2 * * *",
        "0 9 * * MON-FRI",
        "0 0 L * *",
    ];
    const ZONES: [Option<&str>; 3] = [None, Some("Asia/Shanghai"), Some("America/New_York")];
    ConfigDocument {
        version: None,
        calendars: Default::default(),
        limits: Default::default(),
        tasks: registry
            .names()
            .enumerate()
            .map(|(i, name)| TaskConfig {
                name: name.into(),
                enabled: i % 10 != 0,
                cron: if i < changed {
                    "15 4 * * *".into()
                } else {
                    CRONS[i % CRONS.len()].into()
                },
                timezone: ZONES[i % ZONES.len()].map(Into::into),
                ..Default::default()
            })
            .collect(),
    }
}

async fn xmins(pool: &sqlx::PgPool) -> Vec<String> {
    sqlx::query_scalar("SELECT xmin::text FROM scheduler_tasks ORDER BY name")
        .fetch_all(pool)
        .await
        .unwrap()
}

#[tokio::main]
async fn main() {
    let url = database_url();
    let registry = synthetic_registry("cfg.", TASKS);
    let unchanged = document(&registry, 0);
    let with_changes = document(&registry, 100);
    println!("| step | median ms | min ms | max ms | rows written |");
    println!("|---|---|---|---|---|");
    let (mut first, mut again, mut changed) = (Vec::new(), Vec::new(), Vec::new());
    let mut writes_again = 0usize;
    for round in 0..ROUNDS {
        let schema = format!("bench_reconcile_{round}");
        let pool = fresh_schema(&url, &schema).await;
        let store: Arc<dyn Store> = Arc::new(PgStore::connect_lazy(&url, &schema, 4).unwrap());
        let reconciler = Reconciler::new(store, registry.clone(), chrono_tz::UTC, "bench");
        // Warm the pool's connection so the first measurement is the reconcile, not a connect.
        sqlx::query("SELECT 1").execute(&pool).await.unwrap();

        let t = Instant::now();
        let report = reconciler.reconcile(&unchanged).await.unwrap();
        first.push(t.elapsed().as_secs_f64() * 1000.0);
        assert_eq!(report.created.len(), TASKS);

        let before = xmins(&pool).await;
        let t = Instant::now();
        let report = reconciler.reconcile(&unchanged).await.unwrap();
        again.push(t.elapsed().as_secs_f64() * 1000.0);
        assert!(!report.changed_anything());
        let after = xmins(&pool).await;
        writes_again += before.iter().zip(&after).filter(|(a, b)| a != b).count();

        let t = Instant::now();
        let report = reconciler.reconcile(&with_changes).await.unwrap();
        changed.push(t.elapsed().as_secs_f64() * 1000.0);
        assert_eq!(report.updated.len(), 100);
        pool.close().await;
    }
    let row = |label: &str, v: &mut Vec<f64>, writes: String| {
        let (min, max) = (
            v.iter().cloned().fold(f64::MAX, f64::min),
            v.iter().cloned().fold(0.0, f64::max),
        );
        println!(
            "| {label} | {:.1} | {min:.1} | {max:.1} | {writes} |",
            percentile(v, 50.0)
        );
    };
    row(
        "first reconcile, 10,000 tasks (all created)",
        &mut first,
        "10,000".into(),
    );
    row(
        "unchanged re-reconcile",
        &mut again,
        format!("{writes_again}"),
    );
    row(
        "re-reconcile with 100 schedules changed",
        &mut changed,
        "100".into(),
    );
    println!("\n({ROUNDS} rounds, each in a fresh schema)");
}
