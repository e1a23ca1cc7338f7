//! Prometheus metrics of one node, in an explicit registry (several nodes in one process stay
//! apart), served by the admin server at `/metrics` in the OpenMetrics text format.
//!
//! Names follow Prometheus' conventions; the only per-task label is `task` (never a run id), so
//! the series count grows with the number of tasks, not with history. "Has not succeeded for X"
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

use std::sync::atomic::AtomicU64;

use chrono::{DateTime, Utc};
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

fn ts(at: DateTime<Utc>) -> f64 {
    at.timestamp_millis() as f64 / 1000.0
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

    fn task(task: &str) -> TaskLabel {
        TaskLabel {
            task: task.to_owned(),
        }
    }

    pub(crate) fn run_started(
        &self,
        task: &str,
        tick: DateTime<Utc>,
        trigger: &str,
        now: DateTime<Utc>,
    ) {
        self.running.get_or_create(&Self::task(task)).inc();
        if trigger == "schedule" {
            let delay = (now - tick).num_microseconds().unwrap_or(0).max(0) as f64 / 1e6;
            self.delay.get_or_create(&Self::task(task)).observe(delay);
            #[cfg(feature = "otel")]
            if let Some(otel) = self.otel.get() {
                otel.delay.record(
                    delay,
                    &[opentelemetry::KeyValue::new("task", task.to_owned())],
                );
            }
        }
    }

    pub(crate) fn run_ended(
        &self,
        task: &str,
        outcome: &str,
        trigger: &str,
        seconds: f64,
        started: bool,
        now: DateTime<Utc>,
    ) {
        if started {
            self.running.get_or_create(&Self::task(task)).dec();
            self.duration
                .get_or_create(&Self::task(task))
                .observe(seconds);
            #[cfg(feature = "otel")]
            if let Some(otel) = self.otel.get() {
                otel.duration.record(
                    seconds,
                    &[opentelemetry::KeyValue::new("task", task.to_owned())],
                );
            }
        }
        self.runs
            .get_or_create(&RunLabels {
                task: task.to_owned(),
                outcome: outcome.to_owned(),
                trigger: trigger.to_owned(),
            })
            .inc();
        if outcome == "succeeded" {
            self.last_success
                .get_or_create(&Self::task(task))
                .set(ts(now));
        }
    }

    pub(crate) fn ticks_skipped(&self, task: &str, reason: &str, ticks: i64) {
        self.skipped
            .get_or_create(&SkipLabels {
                task: task.to_owned(),
                reason: reason.to_owned(),
            })
            .inc_by(u64::try_from(ticks).unwrap_or(0));
    }

    pub(crate) fn next_run(&self, task: &str, at: Option<DateTime<Utc>>) {
        match at {
            Some(at) => {
                self.next_run.get_or_create(&Self::task(task)).set(ts(at));
            }
            None => {
                self.next_run.remove(&Self::task(task));
            }
        }
    }

    pub(crate) fn missed(&self, task: &str, open: bool) {
        self.missed
            .get_or_create(&Self::task(task))
            .set(i64::from(open));
    }

    /// `events` given up unsent because the outbox was over its bound.
    #[cfg_attr(not(feature = "webhook"), allow(dead_code))]
    pub(crate) fn webhook_dropped(&self, events: u64) {
        self.webhook
            .get_or_create(&ResultLabel {
                result: "dropped".to_owned(),
            })
            .inc_by(events);
    }

    #[cfg_attr(not(feature = "webhook"), allow(dead_code))]
    pub(crate) fn webhook_delivery(&self, result: &str) {
        self.webhook
            .get_or_create(&ResultLabel {
                result: result.to_owned(),
            })
            .inc();
    }

    /// A pass of `service` panicked (see `engine::health`).
    pub(crate) fn service_panicked(&self, service: &str) {
        self.service_panics
            .get_or_create(&ServiceLabel {
                service: service.to_owned(),
            })
            .inc();
    }

    pub(crate) fn renewal(&self, ok: bool) {
        self.renewals
            .get_or_create(&ResultLabel {
                result: if ok { "ok" } else { "failed" }.into(),
            })
            .inc();
    }

    pub(crate) fn lock_lost(&self, taken_over: bool) {
        self.losses
            .get_or_create(&ReasonLabel {
                reason: if taken_over {
                    "taken_over"
                } else {
                    "unrenewable"
                }
                .into(),
            })
            .inc();
    }

    pub(crate) fn reconcile(&self, outcome: &str, refused: usize) {
        self.reconciles
            .get_or_create(&OutcomeLabel {
                outcome: outcome.to_owned(),
            })
            .inc();
        self.refused.inc_by(refused as u64);
    }

    /// An admin request refused for its token, `reason` as in the table above.
    #[cfg_attr(not(feature = "admin"), allow(dead_code))]
    pub(crate) fn admin_auth_failure(&self, reason: &str) {
        self.admin_auth_failures
            .get_or_create(&ReasonLabel {
                reason: reason.to_owned(),
            })
            .inc();
    }

    /// The node's database connections moved to another server `times` times.
    pub(crate) fn failed_over(&self, times: u64) {
        self.failovers.inc_by(times);
    }

    /// The database server the node's connections go to now (`host:port`).
    pub(crate) fn database_server(&self, server: &str) {
        let mut shown = self.shown_server.lock().unwrap_or_else(|p| p.into_inner());
        if shown.as_deref() == Some(server) {
            return;
        }
        if let Some(former) = shown.take() {
            self.database_server.remove(&ServerLabel { server: former });
        }
        self.database_server
            .get_or_create(&ServerLabel {
                server: server.to_owned(),
            })
            .set(1);
        *shown = Some(server.to_owned());
    }

    pub(crate) fn config_read_error(&self) {
        self.config_errors.inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_and_skips_are_counted_per_task_in_prometheus_names() {
        let m = Metrics::new();
        let now = Utc::now();
        m.run_started("sync", now, "schedule", now);
        m.run_ended("sync", "succeeded", "schedule", 0.2, true, now);
        m.ticks_skipped("sync", "overlap", 3);
        let text = m.encode();
        assert!(
            text.contains(
                r#"scheduler_task_runs_total{task="sync",outcome="succeeded",trigger="schedule"} 1"#
            ),
            "{text}"
        );
        assert!(
            text.contains(r#"scheduler_task_ticks_skipped_total{task="sync",reason="overlap"} 3"#)
        );
        assert!(text.contains(r#"scheduler_task_running{task="sync"} 0"#));
        assert!(text.contains("scheduler_task_run_duration_seconds_count"));
        assert!(text.contains(r#"scheduler_build_info{version=""#));
    }

    /// One server shown at a time; the failovers counted.
    #[test]
    fn the_database_server_is_one_series_that_moves() {
        let m = Metrics::new();
        m.database_server("h1:5432");
        m.database_server("h1:5432");
        m.database_server("h2:5432");
        m.failed_over(1);
        let text = m.encode();
        assert!(
            text.contains(r#"scheduler_database_server_info{server="h2:5432"} 1"#),
            "{text}"
        );
        assert!(!text.contains("h1:5432"), "{text}");
        assert!(
            text.contains("scheduler_database_failovers_total 1"),
            "{text}"
        );
    }

    /// Every `scheduler_*` name in the example alert rules is one this registry exports.
    #[test]
    fn the_example_alert_rules_use_existing_metrics() {
        let rules = include_str!("../../docs/alerts.yml");
        // A family shows in the exposition once it has a sample: give each one.
        let m = Metrics::new();
        let now = Utc::now();
        m.run_started("t", now, "schedule", now);
        m.run_ended("t", "succeeded", "schedule", 0.1, true, now);
        m.ticks_skipped("t", "overlap", 1);
        m.next_run("t", Some(now));
        m.missed("t", false);
        m.webhook_delivery("delivered");
        m.renewal(true);
        m.lock_lost(true);
        m.reconcile("applied", 0);
        m.config_read_error();
        m.service_panicked("sla");
        m.failed_over(1);
        m.database_server("db1:5432");
        let text = m.encode();
        let exported: std::collections::HashSet<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("# TYPE "))
            .filter_map(|l| l.split_whitespace().next())
            .collect();
        let mut used = 0;
        for word in rules.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
            if !word.starts_with("scheduler_") || word == "scheduler_" {
                continue;
            }
            used += 1;
            // Counters are declared without the `_total` their samples carry.
            let family = word.strip_suffix("_total").unwrap_or(word);
            assert!(
                exported.contains(family),
                "docs/alerts.yml uses `{word}`, which is not exported; exported: {exported:?}"
            );
        }
        assert!(used >= 10, "the rules name the metrics they use");
    }
}
