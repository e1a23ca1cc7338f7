//! [`PgStoreBuilder`]: a store's settings, each with its documented default, and the
//! connection options made from the URL (libpq's reading of it, TLS, the schema and timeouts set
//! on every connection).

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

use super::conninfo::{self, ConnInfo, TargetSessionAttrs};
use super::servers::{self, Servers};
use super::{
    CLIENT_TIMEOUT_SLACK, DEFAULT_ACQUIRE_TIMEOUT, DEFAULT_LOCK_TIMEOUT, DEFAULT_MAX_CONNECTIONS,
    DEFAULT_SCHEMA, DEFAULT_STATEMENT_TIMEOUT, IDLE_IN_TRANSACTION_TIMEOUT, Listen, PgStore,
    database_url, millis, notify_channel, quote_ident, redact_url, tls, validate_schema,
};
use crate::store::{StoreError, StoreResult};

/// Builds a [`PgStore`]; every setting has a documented default.
///
/// ```
/// use std::time::Duration;
/// use scheduler::store::postgres::PgStoreBuilder;
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), scheduler::store::StoreError> {
/// let store = PgStoreBuilder::new("postgres://app@127.0.0.1:5432/app")
///     .schema("jobs")
///     .max_connections(4)
///     .statement_timeout(Duration::from_secs(5))
///     .connect_lazy()?;
/// assert_eq!(store.schema(), "jobs");
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct PgStoreBuilder {
    url: String,
    schema: String,
    max_connections: u32,
    statement_timeout: Duration,
    acquire_timeout: Duration,
    lock_timeout: Duration,
    pgbouncer: Option<bool>,
    listen_url: Option<String>,
}

impl std::fmt::Debug for PgStoreBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStoreBuilder")
            .field("url", &redact_url(&self.url))
            .field("schema", &self.schema)
            .field("max_connections", &self.max_connections)
            .field("statement_timeout", &self.statement_timeout)
            .field("pgbouncer", &self.pgbouncer)
            .field("listen_url", &self.listen_url.as_deref().map(redact_url))
            .finish_non_exhaustive()
    }
}

