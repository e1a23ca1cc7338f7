//! Per-run log capture: what a handler logs inside its run is kept with the run, readable with
//! [`HistoryStore::run_log`](crate::store::HistoryStore::run_log) (`scheduler logs RUN_ID`, the
//! admin API).
//!
//! [`layer`] is a [`tracing_subscriber::Layer`] that recognises the events emitted inside a
//! run's span (`task_run`), formats each as one line (time, level, target, message, fields) and
//! appends it to that run's buffer. The buffer is bounded: the first [`MAX_LINES`] lines and
//! [`MAX_BYTES`] bytes are kept, then one marker line says how many lines and bytes were
//! dropped. A background flusher per run writes the buffer to the run's own store in chunks
//! (every [`FLUSH_INTERVAL`], sooner when [`FLUSH_AT_BYTES`] are waiting), so logging never
//! waits for the database; the last chunk is written when the handler is done, before the
//! run's outcome is recorded, waiting at most [`FINAL_FLUSH_WAIT`]. Logs are pruned with their
//! runs.
//!
//! [`init_tracing`](crate::init_tracing) installs the layer. An application with a subscriber of
//! its own adds it:
//!
//! ```
//! use tracing_subscriber::prelude::*;
//!
//! let subscriber = tracing_subscriber::registry()
//!     .with(tracing_subscriber::EnvFilter::new("info"))
//!     .with(tracing_subscriber::fmt::layer())
//!     .with(scheduler::run_log_layer());
//! # let _ = subscriber;
//! // subscriber.init();
//! ```
//!
//! **What is captured.** Events at the levels the subscriber enables (a global filter such as
//! `RUST_LOG` applies; a filter given to this layer alone with `.with_filter(...)` narrows it
//! further), emitted inside the run's span: by the handler and by anything it awaits, including
//! tasks it spawns with `.in_current_span()` (a plain `tokio::spawn` leaves the span). The run's
//! span is an `INFO` span of target `scheduler::engine::runner`: a filter that disables it (such
//! as `RUST_LOG=warn`) disables the capture too (`RUST_LOG=warn,scheduler=info` keeps it). The
//! scheduler's own lines about the run (`run started`, `run finished`) are not part of the log:
//! the run's record says how it ended.
//!
//! **Lines from outside the layer.** A task with `isolation = "process"` runs its handler in a
//! child process (`docs/isolation.md`); the node turns that child's `tracing` events, stdout and
//! stderr into lines of the run's log through [`RunLogCapture::external`] and [`RunLogLines`]:
//! the same format, bounds, marker and flushing as a captured span.
//!
//! **Secrets.** Every line goes through the crate's redaction before it is kept, as a
//! handler's error does: passwords in URLs and DSNs, `password=`, `token=`, `api_key=` values,
//! `Bearer` credentials, `password: value` labels, JSON fields named like secrets and JWTs.
//!
//! This module owns the capture and the buffer; it must not decide anything about a run.

use std::any::TypeId;
use std::fmt::Write as _;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tracing::field::{Field, Visit};
use tracing::span;
use tracing::{Dispatch, Event, Subscriber};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::registry::LookupSpan;

use crate::store::{LogChunk, Store};

/// A run's log keeps at most this many lines, then the truncation marker.
pub const MAX_LINES: usize = 500;
/// A run's log keeps at most this many bytes, then the truncation marker.
pub const MAX_BYTES: usize = 256 * 1024;
/// How often a run's waiting lines are written while it runs.
pub const FLUSH_INTERVAL: Duration = Duration::from_secs(1);
/// Waiting lines of this many bytes are written at once, without waiting for the interval.
pub const FLUSH_AT_BYTES: usize = 32 * 1024;
/// How long the end of a run waits for its log to be written before recording the outcome
/// anyway (the log's last lines are then lost if the store does not take them).
pub const FINAL_FLUSH_WAIT: Duration = Duration::from_secs(5);

/// The capture layer; see the [module docs](self). `S` is the subscriber it is layered on.
pub struct RunLogLayer<S> {
    attach: Attach,
    _subscriber: PhantomData<fn(S)>,
}

impl<S> std::fmt::Debug for RunLogLayer<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RunLogLayer")
    }
}

/// The capture layer, for `tracing_subscriber::registry().with(...)`; see the
/// [module docs](self).
pub fn layer<S>() -> RunLogLayer<S>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    RunLogLayer {
        attach: Attach(attach_to::<S>),
        _subscriber: PhantomData,
    }
}

impl<S> Default for RunLogLayer<S>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn default() -> Self {
        layer()
    }
}

/// How the runner reaches the layer through the subscriber (tracing-error's pattern): the
/// layer hands out this function, which knows the subscriber's concrete type and stores a
/// run's buffer in its span's extensions.
#[derive(Clone, Copy)]
struct Attach(fn(&Dispatch, &span::Id, Arc<RunLogBuffer>) -> bool);

fn attach_to<S>(dispatch: &Dispatch, id: &span::Id, buffer: Arc<RunLogBuffer>) -> bool
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    let Some(subscriber) = dispatch.downcast_ref::<S>() else {
        return false;
    };
    let Some(span) = subscriber.span(id) else {
        return false;
    };
    span.extensions_mut().insert(Capture(buffer));
    true
}

