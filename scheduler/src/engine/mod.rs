//! The engine: runs every due tick exactly once across all nodes sharing a store.
//!
//! A node claims due ticks atomically (claiming advances the row's next run in the same
//! transaction), runs each handler on its handler pool under a lock watchdog, records the
//! run, and releases the lock. The store's clock decides what is due and what has expired. The
//! node's own services run on a runtime of their own, so no handler can hold them up.
//!
//! This module keeps the node's lifecycle (start, run, drain: `life` holds both ends); each
//! concern lives in its own:
//!
//! | concern | where |
//! |---|---|
//! | the state the run path shares (claimer, runners, handlers) | `shared` |
//! | when to look, claiming in batches | `claimer` |
//! | the decisions inside a claim: takeover here, what is due by `crate::ticks` | `rules` |
//! | one run: handler, stop requests, panics | `runner` |
//! | where work runs: the engine runtime, a thread per handler | `runtime` |
//! | stopping the process when a handler cannot be stopped and its lock cannot be kept | `failstop` |
//! | how a run ends (the one rule) | `outcome` |
//! | polling a handler only while its lock is trusted | `gate` |
//! | lock renewal (one write for all held locks) and loss; cancel requests reaching a run | `watchdog` |
//! | recording outcomes in batches | `completer` |
//! | which background services a node runs, with what parts, in which group | `roster` |
//! | heartbeat, pruning, rescheduling, change notifications | `maintenance` |
//! | a task's service levels, as read from the applied config | `levels` |
//! | service levels: late ticks, missed wall-clock deadlines | `sla` |
//! | one incident per problem: folding alerts, reminders, resolutions | `incidents` |
//! | applying the task config | `config_sync` |
//! | the loop every background service shares | `service` |
//! | services that panic: restarted or fail-stop, their states for the probes | `health` |
//! | the services that are down, written to the node's row for `/api/nodes` | `reporter` |
//! | validated settings and their defaults | `settings` |
//! | what the admin server may see of the engine | `view` |
//!
//! The engine knows nothing of the admin server: the composition root (`crate::node`) starts
//! both side by side and hands the admin server an `EngineView`. The tick rules the engine
//! applies (what is due, missed, skipped) are `crate::ticks`'.
//!
//! The guarantees and the mechanisms behind them are in `RELIABILITY.md`.

mod claimer;
mod completer;
mod config_sync;
mod database;
#[cfg(feature = "webhook")]
mod delivery;
mod execute;
mod failstop;
mod gate;
mod health;
mod incidents;
mod levels;
mod life;
mod maintenance;
mod outcome;
mod reporter;
mod roster;
mod rules;
mod runner;
mod runtime;
mod service;
mod settings;
mod shared;
mod skips;
mod sla;
mod slots;
mod view;
mod watchdog;

use std::future::Future;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub(crate) use config_sync::ConfigFeed;
#[cfg(feature = "webhook")]
use delivery::AlertSink;
pub use failstop::FAIL_STOP_EXIT_CODE;
// What the admin server shows of the node's services.
#[cfg(feature = "admin")]
pub(crate) use health::ServiceStatus;
#[cfg(feature = "webhook")]
pub use incidents::INCIDENT_KINDS;
pub use settings::{
    DEFAULT_CONFIG_POLL_INTERVAL, DEFAULT_HEARTBEAT_INTERVAL, DEFAULT_LOCK_LIFETIME,
    DEFAULT_MAX_CLAIM_AHEAD, DEFAULT_MAX_CONCURRENT, DEFAULT_POLL_INTERVAL, DEFAULT_RUN_RETENTION,
    DEFAULT_SHUTDOWN_TIMEOUT,
};
pub(crate) use settings::{Settings, TaskDefaults, default_node_id};
pub(crate) use view::EngineView;

use crate::context::StateMap;
use crate::store::Store;
use crate::{Error, Result, TaskRegistry};
use config_sync::ConfigSync;
use shared::Shared;

/// One node's engine, assembled and ready to [`run_until`](Engine::run_until) a shutdown
/// signal; the public [`Scheduler`](crate::Scheduler) runs it beside the admin server.
pub(crate) struct Engine {
    shared: Arc<Shared>,
    completions: Option<tokio::sync::mpsc::UnboundedReceiver<completer::Completion>>,
    config: Option<ConfigFeed>,
    migrate: bool,
    store_description: String,
}

