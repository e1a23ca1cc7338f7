//! The engine: runs every due tick exactly once across all nodes sharing a store.
//!
//! A node claims due ticks atomically (claiming advances the row's next run in the same
//! transaction), runs each handler in its own tokio task under a lock watchdog, records the run,
//! and releases the lock. The store's clock decides what is due and what has expired.
//!
//! | concern | where |
//! |---|---|
//! | when to look, claiming in batches | `claimer` |
//! | one run: handler, panics, outcome | `runner` |
//! | lock renewal (one write for all held locks) and loss | `watchdog` |
//! | heartbeat, pruning, change notifications | `maintenance` |
//! | settings and the environment contract | `settings` |
//!
//! **Guarantees.** A task never runs twice at the same time: a lock is taken only when free, every
//! lock write is fenced by its token, and a node stops a handler before its lock can expire in
//! the database. A node killed mid-run is recovered once its lock expires: another node marks the
//! run `lost` and runs the tick again once; recovery takes at most the lock lifetime plus the
//! poll interval (defaults 60 s + 30 s; other nodes usually notice sooner, since they wake at the
//! lock's expiry). A run longer than its cron interval is followed by exactly one run right after
//! it, with the missed ticks counted in `ticks_collapsed`; the same holds after all nodes were
//! down.

mod claimer;
mod completer;
mod config_sync;
mod gate;
mod maintenance;
mod outcome;
mod rules;
mod runner;
mod settings;
mod watchdog;

use std::borrow::Cow;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use chrono_tz::Tz;
use tokio::sync::{Notify, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use settings::{
    DEFAULT_CONFIG_POLL_INTERVAL, DEFAULT_HEARTBEAT_INTERVAL, DEFAULT_LOCK_LIFETIME,
    DEFAULT_MAX_CONCURRENT, DEFAULT_POLL_INTERVAL, DEFAULT_RUN_RETENTION, DEFAULT_SHUTDOWN_TIMEOUT,
    FLUSH_TIMEOUT, HARD_STOP_WAIT,
};
use settings::{Settings, env_duration, env_var};

use crate::config::{ConfigDocument, ConfigSettings, ConfigSource, ConfigWatcher};
use crate::context::StateMap;
use crate::store::postgres::{DEFAULT_MAX_CONNECTIONS, DEFAULT_SCHEMA, PgStore, redact_url};
use crate::store::{NodeInfo, Store};
use crate::{Error, Result, TaskRegistry};
use config_sync::{ConfigFeed, ConfigSync};

/// Exponential backoff for retries against the store: 250 ms doubling to 10 s.
pub(crate) fn backoff(attempt: u32) -> Duration {
    Duration::from_millis(250u64.saturating_mul(1 << attempt.min(6))).min(Duration::from_secs(10))
}

/// The pause between passes of a periodic service: the interval after a success; after a
/// failure, a backoff no longer than the interval, with the error logged once per outage.
#[derive(Debug, Default)]
pub(crate) struct RetryPause {
    failures: u32,
}

impl RetryPause {
    pub(crate) fn after<T, E: std::fmt::Display>(
        &mut self,
        result: &std::result::Result<T, E>,
        interval: Duration,
        what: &'static str,
    ) -> Duration {
        match result {
            Ok(_) => {
                self.failures = 0;
                interval
            }
            Err(e) => {
                if self.failures == 0 {
                    tracing::warn!(error = %e, "{what}; retrying");
                }
                self.failures += 1;
                backoff(self.failures).min(interval)
            }
        }
    }
}

/// This node as recorded in the node table.
pub(crate) fn node_info(shared: &Shared) -> NodeInfo {
    NodeInfo::new(
        shared.node_id.to_string(),
        settings::hostname(),
        std::process::id(),
        env!("CARGO_PKG_VERSION"),
        shared.names.clone(),
    )
}

/// State shared by the engine's services.
pub(crate) struct Shared {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) registry: TaskRegistry,
    pub(crate) names: Vec<String>,
    pub(crate) node_id: Arc<str>,
    pub(crate) state: StateMap,
    pub(crate) settings: Settings,
    pub(crate) permits: Arc<Semaphore>,
    /// Wakes the claim loop (a handler finished, another node changed something).
    pub(crate) wake: Notify,
    /// Tells handlers to stop (graceful shutdown).
    pub(crate) handlers_cancel: CancellationToken,
    /// Aborts handlers still running after the drain timeout.
    pub(crate) hard_stop: CancellationToken,
    /// Stops retrying outcome writes at the very end of shutdown.
    pub(crate) flush_deadline: CancellationToken,
    pub(crate) tracker: TaskTracker,
    /// Compiled schedules, shared by claims and runners.
    pub(crate) specs: crate::schedule::SpecCache,
    /// Renews the locks of running handlers.
    pub(crate) watchdog: Arc<watchdog::LockWatchdog>,
    /// Where runners hand their outcomes to the completer.
    pub(crate) completions: tokio::sync::mpsc::UnboundedSender<completer::Completion>,
}

