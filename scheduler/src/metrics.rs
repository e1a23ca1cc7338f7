//! Prometheus metrics of one node, in an explicit registry (several nodes in one process stay
//! apart), served by the admin server at `/metrics` in the OpenMetrics text format.
//!
//! Names follow Prometheus' conventions; the only per-task label is `task` (never a run id, nor
//! an instance's key: an instance's runs count under its task, and the per-row gauges, next run
//! and missed, are the task's own row's), so the series count grows with the number of tasks,
//! not with history or tenants. "Has not succeeded for X"
//! and "skipped a tick" are one alert rule each (see `docs/alerts.yml`):
//!
//! | metric | type | labels |
//! |---|---|---|
//! | `scheduler_task_runs_total` | counter | `task`, `outcome`, `trigger` |
//! | `scheduler_task_run_duration_seconds` | histogram | `task` |
//! | `scheduler_task_start_delay_seconds` | histogram | `task` (scheduled runs: start minus tick) |
//! | `scheduler_task_ticks_skipped_total` | counter | `task`, `reason` |
//! | `scheduler_task_last_success_timestamp_seconds` | gauge | `task` |
//! | `scheduler_task_next_run_timestamp_seconds` | gauge | `task` (as last seen by this node) |
//! | `scheduler_task_running` | gauge | `task` |
//! | `scheduler_task_missed` | gauge | `task` (1 while a missed-run incident is open) |
//! | `scheduler_lock_renewals_total` | counter | `result` (`ok`, `failed`) |
//! | `scheduler_lock_losses_total` | counter | `reason` (`taken_over`, `unrenewable`) |
//! | `scheduler_reconciles_total` | counter | `outcome` (`applied`, `unchanged`, `stale`, `failed`) |
//! | `scheduler_config_entries_refused_total` | counter | — |
//! | `scheduler_config_read_errors_total` | counter | — |
//! | `scheduler_webhook_deliveries_total` | counter | `result` (`delivered`, `retry`, `failed`, `disabled`, `dropped`: given up unsent, the outbox over its bound) |
//! | `scheduler_events_dropped_total` | counter | — (events slow subscribers lost) |
//! | `scheduler_handler_threads_replaced_total` | counter | — (handler threads held inside one poll by a handler that blocks or spins, each replaced by a new thread) |
//! | `scheduler_admin_auth_failures_total` | counter | `reason` (`missing`, `malformed`, `wrong_token`, `viewer_token`: admin requests refused for their token) |
//! | `scheduler_service_panics_total` | counter | `service` (a pass of a background service, or a run's bookkeeping (`runner`), that panicked: restarted, or the node fail-stopped) |
//! | `scheduler_database_failovers_total` | counter | — (moves of this node's database connections to another server: failovers, switchovers) |
//! | `scheduler_database_server_info` | gauge | `server` (`host:port` of the database server this node's connections go to, always 1; PostgreSQL only) |
//! | `scheduler_build_info` | gauge | `version` (always 1) |