/// An engine's life on the engine runtime, from start-up to the end of its drain (see
/// [`Engine::run_until`]).
pub(crate) type Life = std::pin::Pin<Box<dyn Future<Output = Result<()>> + Send>>;

impl Engine {
    /// Assembles an engine from validated parts (see `SchedulerBuilder::build`).
    pub(crate) fn assemble(
        store: Arc<dyn Store>,
        registry: TaskRegistry,
        settings: Settings,
        state: StateMap,
        config: Option<ConfigFeed>,
        migrate: bool,
        #[cfg(feature = "webhook")] channels: Option<crate::channels::Channels>,
    ) -> Self {
        #[cfg(feature = "webhook")]
        let alerts = channels.map(|c| Arc::new(AlertSink::new(Arc::new(c), &settings.node_id)));
        #[cfg(feature = "webhook")]
        let sink = alerts
            .clone()
            .map(|a| a as Arc<dyn crate::events::EventSink>);
        #[cfg(not(feature = "webhook"))]
        let sink = None;
        let desk = Arc::new(incidents::IncidentDesk::new(sink));
        let sink = Some(Arc::clone(&desk) as Arc<dyn crate::events::EventSink>);
        let names: Arc<[String]> = registry.names().map(str::to_owned).collect();
        let (completions, completion_queue) = tokio::sync::mpsc::unbounded_channel();
        let watchdog = Arc::new(watchdog::LockWatchdog::new(
            Arc::clone(&store),
            Arc::from(settings.node_id.as_str()),
            settings.renew_interval,
            settings.clock.clone(),
        ));
        let store_description = store.describe();
        let metrics = Arc::new(crate::metrics::Metrics::new());
        let events = crate::events::EventBus::counted(metrics.events_dropped.clone())
            .with_sink(sink)
            .with_defaults(settings.default_owners.clone(), settings.default_timezone);
        let shared = Arc::new(Shared {
            store,
            registry,
            names,
            node_id: Arc::from(settings.node_id.as_str()),
            state,
            slots: slots::Slots::new(settings.max_concurrent),
            live_nodes: Arc::new(std::sync::atomic::AtomicUsize::new(1)),
            instances: Arc::default(),
            settings,
            wake: Arc::default(),
            handlers_cancel: CancellationToken::new(),
            hard_stop: CancellationToken::new(),
            flush_deadline: CancellationToken::new(),
            tracker: TaskTracker::new(),
            handlers: std::sync::OnceLock::new(),
            specs: Arc::default(),
            watchdog,
            completions,
            events: Arc::new(events),
            metrics,
            #[cfg(feature = "webhook")]
            alerts,
            incidents: desk,
            config_view: Arc::default(),
            started: Arc::default(),
            health: Arc::default(),
        });
        Engine {
            shared,
            completions: Some(completion_queue),
            config,
            migrate,
            store_description,
        }
    }

    /// What the admin server may see of this engine (see [`EngineView`]).
    pub(crate) fn view(&self) -> EngineView {
        let shared = &self.shared;
        EngineView::new(view::ViewParts {
            node_id: Arc::clone(&shared.node_id),
            store: Arc::clone(&shared.store),
            metrics: Arc::clone(&shared.metrics),
            started: Arc::clone(&shared.started),
            draining: shared.handlers_cancel.clone(),
            health: Arc::clone(&shared.health),
            config_view: Arc::clone(&shared.config_view),
            registry: shared.registry.clone(),
            settings: shared.settings.clone(),
            specs: Arc::clone(&shared.specs),
        })
    }

    /// A stream of what happens on this node from now on (see [`crate::events`]).
    pub(crate) fn subscribe(&self) -> crate::events::EventStream {
        self.shared.events.subscribe()
    }

    /// Hands every event this node emits from now on to `sink` too (see
    /// [`EventBus::attach`](crate::events::EventBus::attach)).
    #[cfg(feature = "otel")]
    pub(crate) fn attach_event_sink(&self, sink: Arc<dyn crate::events::EventSink>) -> bool {
        self.shared.events.attach(sink)
    }

    /// This node's metrics.
    pub(crate) fn metrics(&self) -> Arc<crate::metrics::Metrics> {
        Arc::clone(&self.shared.metrics)
    }

    /// The store this node uses.
    pub(crate) fn store(&self) -> Arc<dyn Store> {
        Arc::clone(&self.shared.store)
    }

