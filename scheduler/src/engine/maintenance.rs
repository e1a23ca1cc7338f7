//! Node upkeep: the heartbeat that shows the node is alive, pruning of old run history (in its
//! own loop: a pass over millions of old runs takes seconds, and the heartbeat must not wait for
//! it, or other nodes would think this one silent), and the change listener that wakes the claim
//! loop early.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::Duration;

use tokio::time::Instant;

use tokio::sync::Notify;

use super::service::{Service, backoff};
use super::settings;
use super::watchdog::LockWatchdog;
use crate::events::EventBus;
use crate::metrics::Metrics;
use crate::registry::TaskRegistry;
use crate::schedule::SpecCache;
use crate::store::{Change, ChangeListener, NodeInfo, Store, StoreError};

/// How often old runs are pruned, and enabled tasks without a next run looked for.
pub(crate) const PRUNE_INTERVAL: Duration = Duration::from_secs(3600);
/// The least grace of the missed-run check (the store's overdue hint is 2 s).
pub(crate) const MIN_MISSED_GRACE: Duration = Duration::from_secs(2);
/// Overdue tasks looked at per check.
const MISSED_CHECK_LIMIT: u32 = 1_000;
/// Rows deleted per pruning statement, so none holds many row locks for long.
pub(crate) const PRUNE_BATCH: u32 = 5_000;

/// A node is reported silent after this many of our heartbeat intervals without one of its own.
pub(super) const SILENT_AFTER_HEARTBEATS: u32 = 3;

/// This node (`node_id`, running the tasks `names`) as recorded in the node table.
pub(crate) fn node_info(node_id: &str, names: &[String]) -> NodeInfo {
    NodeInfo::new(
        node_id.to_owned(),
        settings::hostname(),
        std::process::id(),
        env!("CARGO_PKG_VERSION"),
        names.to_vec(),
    )
}

/// What the heartbeat works with.
pub(crate) struct HeartbeatParts {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) node_id: Arc<str>,
    /// The tasks this node runs, as its row names them.
    pub(crate) names: Arc<[String]>,
    pub(crate) registry: TaskRegistry,
    pub(crate) heartbeat_interval: Duration,
    pub(crate) missed_grace: Option<Duration>,
    /// Where the live nodes the heartbeat counts are kept, for the claimer.
    pub(crate) live_nodes: Arc<AtomicUsize>,
    /// Where the instances the heartbeat counts are kept, for the claimer.
    pub(crate) instances: Arc<AtomicUsize>,
    pub(crate) specs: Arc<SpecCache>,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) events: Arc<EventBus>,
    /// Where the instances' own service levels are kept (see `levels::RowLevels`).
    pub(crate) config_view: Arc<std::sync::RwLock<super::config_sync::ConfigView>>,
}

pub(crate) struct Maintenance {
    parts: HeartbeatParts,
    /// When stuck tasks are looked for next.
    next_upkeep: Instant,
    /// Nodes already reported silent (each is logged once, and again once it is back).
    silent: BTreeSet<String>,
    /// Tasks reported as impossible to schedule (each logged once).
    unschedulable: BTreeSet<String>,
}

impl Maintenance {
    pub(crate) fn new(parts: HeartbeatParts) -> Self {
        Self {
            parts,
            next_upkeep: Instant::now(),
            silent: BTreeSet::new(),
            unschedulable: BTreeSet::new(),
        }
    }

    /// Heartbeat, the missed-run check when tasks are overdue, and now and then a look for
    /// enabled tasks without a next run.
    pub(crate) async fn beat(&mut self) -> crate::store::StoreResult<()> {
        let parts = &self.parts;
        let silent_after = parts.heartbeat_interval * SILENT_AFTER_HEARTBEATS;
        let beat = parts.store.heartbeat(&parts.node_id, silent_after).await?;
        if !beat.registered {
            tracing::warn!(
                "this node's row was missing (pruned after a long silence); registering again"
            );
            parts
                .store
                .register_node(&node_info(&parts.node_id, &parts.names))
                .await?;
        }
        parts.live_nodes.store(
            usize::try_from(beat.live).unwrap_or(1).max(1),
            std::sync::atomic::Ordering::Relaxed,
        );
        parts.instances.store(
            usize::try_from(beat.instances).unwrap_or(0),
            std::sync::atomic::Ordering::Relaxed,
        );
        let now_silent: BTreeSet<String> = beat.silent.into_iter().collect();
        for node in now_silent.difference(&self.silent) {
            tracing::warn!(node = %node, silent_for_more_than = ?silent_after, "node stopped sending heartbeats without shutting down (crashed, killed or cut off); its locks expire on their own and its runs will be recovered");
        }
        for node in self.silent.difference(&now_silent) {
            tracing::info!(node = %node, "node is no longer silent (back, stopped cleanly, or forgotten)");
        }
        self.silent = now_silent;
        if beat.overdue > 0 {
            self.check_missed().await?;
        }
        if Instant::now() >= self.next_upkeep {
            self.reschedule_stuck().await?;
            self.next_upkeep = Instant::now() + PRUNE_INTERVAL;
        }
        Ok(())
    }

