//! The PostgreSQL store. All of its SQL is in `queries/*.sql` (and, what SQLite runs alike, in
//! `store/queries/`), included at compile time; every
//! value is a bound parameter. The schema is selected per connection (`search_path` as a startup
//! option, quoted), so the queries name tables without a schema.
//!
//! **Nothing waits forever.** Every operation acquires its connection within the acquire
//! timeout and finishes within the operation timeout (the server's `statement_timeout` plus a
//! little); a connection whose operation timed out is closed, not reused, because a half-read
//! reply would poison the next query. Connections carry `lock_timeout` (a row held by a stuck
//! transaction fails the waiter instead of freezing it), `idle_in_transaction_session_timeout`
//! (a node that died mid-transaction frees its row locks) and server-side TCP keepalives. A
//! connection handed back to the pool answers the pool's check within a bound too
//! (`store/in_use.rs`), and the change listener's connections have pools of their own
//! (`listener.rs`): a server that stops answering between statements holds no place of the
//! pool for long.

mod builder;
mod conninfo;
mod database_url;
mod listener;
mod migrate;
mod operations;
mod row;
mod servers;
mod tls;

use std::time::Duration;

use sqlx::PgPool;

use super::{StoreError, StoreResult};
pub use builder::{PgStoreBuilder, choose_server};
pub use conninfo::TargetSessionAttrs;

/// Default size of a node's connection pool, the change listener's connection included.
///
/// A node needs one connection for the listener and, at most at once, one each for claiming,
/// recording outcomes and renewing locks; maintenance and reconciles wait briefly for one of
/// those. Four per node lets 20 nodes (80 connections) fit PostgreSQL's default
/// `max_connections` of 100 with room for the application (see `RELIABILITY.md`).
pub const DEFAULT_MAX_CONNECTIONS: u32 = 4;
/// Default Postgres schema.
pub const DEFAULT_SCHEMA: &str = "public";
/// Default server-side limit of one statement (`statement_timeout`).
pub const DEFAULT_STATEMENT_TIMEOUT: Duration = Duration::from_secs(10);
/// Default wait for a pooled connection.
pub const DEFAULT_ACQUIRE_TIMEOUT: Duration = Duration::from_secs(5);
/// Default wait for a row lock held by another transaction (`lock_timeout`).
pub const DEFAULT_LOCK_TIMEOUT: Duration = Duration::from_secs(5);
/// A session idle inside a transaction this long is ended by the server, freeing its locks.
const IDLE_IN_TRANSACTION_TIMEOUT: Duration = Duration::from_secs(30);
/// How much longer than the statement timeout the client waits before closing the connection.
const CLIENT_TIMEOUT_SLACK: Duration = Duration::from_secs(2);
/// PostgreSQL's identifier limit (NAMEDATALEN - 1), in bytes.
const MAX_IDENTIFIER_BYTES: usize = 63;

pub use crate::redact::redact_url;

/// Milliseconds of a duration as the `int8` the queries multiply by `interval '1 millisecond'`.
fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// Quotes an SQL identifier (for `CREATE SCHEMA` and `search_path`, where nothing can be bound).
pub(crate) fn quote_ident(ident: &str) -> String {
    format!("\"{}\"", ident.replace('"', "\"\""))
}

/// Checks a schema name: 1 to 63 bytes, no NUL. Any other character works (the name is quoted
/// everywhere it is used), so `Jobs` and `计划` are schemas of their own, not `jobs`.
fn validate_schema(schema: &str) -> StoreResult<()> {
    if schema.is_empty() || schema.len() > MAX_IDENTIFIER_BYTES || schema.contains('\0') {
        return Err(StoreError::setup(format!(
            "invalid schema name `{}`: PostgreSQL schema names are 1 to {MAX_IDENTIFIER_BYTES} bytes without NUL characters",
            schema.escape_debug()
        )));
    }
    Ok(())
}

/// The NOTIFY payload of a cancel request (the listener tells it from every other change).
pub(crate) const CANCEL_PAYLOAD: &str = "cancel";

/// The NOTIFY channel of one schema's scheduler (channels are per database, so per schema here).
/// A plain lower-case ASCII schema keeps its readable name (`scheduler_public`); any other gets
/// a digest, so the channel is always a valid identifier of at most 63 bytes.
fn notify_channel(schema: &str) -> String {
    let plain = schema
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if plain && schema.len() <= MAX_IDENTIFIER_BYTES - "scheduler_".len() {
        format!("scheduler_{schema}")
    } else {
        use sha2::Digest;
        let digest = sha2::Sha256::digest(schema.as_bytes());
        let hex: String = digest[..12].iter().map(|b| format!("{b:02x}")).collect();
        format!("scheduler_{hex}")
    }
}

