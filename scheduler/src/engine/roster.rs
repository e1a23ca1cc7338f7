//! The node's background services: which run, each with the parts it is given and what wakes
//! it early, each under `service::run` (restarted after a panic, or fail-stop).
//!
//! They start in two groups that stop at different moments. The run path's services (the
//! completer that records outcomes, the lock renewer, the cancel checks) run as long as runs may
//! be going, the drain included. The workers (claimer, heartbeat, pruner, listener, config,
//! service levels, incidents, database, reporter, alert delivery) stop as the drain begins.
//!
//! What this module must not do: decide when the node starts, drains or stops (that is the
//! engine's life: `super::Engine::run_until` and `life`), or hold a service's own logic.

use std::sync::Arc;

use tokio::sync::Notify;
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::completer::{self, Completion};
use super::config_sync::{self, ConfigSync};
use super::shared::Shared;
use super::{claimer, database, incidents, maintenance, reporter, service, sla, watchdog};

/// What wakes a service early, found in the state the run path shares.
type WakeOf = fn(&Shared) -> &Notify;

/// Runs `service` as the node's service `name` until `stop` (see `service::run`).
async fn supervise<S: service::Service>(
    shared: Arc<Shared>,
    name: &'static str,
    service: S,
    stop: CancellationToken,
    wake: Option<WakeOf>,
) {
    let wake = wake.map(|wake| wake(&shared));
    service::run(service, stop, wake, &shared.care(name)).await;
}

/// The run path's services, running: outcomes recorded, locks renewed, cancel requests looked
/// for, until [`RunPath::stop`].
pub(super) struct RunPath {
    stop: CancellationToken,
    completer: JoinHandle<()>,
    renewer: JoinHandle<()>,
    cancels: JoinHandle<()>,
}

impl RunPath {
    /// Starts the completer on `completions` (the runners' outcomes), the renewer and the
    /// cancel checks.
    pub(super) fn start(shared: &Arc<Shared>, completions: UnboundedReceiver<Completion>) -> Self {
        let stop = CancellationToken::new();
        let completer = tokio::spawn({
            let completer = completer::Completer {
                store: Arc::clone(&shared.store),
                watchdog: Arc::clone(&shared.watchdog),
                wake: Arc::clone(&shared.wake),
                flush_deadline: shared.flush_deadline.clone(),
            };
            let stop = stop.clone();
            let shared = Arc::clone(shared);
            async move {
                completer::run(completer, completions, stop, &shared.care("completer")).await;
            }
        });
        let renewer = tokio::spawn(supervise(
            Arc::clone(shared),
            "renewer",
            watchdog::Renewer(Arc::clone(&shared.watchdog), Arc::clone(&shared.metrics)),
            stop.clone(),
            None,
        ));
        // Cancel requests are looked for as long as runs may be going (the drain included).
        let cancels = tokio::spawn(supervise(
            Arc::clone(shared),
            "cancels",
            watchdog::CancelCheck(Arc::clone(&shared.watchdog)),
            stop.clone(),
            Some(|shared| shared.watchdog.cancel_wake()),
        ));
        RunPath {
            stop,
            completer,
            renewer,
            cancels,
        }
    }

    /// Stops them and waits until they have; called once every runner has had its outcome
    /// recorded (or given up on).
    pub(super) async fn stop(self) {
        self.stop.cancel();
        let _ = self.completer.await;
        let _ = self.renewer.await;
        let _ = self.cancels.await;
    }
}

