//! Keeps the store in line with the task config: polls the config source, and reconciles each
//! new document. A document that cannot be fetched or parsed changes nothing (the watcher keeps
//! the last good one); a reconcile that fails on the database is retried with the same document.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::levels::{RowLevels, TaskLevels, levels_of};
use super::service::{Service, backoff};
use super::skips::report_skip;
use crate::config::{ConfigDocument, ConfigWatcher, PollOutcome};
use crate::events::{EventBus, SchedulerEvent};
use crate::metrics::Metrics;
use crate::reconciler::{ReconcileReport, Reconciler};
use crate::registry::TaskRegistry;
use crate::store::Store;

/// Where the documents come from.
pub(crate) enum ConfigFeed {
    /// A polled source.
    Watched(ConfigWatcher),
    /// One fixed document.
    Fixed(Arc<ConfigDocument>),
}

/// What this node knows about its config, kept in memory for the admin API (`/api/config`) and
/// the readiness probe.
#[derive(Debug, Clone, Default)]
pub(crate) struct ConfigView {
    /// Where documents come from (redacted), `None` without a config.
    pub source: Option<String>,
    /// The last good document read, and when.
    pub document: Option<(Arc<ConfigDocument>, DateTime<Utc>)>,
    /// Why the latest read failed, while it does.
    pub last_error: Option<String>,
    /// The last reconcile that completed, and when.
    pub report: Option<(ReconcileReport, DateTime<Utc>)>,
    /// The service levels of the last good document, by task.
    pub levels: Arc<BTreeMap<String, TaskLevels>>,
    /// The jitter windows the last good document sets (valid `jitter` entries), by task.
    pub jitter: Arc<BTreeMap<String, Duration>>,
    /// The instances' own service levels, by row, as their rows last said (not the
    /// document's: kept when a document is read).
    pub rows: Arc<RowLevels>,
}

impl ConfigView {
    /// Takes `doc` as the last good document, read now.
    fn set_document(&mut self, doc: &Arc<ConfigDocument>, default_zone: chrono_tz::Tz) {
        self.levels = Arc::new(levels_of(doc, default_zone));
        self.jitter = Arc::new(
            doc.tasks
                .iter()
                .filter_map(|entry| {
                    let text = entry.jitter.as_deref()?;
                    let window = crate::config::jitter_window(text).ok()?;
                    Some((entry.name.clone(), window))
                })
                .collect(),
        );
        self.document = Some((Arc::clone(doc), Utc::now()));
    }

    /// Whether the node has what it needs from its config: no config at all, or one reconcile
    /// done.
    #[cfg_attr(not(feature = "admin"), allow(dead_code))]
    pub(crate) fn loaded(&self) -> bool {
        self.source.is_none() || self.report.is_some()
    }
}

pub(crate) struct ConfigSync {
    feed: ConfigFeed,
    reconciler: Reconciler,
    /// A document seen but not yet applied (the database failed).
    pending: Option<Arc<ConfigDocument>>,
    /// The pause between polls.
    interval: Duration,
    /// The config as applied, for the admin API and the services that read its levels.
    config_view: Arc<RwLock<ConfigView>>,
    default_timezone: chrono_tz::Tz,
    events: Arc<EventBus>,
    metrics: Arc<Metrics>,
}

/// What a [`ConfigSync`] works with: the node's parts it reads and writes.
pub(crate) struct ConfigSyncParts<'a> {
    pub(crate) store: &'a Arc<dyn Store>,
    pub(crate) registry: &'a TaskRegistry,
    pub(crate) node_id: &'a str,
    pub(crate) default_timezone: chrono_tz::Tz,
    /// The pause between reads of a fixed document.
    pub(crate) poll_interval: Duration,
    pub(crate) config_view: &'a Arc<RwLock<ConfigView>>,
    pub(crate) events: &'a Arc<EventBus>,
    pub(crate) metrics: &'a Arc<Metrics>,
}