/// Where the change listener's `LISTEN` connections go. Each has a pool of its own (see
/// `listener.rs`), made from the options of the pool named here.
#[derive(Debug, Clone)]
enum Listen {
    /// The store's server, as the store's pool chose it: one of `max_connections`.
    Pool,
    /// A direct URL (`SCHEDULER_LISTEN_URL`): a pool that never connects, whose options follow
    /// the URL's choice of server, and that choice (boxed: the store stays small).
    Direct(Box<(PgPool, Option<std::sync::Arc<servers::Servers>>)>),
    /// Through a transaction-mode pooler without a direct URL: no listener.
    Unavailable,
}

/// The PostgreSQL implementation of [`Store`](super::Store).
#[derive(Debug, Clone)]
pub struct PgStore {
    pool: PgPool,
    schema: String,
    channel: String,
    description: Box<str>,
    op_timeout: Duration,
    acquire_timeout: Duration,
    /// Through a transaction-mode pooler: the statement that opens each operation's transaction
    /// (with its `SET LOCAL`s); `None` on a direct connection.
    transaction_begin: Option<std::sync::Arc<str>>,
    listen: Listen,
    /// The choice of server (see `servers.rs`; one host too).
    servers: Option<std::sync::Arc<servers::Servers>>,
}

impl PgStore {
    /// A builder for a store on `url`.
    pub fn builder(url: impl Into<String>) -> PgStoreBuilder {
        PgStoreBuilder::new(url)
    }

    /// Connects lazily to `url`, using tables in `schema` (created by
    /// [`Store::migrate`](super::Store::migrate)), with `max_connections` pooled connections and
    /// every other setting at its default.
    pub fn connect_lazy(url: &str, schema: &str, max_connections: u32) -> StoreResult<Self> {
        PgStoreBuilder::new(url)
            .schema(schema)
            .max_connections(max_connections)
            .connect_lazy()
    }

    /// The pool (for the application's own queries against run history).
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// The schema the tables live in.
    pub fn schema(&self) -> &str {
        &self.schema
    }

    /// The channel this store's nodes notify each other on.
    pub fn notify_channel(&self) -> &str {
        &self.channel
    }

    /// Whether this store reaches PostgreSQL through a transaction-mode pooler (see
    /// [`PgStoreBuilder::pgbouncer`]).
    pub fn through_pgbouncer(&self) -> bool {
        self.transaction_begin.is_some()
    }

    /// `host:port` of the server the store's pool uses now (`None` before the first
    /// connection, and after a doubt until the server is chosen again).
    pub fn current_server(&self) -> Option<String> {
        self.servers.as_ref().and_then(|s| s.current())
    }

    /// The server the store's connections go to (see
    /// [`Store::database_server`](super::Store::database_server)): with several hosts or a
    /// session check, the one last chosen (`None` before the first choice); else the URL's
    /// host and port.
    pub(crate) fn server_now(&self) -> Option<super::DatabaseServer> {
        match &self.servers {
            Some(servers) => {
                let (address, failovers, timeline) = servers.last_choice()?;
                let mut server = super::DatabaseServer::new(address);
                server.failovers = failovers;
                server.timeline = timeline;
                Some(server)
            }
            None => Some(super::DatabaseServer::new(servers::label_of(
                &self.pool.connect_options(),
            ))),
        }
    }

    /// How many hosts the connection string lists.
    pub(crate) fn hosts(&self) -> usize {
        self.servers.as_ref().map_or(1, |s| s.hosts())
    }

    /// After a driver error: if it says the server is gone or no longer takes writes, the next
    /// connection chooses the server again. Whether the connection must be closed.
    pub(crate) fn doubt_server(&self, error: &sqlx::Error) -> bool {
        let lost = server_lost(error);
        if lost && let Some(servers) = &self.servers {
            servers.suspect();
        }
        lost
    }

    /// The statement that opens an operation's transaction through a pooler, or `None`.
    pub(crate) fn transaction_begin(&self) -> Option<sqlx::AssertSqlSafe<std::sync::Arc<str>>> {
        self.transaction_begin.clone().map(sqlx::AssertSqlSafe)
    }
}

/// The error of a connection refused by PgBouncer for a startup parameter it does not know,
/// reworded to say what to write; `None` for any other error.
fn pooler_hint(error: &sqlx::Error) -> Option<String> {
    let sqlx::Error::Database(db) = error else {
        return None;
    };
    db.message()
        .starts_with("unsupported startup parameter")
        .then(|| {
            format!(
                "{} (the server looks like PgBouncer: add pgbouncer=true to the database URL)",
                db.message()
            )
        })
}

/// Whether `error` says the server is gone or no longer the one to write to: a lost
/// connection, an administrator's or a crash shutdown (57P01-57P03), cannot connect now
/// (57P03), a read-only transaction (25006), a connection exception (08...).
fn server_lost(error: &sqlx::Error) -> bool {
    use sqlx::Error as E;
    match error {
        E::Io(_) | E::Protocol(_) | E::PoolTimedOut => true,
        E::Database(db) => {
            let code = db.code().map(|c| c.into_owned()).unwrap_or_default();
            matches!(code.as_str(), "25006" | "57P01" | "57P02" | "57P03") || code.starts_with("08")
        }
        _ => false,
    }
}