/// Starts the workers, each until `stop`; `config` applies the task config, if the node has
/// one. The tracker returned is closed: the drain waits on it.
pub(super) fn start_workers(
    shared: &Arc<Shared>,
    config: Option<ConfigSync>,
    stop: &CancellationToken,
) -> TaskTracker {
    let workers = TaskTracker::new();
    workers.spawn(supervise(
        Arc::clone(shared),
        "claimer",
        claimer::ClaimLoop::new(Arc::clone(shared)),
        stop.clone(),
        Some(|shared| &shared.wake),
    ));
    workers.spawn(supervise(
        Arc::clone(shared),
        "heartbeat",
        maintenance::Maintenance::new(maintenance::HeartbeatParts {
            store: Arc::clone(&shared.store),
            node_id: Arc::clone(&shared.node_id),
            names: Arc::clone(&shared.names),
            registry: shared.registry.clone(),
            heartbeat_interval: shared.settings.heartbeat_interval,
            missed_grace: shared.settings.missed_grace,
            live_nodes: Arc::clone(&shared.live_nodes),
            instances: Arc::clone(&shared.instances),
            specs: Arc::clone(&shared.specs),
            metrics: Arc::clone(&shared.metrics),
            events: Arc::clone(&shared.events),
            config_view: Arc::clone(&shared.config_view),
        }),
        stop.clone(),
        None,
    ));
    workers.spawn(supervise(
        Arc::clone(shared),
        "pruner",
        maintenance::Pruner {
            store: Arc::clone(&shared.store),
            retention: shared.settings.run_retention,
            heartbeat_interval: shared.settings.heartbeat_interval,
        },
        stop.clone(),
        None,
    ));
    workers.spawn(supervise(
        Arc::clone(shared),
        "listener",
        maintenance::Listener::new(
            Arc::clone(&shared.store),
            Arc::clone(&shared.wake),
            Arc::clone(&shared.watchdog),
        ),
        stop.clone(),
        None,
    ));
    if let Some(config) = config {
        workers.spawn(supervise(
            Arc::clone(shared),
            "config",
            config,
            stop.clone(),
            None,
        ));
    }
    workers.spawn(supervise(
        Arc::clone(shared),
        "sla",
        sla::SlaWatch::new(
            Arc::clone(&shared.store),
            Arc::clone(&shared.events),
            config_sync::AppliedLevels(Arc::clone(&shared.config_view)),
            shared.settings.clock.clone(),
        ),
        stop.clone(),
        None,
    ));
    workers.spawn(supervise(
        Arc::clone(shared),
        "incidents",
        incidents::IncidentKeeper::new(
            Arc::clone(&shared.store),
            Arc::clone(&shared.events),
            config_sync::AppliedLevels(Arc::clone(&shared.config_view)),
            Arc::clone(&shared.incidents),
            shared.settings.clock.clone(),
        ),
        stop.clone(),
        Some(|shared| &shared.incidents.wake),
    ));
    workers.spawn(supervise(
        Arc::clone(shared),
        "database",
        database::DatabaseWatch::new(
            Arc::clone(&shared.store),
            Arc::clone(&shared.events),
            Arc::clone(&shared.metrics),
            Arc::clone(&shared.node_id),
            shared.settings.accept_async_replication,
            shared.settings.heartbeat_interval,
        ),
        stop.clone(),
        None,
    ));
    workers.spawn(supervise(
        Arc::clone(shared),
        "reporter",
        reporter::Reporter::new(
            Arc::clone(&shared.health),
            Arc::clone(&shared.store),
            Arc::clone(&shared.node_id),
            shared.settings.heartbeat_interval,
        ),
        stop.clone(),
        Some(|shared| reporter::Reporter::wake(&shared.health)),
    ));
    #[cfg(feature = "webhook")]
    if let Some(sink) = shared.alerts.clone() {
        workers.spawn(supervise(
            Arc::clone(shared),
            "delivery",
            super::delivery::Deliverer::new(
                Arc::clone(&shared.store),
                Arc::clone(&shared.metrics),
                Arc::clone(&shared.node_id),
                shared.settings.public_url.clone(),
                sink,
            ),
            stop.clone(),
            Some(|shared| shared.alerts.as_ref().map_or(&shared.wake, |a| &a.wake)),
        ));
    }
    workers.close();
    workers
}