/// A span extension: the events inside this span belong to this run's log.
struct Capture(Arc<RunLogBuffer>);

impl<S> Layer<S> for RunLogLayer<S>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let target = event.metadata().target();
        if target == "scheduler" || target.starts_with("scheduler::") {
            return;
        }
        let Some(scope) = ctx.event_scope(event) else {
            return;
        };
        let Some(buffer) = scope
            .into_iter()
            .find_map(|span| span.extensions().get::<Capture>().map(|c| Arc::clone(&c.0)))
        else {
            return;
        };
        buffer.push(&format_line(event));
    }

    unsafe fn downcast_raw(&self, id: TypeId) -> Option<*const ()> {
        if id == TypeId::of::<Self>() {
            Some(self as *const Self as *const ())
        } else if id == TypeId::of::<Attach>() {
            Some(&self.attach as *const Attach as *const ())
        } else {
            None
        }
    }
}

/// `2026-03-08T07:00:00.123Z  INFO target: message key=value ...`, ending in a newline.
fn format_line(event: &Event<'_>) -> String {
    let meta = event.metadata();
    write_line(
        chrono::Utc::now(),
        meta.level(),
        meta.target(),
        &event_text(event),
    )
}

/// An event's message and fields, `message key=value ...`, as the log shows them after the
/// target. A child process of an isolated task sends its events to the node in this form.
pub(crate) fn event_text(event: &Event<'_>) -> String {
    let mut visitor = LineVisitor {
        message: String::new(),
        fields: String::new(),
    };
    event.record(&mut visitor);
    let mut text = visitor.message;
    if !visitor.fields.is_empty() {
        if !text.is_empty() {
            text.push(' ');
        }
        text.push_str(&visitor.fields);
    }
    text
}

/// One line of a run's log: `time LEVEL target: text`, ending in a newline. Secrets are
/// redacted as in handler errors ([`crate::redact::redact_text`]: a handler that logs the DSN
/// or URL it connects to does not publish its password through the API or `scheduler logs`).
fn write_line(
    at: chrono::DateTime<chrono::Utc>,
    level: &tracing::Level,
    target: &str,
    text: &str,
) -> String {
    let mut line = String::with_capacity(48 + target.len() + text.len());
    let _ = write!(
        line,
        "{} {:>5} {}: {}",
        at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        level,
        target,
        crate::redact::redact_text(text)
    );
    if line.contains('\0') {
        // PostgreSQL text cannot hold NUL: one such line would lose its whole chunk.
        line = line.replace('\0', "\\0");
    }
    line.push('\n');
    line
}

struct LineVisitor {
    message: String,
    fields: String,
}

impl LineVisitor {
    fn separate(&mut self) {
        if !self.fields.is_empty() {
            self.fields.push(' ');
        }
    }
}

impl Visit for LineVisitor {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message.push_str(value);
        } else {
            self.separate();
            let _ = write!(self.fields, "{}={value}", field.name());
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.message, "{value:?}");
        } else {
            self.separate();
            let _ = write!(self.fields, "{}={value:?}", field.name());
        }
    }
}

/// One run's lines on their way to the store.
pub(crate) struct RunLogBuffer {
    run_id: i64,
    state: Mutex<BufferState>,
    /// Lines of [`FLUSH_AT_BYTES`] are waiting.
    full: Notify,
}

#[derive(Default)]
struct BufferState {
    pending: String,
    pending_lines: i32,
    kept_lines: usize,
    kept_bytes: usize,
    dropped_lines: u64,
    dropped_bytes: u64,
    next_seq: i32,
    closed: bool,
}

impl RunLogBuffer {
    fn new(run_id: i64) -> Self {
        Self {
            run_id,
            state: Mutex::new(BufferState::default()),
            full: Notify::new(),
        }
    }

    /// Keeps `line` (one event, possibly several lines of text) if it fits the bounds; once one
    /// does not, every later line is only counted, so the log is the run's first lines.
    fn push(&self, line: &str) {
        let lines = line.matches('\n').count().max(1);
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if state.closed {
            return;
        }
        if state.dropped_lines > 0
            || state.kept_lines + lines > MAX_LINES
            || state.kept_bytes + line.len() > MAX_BYTES
        {
            state.dropped_lines += lines as u64;
            state.dropped_bytes += line.len() as u64;
            return;
        }
        state.kept_lines += lines;
        state.kept_bytes += line.len();
        state.pending.push_str(line);
        state.pending_lines += i32::try_from(lines).unwrap_or(i32::MAX);
        if state.pending.len() >= FLUSH_AT_BYTES {
            drop(state);
            self.full.notify_one();
        }
    }