    /// Opens a missed-run incident for each overdue task past its grace that nobody is running
    /// it for (all nodes were down, the nodes that run it are gone, or its handler hangs): one
    /// node wins each incident (the store opens it once) and raises `task.missed`.
    async fn check_missed(&mut self) -> crate::store::StoreResult<()> {
        let parts = &self.parts;
        let overdue = parts
            .store
            .overdue_tasks(MIN_MISSED_GRACE, MISSED_CHECK_LIMIT)
            .await?;
        // How late a tick is goes by the store's clock: a node whose wall clock runs ahead
        // would otherwise report every task a few seconds late as missed.
        let mut incidents = Vec::new();
        for task in &overdue {
            // Its `task.missed` carries its row's tags (an instance's own, as read now).
            parts
                .events
                .note_row(&task.name, &task.tags, &task.timezone);
            super::config_sync::note_row_levels(
                &parts.config_view,
                &task.name,
                task.tags.sla.as_deref(),
                &task.timezone,
                true,
            );
            let Ok(spec) =
                parts
                    .specs
                    .get_named(&task.cron, &task.timezone, task.calendar.as_deref())
            else {
                continue; // reported as an unreadable schedule by the claimer
            };
            let missed = crate::ticks::missed_by(
                &spec,
                task.next_run_at,
                task.checked_at,
                parts.missed_grace,
            );
            if missed.is_some() {
                incidents.push((task.name.clone(), task.next_run_at));
            }
        }
        for name in parts.store.open_missed(&incidents).await? {
            let Some((_, expected_at)) = incidents.iter().find(|(n, _)| *n == name) else {
                continue;
            };
            let spec = overdue.iter().find(|t| t.name == name).and_then(|t| {
                parts
                    .specs
                    .get_named(&t.cron, &t.timezone, t.calendar.as_deref())
                    .ok()
            });
            let grace = spec.map_or(chrono::TimeDelta::zero(), |s| {
                crate::ticks::missed_grace(&s, *expected_at, parts.missed_grace)
            });
            tracing::error!(task = %name, expected_at = %expected_at, "task missed a run: it has not started since a tick it should have run");
            parts.metrics.missed(&name, true);
            parts.events.emit(crate::events::SchedulerEvent::Missed {
                task: name,
                expected_at: *expected_at,
                grace_ms: u64::try_from(grace.num_milliseconds()).unwrap_or(0),
            });
        }
        Ok(())
    }

    /// Enabled tasks of this binary with no next run would never run again (an older node that
    /// could not read the schedule cleared it, or the row was edited): schedule them from their
    /// stored cron, or report (once) why that is impossible.
    async fn reschedule_stuck(&mut self) -> crate::store::StoreResult<()> {
        let parts = &self.parts;
        let (db_now, rows) = parts.store.load_tasks().await?;
        // Every instance's own tags, for the events of those this node has not claimed.
        parts.events.set_rows(
            rows.iter()
                .map(|r| (r.name.as_str(), &r.tags, r.timezone.as_str())),
        );
        // And their own service levels, for the deadlines of those this node has not claimed.
        super::config_sync::set_row_levels(
            &parts.config_view,
            rows.iter().map(|r| {
                (
                    r.name.as_str(),
                    r.tags.sla.as_deref(),
                    r.timezone.as_str(),
                    r.enabled && !r.removed,
                )
            }),
        );
        let mut next_runs = Vec::new();
        for row in rows
            .iter()
            .filter(|r| r.enabled && r.next_run_at.is_none() && parts.registry.contains(&r.name))
        {
            match parts
                .specs
                .get_named(&row.cron, &row.timezone, row.calendar.as_deref())
            {
                Ok(spec) => {
                    let floor = row.last_scheduled_at.map_or(db_now, |t| t.max(db_now));
                    match spec.next_after(floor) {
                        Some(tick) => {
                            // Its first tick starts at its offset, as the claims' do.
                            let window = stored_window(row, &rows, &parts.registry);
                            let start =
                                crate::ticks::jitter::start_of(&row.name, &spec, tick, window);
                            let tick = (start != tick).then_some(tick);
                            next_runs.push((row.name.clone(), start, tick));
                        }
                        None => {
                            if self.unschedulable.insert(row.name.clone()) {
                                tracing::error!(task = %row.name, cron = %row.cron, "enabled task whose schedule never fires again: it will not run");
                            }
                        }
                    }
                }
                Err(e) => {
                    if self.unschedulable.insert(row.name.clone()) {
                        tracing::error!(task = %row.name, cron = %row.cron, error = %e, "enabled task has no next run and a schedule this node cannot read: it will not run until the config fixes it");
                    }
                }
            }
        }
        for name in parts.store.reschedule(&next_runs).await? {
            tracing::warn!(task = %name, "enabled task had no next run: scheduled again from its stored cron");
        }
        Ok(())
    }
}

