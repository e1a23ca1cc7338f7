//! What the admin server may see of a running engine: one narrow, cheap handle, [`EngineView`].
//!
//! The admin server runs beside the engine (the composition root, `crate::node`, starts both)
//! and holds this view and nothing else of the engine's. The view only reads:
//!
//! | it may read | for |
//! |---|---|
//! | the node's id, its store, its metrics | every route; `/metrics` |
//! | whether the node prepared the store, whether it drains, its config as last read and applied | `/readyz`, `/api/config`, `/api/tasks` |
//! | the states of its background services (see `health`) | `/readyz`, `/api/nodes` |
//! | a task's settings (its attribute over the node's defaults), and its descriptor | `/api/tasks` |
//! | the node's missed grace and clock, and the compiled schedules | `/api/ticks`, the strips of instances |
//!
//! It asks nothing of the engine: the admin API's mutations (trigger, pause, resume) go through
//! the store ([`crate::operate`]) and are audited there; every node, this one included, learns
//! of them as of any other change (a notification, or its next look at the store).
//!
//! A view is cheap to clone, `Send + Sync`, and keeps what it reads alive by itself (it borrows
//! nothing), so the admin server may run on another runtime or thread than the engine.

// Only the admin server reads the engine through the view.
#![cfg_attr(not(feature = "admin"), allow(dead_code))]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::config_sync::ConfigView;
use super::health::{Health, ServiceStatus};
use super::settings::Settings;
use crate::TaskDescriptor;
use crate::metrics::Metrics;
use crate::registry::{TaskRegistry, TaskSettings};
use crate::schedule::{ScheduleError, ScheduleSpec, SpecCache};
use crate::store::Store;

/// The admin server's view of the engine (see the [module docs](self)).
#[derive(Clone)]
pub(crate) struct EngineView(Arc<ViewParts>);

/// What an [`EngineView`] reads: the engine's own, shared (or, for what never changes, copied
/// when the view is made).
pub(super) struct ViewParts {
    pub(super) node_id: Arc<str>,
    pub(super) store: Arc<dyn Store>,
    pub(super) metrics: Arc<Metrics>,
    /// Set once the store is prepared.
    pub(super) started: Arc<AtomicBool>,
    /// Cancelled when the node drains (its handlers are told to stop).
    pub(super) draining: CancellationToken,
    pub(super) health: Arc<Health>,
    pub(super) config_view: Arc<RwLock<ConfigView>>,
    pub(super) registry: TaskRegistry,
    pub(super) settings: Settings,
    pub(super) specs: Arc<SpecCache>,
}

impl EngineView {
    pub(super) fn new(parts: ViewParts) -> Self {
        Self(Arc::new(parts))
    }

    /// This node's id.
    pub(crate) fn node_id(&self) -> &str {
        &self.0.node_id
    }

    /// The store this node uses: what the admin API reads, and where its mutations go.
    pub(crate) fn store(&self) -> &Arc<dyn Store> {
        &self.0.store
    }

    /// This node's metrics.
    pub(crate) fn metrics(&self) -> &Metrics {
        &self.0.metrics
    }

    /// Whether the node has prepared the store (migrations, its registration).
    pub(crate) fn started(&self) -> bool {
        self.0.started.load(Ordering::Acquire)
    }

    /// Whether the node is draining (shutdown requested).
    pub(crate) fn draining(&self) -> bool {
        self.0.draining.is_cancelled()
    }

    /// The node's background services and their states (see `super::health`).
    pub(crate) fn services(&self) -> Vec<ServiceStatus> {
        self.0.health.services()
    }

    /// Reads what the node knows of its config (the document last read, the last reconcile);
    /// `read` must not wait (the engine writes it while it applies a document).
    pub(crate) fn read_config<R>(&self, read: impl FnOnce(&ConfigView) -> R) -> R {
        read(&self.0.config_view.read().expect("config view lock"))
    }

    /// The settings of a task registered in this binary, and its descriptor (`None`: not
    /// registered here).
    pub(crate) fn task_settings(
        &self,
        task: &str,
    ) -> Option<(TaskSettings, &'static TaskDescriptor)> {
        self.0.settings.registered(&self.0.registry, task)
    }

    /// Owners of tasks whose config entry names none.
    #[cfg_attr(not(feature = "admin"), allow(dead_code))]
    pub(crate) fn default_owners(&self) -> &[String] {
        &self.0.settings.default_owners
    }

    /// The time by the node's clock: the system clock, or the test clock the node was built
    /// with (which its claims and missed-run checks decide by too).
    pub(crate) fn now(&self) -> chrono::DateTime<chrono::Utc> {
        self.0.settings.clock.now()
    }

    /// The node's missed grace, if it sets one (`None`: from each task's interval; see
    /// [`crate::ticks`]).
    pub(crate) fn missed_grace(&self) -> Option<Duration> {
        self.0.settings.missed_grace
    }

    /// The jitter window of `task` as this node knows it: its entry's in the config this node
    /// applied, else its attribute's, else none.
    pub(crate) fn task_jitter(&self, task: &str) -> std::time::Duration {
        super::config_sync::task_window(&self.0.config_view, &self.0.registry)(task)
    }

    /// The config document this node applied last, read at each call.
    #[cfg_attr(not(feature = "admin"), allow(dead_code))]
    pub(crate) fn config_documents(&self) -> crate::schedules::Documents {
        super::config_sync::documents(&self.0.config_view)
    }

    /// A stored schedule, compiled (and kept compiled, as the engine's claims use it).
    pub(crate) fn schedule(
        &self,
        cron: &str,
        zone: &str,
        calendar: Option<&str>,
    ) -> Result<ScheduleSpec, ScheduleError> {
        self.0.specs.get_named(cron, zone, calendar)
    }
}
