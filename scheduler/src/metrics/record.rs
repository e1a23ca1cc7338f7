//! Recording: what the engine, the services and the admin server report, each into its
//! series.

use chrono::{DateTime, Utc};

use super::{
    Metrics, OutcomeLabel, ReasonLabel, ResultLabel, RunLabels, ServerLabel, ServiceLabel,
    SkipLabels, TaskLabel,
};

/// `at` in seconds since the epoch, as a timestamp gauge holds it.
fn ts(at: DateTime<Utc>) -> f64 {
    at.timestamp_millis() as f64 / 1000.0
}

impl Metrics {
    /// The series of the row `row`: its task's (an instance `task/key` counts under its task, so
    /// 10,000 tenants add no series).
    fn task(row: &str) -> TaskLabel {
        TaskLabel {
            task: Self::task_of(row).to_owned(),
        }
    }

    fn task_of(row: &str) -> &str {
        crate::instance::split_row(row).map_or(row, |(task, _)| task)
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
                    &[opentelemetry::KeyValue::new(
                        "task",
                        Self::task_of(task).to_owned(),
                    )],
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
                    &[opentelemetry::KeyValue::new(
                        "task",
                        Self::task_of(task).to_owned(),
                    )],
                );
            }
        }
        self.runs
            .get_or_create(&RunLabels {
                task: Self::task_of(task).to_owned(),
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
                task: Self::task_of(task).to_owned(),
                reason: reason.to_owned(),
            })
            .inc_by(u64::try_from(ticks).unwrap_or(0));
    }

    /// The next run of `task`'s own row (an instance's is its own row's state, not its task's:
    /// not a series).
    pub(crate) fn next_run(&self, task: &str, at: Option<DateTime<Utc>>) {
        if crate::instance::split_row(task).is_some() {
            return;
        }
        match at {
            Some(at) => {
                self.next_run.get_or_create(&Self::task(task)).set(ts(at));
            }
            None => {
                self.next_run.remove(&Self::task(task));
            }
        }
    }

    /// Whether `task`'s own row has a missed-run incident open (an instance's incident is its
    /// own, in the incidents and alerts: not a series).
    pub(crate) fn missed(&self, task: &str, open: bool) {
        if crate::instance::split_row(task).is_some() {
            return;
        }
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
