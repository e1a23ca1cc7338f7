//! A node's runs as spans: a run's span starts at its `run.started` event and ends at the
//! event that ends it.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::SystemTime;

use opentelemetry::KeyValue;
use opentelemetry::trace::{Span as _, SpanKind, Status, Tracer as _};
use opentelemetry_sdk::trace::SdkTracer;

use crate::events::{EventSink, RunRef, SchedulerEvent};

/// Turns a node's run events into spans: a run's span starts at its `run.started` and ends
/// at the event that ends it.
pub(super) struct RunSpans {
    tracer: SdkTracer,
    open: Mutex<HashMap<i64, opentelemetry_sdk::trace::Span>>,
}

impl std::fmt::Debug for RunSpans {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunSpans").finish_non_exhaustive()
    }
}

impl RunSpans {
    /// Spans of `tracer`, none open yet.
    pub(super) fn new(tracer: SdkTracer) -> Self {
        Self {
            tracer,
            open: Mutex::new(HashMap::new()),
        }
    }

    fn start(&self, run: &RunRef) -> opentelemetry_sdk::trace::Span {
        self.tracer
            .span_builder(format!("run {}", run.task))
            .with_kind(SpanKind::Internal)
            .with_start_time(SystemTime::now())
            .with_attributes([
                KeyValue::new("scheduler.task", run.task.clone()),
                KeyValue::new("scheduler.run_id", run.run_id),
                KeyValue::new(
                    "scheduler.scheduled_at",
                    run.scheduled_at
                        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                ),
                KeyValue::new("scheduler.attempt", i64::from(run.attempt)),
                KeyValue::new("scheduler.trigger", run.trigger.clone()),
                KeyValue::new("scheduler.node", run.node.clone()),
            ])
            .start(&self.tracer)
    }

    fn end(&self, run: &RunRef, kind: &'static str, outcome: &'static str, error: Option<&str>) {
        let open = self
            .open
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&run.run_id);
        // A run handed back or cancelled before its handler started has no start: its span is
        // its end.
        let mut span = open.unwrap_or_else(|| self.start(run));
        span.set_attribute(KeyValue::new("scheduler.outcome", outcome));
        span.set_attribute(KeyValue::new("scheduler.event", kind));
        match (outcome, error) {
            ("succeeded", _) => span.set_status(Status::Ok),
            (_, Some(error)) => span.set_status(Status::error(error.to_owned())),
            _ => {}
        }
        span.end();
    }

    pub(super) fn end_all(&self) {
        let open: Vec<_> = self
            .open
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain()
            .collect();
        for (_, mut span) in open {
            span.set_attribute(KeyValue::new("scheduler.event", "node.stopped"));
            span.end();
        }
    }
}

impl EventSink for RunSpans {
    fn offer(&self, event: &SchedulerEvent) {
        use SchedulerEvent as E;
        match event {
            E::RunStarted { run } => {
                let span = self.start(run);
                self.open
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(run.run_id, span);
            }
            E::RunSucceeded { run, .. } => self.end(run, event.kind(), "succeeded", None),
            E::RunFailed { run, error, .. } => self.end(run, event.kind(), "failed", Some(error)),
            E::RunTimedOut { run, error, .. } => {
                self.end(run, event.kind(), "timed_out", Some(error))
            }
            // Handed over: its tick runs again, so not an error.
            E::RunInterrupted { run, .. } => self.end(run, event.kind(), "interrupted", None),
            // At most once, stopped before it finished: what it did is unknown.
            E::RunAbandoned { run, reason } => {
                self.end(run, event.kind(), "interrupted", Some(reason))
            }
            // An operator's decision, not a failure.
            E::RunCancelled { run, .. } => self.end(run, event.kind(), "cancelled", None),
            _ => {}
        }
    }
}
