//! The composition root: [`SchedulerBuilder`] gathers the settings (in code, or from the
//! environment through the one reader in `env`), validates them, picks the store by URL, binds
//! the admin server's address, and assembles a [`Scheduler`]: an engine and, beside it, the
//! admin server (`node`). It builds; it does not run.

mod assemble;
mod environment;

use std::sync::Arc;
use std::time::Duration;

use chrono_tz::Tz;

use crate::Scheduler;
use crate::config::{ConfigDocument, ConfigSettings, ConfigSource};
use crate::context::StateMap;
use crate::policy::{Misfire, Recovery};
use crate::store::{Store, StoreSettings};
use crate::{Result, TaskRegistry};

impl Scheduler {
    /// A builder with every setting at its default.
    pub fn builder() -> SchedulerBuilder {
        SchedulerBuilder::default()
    }
}

/// Where the task config comes from.
enum ConfigOrigin {
    Settings(ConfigSettings),
    Source(Box<dyn ConfigSource>),
    Document(ConfigDocument),
}

/// Builds a [`Scheduler`]; every setting has a documented default.
///
/// ```no_run
/// # async fn demo() -> scheduler::Result<()> {
/// use std::time::Duration;
///
/// struct Db; // an application pool, for example
///
/// let scheduler = scheduler::Scheduler::builder()
///     .database_url("postgres://app@127.0.0.1/app")
///     .config("tasks.json")
///     .lock_lifetime(Duration::from_secs(30))
///     .max_concurrent(20)
///     .state(Db)
///     .build()?;
/// scheduler.run_until(async { let _ = tokio::signal::ctrl_c().await; }).await
/// # }
/// ```
#[derive(Default)]
pub struct SchedulerBuilder {
    store_settings: StoreSettings,
    store: Option<Arc<dyn Store>>,
    registry: Option<TaskRegistry>,
    state: StateMap,
    config: Option<ConfigOrigin>,
    node_id: Option<String>,
    lock_lifetime: Option<Duration>,
    renew_interval: Option<Duration>,
    max_concurrent: Option<usize>,
    shutdown_timeout: Option<Duration>,
    poll_interval: Option<Duration>,
    max_claim_ahead: Option<Duration>,
    heartbeat_interval: Option<Duration>,
    run_retention: Option<Duration>,
    default_timezone: Option<Tz>,
    default_recovery: Option<Recovery>,
    default_timeout: Option<Duration>,
    default_retries: Option<u32>,
    default_backoff: Option<Duration>,
    default_misfire: Option<Misfire>,
    missed_grace: Option<Duration>,
    #[cfg(feature = "webhook")]
    webhook: Option<crate::webhook::WebhookSettings>,
    #[cfg(feature = "webhook")]
    channels: Option<crate::channels::Channels>,
    default_owners: Vec<String>,
    public_url: Option<String>,
    config_poll_interval: Option<Duration>,
    migrate: Option<bool>,
    accept_async_replication: Option<bool>,
    clock: crate::clock::Clock,
    #[cfg(feature = "admin")]
    admin_addr: Option<std::net::SocketAddr>,
    #[cfg(feature = "admin")]
    admin_token: Option<String>,
    #[cfg(feature = "admin")]
    admin_viewer_token: Option<String>,
    #[cfg(feature = "admin")]
    admin_hosts: Vec<String>,
    #[cfg(feature = "admin")]
    admin_limits: crate::admin::AdminLimits,
    #[cfg(feature = "otel")]
    otel: Option<crate::otel::OtelSettings>,
}

impl std::fmt::Debug for SchedulerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SchedulerBuilder")
            .field("store", &self.store_settings)
            .field("node_id", &self.node_id)
            .finish_non_exhaustive()
    }
}

