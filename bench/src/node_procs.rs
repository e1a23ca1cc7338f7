//! Node processes for the benchmarks that run several nodes on one PostgreSQL schema (`scale`,
//! `shards`): where the node binary is, waiting until every node has registered, waiting for an
//! instant on the wall clock (ticks are wall-clock instants).

use std::path::PathBuf;
use std::time::Duration;

use chrono::Utc;

/// The benchmark binary `name` beside the running one (`cargo build --release -p
/// scheduler-bench --bins` builds them all).
pub fn sibling(name: &str) -> PathBuf {
    std::env::current_exe()
        .expect("the running binary's path")
        .with_file_name(name)
}

/// Waits until `nodes` nodes are registered and not stopped in `schema`; panics after `within`.
pub async fn wait_registered(admin: &sqlx::PgPool, schema: &str, nodes: usize, within: Duration) {
    let deadline = std::time::Instant::now() + within;
    loop {
        let up: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
            "SELECT count(*) FROM {schema}.scheduler_nodes WHERE stopped_at IS NULL"
        )))
        .fetch_one(admin)
        .await
        .unwrap();
        if up as usize >= nodes {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "only {up} of {nodes} nodes came up"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Sleeps until `ms` (milliseconds since the Unix epoch).
pub async fn sleep_until(ms: i64) {
    let wait = ms - Utc::now().timestamp_millis();
    if wait > 0 {
        tokio::time::sleep(Duration::from_millis(wait as u64)).await;
    }
}