impl PgStoreBuilder {
    /// A store on the database at `url` (`postgres://` or `postgresql://`).
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            schema: DEFAULT_SCHEMA.to_owned(),
            max_connections: DEFAULT_MAX_CONNECTIONS,
            statement_timeout: DEFAULT_STATEMENT_TIMEOUT,
            acquire_timeout: DEFAULT_ACQUIRE_TIMEOUT,
            lock_timeout: DEFAULT_LOCK_TIMEOUT,
            pgbouncer: None,
            listen_url: None,
        }
    }

    /// The schema holding the `scheduler_*` tables (created by migrations). Default `public`.
    pub fn schema(mut self, schema: impl Into<String>) -> Self {
        self.schema = schema.into();
        self
    }

    /// Connections to the database, the change listener's included (it has a pool of its own,
    /// the store's [`pool`](PgStore::pool) the others; with a [`listen_url`](Self::listen_url)
    /// the listener's connection is one more, there). Default 4; at least 2.
    pub fn max_connections(mut self, n: u32) -> Self {
        self.max_connections = n;
        self
    }

    /// The longest one statement may run on the server. Default 10 s. The client gives up two
    /// seconds later and closes the connection (a dead network gives no error of its own).
    pub fn statement_timeout(mut self, timeout: Duration) -> Self {
        self.statement_timeout = timeout;
        self
    }

    /// The longest an operation waits for a pooled connection. Default 5 s.
    pub fn acquire_timeout(mut self, timeout: Duration) -> Self {
        self.acquire_timeout = timeout;
        self
    }

    /// The longest a statement waits for a row lock held by another transaction. Default 5 s.
    pub fn lock_timeout(mut self, timeout: Duration) -> Self {
        self.lock_timeout = timeout;
        self
    }

    /// Whether the URL reaches PostgreSQL through a pooler in transaction mode (PgBouncer with
    /// `pool_mode = transaction`, the pooled endpoints of Neon, Supabase and others). Default:
    /// the URL's `pgbouncer=true|false` parameter, else `false`.
    ///
    /// Through such a pooler each operation runs in one transaction that sets its own
    /// `search_path` and timeouts (`SET LOCAL`), since session settings and startup options do
    /// not survive the pooler; no prepared statement outlives its transaction; migrations take a
    /// transaction-level advisory lock; and `LISTEN` is only used over
    /// [`listen_url`](Self::listen_url), else other nodes' changes arrive within the poll
    /// interval.
    pub fn pgbouncer(mut self, through_pgbouncer: bool) -> Self {
        self.pgbouncer = Some(through_pgbouncer);
        self
    }

    /// A direct connection (not through a transaction-mode pooler) for the change listener's
    /// `LISTEN` (`SCHEDULER_LISTEN_URL`). Default: none, and the listener shares the pool, or,
    /// [through a pooler](Self::pgbouncer), there is no listener.
    pub fn listen_url(mut self, url: impl Into<String>) -> Self {
        self.listen_url = Some(url.into());
        self
    }

    /// Validates the settings and creates the pool, inside a Tokio runtime (the pool's upkeep
    /// runs on it). Connects to nothing until the first query, so a node can start while the
    /// database is down and catch up when it returns.
    pub fn connect_lazy(self) -> StoreResult<PgStore> {
        let prepared = self.prepare()?;
        let listen = match &self.listen_url {
            Some(url) => {
                let (options, url_pgbouncer, info) = connect_options(url)?;
                if url_pgbouncer == Some(true) {
                    return Err(StoreError::setup(
                        "the listen URL (SCHEDULER_LISTEN_URL) is for a direct connection, where LISTEN works; it cannot say pgbouncer=true",
                    ));
                }
                let options = default_application_name(options, "scheduler listener");
                let servers =
                    servers_for(&options, &info, "the listen URL (SCHEDULER_LISTEN_URL)")?;
                // Never connects: its options follow the listen URL's choice of server, and
                // each LISTEN connection gets a pool of its own made from them.
                let options_pool = pool_with(
                    PgPoolOptions::new().max_connections(1),
                    options,
                    servers.as_ref(),
                );
                Listen::Direct(Box::new((options_pool, servers)))
            }
            None if prepared.pgbouncer => Listen::Unavailable,
            None => Listen::Pool,
        };
        // On the store's server, the listener's connection is one of `max_connections`.
        let listener_place = u32::from(matches!(listen, Listen::Pool));
        let pool = pool_with(
            PgPoolOptions::new()
                .max_connections(self.max_connections - listener_place)
                // No connection is kept open on its own (that would need a runtime to build the
                // store); the node's regular queries keep one warm.
                .acquire_timeout(self.acquire_timeout)
                .idle_timeout(Some(Duration::from_secs(600)))
                .test_before_acquire(false),
            prepared.options,
            prepared.servers.as_ref(),
        );
        let host = redact_url(&self.url);
        let via = if prepared.pgbouncer {
            ", through pgbouncer"
        } else {
            ""
        };
        Ok(PgStore {
            pool,
            description: format!("postgres {host} (schema {}{via})", self.schema).into(),
            channel: notify_channel(&self.schema),
            schema: self.schema,
            op_timeout: self.statement_timeout + CLIENT_TIMEOUT_SLACK,
            acquire_timeout: self.acquire_timeout,
            transaction_begin: prepared.transaction_begin,
            listen,
            servers: prepared.servers,
        })
    }

    /// Connects once, as the store's connections do (the same options, the same choice of
    /// server), within `timeout`, and says which server answered (`host:port`): for a command
    /// that wants the real cause of an unreachable database rather than a pool's timeout.
    /// Needs a Tokio runtime.
    pub async fn reach(&self, timeout: Duration) -> StoreResult<String> {
        let prepared = self.prepare()?;
        let reach = async {
            match &prepared.servers {
                Some(servers) => {
                    let found = servers.find().await.map_err(StoreError::setup)?;
                    let _ = sqlx::Connection::close(found.connection).await;
                    Ok(servers.label(found.index))
                }
                None => {
                    use sqlx::{ConnectOptions, Connection};
                    let connection = prepared
                        .options
                        .connect()
                        .await
                        .map_err(|e| StoreError::setup(super::describe(&e)))?;
                    let _ = connection.close().await;
                    Ok(format!(
                        "{}:{}",
                        prepared.options.get_host(),
                        prepared.options.get_port()
                    ))
                }
            }
        };
        tokio::time::timeout(timeout, reach).await.map_err(|_| {
            StoreError::setup(format!(
                "no answer within {}s (is the host and port right, and the server up?)",
                timeout.as_secs()
            ))
        })?
    }

    /// The settings checked and turned into the options of the store's connections.
    fn prepare(&self) -> StoreResult<Prepared> {
        validate_schema(&self.schema)?;
        if tokio::runtime::Handle::try_current().is_err() {
            return Err(StoreError::setup(
                "the PostgreSQL store must be created inside a Tokio runtime (in `#[tokio::main]`)",
            ));
        }
        if self.max_connections < 2 {
            return Err(StoreError::setup(
                "max_connections must be at least 2 (one is the change listener's)",
            ));
        }
        for (name, d) in [
            ("statement_timeout", self.statement_timeout),
            ("acquire_timeout", self.acquire_timeout),
            ("lock_timeout", self.lock_timeout),
        ] {
            if d < Duration::from_millis(10) {
                return Err(StoreError::setup(format!("{name} must be at least 10ms")));
            }
        }
        let (options, url_pgbouncer, info) = connect_options(&self.url)?;
        let pgbouncer = self.pgbouncer.or(url_pgbouncer).unwrap_or(false);
        let ms = |d: Duration| millis(d).to_string();
        let session = [
            ("search_path", quote_ident(&self.schema)),
            ("statement_timeout", ms(self.statement_timeout)),
            ("lock_timeout", ms(self.lock_timeout)),
            (
                "idle_in_transaction_session_timeout",
                ms(IDLE_IN_TRANSACTION_TIMEOUT),
            ),
        ];
        let (options, transaction_begin) = if pgbouncer {
            // A transaction-mode pooler refuses startup parameters it does not know
            // (`extra_float_digits`, `options`) and would not keep session settings anyway: each
            // operation sets them for its own transaction. `DEALLOCATE ALL` drops the statements
            // a previous client of the same server connection left, so the names sqlx gives its
            // (uncached) statements cannot collide.
            let sets: Vec<String> = session
                .iter()
                .map(|(name, value)| format!("SET LOCAL {name} = {value}"))
                .collect();
            let begin = format!("BEGIN; DEALLOCATE ALL; {}", sets.join("; "));
            let options = options.extra_float_digits(None).statement_cache_capacity(0);
            (options, Some(std::sync::Arc::from(begin)))
        } else {
            let keepalives = [
                ("tcp_keepalives_idle", "10".to_owned()),
                ("tcp_keepalives_interval", "5".to_owned()),
                ("tcp_keepalives_count", "3".to_owned()),
            ];
            (options.options(session.into_iter().chain(keepalives)), None)
        };
        let options = default_application_name(options, "scheduler");
        let servers = servers_for(&options, &info, "the database URL")?;
        Ok(Prepared {
            options,
            pgbouncer,
            transaction_begin,
            servers,
        })
    }
}