impl SchedulerBuilder {
    /// A builder with settings from the process environment:
    ///
    /// | variable | setting | default |
    /// |---|---|---|
    /// | `SCHEDULER_DATABASE_URL`, else `DATABASE_URL` | [`database_url`](Self::database_url) | `sqlite://scheduler.db` |
    /// | `SCHEDULER_SCHEMA` | PostgreSQL only: schema of the tables | `public` |
    /// | `SCHEDULER_MAX_CONNECTIONS` | PostgreSQL only: connections per node, the listener's included | `4` |
    /// | `SCHEDULER_LISTEN_URL` | PostgreSQL only: a direct URL for `LISTEN` when the database URL goes through PgBouncer (`?pgbouncer=true`) | none |
    /// | `SCHEDULER_ACCEPT_ASYNC_REPLICATION` | [`accept_async_replication`](Self::accept_async_replication) | `false` |
    /// | `SCHEDULER_CONFIG` | [`config`](Self::config) | none |
    /// | `SCHEDULER_CONFIG_POLL_INTERVAL` | [`config_poll_interval`](Self::config_poll_interval) | `10s` |
    /// | `SCHEDULER_CONFIG_TOKEN`, `SCHEDULER_CONFIG_HEADERS`, `SCHEDULER_CONFIG_TIMEOUT` | HTTP config source (see [`ConfigSettings`]) | none, none, `10s` |
    /// | `SCHEDULER_NODE_ID` | [`node_id`](Self::node_id) | `hostname-pid` |
    /// | `SCHEDULER_LOCK_LIFETIME` | [`lock_lifetime`](Self::lock_lifetime) | `20s` |
    /// | `SCHEDULER_MAX_CONCURRENT` | [`max_concurrent`](Self::max_concurrent) | `1000` |
    /// | `SCHEDULER_SHUTDOWN_TIMEOUT` | [`shutdown_timeout`](Self::shutdown_timeout) | `20s` |
    /// | `SCHEDULER_POLL_INTERVAL` | [`poll_interval`](Self::poll_interval) | `30s` |
    /// | `SCHEDULER_MAX_CLAIM_AHEAD` | [`max_claim_ahead`](Self::max_claim_ahead) | `1s` |
    /// | `SCHEDULER_TIMEZONE` | [`default_timezone`](Self::default_timezone) | `UTC` |
    /// | `SCHEDULER_RUN_RETENTION` | [`run_retention`](Self::run_retention) | `14days` |
    /// | `SCHEDULER_DEFAULT_RECOVERY` | [`default_recovery`](Self::default_recovery) | `rerun` |
    /// | `SCHEDULER_DEFAULT_TIMEOUT` | [`default_timeout`](Self::default_timeout) | none |
    /// | `SCHEDULER_DEFAULT_RETRIES` | [`default_retries`](Self::default_retries) | `0` |
    /// | `SCHEDULER_DEFAULT_BACKOFF` | [`default_backoff`](Self::default_backoff) | `30s` |
    /// | `SCHEDULER_DEFAULT_MISFIRE` | [`default_misfire`](Self::default_misfire) | `once` |
    /// | `SCHEDULER_MISSED_GRACE` | [`missed_grace`](Self::missed_grace) | half the interval, 5 s to 15 min |
    /// | `SCHEDULER_WEBHOOK_URL`, `SCHEDULER_WEBHOOK_SECRET` | [`webhook`](Self::webhook) | none |
    /// | `SCHEDULER_WEBHOOK_EVENTS`, `SCHEDULER_WEBHOOK_TIMEOUT` | the webhook's events and timeout | the alerts, `10s` |
    /// | `SCHEDULER_CHANNELS_FILE` | [`channels`](Self::channels): Slack, Feishu, DingTalk, WeCom, e-mail, routes (see [`crate::channels`]) | none |
    /// | `SCHEDULER_DEFAULT_OWNERS` | [`default_owners`](Self::default_owners), comma-separated | none |
    /// | `SCHEDULER_PUBLIC_URL` | [`public_url`](Self::public_url): the dashboard's address, linked from alerts | none |
    /// | `SCHEDULER_MIGRATE` | [`migrate`](Self::migrate) (`false` to skip) | `true` |
    /// | `SCHEDULER_ADMIN_ADDR` | [`admin_addr`](Self::admin_addr), e.g. `127.0.0.1:9870` | off |
    /// | `SCHEDULER_ADMIN_TOKEN` | [`admin_token`](Self::admin_token) | none (mutations refused) |
    /// | `SCHEDULER_ADMIN_VIEWER_TOKEN` | [`admin_viewer_token`](Self::admin_viewer_token) | none |
    /// | `SCHEDULER_ADMIN_HOSTS` | [`admin_hosts`](Self::admin_hosts), comma-separated | none |
    /// | `SCHEDULER_ADMIN_MAX_CONNECTIONS`, `SCHEDULER_ADMIN_HEADER_TIMEOUT`, `SCHEDULER_ADMIN_IDLE_TIMEOUT`, `SCHEDULER_ADMIN_REQUEST_TIMEOUT`, `SCHEDULER_ADMIN_MAX_CONCURRENT_READS` | [`admin_limits`](Self::admin_limits) | `128`, `10s`, `60s`, `30s`, `1` |
    /// | `OTEL_EXPORTER_OTLP_ENDPOINT`, `OTEL_*` (the `otel` feature) | `otel` (with the feature: `otel::OtelSettings::from_env`) | nothing exported |
    ///
    /// Durations are written like `2s`, `500ms`, `10m`. An invalid value is an
    /// [`Error::InvalidSetting`](crate::Error::InvalidSetting) naming the variable.
    pub fn from_env() -> Result<Self> {
        Self::from_lookup(crate::env::process)
    }

