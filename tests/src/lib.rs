//! Test support for the `scheduler` workspace.
//!
//! Owns the plumbing every database test needs, and nothing about the engine
//! itself (this library does not depend on `scheduler`):
//!
//! - [`database_url`]: the server the suite runs against. `scripts/test`
//!   picks one (a running server or a throwaway cluster) and exports
//!   `DATABASE_URL`.
//! - [`TestSchema`]: an isolated, uniquely named schema per test, with a pool
//!   and a URL whose `search_path` points at it, dropped when the test ends.
//! - [`TempCluster`]: a private PostgreSQL cluster a fault test may stop,
//!   start and restart without disturbing anyone else.
//! - [`init_tracing`]: log output that `cargo test` captures per test.
//! - [`wait_until`]: bounded polling for a condition.
//!
//! ```no_run
//! use scheduler_tests::TestSchema;
//!
//! # async fn example() {
//! let db = TestSchema::new("leases").await;
//! sqlx::query("create table leases (id int primary key)")
//!     .execute(&db.pool)
//!     .await
//!     .unwrap();
//! db.cleanup().await;
//! # }
//! ```

mod cluster;
mod schema;

pub use cluster::{ClusterError, TempCluster};
pub use schema::{STALE_SCHEMA_AGE, TestSchema, sweep_stale_schemas};

use std::sync::Once;

/// The environment variable that names the server the suite runs against.
pub const DATABASE_URL_VAR: &str = "DATABASE_URL";

/// The PostgreSQL URL the suite runs against, from `DATABASE_URL`.
///
/// # Panics
///
/// If `DATABASE_URL` is not set, with a message saying to run the suite with
/// `scripts/test`, which sets it.
pub fn database_url() -> String {
    match std::env::var(DATABASE_URL_VAR) {
        Ok(url) if !url.trim().is_empty() => url,
        _ => panic!("DATABASE_URL is not set: run the suite with scripts/test"),
    }
}

/// `url` with any password replaced by `***`, fit for logs and panic messages (the library's
/// own redaction, so tests and the scheduler agree on what a log may show).
pub use scheduler::store::postgres::redact_url;

/// Install a test-friendly tracing subscriber, once per process.
///
/// Output goes through the test harness's capture (`with_test_writer`), so it
/// shows only for failing tests or with `--nocapture`. The filter comes from
/// `RUST_LOG` and defaults to `warn`. Safe to call from every test; if some
/// other subscriber is already installed, that one is kept.
pub fn init_tracing() {
    static INIT: Once = Once::new();
    INIT.call_once(|| {
        let filter = tracing_subscriber::EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
        let _ = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_test_writer()
            .try_init();
    });
}

/// Polls `check` every 50 ms until it returns true; panics with `what` after `limit`.
pub async fn wait_until<F, Fut>(limit: std::time::Duration, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if check().await {
            return;
        }
        if tokio::time::Instant::now() > deadline {
            panic!("timed out after {limit:?} waiting for: {what}");
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}