    /// The lines waiting, as the next chunk; with `last`, closes the buffer and ends the log
    /// with the truncation marker if lines were dropped.
    fn take(&self, last: bool) -> Option<LogChunk> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if state.closed {
            return None;
        }
        let truncated = last && state.dropped_lines > 0;
        if last {
            state.closed = true;
        }
        if truncated {
            let marker = format!(
                "[log truncated: {} more lines ({} bytes) not kept; a run keeps its first {} lines and {} KiB]\n",
                state.dropped_lines,
                state.dropped_bytes,
                MAX_LINES,
                MAX_BYTES / 1024
            );
            state.pending.push_str(&marker);
            state.pending_lines += 1;
        }
        if state.pending.is_empty() {
            return None;
        }
        let mut chunk = LogChunk::new(
            self.run_id,
            state.next_seq,
            std::mem::take(&mut state.pending),
            std::mem::take(&mut state.pending_lines),
        );
        chunk.truncated = truncated;
        state.next_seq += 1;
        Some(chunk)
    }
}

/// A run's capture: its buffer, fed by the run's span (and, for a run whose handler runs
/// elsewhere, by [`RunLogLines`]), and the flusher writing it to the store.
pub struct RunLogCapture {
    buffer: Arc<RunLogBuffer>,
    done: CancellationToken,
    flusher: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for RunLogCapture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunLogCapture")
            .field("run_id", &self.buffer.run_id)
            .finish_non_exhaustive()
    }
}

impl RunLogCapture {
    /// Starts capturing the events inside `span` for run `run_id` into `store`; `None` when no
    /// [`RunLogLayer`] is installed (or the span is disabled), so nothing is captured.
    pub(crate) fn start(span: &tracing::Span, run_id: i64, store: Arc<dyn Store>) -> Option<Self> {
        let buffer = Arc::new(RunLogBuffer::new(run_id));
        let attached = span
            .with_subscriber(|(id, dispatch)| {
                dispatch
                    .downcast_ref::<Attach>()
                    .is_some_and(|attach| (attach.0)(dispatch, id, Arc::clone(&buffer)))
            })
            .unwrap_or(false);
        if !attached {
            return None;
        }
        Some(Self::flushing(buffer, store))
    }

    /// Starts the log of run `run_id`, fed only through [`lines`](Self::lines): the lines of a
    /// handler that runs outside this process (a task with `isolation = "process"`). Same bounds,
    /// marker and flushing as a captured span. Must be called inside a tokio runtime.
    pub fn external(run_id: i64, store: Arc<dyn Store>) -> Self {
        Self::flushing(Arc::new(RunLogBuffer::new(run_id)), store)
    }

    fn flushing(buffer: Arc<RunLogBuffer>, store: Arc<dyn Store>) -> Self {
        let done = CancellationToken::new();
        // Not in the run's span: the flusher's own complaints are not part of the run's log.
        let flusher = tokio::spawn(flush(Arc::clone(&buffer), store, done.clone()));
        Self {
            buffer,
            done,
            flusher,
        }
    }

    /// A handle that adds lines to this run's log from outside the tracing layer.
    pub fn lines(&self) -> RunLogLines {
        RunLogLines {
            buffer: Arc::clone(&self.buffer),
        }
    }

    /// Writes the last lines (and the truncation marker), waiting at most
    /// [`FINAL_FLUSH_WAIT`]. Lines added after this are not kept.
    pub async fn finish(self) {
        self.done.cancel();
        if tokio::time::timeout(FINAL_FLUSH_WAIT, self.flusher)
            .await
            .is_err()
        {
            tracing::warn!(
                wait = ?FINAL_FLUSH_WAIT,
                "the run's log was not written in time; its outcome is recorded without waiting further"
            );
        }
    }
}

/// Adds lines to a run's log that do not come from the tracing layer, such as the output of an
/// isolated task's child process; they go through the run's bounded buffer like captured events
/// (the first [`MAX_LINES`] lines and [`MAX_BYTES`] bytes, then the truncation marker).
#[derive(Clone)]
pub struct RunLogLines {
    buffer: Arc<RunLogBuffer>,
}

impl std::fmt::Debug for RunLogLines {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunLogLines")
            .field("run_id", &self.buffer.run_id)
            .finish()
    }
}

impl RunLogLines {
    /// Adds one line, formatted like a captured event: `at`, `level`, `target: text`. A `text`
    /// with newlines counts as that many lines.
    pub fn push(
        &self,
        at: chrono::DateTime<chrono::Utc>,
        level: tracing::Level,
        target: &str,
        text: &str,
    ) {
        self.buffer.push(&write_line(at, &level, target, text));
    }
}

async fn flush(buffer: Arc<RunLogBuffer>, store: Arc<dyn Store>, done: CancellationToken) {
    loop {
        tokio::select! {
            _ = done.cancelled() => {}
            _ = buffer.full.notified() => {}
            _ = tokio::time::sleep(FLUSH_INTERVAL) => {}
        }
        let last = done.is_cancelled();
        if let Some(chunk) = buffer.take(last)
            && let Err(error) = store.append_run_logs(std::slice::from_ref(&chunk)).await
        {
            tracing::warn!(
                run_id = chunk.run_id,
                lines = chunk.lines,
                error = %error,
                "could not write a chunk of the run's log; those lines are lost"
            );
        }
        if last {
            return;
        }
    }
}

#[cfg(test)]
mod tests;
