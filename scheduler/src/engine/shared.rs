//! The state the engine's run path shares: the claim loop, the runners and the handlers
//! they run (`claimer`, `runner`, `execute`) read most of it. The node's other services take
//! only the parts they use, handed out by the engine (`super`) when it starts them.

use std::sync::Arc;

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::config_sync::{self, ConfigView};
#[cfg(feature = "webhook")]
use super::delivery::AlertSink;
use super::settings::Settings;
use super::{completer, failstop, health, incidents, levels, runtime, service, skips, watchdog};
use crate::TaskRegistry;
use crate::context::StateMap;
use crate::store::Store;

/// State shared by the engine's run path; the engine hands its other services the parts they
/// use.
pub(crate) struct Shared {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) registry: TaskRegistry,
    pub(crate) names: Arc<[String]>,
    pub(crate) node_id: Arc<str>,
    pub(crate) state: StateMap,
    pub(crate) settings: Settings,
    /// The node's handler slots (see [`super::slots`]).
    pub(crate) slots: super::slots::Slots,
    /// Live nodes sharing the due work, this one included, as the last heartbeat counted them:
    /// bounds the batch one claim takes (see `claimer::fair_cap`).
    pub(crate) live_nodes: Arc<std::sync::atomic::AtomicUsize>,
    /// Instances in the store, as the last heartbeat counted them: with the registered tasks,
    /// the rows a tick may hold, which size the claims (see `claimer::fair_cap` and
    /// `claimer::claim_ahead`).
    pub(crate) instances: Arc<std::sync::atomic::AtomicUsize>,
    /// Wakes the claim loop (a handler finished, another node changed something).
    pub(crate) wake: Arc<Notify>,
    /// Tells handlers to stop (graceful shutdown).
    pub(crate) handlers_cancel: CancellationToken,
    /// Aborts handlers still running after the drain timeout.
    pub(crate) hard_stop: CancellationToken,
    /// Stops retrying outcome writes at the very end of shutdown.
    pub(crate) flush_deadline: CancellationToken,
    pub(crate) tracker: TaskTracker,
    /// Where handlers run (the handler pool), set when the node starts (see [`Shared::handlers`]).
    pub(super) handlers: std::sync::OnceLock<Arc<runtime::HandlerThreads>>,
    /// Compiled schedules, shared by claims and runners.
    pub(crate) specs: Arc<crate::schedule::SpecCache>,
    /// Renews the locks of running handlers.
    pub(crate) watchdog: Arc<watchdog::LockWatchdog>,
    /// Where runners hand their outcomes to the completer.
    pub(crate) completions: tokio::sync::mpsc::UnboundedSender<completer::Completion>,
    /// What happened, for subscribers.
    pub(crate) events: Arc<crate::events::EventBus>,
    /// This node's metrics.
    pub(crate) metrics: Arc<crate::metrics::Metrics>,
    /// Alerts on their way to the channels, if any is configured.
    #[cfg(feature = "webhook")]
    pub(crate) alerts: Option<Arc<AlertSink>>,
    /// Where alerts about tasks wait to be folded into incidents (the bus's sink).
    pub(crate) incidents: Arc<incidents::IncidentDesk>,
    /// The config as this node last read and applied it (for the admin API).
    pub(crate) config_view: Arc<std::sync::RwLock<ConfigView>>,
    /// Set once the store is prepared (migrations, node registration).
    pub(crate) started: Arc<std::sync::atomic::AtomicBool>,
    /// The states of the node's background services (see `health`).
    pub(crate) health: Arc<health::Health>,
}

impl Shared {
    /// Counts skipped ticks and raises `tick.skipped` (to the webhook too unless `local_only`).
    pub(crate) fn report_skip(&self, skip: &crate::store::SkipRecord, local_only: bool) {
        skips::report_skip(&self.metrics, &self.events, skip, local_only);
    }

    /// The service levels of `task` in the config this node applied, if it has any.
    pub(crate) fn levels(&self, task: &str) -> Option<levels::TaskLevels> {
        config_sync::levels(&self.config_view, task)
    }

    /// What the service `name` runs under (see `service::Care`).
    pub(crate) fn care(&self, name: &'static str) -> service::Care<'_> {
        service::Care {
            name,
            health: &self.health,
            events: &self.events,
            metrics: &self.metrics,
            fail_stop: failstop::exit_service,
            clock: &self.settings.clock,
        }
    }

    /// Where this node's handlers run: its handler pool, in the context of the runtime
    /// `run_until` was called from (the engine's own if it was not set).
    pub(crate) fn handlers(&self) -> &Arc<runtime::HandlerThreads> {
        self.handlers.get_or_init(|| {
            let engine = tokio::runtime::Handle::current();
            Arc::new(runtime::HandlerThreads::new(
                None,
                engine,
                self.metrics.handler_threads_replaced.clone(),
            ))
        })
    }

    /// What the config service works with.
    pub(super) fn config_sync_parts(&self) -> config_sync::ConfigSyncParts<'_> {
        config_sync::ConfigSyncParts {
            store: &self.store,
            registry: &self.registry,
            node_id: &self.node_id,
            default_timezone: self.settings.default_timezone,
            poll_interval: self.settings.config_poll_interval,
            config_view: &self.config_view,
            events: &self.events,
            metrics: &self.metrics,
        }
    }

    /// The settings of a registered task (`None`: not in this binary).
    pub(crate) fn task_settings(
        &self,
        task: &str,
    ) -> Option<(
        crate::registry::TaskSettings,
        &'static crate::TaskDescriptor,
    )> {
        self.settings.registered(&self.registry, task)
    }
}