    /// The store, described for people (its password redacted).
    pub(crate) fn store_description(&self) -> &str {
        &self.store_description
    }

    /// This node's id.
    pub(crate) fn node_id(&self) -> &str {
        &self.shared.node_id
    }

    /// The tasks this node runs.
    pub(crate) fn task_names(&self) -> &[String] {
        &self.shared.names
    }

    /// Each task's jitter window as this node knows it: its entry's in the config this node
    /// applied, else its attribute's, else none.
    pub(crate) fn task_jitter(&self) -> crate::schedules::TaskWindow {
        config_sync::task_window(&self.shared.config_view, &self.shared.registry)
    }

    /// The config document this node applied last, read at each call.
    pub(crate) fn config_documents(&self) -> crate::schedules::Documents {
        config_sync::documents(&self.shared.config_view)
    }

    /// Runs until `shutdown` completes, then drains: stops claiming, tells handlers to stop
    /// through their context, waits up to the shutdown timeout, stops what is left and hands
    /// its ticks over to other nodes, and returns.
    ///
    /// Start-up order: whatever `around` starts before it runs the engine's life (the
    /// composition root starts the admin server there, so probes answer during start-up),
    /// database and migrations, config, workers. A database that is down at start is retried
    /// with backoff until it comes up or `shutdown` completes.
    ///
    /// The node's services run on the engine runtime, and so does `around`: it is handed a view
    /// of this engine and the engine's [`Life`], which it must run to its end, and what it
    /// returns is what this returns. The engine knows nothing of what runs around it.
    pub(crate) async fn run_until<F, A, R>(self, shutdown: F, around: A) -> Result<()>
    where
        F: Future<Output = ()> + Send,
        A: FnOnce(EngineView, Life) -> R,
        R: Future<Output = Result<()>> + Send + 'static,
    {
        // The node's services run on the engine runtime, its handlers on its handler pool in
        // the context of the caller's runtime (see `runtime`): this future only waits.
        let engine = runtime::engine().map_err(|e| Error::Io(std::io::Error::other(e)))?;
        let _ = self
            .shared
            .handlers
            .set(Arc::new(runtime::HandlerThreads::new(
                tokio::runtime::Handle::try_current().ok(),
                engine.handle().clone(),
                self.shared.metrics.handler_threads_replaced.clone(),
            )));
        let requested = CancellationToken::new();
        let view = self.view();
        let life: Life = Box::pin(self.run_on_engine(requested.clone().cancelled_owned()));
        let mut node = engine.spawn(around(view, life));
        // Dropped before the node stopped (the caller gave up on it): it shuts down gracefully.
        let abandoned = requested.clone().drop_guard();
        tokio::pin!(shutdown);
        let joined = tokio::select! {
            joined = &mut node => joined,
            () = &mut shutdown => {
                requested.cancel();
                (&mut node).await
            }
        };
        abandoned.disarm();
        match joined {
            Ok(result) => result,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(e) => Err(Error::Io(std::io::Error::other(format!(
                "the scheduler's engine stopped unexpectedly: {e}"
            )))),
        }
    }

    /// The node's whole life on the engine runtime, until `shutdown`: start, run, drain.
    async fn run_on_engine<F>(mut self, shutdown: F) -> Result<()>
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
            .map(|feed| ConfigSync::new(shared.config_sync_parts(), feed));
        tokio::select! {
            () = self.start(&shared, config.as_mut()) => {}
            _ = &mut shutdown => {
                tracing::info!("shutdown requested during start-up");
                return Ok(());
            }
        }

        let run_path = roster::RunPath::start(
            &shared,
            self.completions
                .take()
                .expect("run_until consumes the scheduler"),
        );
        let workers = roster::start_workers(&shared, config, &stop);
        tracing::info!(node = %shared.node_id, "scheduler running");

        shutdown.await;
        self.drain(&shared, stop, workers).await;
        // Every runner has had its outcome recorded (or given up on) by now.
        run_path.stop().await;
        // A handler that could not be stopped is not renewed any more: if it still runs when its
        // lock could expire, the process stops (its runner sees to that, see `failstop`).
        shared.watchdog.stop();
        if let Err(e) = shared.store.deregister_node(&shared.node_id).await {
            tracing::warn!(error = %e, "could not mark the node stopped");
        }
        tracing::info!(
            node = %shared.node_id,
            events_dropped = shared.events.dropped(),
            "scheduler stopped"
        );
        Ok(())
    }
}
