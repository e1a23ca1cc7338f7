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
//! - [`front_door::FrontDoor`]: a TCP front door that moves to a new primary (a VIP, HAProxy, a
//!   Kubernetes `-rw` Service), for failover tests.
//! - [`commit_cut::CommitCut`]: a proxy that loses the answer to a COMMIT (the server commits,
//!   the client never learns it).
//! - [`PgBouncer`]: a private PgBouncer in transaction mode in front of a
//!   cluster, for tests of the store through a pooler.
//! - [`init_tracing`]: log output that `cargo test` captures per test.
//! - [`wait_until`]: bounded polling for a condition.
//! - [`postgres_tests!`] and [`require_postgres`]: every test that needs PostgreSQL (a server or
//!   its binaries) is named `on_postgres::...`, the one name `scripts/test --sqlite-only` skips;
//!   in such a run, a test that reaches for PostgreSQL under another name fails saying so.
//! - [`isolation_record_dir`]: where the isolated handlers of `test_node` keep their record.
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
pub mod commit_cut;
pub mod front_door;
pub mod handler_records;
mod pgbouncer;
pub mod proxy;
mod schema;

pub use cluster::{ClusterError, TempCluster};
pub use pgbouncer::PgBouncer;
pub use schema::{STALE_SCHEMA_AGE, TestSchema, sweep_stale_schemas};

use std::sync::Once;

/// The environment variable that names the server the suite runs against.
pub const DATABASE_URL_VAR: &str = "DATABASE_URL";

/// Set to `sqlite` by `scripts/test --sqlite-only`: the run skips every test named
/// `on_postgres::...` and has no PostgreSQL.
pub const BACKENDS_VAR: &str = "SCHEDULER_TEST_BACKENDS";

/// The path segment of every test that needs PostgreSQL (a server, or its binaries for a
/// [`TempCluster`]): what `scripts/test --sqlite-only` skips (`--skip on_postgres::`). Tests
/// needing no database may live anywhere, also in modules named `postgres`.
pub const POSTGRES_TESTS: &str = "on_postgres::";

/// Fails a test that needs `what` (PostgreSQL) in a SQLite-only run: it is not named
/// [`POSTGRES_TESTS`], so the run did not skip it. Called by [`database_url`] and
/// [`TempCluster::start`], so every way into PostgreSQL the harness offers checks it.
///
/// # Panics
///
/// When [`BACKENDS_VAR`] is `sqlite`, naming the fix.
pub fn require_postgres(what: &str) {
    if std::env::var(BACKENDS_VAR).is_ok_and(|b| b == "sqlite") {
        panic!(
            "this test needs {what}, but this is a SQLite-only run (scripts/test --sqlite-only), \
             which skips only the tests named `{POSTGRES_TESTS}...`: declare it with \
             scheduler_tests::postgres_tests! (or on_both_backends!'s postgres_only list)"
        );
    }
}

/// Declares which tests of a file need PostgreSQL: each named `async fn` of the file (written
/// without a test attribute) becomes the test `on_postgres::<name>` with the attribute given
/// for its group, the one name `scripts/test --sqlite-only` skips.
///
/// ```no_run
/// scheduler_tests::postgres_tests! {
///     #[tokio::test] a_schema_is_made, a_route_answers;
///     #[tokio::test(flavor = "multi_thread", worker_threads = 2)] a_restart_is_survived;
/// }
///
/// async fn a_schema_is_made() {
///     let db = scheduler_tests::TestSchema::new("made").await;
///     db.cleanup().await;
/// }
/// # async fn a_route_answers() {}
/// # async fn a_restart_is_survived() {}
/// # fn main() {}
/// ```
#[macro_export]
macro_rules! postgres_tests {
    ($(#[$attr:meta] $($test:ident),+ $(,)?);+ $(;)?) => {
        /// The tests that need PostgreSQL (`scripts/test --sqlite-only` skips `on_postgres::`).
        mod on_postgres {
            $($crate::postgres_tests!(@group $attr; $($test),+);)+
        }
    };
    (@group $attr:meta; $($test:ident),+) => {
        $(
            #[$attr]
            async fn $test() {
                super::$test().await
            }
        )+
    };
}

/// The PostgreSQL URL the suite runs against, from `DATABASE_URL`.
///
/// # Panics
///
/// If `DATABASE_URL` is not set, with a message saying to run the suite with
/// `scripts/test`, which sets it; in a SQLite-only run, by [`require_postgres`].
pub fn database_url() -> String {
    require_postgres("PostgreSQL (DATABASE_URL)");
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

/// Where the `iso.*` handlers of the `test_node` binary record what they did in run `run_id`
/// (one file per fact: `pid`, `identity`, `cancelled`, ...). Tests pick run ids of their own.
pub fn isolation_record_dir(run_id: i64) -> std::path::PathBuf {
    std::env::temp_dir()
        .join("scheduler-isolation-records")
        .join(run_id.to_string())
}