/// Where the task config comes from.
enum ConfigOrigin {
    Settings(ConfigSettings),
    Source(Box<dyn ConfigSource>),
    Document(ConfigDocument),
}

/// A configured scheduler node, ready to [`run_until`](Scheduler::run_until) a shutdown signal.
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
pub struct Scheduler {
    shared: Arc<Shared>,
    completions: Option<tokio::sync::mpsc::UnboundedReceiver<completer::Completion>>,
    config: Option<ConfigFeed>,
    migrate: bool,
    store_description: String,
}

impl std::fmt::Debug for Scheduler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scheduler")
            .field("node_id", &self.shared.node_id)
            .field("store", &self.store_description)
            .field("tasks", &self.shared.names)
            .finish_non_exhaustive()
    }
}

/// Builds a [`Scheduler`]; every setting has a documented default.
#[derive(Default)]
pub struct SchedulerBuilder {
    database_url: Option<String>,
    schema: Option<String>,
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
    heartbeat_interval: Option<Duration>,
    run_retention: Option<Duration>,
    default_timezone: Option<Tz>,
    config_poll_interval: Option<Duration>,
    migrate: Option<bool>,
    max_connections: Option<u32>,
}

impl std::fmt::Debug for SchedulerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SchedulerBuilder")
            .field(
                "database_url",
                &self.database_url.as_deref().map(redact_url),
            )
            .field("schema", &self.schema)
            .field("node_id", &self.node_id)
            .finish_non_exhaustive()
    }
}

impl Scheduler {
    /// A builder with every setting at its default.
    pub fn builder() -> SchedulerBuilder {
        SchedulerBuilder::default()
    }

    /// The store this node uses.
    pub fn store(&self) -> Arc<dyn Store> {
        Arc::clone(&self.shared.store)
    }

    /// This node's id.
    pub fn node_id(&self) -> &str {
        &self.shared.node_id
    }

