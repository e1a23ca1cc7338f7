//! Per-test schemas on the suite's server ([`database_url`]).
//!
//! Each [`TestSchema`] is a fresh schema named `t_<prefix>_<unix secs>_<rand>`;
//! its pool and URL carry `search_path=<schema>`, so unqualified SQL (and any
//! child process handed the URL) lands in it. The timestamp in the name lets
//! [`sweep_stale_schemas`] drop leftovers of killed runs without guessing.
//!
//! This module only creates and drops `t_*` schemas; it never touches other
//! objects on the server.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{AssertSqlSafe, Connection, Executor, PgConnection, PgPool};

use crate::{database_url, redact_url};

/// Schemas named like a [`TestSchema`] and older than this are dropped by
/// [`sweep_stale_schemas`]: far longer than any test run, so a concurrent
/// run's schemas are never touched.
pub const STALE_SCHEMA_AGE: Duration = Duration::from_secs(6 * 60 * 60);

/// Connections in each test's pool. Small: tests run in parallel and the
/// server's `max_connections` is shared by all of them.
const POOL_MAX_CONNECTIONS: u32 = 5;

/// How long a drop waits for a lock before giving up (the schema is then left
/// for [`sweep_stale_schemas`]) instead of hanging the test.
const DROP_LOCK_TIMEOUT: &str = "5s";

/// How long [`Drop`] waits for its background drop to finish.
const DROP_WAIT: Duration = Duration::from_secs(15);

/// PostgreSQL's identifier limit (NAMEDATALEN - 1).
const MAX_IDENTIFIER_LEN: usize = 63;

/// An isolated schema for one test, dropped (CASCADE) when the test ends.
///
/// Prefer ending a test with [`TestSchema::cleanup`], which closes the pool
/// and drops the schema before returning. If the test panics or forgets,
/// [`Drop`] still drops the schema, on a helper thread with its own runtime
/// (it waits up to 15 s and only warns on failure). Anything left behind by a
/// killed run is removed by [`sweep_stale_schemas`], which the first
/// `TestSchema::new` of each test process runs.
///
/// ```no_run
/// # async fn example() {
/// let db = scheduler_tests::TestSchema::new("claims").await;
/// // Unqualified names resolve to db.schema:
/// sqlx::query("create table claims (id int)").execute(&db.pool).await.unwrap();
/// // A process under test can be pointed at the same schema with db.url.
/// db.cleanup().await;
/// # }
/// ```
#[derive(Debug)]
pub struct TestSchema {
    /// The schema's name, `t_<prefix>_<unix secs>_<8 hex>`; a plain
    /// identifier that needs no quoting.
    pub schema: String,
    /// `DATABASE_URL` plus `options=-c search_path=<schema>`, understood by
    /// sqlx and libpq alike.
    pub url: String,
    /// A pool whose connections all have `search_path` set to the schema.
    pub pool: PgPool,
    admin_url: String,
    cleaned: bool,
}