/// The server a connection string leads to, chosen as libpq chooses it (hosts in order, or
/// shuffled with `load_balance_hosts=random`; each within `connect_timeout`; each session
/// checked for `target_session_attrs`, default `any`), as `host:port`; the error lists each
/// host's reason. Any target is allowed here, `read-only` and `standby` too: it is for checks
/// and tools, not for the store. Needs a Tokio runtime.
///
/// ```no_run
/// # async fn f() -> Result<(), scheduler::store::StoreError> {
/// let server = scheduler::store::postgres::choose_server(
///     "postgres://db1:5432,db2:5432/app?target_session_attrs=standby",
/// )
/// .await?;
/// println!("a standby: {server}");
/// # Ok(()) }
/// ```
pub async fn choose_server(url: &str) -> StoreResult<String> {
    let (options, _, info) = connect_options(url)?;
    let servers = Servers::new(
        &options,
        &info.hosts,
        info.target.unwrap_or(TargetSessionAttrs::Any),
        info.load_balance,
        info.connect_timeout,
    );
    let found = servers.find().await.map_err(StoreError::setup)?;
    let _ = sqlx::Connection::close(found.connection).await;
    Ok(servers.label(found.index))
}

/// A store's connection options, ready for its pool.
struct Prepared {
    options: PgConnectOptions,
    pgbouncer: bool,
    transaction_begin: Option<std::sync::Arc<str>>,
    /// Several hosts, or a session check: the server is chosen before connections join.
    servers: Option<Arc<Servers>>,
}