/// The service levels of `task` (a row: an instance's own, else its task's in the config this
/// node applied), if it has any.
pub(crate) fn levels(view: &RwLock<ConfigView>, task: &str) -> Option<TaskLevels> {
    let view = view.read().unwrap_or_else(|p| p.into_inner());
    if let Some(own) = view.rows.get(task) {
        return Some(own);
    }
    let task = crate::instance::split_row(task).map_or(task, |(task, _)| task);
    view.levels.get(task).copied()
}

/// Notes instance row `row`'s own service levels as its row holds them (`stored`: its `sla`
/// column; `None`: its task's), in its zone `zone`. Takes the write lock only when they changed.
pub(crate) fn note_row_levels(
    view: &RwLock<ConfigView>,
    row: &str,
    stored: Option<&str>,
    zone: &str,
    enabled: bool,
) {
    if crate::instance::split_row(row).is_none() {
        return;
    }
    let known = {
        let view = view.read().unwrap_or_else(|p| p.into_inner());
        view.rows.knows(row, stored, zone, enabled)
    };
    if !known {
        let mut view = view.write().unwrap_or_else(|p| p.into_inner());
        Arc::make_mut(&mut view.rows).note(row, stored, zone, enabled);
    }
}

/// Takes every instance's own service levels from `rows` (every row of the store: name, `sla`
/// column, zone, enabled), in place of those noted before.
pub(crate) fn set_row_levels<'a>(
    view: &RwLock<ConfigView>,
    rows: impl IntoIterator<Item = (&'a str, Option<&'a str>, &'a str, bool)>,
) {
    let mut own = RowLevels::default();
    own.set_rows(rows);
    view.write().unwrap_or_else(|p| p.into_inner()).rows = Arc::new(own);
}

/// The jitter windows the config this node applied sets, by task.
pub(crate) fn jitter_windows(view: &RwLock<ConfigView>) -> Arc<BTreeMap<String, Duration>> {
    let view = view.read().unwrap_or_else(|p| p.into_inner());
    Arc::clone(&view.jitter)
}

/// Each task's jitter window as a node knows it: its entry's in the config `view` holds, else
/// its attribute's in `registry`, else none.
pub(crate) fn task_window(
    view: &Arc<RwLock<ConfigView>>,
    registry: &TaskRegistry,
) -> crate::schedules::TaskWindow {
    let (view, registry) = (Arc::clone(view), registry.clone());
    Arc::new(move |task: &str| {
        let config = jitter_windows(&view).get(task).copied();
        let attribute = registry.get(task).and_then(|d| d.options.jitter);
        crate::ticks::jitter::window(None, config, attribute)
    })
}

/// The last good config document the `view` holds, as a [`Schedules`](crate::Schedules)
/// handle reads the calendars its instances name from.
pub(crate) fn documents(view: &Arc<RwLock<ConfigView>>) -> crate::schedules::Documents {
    let view = Arc::clone(view);
    Arc::new(move || {
        let view = view.read().unwrap_or_else(|p| p.into_inner());
        view.document.as_ref().map(|(doc, _)| Arc::clone(doc))
    })
}

/// The service levels of the config this node applied, as the services that judge them read
/// them.
#[derive(Clone)]
pub(crate) struct AppliedLevels(pub(crate) Arc<RwLock<ConfigView>>);

impl AppliedLevels {
    /// The service levels of `task`, if it has any.
    pub(crate) fn levels(&self, task: &str) -> Option<TaskLevels> {
        levels(&self.0, task)
    }

    /// Every task's service levels.
    pub(crate) fn all_levels(&self) -> Arc<BTreeMap<String, TaskLevels>> {
        let view = self.0.read().unwrap_or_else(|p| p.into_inner());
        Arc::clone(&view.levels)
    }

    /// Every instance's own service levels, by row.
    pub(crate) fn row_levels(&self) -> Arc<RowLevels> {
        let view = self.0.read().unwrap_or_else(|p| p.into_inner());
        Arc::clone(&view.rows)
    }
}