    /// Like [`from_env`](Self::from_env), reading variables through `lookup`.
    ///
    /// ```
    /// let env = [("SCHEDULER_LOCK_LIFETIME", "soon")];
    /// let lookup = |name: &str| env.iter().find(|(k, _)| *k == name).map(|(_, v)| v.to_string());
    /// let error = scheduler::SchedulerBuilder::from_lookup(lookup).unwrap_err();
    /// assert!(error.to_string().starts_with("invalid setting `SCHEDULER_LOCK_LIFETIME`"));
    /// ```
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self> {
        environment::from_lookup(lookup)
    }

    /// The database: `postgres://` (or `postgresql://`) for PostgreSQL, `sqlite://PATH` for the
    /// embedded store. Default `sqlite://scheduler.db`. Never logged with its password. For
    /// PostgreSQL options (schema, pool size), pass a [`store`](Self::store) built with
    /// [`PgStore::builder`](crate::store::PgStore::builder).
    pub fn database_url(mut self, url: impl Into<String>) -> Self {
        self.store_settings.url = Some(url.into());
        self
    }

    /// Uses an existing store instead of connecting to a [`database_url`](Self::database_url)
    /// (a [`PgStore`](crate::store::PgStore) built with its own options, for instance).
    pub fn store(mut self, store: Arc<dyn Store>) -> Self {
        self.store = Some(store);
        self
    }

    /// The tasks this node runs. Default: every `#[task]` in the binary
    /// ([`TaskRegistry::collect`]).
    pub fn registry(mut self, registry: TaskRegistry) -> Self {
        self.registry = Some(registry);
        self
    }