/// The choice of server for a connection string (one host too: then a search is one
/// connection, with no check unless `target_session_attrs` asks for one). The scheduler
/// writes, so a host list without `target_session_attrs` means `read-write`, and the targets
/// that choose a server refusing writes are refused.
fn servers_for(
    options: &PgConnectOptions,
    info: &ConnInfo,
    what: &str,
) -> StoreResult<Option<Arc<Servers>>> {
    let target = info.target.unwrap_or(if info.hosts.len() > 1 {
        TargetSessionAttrs::ReadWrite
    } else {
        TargetSessionAttrs::Any
    });
    if matches!(
        target,
        TargetSessionAttrs::ReadOnly
            | TargetSessionAttrs::Standby
            | TargetSessionAttrs::PreferStandby
    ) {
        return Err(StoreError::setup(format!(
            "{what} says target_session_attrs={}, but the scheduler writes to its database: use read-write or primary (or any)",
            target.name()
        )));
    }
    Ok(Some(Arc::new(Servers::new(
        options,
        &info.hosts,
        target,
        info.load_balance,
        info.connect_timeout,
    ))))
}

/// A lazy pool on `options`, or, with `servers`, on the server they choose (starting with the
/// first host): every new connection's session is checked (one that fails is replaced by a
/// connection to the server that passes now), and a connection opened before the last choice
/// is not handed out again.
fn pool_with(
    pool: PgPoolOptions,
    options: PgConnectOptions,
    servers: Option<&Arc<Servers>>,
) -> sqlx::PgPool {
    let start = servers.map_or(options, |s| s.first_options());
    pool_starting_at(pool, start, servers)
}

/// [`pool_with`], its first connections on `start` (the server chosen so far).
pub(super) fn pool_starting_at(
    pool: PgPoolOptions,
    start: PgConnectOptions,
    servers: Option<&Arc<Servers>>,
) -> sqlx::PgPool {
    let Some(servers) = servers else {
        return pool.connect_lazy_with(start);
    };
    let on_connect = Arc::clone(servers);
    let on_acquire = Arc::clone(servers);
    pool.after_connect(move |connection, _| {
        let servers = Arc::clone(&on_connect);
        Box::pin(async move {
            if servers::check(connection, servers.target())
                .await?
                .is_none()
            {
                return Ok(());
            }
            servers.suspect();
            let found = servers.find().await.map_err(sqlx::Error::Protocol)?;
            let former = std::mem::replace(connection, found.connection);
            let _ = sqlx::Connection::close(former).await;
            Ok(())
        })
    })
    .before_acquire(move |_, meta| {
        let fresh = on_acquire.fresh(meta.age);
        Box::pin(async move { Ok(fresh) })
    })
    .connect_lazy_with(start)
}

/// sqlx's options for `url`, and its `pgbouncer` parameter: libpq's TLS rules applied (see
/// `tls.rs`), and every parameter sqlx does not know taken out first, since sqlx would log it
/// with its value.
fn connect_options(url: &str) -> StoreResult<(PgConnectOptions, Option<bool>, ConnInfo)> {
    let unusable = |e: &dyn std::fmt::Display| {
        StoreError::setup(format!(
            "`{}` is not a usable PostgreSQL URL: {}",
            redact_url(url),
            crate::redact::redact_text(&e.to_string())
        ))
    };
    let info = conninfo::parse(url).map_err(|e| unusable(&e))?;
    let parsed = database_url::DatabaseUrl::parse(&info.url).map_err(|e| unusable(&e))?;
    if !parsed.ignored.is_empty() {
        tracing::warn!(
            parameters = %parsed.ignored.join(", "),
            "ignoring database URL parameters the scheduler does not support (values not shown)"
        );
    }
    if parsed.ignored.iter().any(|p| p == "sslpassword") {
        tracing::warn!(
            "sslpassword is not supported: the client key (sslkey) must be an unencrypted PEM file"
        );
    }
    let tls = tls::TlsSettings::from_env(&parsed.tls)?;
    let options = PgConnectOptions::from_str(parsed.for_sqlx.as_str()).map_err(|e| unusable(&e))?;
    Ok((tls.apply(options), parsed.pgbouncer, info))
}

/// `name` as the `application_name`, unless the URL (or `PGAPPNAME`) gave one.
fn default_application_name(options: PgConnectOptions, name: &str) -> PgConnectOptions {
    if options.get_application_name().is_some() {
        options
    } else {
        options.application_name(name)
    }
}