/// The jitter window of `row` as the store and `registry` know it: its own, else its task's as
/// the reconcile stored it on the task's own row (the config entry's, else the attribute's),
/// else the task attribute's, else none (see [`crate::ticks::jitter::window`]).
fn stored_window(
    row: &crate::store::TaskRow,
    rows: &[crate::store::TaskRow],
    registry: &TaskRegistry,
) -> Duration {
    let task = crate::ticks::jitter::identity(&row.name).0;
    let stored = rows.iter().find(|r| r.name == task).and_then(|r| r.jitter);
    let attribute = registry.get(task).and_then(|d| d.options.jitter);
    crate::ticks::jitter::window(row.jitter, stored, attribute)
}

impl Service for Maintenance {
    type Pass = ();
    type Error = StoreError;

    fn events(&self) -> Option<&crate::events::EventBus> {
        Some(&self.parts.events)
    }

    fn what(&self) -> &'static str {
        "the heartbeat"
    }

    async fn run_once(&mut self) -> Result<(), StoreError> {
        self.beat().await
    }

    fn pause_after(&mut self, (): ()) -> Option<Duration> {
        Some(self.parts.heartbeat_interval)
    }

    fn pause_after_failure(&mut self, failures: u32) -> Duration {
        backoff(failures - 1).min(self.parts.heartbeat_interval)
    }
}

/// Deletes history older than the retention, every [`PRUNE_INTERVAL`], in batches of
/// [`PRUNE_BATCH`] rows per statement.
pub(crate) struct Pruner {
    pub(crate) store: Arc<dyn Store>,
    /// How long runs are kept.
    pub(crate) retention: Duration,
    /// The longest pause after a failed pass.
    pub(crate) heartbeat_interval: Duration,
}

impl Service for Pruner {
    type Pass = ();
    type Error = StoreError;

    fn what(&self) -> &'static str {
        "pruning old runs"
    }

    /// A pass may be a backlog of many batches (retention first enabled or shortened): a stop
    /// does not wait for it. Each batch is a statement of its own, so a pass dropped half-way
    /// has deleted whole batches, and the next pass (on this node or another) goes on.
    fn cancel_safe(&self) -> bool {
        true
    }

    async fn run_once(&mut self) -> Result<(), StoreError> {
        let retention = self.retention;
        let pruned = self.store.prune_history(retention, PRUNE_BATCH).await?;
        if pruned > 0 {
            tracing::info!(pruned, retention = ?retention, "pruned old runs");
        }
        Ok(())
    }

    fn pause_after(&mut self, (): ()) -> Option<Duration> {
        Some(PRUNE_INTERVAL)
    }

    fn pause_after_failure(&mut self, failures: u32) -> Duration {
        backoff(failures - 1).min(self.heartbeat_interval)
    }
}

/// Forwards change notifications from other nodes to the claim loop, and cancel requests to the
/// watchdog's cancel check.
pub(crate) struct Listener {
    store: Arc<dyn Store>,
    /// Wakes the claim loop.
    wake: Arc<Notify>,
    watchdog: Arc<LockWatchdog>,
    listener: Option<Box<dyn ChangeListener>>,
}

impl Listener {
    pub(crate) fn new(
        store: Arc<dyn Store>,
        wake: Arc<Notify>,
        watchdog: Arc<LockWatchdog>,
    ) -> Self {
        Self {
            store,
            wake,
            watchdog,
            listener: None,
        }
    }
}

impl Service for Listener {
    type Pass = ();
    type Error = StoreError;

    fn what(&self) -> &'static str {
        "the change listener (the poll interval still applies)"
    }

    fn cancel_safe(&self) -> bool {
        true
    }

    async fn run_once(&mut self) -> Result<(), StoreError> {
        let listener = match &mut self.listener {
            Some(l) => l,
            None => self.listener.insert(self.store.listener().await?),
        };
        match listener.recv().await? {
            Change::Schedule => self.wake.notify_one(),
            Change::CancelRequested => self.watchdog.check_cancels_soon(),
            _ => {
                self.wake.notify_one();
                self.watchdog.check_cancels_soon();
            }
        }
        Ok(())
    }

    fn pause_after(&mut self, (): ()) -> Option<Duration> {
        Some(Duration::ZERO)
    }

    /// At most a second: while the listener is away, other nodes' notifications are lost, and
    /// its return (with a look at everything) is what brings a run asked for meanwhile, so it
    /// tries again soon after a failover (one connection attempt a second).
    fn pause_after_failure(&mut self, failures: u32) -> Duration {
        backoff(failures - 1).min(LISTEN_RETRY_AT_MOST)
    }
}

/// The longest pause between the change listener's attempts to connect again.
const LISTEN_RETRY_AT_MOST: Duration = Duration::from_secs(1);