/// A connect error in words, redacted: TLS and pooler errors explained, else the driver's text.
fn describe(error: &sqlx::Error) -> String {
    let text = tls::explain(error)
        .or_else(|| pooler_hint(error))
        .unwrap_or_else(|| error.to_string());
    crate::redact::redact_text(&text)
}

/// Classifies a driver error for callers above the store.
fn classify(operation: &'static str, error: sqlx::Error) -> StoreError {
    use sqlx::Error as E;
    let transient = match &error {
        E::Io(_)
        | E::Tls(_)
        | E::Protocol(_)
        | E::PoolTimedOut
        | E::PoolClosed
        | E::WorkerCrashed
        | E::BeginFailed => Some(false),
        E::Database(db) => {
            let code = db.code().map(|c| c.into_owned()).unwrap_or_default();
            match code.as_str() {
                // lock_not_available, serialization_failure, deadlock_detected
                "55P03" | "40001" | "40P01" => Some(true),
                // query_canceled (statement_timeout), admin/crash shutdown, cannot connect
                // now, idle-in-transaction timeout; a read-only transaction (the server is no
                // longer the primary: the next connection finds the one that is)
                "57014" | "57P01" | "57P02" | "57P03" | "25P03" | "25006" => Some(false),
                // connection exceptions, insufficient resources, operator intervention
                c if c.starts_with("08") || c.starts_with("53") || c.starts_with("58") => {
                    Some(false)
                }
                _ => None,
            }
        }
        _ => None,
    };
    let source: super::BoxError = match tls::explain(&error).or_else(|| pooler_hint(&error)) {
        Some(explained) => explained.into(),
        None => Box::new(error),
    };
    StoreError::classified(operation, source, transient)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channels_are_valid_identifiers_for_any_schema() {
        assert_eq!(notify_channel("public"), "scheduler_public");
        for schema in ["Jobs", "计划任务", "a\"b", &"x".repeat(63), "ü"] {
            let channel = notify_channel(schema);
            assert!(channel.len() <= 63, "{channel}");
            assert!(channel.is_ascii(), "{channel}");
        }
        assert_ne!(notify_channel("Jobs"), notify_channel("jobs"));
    }

    #[test]
    fn schema_names_are_checked_not_truncated() {
        assert!(validate_schema("Jobs").is_ok());
        assert!(validate_schema("计划").is_ok());
        let long = "计".repeat(22); // 66 bytes
        let error = validate_schema(&long).unwrap_err().to_string();
        assert!(error.contains("1 to 63 bytes"), "{error}");
        assert!(validate_schema("").is_err());
    }

    #[test]
    fn outside_a_runtime_the_store_is_refused_not_a_panic() {
        let error = PgStoreBuilder::new("postgres://app@127.0.0.1/x")
            .connect_lazy()
            .unwrap_err()
            .to_string();
        assert!(error.contains("inside a Tokio runtime"), "{error}");
    }

    #[tokio::test]
    async fn host_lists_and_the_keyword_form_make_a_store_without_showing_the_password() {
        for url in [
            "postgres://app:hunter2@h1:5432,h2:5433/app?target_session_attrs=read-write",
            "postgres://app:hunter2@h1,h2/app?port=5432,5433",
            "host=h1,h2 port=5432,5433 user=app password='hunter2' dbname=app",
            "host=h1 user=app password=hunter2 dbname=app",
        ] {
            let store = PgStoreBuilder::new(url).connect_lazy().unwrap();
            let shown = format!("{store:?} {}", crate::store::Store::describe(&store));
            assert!(!shown.contains("hunter2"), "{url}: {shown}");
            assert!(store.current_server().is_none());
        }
    }

    #[tokio::test]
    async fn targets_that_choose_a_read_only_server_are_refused_for_the_store() {
        for target in ["read-only", "standby", "prefer-standby"] {
            let url = format!("postgres://app:hunter2@h1,h2/app?target_session_attrs={target}");
            let error = PgStoreBuilder::new(url)
                .connect_lazy()
                .unwrap_err()
                .to_string();
            assert!(
                error.contains(&format!("target_session_attrs={target}")),
                "{error}"
            );
            assert!(error.contains("read-write or primary"), "{error}");
        }
        let error = PgStoreBuilder::new("postgres://app:hunter2@h1:5432,h2:x/app")
            .connect_lazy()
            .unwrap_err()
            .to_string();
        assert!(error.contains("port of host 2"), "{error}");
        assert!(!error.contains("hunter2"), "{error}");
    }

    #[tokio::test]
    async fn a_bad_url_is_a_setup_error_without_its_password() {
        let error = PgStoreBuilder::new("postgres://app:hunter2@db:notaport/x")
            .connect_lazy()
            .unwrap_err()
            .to_string();
        assert!(error.contains("is not a usable PostgreSQL URL"), "{error}");
        assert!(!error.contains("hunter2"), "{error}");
    }
}