    /// Runs until `shutdown` completes, then drains: stops claiming, tells handlers to stop
    /// through their context, waits up to the shutdown timeout, stops what is left and hands
    /// its ticks over to other nodes, and returns.
    ///
    /// Start-up order: database and migrations, config, workers. A database that is down at
    /// start is retried with backoff until it comes up or `shutdown` completes.
    pub async fn run_until<F>(mut self, shutdown: F) -> Result<()>
    where
        F: Future<Output = ()> + Send,
    {
        let shared = Arc::clone(&self.shared);
        let stop = CancellationToken::new();
        tracing::info!(
            node = %shared.node_id,
            store = %self.store_description,
            tasks = shared.names.len(),
            max_concurrent = shared.settings.max_concurrent,
            lock_lifetime = ?shared.settings.lock_lifetime,
            "scheduler starting"
        );
        tokio::pin!(shutdown);
        let mut config = self
            .config
            .take()
            .map(|feed| ConfigSync::new(&shared, feed));
        tokio::select! {
            () = self.start(&shared, config.as_mut()) => {}
            _ = &mut shutdown => {
                tracing::info!("shutdown requested during start-up");
                return Ok(());
            }
        }

        let completer_stop = CancellationToken::new();
        let completer = tokio::spawn(completer::run(
            Arc::clone(&shared),
            self.completions
                .take()
                .expect("run_until consumes the scheduler"),
            completer_stop.clone(),
        ));
        let watchdog = tokio::spawn(Arc::clone(&shared.watchdog).run(completer_stop.clone()));
        let workers = TaskTracker::new();
        workers.spawn(claimer::ClaimLoop::new(Arc::clone(&shared)).run(stop.clone()));
        workers.spawn(maintenance::Maintenance::new(Arc::clone(&shared)).run(stop.clone()));
        workers.spawn(maintenance::listen(Arc::clone(&shared), stop.clone()));
        if let Some(config) = config {
            workers.spawn(config.run(Arc::clone(&shared), stop.clone()));
        }
        workers.close();
        tracing::info!(node = %shared.node_id, "scheduler running");

        shutdown.await;
        self.drain(&shared, stop, workers).await;
        // Every runner has had its outcome recorded (or given up on) by now.
        completer_stop.cancel();
        let _ = completer.await;
        let _ = watchdog.await;
        if let Err(e) = shared.store.deregister_node(&shared.node_id).await {
            tracing::warn!(error = %e, "could not mark the node stopped");
        }
        tracing::info!(node = %shared.node_id, "scheduler stopped");
        Ok(())
    }

    async fn start(&self, shared: &Arc<Shared>, config: Option<&mut ConfigSync>) {
        let node = node_info(shared);
        let mut attempt = 0u32;
        loop {
            let result = async {
                if self.migrate {
                    shared.store.migrate().await?;
                }
                shared.store.register_node(&node).await
            }
            .await;
            match result {
                Ok(()) => break,
                Err(e) => {
                    let pause = backoff(attempt);
                    tracing::error!(error = %e, retry_in = ?pause, "cannot prepare the database; retrying");
                    tokio::time::sleep(pause).await;
                    attempt += 1;
                }
            }
        }
        // The first reconcile happens before any claim, so a changed schedule applies at once.
        match config {
            Some(config) => {
                if let Err(e) = config.run_once().await {
                    tracing::error!(error = %e, "the task config could not be applied yet; tasks keep their stored state until it is");
                }
            }
            None => tracing::warn!(
                "no task config (SCHEDULER_CONFIG): tasks run as stored in the database"
            ),
        }
    }

    /// Stops claiming and every background service, asks handlers to stop, waits up to the
    /// shutdown timeout, stops what is left (their ticks are handed over), and waits for the
    /// last outcomes to be recorded (up to the flush timeout).
    async fn drain(&self, shared: &Arc<Shared>, stop: CancellationToken, workers: TaskTracker) {
        let running = shared.tracker.len();
        tracing::info!(running, timeout = ?shared.settings.shutdown_timeout, "shutting down: no new claims, asking running handlers to stop");
        // Handlers first: a run claimed from here on is handed back without starting.
        shared.handlers_cancel.cancel();
        stop.cancel();
        let deadline = tokio::time::Instant::now() + shared.settings.shutdown_timeout;
        // A claim in flight finishes first, so its runs are handed back, not forgotten.
        if tokio::time::timeout_at(deadline, workers.wait())
            .await
            .is_err()
        {
            tracing::warn!(
                "a background service (a claim in flight?) did not stop by the shutdown timeout"
            );
        }
        shared.tracker.close();
        if tokio::time::timeout_at(deadline, shared.tracker.wait())
            .await
            .is_err()
        {
            tracing::warn!(
                still_running = shared.tracker.len(),
                "shutdown timeout elapsed: stopping the remaining handlers and handing their ticks over"
            );
            shared.hard_stop.cancel();
        }
        let flush = tokio::time::Instant::now() + HARD_STOP_WAIT + FLUSH_TIMEOUT;
        if tokio::time::timeout_at(flush, shared.tracker.wait())
            .await
            .is_err()
        {
            shared.flush_deadline.cancel();
            if tokio::time::timeout(HARD_STOP_WAIT, shared.tracker.wait())
                .await
                .is_err()
            {
                tracing::error!(
                    still_running = shared.tracker.len(),
                    "some handlers did not stop (they block their threads); exiting without their outcomes: other nodes will treat those runs as lost"
                );
            }
        }
    }
}