    /// Shares `value` with every handler, read with
    /// [`TaskContext::state`](crate::TaskContext::state). One value per type.
    pub fn state<T: Send + Sync + 'static>(mut self, value: T) -> Self {
        self.state.insert(value);
        self
    }

    /// Where the task config lives: a file path or an HTTP(S) URL, polled every
    /// [`config_poll_interval`](Self::config_poll_interval). Default: none (tasks run as stored
    /// in the database). Replaces any config set before.
    pub fn config(mut self, location: impl Into<String>) -> Self {
        self.config = Some(ConfigOrigin::Settings(ConfigSettings::new(location)));
        self
    }

    /// The task config with every source setting spelled out (HTTP headers, token, timeout).
    pub fn config_settings(mut self, settings: ConfigSettings) -> Self {
        self.config = Some(ConfigOrigin::Settings(settings));
        self
    }

    /// A custom config source (a company config centre), polled every
    /// [`config_poll_interval`](Self::config_poll_interval).
    pub fn config_source(mut self, source: impl ConfigSource + 'static) -> Self {
        self.config = Some(ConfigOrigin::Source(Box::new(source)));
        self
    }

    /// A fixed config document, applied at start (tests, embedded configs).
    pub fn config_document(mut self, doc: ConfigDocument) -> Self {
        self.config = Some(ConfigOrigin::Document(doc));
        self
    }

    /// How often the config is polled for changes. Default 10 s (or
    /// `SCHEDULER_CONFIG_POLL_INTERVAL`).
    pub fn config_poll_interval(mut self, interval: Duration) -> Self {
        self.config_poll_interval = Some(interval);
        self
    }

    /// This node's id, unique in the cluster. Default `hostname-pid`.
    pub fn node_id(mut self, id: impl Into<String>) -> Self {
        self.node_id = Some(id.into());
        self
    }

    /// How long a lock lives without renewal. Default 20 s; at least 300 ms. Also how long a
    /// running handler rides out a database outage before it is asked to stop (see
    /// `RELIABILITY.md`).
    pub fn lock_lifetime(mut self, lifetime: Duration) -> Self {
        self.lock_lifetime = Some(lifetime);
        self
    }

    /// How often a running handler's lock is renewed. Default: a fifth of the lock lifetime.
    pub fn lock_renew_interval(mut self, interval: Duration) -> Self {
        self.renew_interval = Some(interval);
        self
    }

    /// How many handlers this node runs at once. Default 1,000.
    ///
    /// A task never overlaps itself, so this bounds how many *different* tasks run at once on
    /// this node; below the number of tasks due on one tick it delays some of them (see
    /// `BENCHMARKS.md`). Lower it to protect a shared downstream resource.
    pub fn max_concurrent(mut self, n: usize) -> Self {
        self.max_concurrent = Some(n);
        self
    }

    /// How long running handlers get to finish on shutdown. Default 20 s; the node exits at
    /// most `HARD_STOP_WAIT` (2 s) + `FLUSH_TIMEOUT`
    /// (5 s) later.
    pub fn shutdown_timeout(mut self, timeout: Duration) -> Self {
        self.shutdown_timeout = Some(timeout);
        self
    }

    /// The safety-net interval at which an idle node re-checks the store. Default 30 s.
    pub fn poll_interval(mut self, interval: Duration) -> Self {
        self.poll_interval = Some(interval);
        self
    }

    /// The most a node claims a tick ahead of it. A claim takes time (about half a second for
    /// 10,000 due rows on one node), so a node sends it 0.1 ms before the tick per task it
    /// registers (twice the measured claim cost per row), at most this, and starts each run on
    /// its tick: a burst starts on time instead of a claim later. A config change or pause made within that lead of a
    /// tick applies from the next tick. Default 1 s, and never more than a quarter of the lock
    /// lifetime; zero claims only what is due.
    pub fn max_claim_ahead(mut self, ahead: Duration) -> Self {
        self.max_claim_ahead = Some(ahead);
        self
    }

    /// How often the node's heartbeat is written. Default 10 s.
    pub fn heartbeat_interval(mut self, interval: Duration) -> Self {
        self.heartbeat_interval = Some(interval);
        self
    }

    /// How long finished runs stay in `scheduler_runs`. Default 14 days.
    pub fn run_retention(mut self, retention: Duration) -> Self {
        self.run_retention = Some(retention);
        self
    }

    /// The zone of config entries that name none. Default UTC.
    pub fn default_timezone(mut self, tz: Tz) -> Self {
        self.default_timezone = Some(tz);
        self
    }

    /// Whether to apply the schema migrations at start. Default true.
    pub fn migrate(mut self, migrate: bool) -> Self {
        self.migrate = Some(migrate);
        self
    }

    /// PostgreSQL only: whether the operator accepts asynchronous replication. Default false
    /// (or `SCHEDULER_ACCEPT_ASYNC_REPLICATION`).
    ///
    /// At start the node reads how its database replicates and says so in its log. When
    /// standbys stream from it (or the URL lists several hosts) and no commit waits for one
    /// (`synchronous_standby_names` empty, or `synchronous_commit` `off` or `local`), it
    /// warns: on a failover, the claims made in the replication lag window are lost with the
    /// old primary, so those ticks may run twice. With `true` it says so at info level instead.
    pub fn accept_async_replication(mut self, accept: bool) -> Self {
        self.accept_async_replication = Some(accept);
        self
    }

    /// Not public API: the node takes the wall-clock time from `clock` and wakes its services
    /// when the clock is moved (see `scheduler::testing::clock`). Give the SQLite store the same
    /// clock.
    #[doc(hidden)]
    pub fn test_clock(mut self, clock: crate::clock::TestClock) -> Self {
        self.clock = crate::clock::Clock::Test(clock);
        self
    }

    /// The recovery rule of tasks whose attribute sets none. Default [`Recovery::Rerun`].
    pub fn default_recovery(mut self, recovery: Recovery) -> Self {
        self.default_recovery = Some(recovery);
        self
    }

    /// The timeout of tasks whose attribute sets none. Default: none.
    pub fn default_timeout(mut self, timeout: Duration) -> Self {
        self.default_timeout = Some(timeout);
        self
    }

    /// The retries of tasks whose attribute sets none. Default 0.
    pub fn default_retries(mut self, retries: u32) -> Self {
        self.default_retries = Some(retries);
        self
    }

    /// The retry backoff of tasks whose attribute sets none. Default 30 s.
    pub fn default_backoff(mut self, backoff: Duration) -> Self {
        self.default_backoff = Some(backoff);
        self
    }

    /// How late a tick may start before its task counts as missed (`task.missed`). Default:
    /// half the task's interval, at least 5 s, at most 15 minutes (or `SCHEDULER_MISSED_GRACE`).
    pub fn missed_grace(mut self, grace: Duration) -> Self {
        self.missed_grace = Some(grace);
        self
    }

    /// Sends alerts to a webhook (see [`crate::webhook`]). Default: none.
    #[cfg(feature = "webhook")]
    pub fn webhook(mut self, webhook: crate::webhook::WebhookSettings) -> Self {
        self.webhook = Some(webhook);
        self
    }

    /// Sends alerts to these channels (Slack, Feishu/Lark, DingTalk, WeCom, e-mail, webhooks),
    /// routed by event type, owner and label (see [`crate::channels`]); the
    /// [`webhook`](Self::webhook), if set too, is one more channel named `webhook`. Default:
    /// none (or the file of `SCHEDULER_CHANNELS_FILE`).
    #[cfg(feature = "webhook")]
    pub fn channels(mut self, channels: crate::channels::Channels) -> Self {
        self.channels = Some(channels);
        self
    }

    /// Who answers for tasks whose config entry names no `owners` (alerts name them and are
    /// routed by them). Default: nobody (or `SCHEDULER_DEFAULT_OWNERS`, comma-separated).
    pub fn default_owners<I, S>(mut self, owners: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.default_owners = owners.into_iter().map(Into::into).collect();
        self
    }

    /// The address people reach the dashboard at (`https://scheduler.example.com`): alerts link
    /// to the run's page there. Default: none, no link (or `SCHEDULER_PUBLIC_URL`).
    pub fn public_url(mut self, url: impl Into<String>) -> Self {
        self.public_url = Some(url.into());
        self
    }

    /// The misfire rule of tasks whose attribute sets none. Default [`Misfire::Once`].
    pub fn default_misfire(mut self, misfire: Misfire) -> Self {
        self.default_misfire = Some(misfire);
        self
    }

    /// Serves the admin HTTP API, `/metrics`, `/healthz` and `/readyz` on `addr` (see
    /// [`crate::admin`]). Default: off. Port 0 picks a free port
    /// ([`Scheduler::admin_addr`](crate::Scheduler::admin_addr) tells which).
    #[cfg(feature = "admin")]
    pub fn admin_addr(mut self, addr: std::net::SocketAddr) -> Self {
        self.admin_addr = Some(addr);
        self
    }

    /// The bearer token admin mutations (trigger, pause, resume) need, at least 16 characters.
    /// Default: none, and then every mutation is refused. Never logged.
    #[cfg(feature = "admin")]
    pub fn admin_token(mut self, token: impl Into<String>) -> Self {
        self.admin_token = Some(token.into());
        self
    }

    /// A bearer token that only reads: the API's `GET` routes and `/metrics` beyond loopback
    /// (a Prometheus scrape, a read-only dashboard), never a mutation (403). At least 16
    /// characters, and not the [`admin_token`](Self::admin_token). Default: none. Never logged.
    #[cfg(feature = "admin")]
    pub fn admin_viewer_token(mut self, token: impl Into<String>) -> Self {
        self.admin_viewer_token = Some(token.into());
        self
    }

    /// The admin server's limits on connections and requests (see
    /// [`AdminLimits`](crate::admin::AdminLimits)). Default: 128 connections, 10 s for a
    /// request's headers, 60 s without a byte on a connection, 30 s for a request, 1 API
    /// request served at a time.
    #[cfg(feature = "admin")]
    pub fn admin_limits(mut self, limits: crate::admin::AdminLimits) -> Self {
        self.admin_limits = limits;
        self
    }

    /// Names the admin server answers to besides its own address and loopback names: `name`
    /// (any port) or `name:port`, as clients reach it (a DNS name, a reverse proxy's name). A
    /// request whose `Host` or cross-origin `Origin` names anything else is refused, so a web
    /// page cannot reach a loopback admin server by DNS rebinding. Default: none.
    #[cfg(feature = "admin")]
    pub fn admin_hosts<I, S>(mut self, hosts: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.admin_hosts = hosts.into_iter().map(Into::into).collect();
        self
    }

    /// Exports the node's runs as spans and its metrics over OTLP while it runs (see
    /// [`crate::otel`]); `None` exports nothing. Default: what the `OTEL_*` variables say with
    /// [`from_env`](Self::from_env), else nothing.
    ///
    /// ```no_run
    /// use scheduler::otel::{OtelSettings, OtlpProtocol};
    ///
    /// let builder = scheduler::Scheduler::builder()
    ///     .otel(Some(OtelSettings::collector(OtlpProtocol::Grpc, "http://127.0.0.1:4317")));
    /// ```
    #[cfg(feature = "otel")]
    pub fn otel(mut self, settings: Option<crate::otel::OtelSettings>) -> Self {
        self.otel = settings;
        self
    }

    /// Validates the settings and builds the scheduler. Connects to nothing yet; binds the
    /// admin server's address if one is set (an address in use is an error here, at start-up).
    ///
    /// In a child process that a node started for a task with `isolation = "process"`, it runs
    /// that task's handler instead and exits the process, before it opens a store or binds a
    /// port (see [`child_request`](crate::child_request)).
    pub fn build(self) -> Result<Scheduler> {
        assemble::build(self)
    }
}

#[cfg(test)]
mod tests;