impl TestSchema {
    /// Create a fresh schema on the suite's server and a pool scoped to it.
    ///
    /// `prefix` names the test in the schema name (lowercased; characters
    /// other than ASCII letters, digits and `_` become `_`; cut to fit
    /// PostgreSQL's 63-byte identifier limit).
    ///
    /// # Panics
    ///
    /// If `DATABASE_URL` is unset, the server is unreachable or the schema
    /// cannot be created: a test cannot go on without its database.
    pub async fn new(prefix: &str) -> TestSchema {
        let admin_url = database_url();
        let schema = schema_name(
            prefix,
            unix_now(),
            &uuid::Uuid::new_v4().simple().to_string(),
        );

        let mut conn = PgConnection::connect(&admin_url).await.unwrap_or_else(|e| {
            panic!(
                "cannot connect to DATABASE_URL={}: {e}\n(run the suite with scripts/test)",
                redact_url(&admin_url)
            )
        });
        conn.execute(AssertSqlSafe(format!(r#"create schema "{schema}""#)))
            .await
            .unwrap_or_else(|e| panic!("cannot create test schema {schema}: {e}"));
        let _ = conn.close().await;

        let url = url_with_search_path(&admin_url, &schema);
        let options: PgConnectOptions = url
            .parse()
            .unwrap_or_else(|e| panic!("bad DATABASE_URL={}: {e}", redact_url(&admin_url)));
        let pool = PgPoolOptions::new()
            .max_connections(POOL_MAX_CONNECTIONS)
            .acquire_timeout(Duration::from_secs(30))
            .connect_with(options)
            .await
            .unwrap_or_else(|e| panic!("cannot open a pool on test schema {schema}: {e}"));

        static SWEPT: AtomicBool = AtomicBool::new(false);
        if !SWEPT.swap(true, Ordering::SeqCst) {
            // Best effort: leftovers only cost space, never correctness.
            let _ = sweep_stale_schemas(&pool).await;
        }

        TestSchema {
            schema,
            url,
            pool,
            admin_url,
            cleaned: false,
        }
    }

    /// Close the pool and drop the schema (CASCADE), waiting for both.
    ///
    /// # Panics
    ///
    /// If the schema cannot be dropped (for example, another connection holds
    /// a lock on one of its tables for more than 5 s): a leak worth seeing.
    pub async fn cleanup(mut self) {
        self.pool.close().await;
        let result = drop_schema(&self.admin_url, &self.schema).await;
        // Whatever happened, Drop must not try again.
        self.cleaned = true;
        if let Err(e) = result {
            panic!("cannot drop test schema {}: {e}", self.schema);
        }
    }
}

impl Drop for TestSchema {
    fn drop(&mut self) {
        if self.cleaned {
            return;
        }
        // Drop is sync and may run inside (or after) the test's runtime, whose
        // pool we must not block on: drop the schema over a fresh connection
        // on a thread with its own runtime, and wait for it a bounded time.
        let admin_url = self.admin_url.clone();
        let schema = self.schema.clone();
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        let spawned = std::thread::Builder::new()
            .name(format!("drop-{schema}"))
            .spawn(move || {
                let result = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|e| e.to_string())
                    .and_then(|rt| rt.block_on(drop_schema(&admin_url, &schema)));
                let _ = done_tx.send(result);
            });
        if let Err(e) = spawned {
            eprintln!("warning: test schema {} left behind: {e}", self.schema);
            return;
        }
        match done_rx.recv_timeout(DROP_WAIT) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => eprintln!("warning: test schema {} left behind: {e}", self.schema),
            Err(_) => eprintln!(
                "warning: test schema {} may be left behind: drop still running after {DROP_WAIT:?}",
                self.schema
            ),
        }
    }
}

/// Drop `t_*` schemas whose name says they were made by a [`TestSchema`] more
/// than [`STALE_SCHEMA_AGE`] ago (leftovers of killed or crashed runs).
/// Returns the names dropped. A schema that cannot be dropped right now (a
/// lock is held) is skipped and left for a later sweep.
pub async fn sweep_stale_schemas(pool: &PgPool) -> Result<Vec<String>, sqlx::Error> {
    let names: Vec<String> =
        sqlx::query_scalar(r"select nspname::text from pg_namespace where nspname like 't\_%'")
            .fetch_all(pool)
            .await?;
    let now = unix_now();
    let mut dropped = Vec::new();
    for name in names {
        let Some(created) = schema_created_at(&name) else {
            continue;
        };
        if now.saturating_sub(created) < STALE_SCHEMA_AGE.as_secs() {
            continue;
        }
        let mut tx = pool.begin().await?;
        tx.execute(AssertSqlSafe(format!(
            "set local lock_timeout = '{DROP_LOCK_TIMEOUT}'"
        )))
        .await?;
        let result = tx
            .execute(AssertSqlSafe(format!(
                r#"drop schema if exists "{name}" cascade"#
            )))
            .await;
        if result.is_ok() && tx.commit().await.is_ok() {
            dropped.push(name);
        }
    }
    Ok(dropped)
}

async fn drop_schema(admin_url: &str, schema: &str) -> Result<(), String> {
    let mut conn = PgConnection::connect(admin_url)
        .await
        .map_err(|e| format!("cannot connect to {}: {e}", redact_url(admin_url)))?;
    conn.execute(AssertSqlSafe(format!(
        "set lock_timeout = '{DROP_LOCK_TIMEOUT}'"
    )))
    .await
    .map_err(|e| e.to_string())?;
    conn.execute(AssertSqlSafe(format!(
        r#"drop schema if exists "{schema}" cascade"#
    )))
    .await
    .map_err(|e| e.to_string())?;
    let _ = conn.close().await;
    Ok(())
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// `t_<prefix>_<unix secs>_<first 8 chars of rand>`, at most 63 bytes.
fn schema_name(prefix: &str, unix_secs: u64, rand: &str) -> String {
    let suffix = format!("_{unix_secs}_{}", &rand[..8.min(rand.len())]);
    let room = MAX_IDENTIFIER_LEN - "t_".len() - suffix.len();
    let mut clean: String = prefix
        .chars()
        .map(|c| match c.to_ascii_lowercase() {
            c @ ('a'..='z' | '0'..='9' | '_') => c,
            _ => '_',
        })
        .take(room)
        .collect();
    if clean.is_empty() {
        clean.push('x');
    }
    format!("t_{clean}{suffix}")
}

/// The unix time encoded in a [`schema_name`], if `name` is one.
fn schema_created_at(name: &str) -> Option<u64> {
    let mut parts = name.rsplitn(3, '_');
    let rand = parts.next()?;
    let secs = parts.next()?;
    let head = parts.next()?;
    let well_formed = head.starts_with("t_")
        && rand.len() == 8
        && rand.bytes().all(|b| b.is_ascii_hexdigit())
        && !secs.is_empty()
        && secs.bytes().all(|b| b.is_ascii_digit());
    if well_formed { secs.parse().ok() } else { None }
}

/// `url` plus a libpq/sqlx `options` parameter setting `search_path`.
fn url_with_search_path(url: &str, schema: &str) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}options=-c%20search_path%3D{schema}")
}