impl SchedulerBuilder {
    /// A builder with settings from the environment:
    ///
    /// | variable | setting | default |
    /// |---|---|---|
    /// | `SCHEDULER_DATABASE_URL`, else `DATABASE_URL` | [`database_url`](Self::database_url) | required |
    /// | `SCHEDULER_SCHEMA` | [`schema`](Self::schema) | `public` |
    /// | `SCHEDULER_CONFIG` | [`config`](Self::config) | none |
    /// | `SCHEDULER_CONFIG_POLL_INTERVAL` | [`config_poll_interval`](Self::config_poll_interval) | `10s` |
    /// | `SCHEDULER_CONFIG_TOKEN`, `SCHEDULER_CONFIG_HEADERS`, `SCHEDULER_CONFIG_TIMEOUT` | HTTP config source (see [`ConfigSettings`]) | none, none, `10s` |
    /// | `SCHEDULER_NODE_ID` | [`node_id`](Self::node_id) | `hostname-pid` |
    /// | `SCHEDULER_LOCK_LIFETIME` | [`lock_lifetime`](Self::lock_lifetime) | `60s` |
    /// | `SCHEDULER_MAX_CONCURRENT` | [`max_concurrent`](Self::max_concurrent) | `1000` |
    /// | `SCHEDULER_SHUTDOWN_TIMEOUT` | [`shutdown_timeout`](Self::shutdown_timeout) | `30s` |
    /// | `SCHEDULER_POLL_INTERVAL` | [`poll_interval`](Self::poll_interval) | `30s` |
    /// | `SCHEDULER_TIMEZONE` | [`default_timezone`](Self::default_timezone) | `UTC` |
    /// | `SCHEDULER_RUN_RETENTION` | [`run_retention`](Self::run_retention) | `14days` |
    /// | `SCHEDULER_MIGRATE` | [`migrate`](Self::migrate) (`false` to skip) | `true` |
    ///
    /// Durations are written like `2s`, `500ms`, `10m`. Invalid values are an error naming the
    /// variable.
    pub fn from_env() -> Result<Self> {
        let mut b = Self {
            database_url: env_var("SCHEDULER_DATABASE_URL").or_else(|| env_var("DATABASE_URL")),
            schema: env_var("SCHEDULER_SCHEMA"),
            config: ConfigSettings::from_env()?.map(ConfigOrigin::Settings),
            node_id: env_var("SCHEDULER_NODE_ID"),
            lock_lifetime: env_duration("SCHEDULER_LOCK_LIFETIME")?,
            shutdown_timeout: env_duration("SCHEDULER_SHUTDOWN_TIMEOUT")?,
            poll_interval: env_duration("SCHEDULER_POLL_INTERVAL")?,
            run_retention: env_duration("SCHEDULER_RUN_RETENTION")?,
            ..Self::default()
        };
        if let Some(v) = env_var("SCHEDULER_MAX_CONCURRENT") {
            b.max_concurrent = Some(v.trim().parse().map_err(|_| Error::InvalidSetting {
                name: Cow::Borrowed("SCHEDULER_MAX_CONCURRENT"),
                message: format!("`{v}` is not a positive whole number"),
            })?);
        }
        if let Some(v) = env_var("SCHEDULER_TIMEZONE") {
            b.default_timezone = Some(crate::schedule::parse_timezone(v.trim())?);
        }
        if let Some(v) = env_var("SCHEDULER_MIGRATE") {
            b.migrate = Some(match v.trim().to_ascii_lowercase().as_str() {
                "1" | "true" | "yes" | "on" => true,
                "0" | "false" | "no" | "off" => false,
                _ => {
                    return Err(Error::InvalidSetting {
                        name: Cow::Borrowed("SCHEDULER_MIGRATE"),
                        message: format!("`{v}` is not a boolean; write `true` or `false`"),
                    });
                }
            });
        }
        Ok(b)
    }

