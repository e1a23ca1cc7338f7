//! A node's runs as spans: a run's span starts at its `run.started` event and ends at the
//! event that ends it.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::SystemTime;

use opentelemetry::KeyValue;
use opentelemetry::trace::{Span as _, SpanKind, Status, Tracer as _};
use opentelemetry_sdk::trace::SdkTracer;

use crate::events::{Event, EventSink, RunRef, SchedulerEvent, TaskTags};

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

    fn start(&self, run: &RunRef, tags: &TaskTags) -> opentelemetry_sdk::trace::Span {
        // Who answers for the run, as its alerts say: a trace backend can route and filter by
        // owner and label without a table of its own.
        let owners =
            opentelemetry::Array::String(tags.owners.iter().map(|o| o.clone().into()).collect());
        let labels = tags
            .labels
            .iter()
            .map(|(k, v)| KeyValue::new(format!("scheduler.label.{k}"), v.clone()));
        self.tracer
            .span_builder(format!("run {}", run.task))
            .with_kind(SpanKind::Internal)
            .with_start_time(SystemTime::now())
            .with_attributes(
                [
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
                    KeyValue::new("scheduler.owners", opentelemetry::Value::Array(owners)),
                ]
                .into_iter()
                .chain(labels)
                .collect::<Vec<_>>(),
            )
            .start(&self.tracer)
    }

    fn end(&self, event: &Event, run: &RunRef, outcome: &'static str, error: Option<&str>) {
        let kind = event.kind();
        let open = self
            .open
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&run.run_id);
        // A run handed back or cancelled before its handler started has no start: its span is
        // its end.
        let mut span = open.unwrap_or_else(|| self.start(run, &event.tags));
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
    fn offer(&self, event: &Event) {
        use SchedulerEvent as E;
        match &event.event {
            E::RunStarted { run } => {
                let span = self.start(run, &event.tags);
                self.open
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(run.run_id, span);
            }
            E::RunSucceeded { run, .. } => self.end(event, run, "succeeded", None),
            E::RunFailed { run, error, .. } => self.end(event, run, "failed", Some(error)),
            E::RunTimedOut { run, error, .. } => self.end(event, run, "timed_out", Some(error)),
            // Handed over: its tick runs again, so not an error.
            E::RunInterrupted { run, .. } => self.end(event, run, "interrupted", None),
            // At most once, stopped before it finished: what it did is unknown.
            E::RunAbandoned { run, reason } => self.end(event, run, "interrupted", Some(reason)),
            // An operator's decision, not a failure.
            E::RunCancelled { run, .. } => self.end(event, run, "cancelled", None),
            _ => {}
        }
    }
}
