//! A built node, [`Scheduler`]: the engine and the admin server, started side by side.
//!
//! Part of the composition root with `builder` (which builds a node) and `app` (the application
//! entry). [`Scheduler::run_until`] runs the engine, and around its life, on the engine's own
//! runtime, the admin server: started first, so probes answer while the engine starts, handed a
//! view of the engine (`EngineView`) and nothing more, and stopped last. The engine knows
//! nothing of the admin server.

use std::future::Future;
#[cfg(feature = "admin")]
use std::net::SocketAddr;
use std::sync::Arc;

use crate::Result;
#[cfg(feature = "admin")]
use crate::admin::AdminListener;
use crate::engine::{Engine, Life};
use crate::events::EventStream;
use crate::metrics::Metrics;
use crate::store::Store;

/// A configured scheduler node, ready to [`run_until`](Scheduler::run_until) a shutdown signal.
/// Built by [`SchedulerBuilder`](crate::SchedulerBuilder) ([`Scheduler::builder`]).
pub struct Scheduler {
    engine: Engine,
    #[cfg(feature = "admin")]
    admin: Option<AdminListener>,
    /// What is exported over OTLP while the node runs, if anything.
    #[cfg(feature = "otel")]
    otel: Option<crate::otel::OtelSettings>,
}

impl std::fmt::Debug for Scheduler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scheduler")
            .field("node_id", &self.engine.node_id())
            .field("store", &self.engine.store_description())
            .field("tasks", &self.engine.task_names())
            .finish_non_exhaustive()
    }
}

impl Scheduler {
    /// A node of `engine`, serving the admin API on `admin` (if any) while it runs.
    #[cfg(feature = "admin")]
    pub(crate) fn new(engine: Engine, admin: Option<AdminListener>) -> Self {
        Self {
            engine,
            admin,
            #[cfg(feature = "otel")]
            otel: None,
        }
    }

    /// A node of `engine` (a build without the admin server).
    #[cfg(not(feature = "admin"))]
    pub(crate) fn new(engine: Engine) -> Self {
        Self {
            engine,
            #[cfg(feature = "otel")]
            otel: None,
        }
    }

    /// Exports over OTLP while the node runs (see [`crate::otel`]).
    #[cfg(feature = "otel")]
    pub(crate) fn with_otel(mut self, settings: Option<crate::otel::OtelSettings>) -> Self {
        self.otel = settings;
        self
    }

    /// The address the admin server listens on, if one is configured (see
    /// [`SchedulerBuilder::admin_addr`](crate::SchedulerBuilder::admin_addr)): the port actually
    /// bound when `:0` was asked for.
    #[cfg(feature = "admin")]
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin.as_ref().map(AdminListener::local_addr)
    }

    /// A stream of what happens on this node from now on (see [`crate::events`]). Subscribe
    /// before [`run_until`](Self::run_until); any number of subscribers may.
    pub fn subscribe(&self) -> EventStream {
        self.engine.subscribe()
    }

    /// This node's metrics (what the admin server serves at `/metrics`).
    pub fn metrics(&self) -> Arc<Metrics> {
        self.engine.metrics()
    }

    /// The store this node uses.
    pub fn store(&self) -> Arc<dyn Store> {
        self.engine.store()
    }

    /// The handle that makes, changes, reads and removes instances of this node's tasks at run
    /// time (see [`Schedules`](crate::Schedules)). Take it before
    /// [`run_until`](Self::run_until); it is cheap to clone and works as long as the store does,
    /// audited as by this node. The calendars its instances name are those of the config
    /// document the node applied last.
    pub fn schedules(&self) -> crate::Schedules {
        crate::Schedules::of(
            self.engine.store(),
            self.engine.task_names().iter().cloned().collect(),
            self.engine.node_id(),
            self.engine.task_jitter(),
        )
        .with_documents(self.engine.config_documents())
    }

    /// This node's id.
    pub fn node_id(&self) -> &str {
        self.engine.node_id()
    }

    /// Runs until `shutdown` completes, then drains: stops claiming, tells handlers to stop
    /// through their context, waits up to the shutdown timeout, stops what is left and hands
    /// its ticks over to other nodes, and returns.
    ///
    /// Start-up order: the admin server (if configured, so probes answer during start-up),
    /// database and migrations, config, workers. A database that is down at start is retried
    /// with backoff until it comes up or `shutdown` completes. The admin server stops last.
    /// With the `otel` feature and an OTLP endpoint, the exporters start before all of it and,
    /// once every run's outcome is recorded, flush the last spans and metrics (see `otel`).
    ///
    /// In a child process that a node started for a task with `isolation = "process"`, it runs
    /// that task's handler instead and exits the process (see [`child_request`](crate::child_request)).
    pub async fn run_until<F>(self, shutdown: F) -> Result<()>
    where
        F: Future<Output = ()> + Send,
    {
        if let Some(request) = crate::isolation::child_request() {
            crate::isolation::run_child(request).await;
        }
        #[cfg(feature = "otel")]
        let otel = match self.otel.as_ref() {
            Some(settings) => {
                let exporters = crate::otel::Exporters::install(
                    settings,
                    self.engine.node_id(),
                    &self.engine.metrics(),
                )?;
                if let Some(sink) = exporters.span_sink() {
                    self.engine.attach_event_sink(sink);
                }
                Some(exporters)
            }
            None => None,
        };
        #[cfg(feature = "admin")]
        let Self { engine, admin, .. } = self;
        #[cfg(not(feature = "admin"))]
        let Self { engine, .. } = self;
        // Around the engine's life, on the engine runtime (so no handler can hold it up): the
        // admin server starts first and stops last.
        #[cfg(feature = "admin")]
        let around = move |view, life: Life| async move {
            let admin = match admin {
                Some(listener) => Some(crate::admin::spawn(listener, view)?),
                None => None,
            };
            let result = life.await;
            if let Some(admin) = admin {
                admin.stop().await;
            }
            result
        };
        #[cfg(not(feature = "admin"))]
        let around = |_view, life: Life| life;
        let result = engine.run_until(shutdown, around).await;
        // Every run's outcome is recorded: its span and the metrics' last values go out now.
        #[cfg(feature = "otel")]
        if let Some(otel) = otel {
            otel.shutdown().await;
        }
        result
    }
}