    /// The PostgreSQL URL. Required unless a [`store`](Self::store) is given. Never logged with
    /// its password.
    pub fn database_url(mut self, url: impl Into<String>) -> Self {
        self.database_url = Some(url.into());
        self
    }

    /// The PostgreSQL schema holding the `scheduler_*` tables. Default `public`.
    pub fn schema(mut self, schema: impl Into<String>) -> Self {
        self.schema = Some(schema.into());
        self
    }

    /// Uses an existing store instead of connecting to `database_url`.
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

    /// How long a lock lives without renewal. Default 60 s; at least 300 ms.
    pub fn lock_lifetime(mut self, lifetime: Duration) -> Self {
        self.lock_lifetime = Some(lifetime);
        self
    }

    /// How often a running handler's lock is renewed. Default: a third of the lock lifetime.
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

    /// How long running handlers get to finish on shutdown. Default 30 s.
    pub fn shutdown_timeout(mut self, timeout: Duration) -> Self {
        self.shutdown_timeout = Some(timeout);
        self
    }

    /// The safety-net interval at which an idle node re-checks the store. Default 30 s.
    pub fn poll_interval(mut self, interval: Duration) -> Self {
        self.poll_interval = Some(interval);
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

    /// Size of the database connection pool. Default 10.
    pub fn max_connections(mut self, n: u32) -> Self {
        self.max_connections = Some(n);
        self
    }

    /// Validates the settings and builds the scheduler. Connects to nothing yet.
    pub fn build(self) -> Result<Scheduler> {
        let registry = match self.registry {
            Some(r) => r,
            None => TaskRegistry::collect()?,
        };
        let lock_lifetime = self.lock_lifetime.unwrap_or(DEFAULT_LOCK_LIFETIME);
        let renew_interval = self
            .renew_interval
            .unwrap_or_else(|| Settings::default_renew_interval(lock_lifetime));
        let settings = Settings {
            node_id: self.node_id.unwrap_or_else(settings::default_node_id),
            lock_lifetime,
            renew_interval,
            takeover_wait: Settings::takeover_wait_for(renew_interval),
            default_recovery: crate::policy::Recovery::default(),
            max_concurrent: self.max_concurrent.unwrap_or(DEFAULT_MAX_CONCURRENT),
            shutdown_timeout: self.shutdown_timeout.unwrap_or(DEFAULT_SHUTDOWN_TIMEOUT),
            poll_interval: self.poll_interval.unwrap_or(DEFAULT_POLL_INTERVAL),
            heartbeat_interval: self
                .heartbeat_interval
                .unwrap_or(DEFAULT_HEARTBEAT_INTERVAL),
            run_retention: self.run_retention.unwrap_or(DEFAULT_RUN_RETENTION),
            default_timezone: self.default_timezone.unwrap_or(Tz::UTC),
            config_poll_interval: self
                .config_poll_interval
                .unwrap_or(DEFAULT_CONFIG_POLL_INTERVAL),
        };
        settings.validate()?;
        let store: Arc<dyn Store> = match (self.store, self.database_url) {
            (Some(store), _) => store,
            (None, Some(url)) => {
                let store = PgStore::builder(&url)
                    .schema(self.schema.as_deref().unwrap_or(DEFAULT_SCHEMA))
                    .max_connections(self.max_connections.unwrap_or(DEFAULT_MAX_CONNECTIONS))
                    .connect_lazy()
                    .map_err(|e| Error::InvalidSetting {
                        name: Cow::Borrowed("database_url"),
                        message: e.to_string(),
                    })?;
                Arc::new(store)
            }
            (None, None) => {
                return Err(Error::InvalidSetting {
                    name: Cow::Borrowed("database_url"),
                    message: "no database configured; set SCHEDULER_DATABASE_URL or DATABASE_URL (e.g. postgres://user@127.0.0.1:5432/app)".into(),
                });
            }
        };
        let store_description = store.describe();
        let config = match self.config {
            None => None,
            Some(ConfigOrigin::Document(doc)) => Some(ConfigFeed::Fixed(Arc::new(doc))),
            Some(ConfigOrigin::Source(source)) => Some(ConfigFeed::Watched(
                ConfigWatcher::new(source).poll_interval(settings.config_poll_interval),
            )),
            Some(ConfigOrigin::Settings(mut config)) => {
                if let Some(interval) = self.config_poll_interval {
                    config.poll_interval = interval;
                }
                Some(ConfigFeed::Watched(config.watcher()?))
            }
        };
        let names = registry.names().map(str::to_owned).collect();
        let (completions, completion_queue) = tokio::sync::mpsc::unbounded_channel();
        let watchdog = Arc::new(watchdog::LockWatchdog::new(
            Arc::clone(&store),
            Arc::from(settings.node_id.as_str()),
            settings.lease_times(),
            settings.renew_interval,
        ));
        let shared = Arc::new(Shared {
            store,
            registry,
            names,
            node_id: Arc::from(settings.node_id.as_str()),
            state: self.state,
            permits: Arc::new(Semaphore::new(settings.max_concurrent)),
            settings,
            wake: Notify::new(),
            handlers_cancel: CancellationToken::new(),
            hard_stop: CancellationToken::new(),
            flush_deadline: CancellationToken::new(),
            tracker: TaskTracker::new(),
            specs: crate::schedule::SpecCache::default(),
            watchdog,
            completions,
        });
        Ok(Scheduler {
            shared,
            completions: Some(completion_queue),
            config,
            migrate: self.migrate.unwrap_or(true),
            store_description,
        })
    }
}

/// Completes on SIGINT (Ctrl-C) or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            tracing::error!(error = %e, "cannot listen for Ctrl-C");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(e) => {
                tracing::error!(error = %e, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => tracing::info!("received SIGINT"),
        _ = terminate => tracing::info!("received SIGTERM"),
    }
}