mod record;

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::metrics::{MetricType, TypedMetric};
use prometheus_client::registry::{Metric, Registry};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TaskLabel {
    task: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RunLabels {
    task: String,
    outcome: String,
    trigger: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SkipLabels {
    task: String,
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabel {
    result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ServiceLabel {
    service: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabel {
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabel {
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ServerLabel {
    server: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VersionLabel {
    version: String,
}

type Seconds = Gauge<f64, AtomicU64>;

/// The run duration histogram's bucket bounds: 5 ms to about 2.7 hours.
fn duration_bounds() -> impl Iterator<Item = f64> {
    prometheus_client::metrics::histogram::exponential_buckets(0.005, 3.0, 14)
}

/// The start delay histogram's bucket bounds: 1 ms to about 9 minutes.
fn delay_bounds() -> impl Iterator<Item = f64> {
    prometheus_client::metrics::histogram::exponential_buckets(0.001, 3.0, 13)
}

fn duration_buckets() -> Histogram {
    Histogram::new(duration_bounds())
}

fn delay_buckets() -> Histogram {
    Histogram::new(delay_bounds())
}

/// The histograms' twins on an OpenTelemetry meter (the `otel` feature): a histogram cannot be
/// read back from the registry, so each observation is recorded in both, with the same bounds.
#[cfg(feature = "otel")]
struct OtelHistograms {
    duration: opentelemetry::metrics::Histogram<f64>,
    delay: opentelemetry::metrics::Histogram<f64>,
}

/// The metrics of one node.
pub struct Metrics {
    registry: Registry,
    runs: Family<RunLabels, Counter>,
    duration: Family<TaskLabel, Histogram, fn() -> Histogram>,
    delay: Family<TaskLabel, Histogram, fn() -> Histogram>,
    skipped: Family<SkipLabels, Counter>,
    last_success: Family<TaskLabel, Seconds>,
    next_run: Family<TaskLabel, Seconds>,
    running: Family<TaskLabel, Gauge>,
    missed: Family<TaskLabel, Gauge>,
    renewals: Family<ResultLabel, Counter>,
    losses: Family<ReasonLabel, Counter>,
    reconciles: Family<OutcomeLabel, Counter>,
    refused: Counter,
    config_errors: Counter,
    webhook: Family<ResultLabel, Counter>,
    pub(crate) events_dropped: Counter,
    pub(crate) handler_threads_replaced: Counter,
    admin_auth_failures: Family<ReasonLabel, Counter>,
    service_panics: Family<ServiceLabel, Counter>,
    failovers: Counter,
    database_server: Family<ServerLabel, Gauge>,
    /// The server `database_server` shows now.
    shown_server: std::sync::Mutex<Option<String>>,
    /// Every family as registered (a family shows in the exposition once it has a sample).
    families: Vec<FamilyInfo>,
    #[cfg(feature = "otel")]
    otel: std::sync::OnceLock<OtelHistograms>,
}

/// A registered family: its name (as in `# TYPE`), its help and its OpenMetrics type.
#[derive(Clone, Copy, Debug)]
#[cfg_attr(not(feature = "otel"), allow(dead_code))]
pub(crate) struct FamilyInfo {
    pub(crate) name: &'static str,
    pub(crate) help: &'static str,
    pub(crate) kind: MetricType,
}

/// Registers `metric` and notes its family.
fn register<M: Metric + TypedMetric>(
    registry: &mut Registry,
    families: &mut Vec<FamilyInfo>,
    name: &'static str,
    help: &'static str,
    metric: M,
) {
    families.push(FamilyInfo {
        name,
        help,
        kind: M::TYPE,
    });
    registry.register(name, help, metric);
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// A fresh registry with every metric registered.
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let mut families = Vec::new();
        let m = Self {
            runs: Family::default(),
            duration: Family::new_with_constructor(duration_buckets),
            delay: Family::new_with_constructor(delay_buckets),
            skipped: Family::default(),
            last_success: Family::default(),
            next_run: Family::default(),
            running: Family::default(),
            missed: Family::default(),
            renewals: Family::default(),
            losses: Family::default(),
            reconciles: Family::default(),
            refused: Counter::default(),
            config_errors: Counter::default(),
            webhook: Family::default(),
            events_dropped: Counter::default(),
            handler_threads_replaced: Counter::default(),
            admin_auth_failures: Family::default(),
            service_panics: Family::default(),
            failovers: Counter::default(),
            database_server: Family::default(),
            shown_server: std::sync::Mutex::new(None),
            #[cfg(feature = "otel")]
            otel: std::sync::OnceLock::new(),
            registry: Registry::default(),
            families: Vec::new(),
        };
        register(
            &mut registry,
            &mut families,
            "scheduler_task_runs",
            "Runs that ended, by task, outcome and trigger",
            m.runs.clone(),
        );
        register(
            &mut registry,
            &mut families,
            "scheduler_task_run_duration_seconds",
            "How long runs took",
            m.duration.clone(),
        );
        register(
            &mut registry,
            &mut families,
            "scheduler_task_start_delay_seconds",
            "How late scheduled runs started after their tick",
            m.delay.clone(),
        );
        register(
            &mut registry,
            &mut families,
            "scheduler_task_ticks_skipped",
            "Due ticks that did not get a run of their own, by reason",
            m.skipped.clone(),
        );
        register(
            &mut registry,
            &mut families,
            "scheduler_task_last_success_timestamp_seconds",
            "When a run of the task last succeeded on this node",
            m.last_success.clone(),
        );
        register(
            &mut registry,
            &mut families,
            "scheduler_task_next_run_timestamp_seconds",
            "The task's next run, as this node last saw it",
            m.next_run.clone(),
        );
        register(
            &mut registry,
            &mut families,
            "scheduler_task_running",
            "Runs of the task running on this node",
            m.running.clone(),
        );
        register(
            &mut registry,
            &mut families,
            "scheduler_task_missed",
            "1 while a missed-run incident of the task is open",
            m.missed.clone(),
        );
        register(
            &mut registry,
            &mut families,
            "scheduler_lock_renewals",
            "Lock renewal statements, by result",
            m.renewals.clone(),
        );
        register(
            &mut registry,
            &mut families,
            "scheduler_lock_losses",
            "Runs whose lock could not be kept, by reason",
            m.losses.clone(),
        );
        register(
            &mut registry,
            &mut families,
            "scheduler_reconciles",
            "Config reconciles, by outcome",
            m.reconciles.clone(),
        );
        register(
            &mut registry,
            &mut families,
            "scheduler_config_entries_refused",
            "Config entries refused (unknown task, invalid cron or zone)",
            m.refused.clone(),
        );
        register(
            &mut registry,
            &mut families,
            "scheduler_config_read_errors",
            "Config documents that could not be fetched or parsed",
            m.config_errors.clone(),
        );
        register(
            &mut registry,
            &mut families,
            "scheduler_webhook_deliveries",
            "Webhook delivery attempts, by result",
            m.webhook.clone(),
        );
        register(
            &mut registry,
            &mut families,
            "scheduler_events_dropped",
            "Events that slow subscribers lost",
            m.events_dropped.clone(),
        );
        register(
            &mut registry,
            &mut families,
            "scheduler_handler_threads_replaced",
            "Handler threads held inside one poll by a handler that blocks or spins, each replaced by a new thread",
            m.handler_threads_replaced.clone(),
        );
        register(
            &mut registry,
            &mut families,
            "scheduler_admin_auth_failures",
            "Admin requests refused for their token (none, malformed, wrong, the viewer's for a mutation), by reason",
            m.admin_auth_failures.clone(),
        );
        register(
            &mut registry,
            &mut families,
            "scheduler_service_panics",
            "Panics of a background service's pass or of a run's bookkeeping, by service",
            m.service_panics.clone(),
        );
        register(
            &mut registry,
            &mut families,
            "scheduler_database_failovers",
            "Moves of this node's database connections to another server (failovers, switchovers)",
            m.failovers.clone(),
        );
        register(
            &mut registry,
            &mut families,
            "scheduler_database_server_info",
            "The database server this node's connections go to (host:port), always 1",
            m.database_server.clone(),
        );
        let build = Family::<VersionLabel, Gauge>::default();
        build
            .get_or_create(&VersionLabel {
                version: env!("CARGO_PKG_VERSION").to_owned(),
            })
            .set(1);
        register(
            &mut registry,
            &mut families,
            "scheduler_build_info",
            "The scheduler's version",
            build,
        );
        Self {
            registry,
            families,
            ..m
        }
    }

    /// Every family, whether or not it has a sample yet.
    #[cfg_attr(not(feature = "otel"), allow(dead_code))]
    pub(crate) fn families(&self) -> &[FamilyInfo] {
        &self.families
    }

    /// The text exposition (OpenMetrics).
    pub fn encode(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)
            .expect("writing to a String cannot fail");
        out
    }

    /// Records the histograms' observations from now on on `meter` as well (once per node).
    #[cfg(feature = "otel")]
    pub(crate) fn record_histograms_to(&self, meter: &opentelemetry::metrics::Meter) {
        let _ = self.otel.set(OtelHistograms {
            duration: meter
                .f64_histogram("scheduler_task_run_duration_seconds")
                .with_description("How long runs took")
                .with_unit("s")
                .with_boundaries(duration_bounds().collect())
                .build(),
            delay: meter
                .f64_histogram("scheduler_task_start_delay_seconds")
                .with_description("How late scheduled runs started after their tick")
                .with_unit("s")
                .with_boundaries(delay_bounds().collect())
                .build(),
        });
    }
}

#[cfg(test)]
mod tests;