#[cfg(test)]
mod unit {
    use super::*;

    #[test]
    fn schema_names_are_clean_and_parse_back() {
        let name = schema_name("Lease Watchdog!", 1_700_000_000, "0123abcdef");
        assert_eq!(name, "t_lease_watchdog__1700000000_0123abcd");
        assert_eq!(schema_created_at(&name), Some(1_700_000_000));
    }

    #[test]
    fn long_prefixes_fit_the_identifier_limit() {
        let name = schema_name(&"a".repeat(200), 1_700_000_000, "0123abcd");
        assert_eq!(name.len(), MAX_IDENTIFIER_LEN);
        assert_eq!(schema_created_at(&name), Some(1_700_000_000));
    }

    #[test]
    fn empty_prefix_still_names_a_schema() {
        assert_eq!(schema_name("", 5, "deadbeef"), "t_x_5_deadbeef");
    }

    #[test]
    fn other_schemas_are_not_ours() {
        for name in [
            "t_",
            "t_foo",
            "t_foo_bar",
            "t_a_123_nothex!!",
            "tenant_1_12345678",
            "t_a_12x_deadbeef",
        ] {
            assert_eq!(schema_created_at(name), None, "{name}");
        }
    }

    #[test]
    fn search_path_goes_into_the_url() {
        assert_eq!(
            url_with_search_path("postgres://u@h/db", "t_x_1_aaaaaaaa"),
            "postgres://u@h/db?options=-c%20search_path%3Dt_x_1_aaaaaaaa"
        );
        assert_eq!(
            url_with_search_path("postgres://u@h/db?sslmode=disable", "s"),
            "postgres://u@h/db?sslmode=disable&options=-c%20search_path%3Ds"
        );
    }
}
