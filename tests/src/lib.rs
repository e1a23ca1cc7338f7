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

/// `url` with any password replaced by `***`, fit for logs and panic messages.
pub fn redact_url(url: &str) -> String {
    let mut out = url.to_owned();
    // userinfo password: scheme://user:password@host
    if let Some(scheme_end) = out.find("://") {
        let rest_start = scheme_end + 3;
        let authority_end = out[rest_start..]
            .find(['/', '?'])
            .map_or(out.len(), |i| rest_start + i);
        if let Some(at) = out[rest_start..authority_end].rfind('@') {
            let at = rest_start + at;
            if let Some(colon) = out[rest_start..at].find(':') {
                out.replace_range(rest_start + colon + 1..at, "***");
            }
        }
    }
    // password=... query parameter
    if let Some(q) = out.find('?') {
        let (head, query) = out.split_at(q + 1);
        let query = query
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some((k, _)) if k == "password" => format!("{k}=***"),
                _ => pair.to_owned(),
            })
            .collect::<Vec<_>>()
            .join("&");
        out = format!("{head}{query}");
    }
    out
}

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

#[cfg(test)]
mod unit {
    use super::redact_url;

    #[test]
    fn redacts_userinfo_password() {
        assert_eq!(
            redact_url("postgres://app:s3cr:et@db.example:5432/x?sslmode=disable"),
            "postgres://app:***@db.example:5432/x?sslmode=disable"
        );
    }

    #[test]
    fn redacts_query_password() {
        assert_eq!(
            redact_url("postgres://app@h/x?password=hunter2&sslmode=disable"),
            "postgres://app@h/x?password=***&sslmode=disable"
        );
    }

    #[test]
    fn leaves_passwordless_urls_alone() {
        let url = "postgres://postgres@127.0.0.1:5432/test";
        assert_eq!(redact_url(url), url);
    }
}