impl ConfigSync {
    pub(crate) fn new(shared: ConfigSyncParts<'_>, feed: ConfigFeed) -> Self {
        let pending = match &feed {
            ConfigFeed::Fixed(doc) => Some(Arc::clone(doc)),
            ConfigFeed::Watched(_) => None,
        };
        {
            let mut view = shared.config_view.write().expect("config view lock");
            view.source = Some(match &feed {
                ConfigFeed::Watched(w) => w.source_name().to_owned(),
                ConfigFeed::Fixed(_) => "a fixed document given in code".to_owned(),
            });
            if let Some(doc) = &pending {
                view.set_document(doc, shared.default_timezone);
                shared.events.set_document(doc);
            }
        }
        let reconciler = Reconciler::new(
            Arc::clone(shared.store),
            shared.registry.clone(),
            shared.default_timezone,
            shared.node_id,
        );
        let interval = match &feed {
            ConfigFeed::Watched(w) => w.interval(),
            ConfigFeed::Fixed(_) => shared.poll_interval,
        };
        Self {
            feed,
            reconciler,
            pending,
            interval,
            config_view: Arc::clone(shared.config_view),
            default_timezone: shared.default_timezone,
            events: Arc::clone(shared.events),
            metrics: Arc::clone(shared.metrics),
        }
    }

    /// Polls the source once and reconciles what is new (or still pending).
    /// `Ok(None)`: nothing to do.
    pub(crate) async fn apply_pending(&mut self) -> crate::Result<Option<ReconcileReport>> {
        if let ConfigFeed::Watched(watcher) = &mut self.feed {
            let outcome = watcher.poll_once().await;
            let mut view = self.config_view.write().expect("config view lock");
            match outcome {
                PollOutcome::Changed(doc) => {
                    view.set_document(&doc, self.default_timezone);
                    self.events.set_document(&doc);
                    self.pending = Some(doc);
                }
                PollOutcome::Failed(_) => self.metrics.config_read_error(),
                PollOutcome::Unchanged => {}
            }
            view.last_error = watcher.last_error().map(str::to_owned);
        }
        let Some(doc) = self.pending.clone() else {
            return Ok(None);
        };
        let report = match self.reconciler.reconcile(&doc).await {
            Ok(report) => report,
            Err(e) => {
                self.metrics.reconcile("failed", 0);
                return Err(e);
            }
        };
        self.pending = None;
        self.report(&report);
        self.config_view.write().expect("config view lock").report =
            Some((report.clone(), Utc::now()));
        Ok(Some(report))
    }

    /// Counts the reconcile and raises its events (once per document: a reconcile is retried
    /// only when it failed, and then reported nothing).
    fn report(&self, report: &ReconcileReport) {
        let outcome = if report.stale.is_some() {
            "stale"
        } else if report.changed_anything() {
            "applied"
        } else {
            "unchanged"
        };
        self.metrics.reconcile(outcome, report.refused.len());
        // Every node that reads the document tells its own subscribers; the node that recorded
        // it also sends the alerts (once per document).
        let emit = |event| {
            if report.recorded {
                self.events.emit(event);
            } else {
                self.events.emit_local(event);
            }
        };
        for (task, reason) in &report.refused {
            emit(SchedulerEvent::ConfigRefused {
                task: task.clone(),
                reason: reason.clone(),
            });
        }
        for task in &report.newly_orphaned {
            emit(SchedulerEvent::TaskOrphaned { task: task.clone() });
        }
        for task in &report.removed {
            emit(SchedulerEvent::TaskRemoved { task: task.clone() });
        }
        for skip in &report.disabled_ticks {
            report_skip(&self.metrics, &self.events, skip, !report.recorded);
        }
    }
}

impl Service for ConfigSync {
    type Pass = ();
    type Error = crate::Error;

    fn events(&self) -> Option<&crate::events::EventBus> {
        Some(&self.events)
    }

    fn what(&self) -> &'static str {
        "applying the config"
    }

    async fn run_once(&mut self) -> crate::Result<()> {
        self.apply_pending().await.map(drop)
    }

    fn pause_after(&mut self, (): ()) -> Option<Duration> {
        match &self.feed {
            ConfigFeed::Fixed(_) if self.pending.is_none() => None,
            _ => Some(self.interval),
        }
    }

    fn pause_after_failure(&mut self, failures: u32) -> Duration {
        backoff(failures - 1).min(self.interval)
    }
}