/// Installs the default log output: `RUST_LOG` filter (default `info`), human-readable lines,
/// or JSON lines with `SCHEDULER_LOG_FORMAT=json`. Does nothing if a subscriber is already set.
pub fn init_tracing() {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false);
    let _ = if env_var("SCHEDULER_LOG_FORMAT").is_some_and(|f| f.eq_ignore_ascii_case("json")) {
        builder.json().try_init()
    } else {
        builder.try_init()
    };
}

/// The whole `main` of a scheduler application: runs the scheduler with settings from the
/// environment (see [`SchedulerBuilder::from_env`]) until SIGTERM or SIGINT, then shuts down
/// gracefully.
///
/// The process arguments select an operator command instead (see [`AppCli`](crate::cli::AppCli)):
/// `myapp check-config tasks.json` checks a config file against the tasks this binary registers
/// without touching the database, and exits non-zero on any problem; `myapp next '<cron>'`
/// previews a schedule. `run` owns the command line: an application with arguments of its own
/// builds the scheduler with [`SchedulerBuilder::from_env`] and calls
/// [`Scheduler::run_until`] instead (and can still offer the commands through
/// [`cli::AppCommand`](crate::cli::AppCommand)).
///
/// ```no_run
/// #[tokio::main]
/// async fn main() -> scheduler::Result<()> {
///     scheduler::run().await
/// }
/// ```
pub async fn run() -> Result<()> {
    use clap::Parser;

    use crate::cli::{AppCli, AppCommand};

    match AppCli::parse().command {
        None | Some(AppCommand::Run) => {
            init_tracing();
            let scheduler = SchedulerBuilder::from_env()?.build()?;
            scheduler.run_until(shutdown_signal()).await
        }
        Some(AppCommand::CheckConfig(args)) => {
            let registry = TaskRegistry::collect()?;
            if !args.run(&registry, &mut std::io::stdout().lock())? {
                // The report above lists the problems; the exit code is what CI reads.
                std::process::exit(1);
            }
            Ok(())
        }
        Some(AppCommand::Next(args)) => args.run(&mut std::io::stdout().lock()),
    }
}
