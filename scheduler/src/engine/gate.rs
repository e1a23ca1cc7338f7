//! The poll gate: a handler's future is polled only while its lock is trusted.
//!
//! Aborting a tokio task takes effect at its next poll, and a process resumed after a pause
//! (SIGSTOP, a frozen VM) wakes every expired timer at once: the handler's own `sleep` and the
//! runner's deadline race, and the handler could run a step after its lock expired. The gate
//! closes that window: before every poll it checks, on the monotonic clock, that the lock's
//! local deadline has not passed and that nobody closed it (shutdown's hard stop, a lock taken
//! over). A closed gate never polls the handler again; it resolves to [`Stopped`] instead.
//!
//! What it cannot do: interrupt a poll already in progress. A handler that blocks its thread
//! (CPU work or blocking I/O without an `.await`) runs until it yields (see `RELIABILITY.md`).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::{Context, Poll};

use tokio::time::Instant;

/// The gate closed before the handler finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stopped;

/// The state one handler's gate checks; shared with the watchdog (which moves the deadline on
/// every renewal) and the runner (which closes it).
#[derive(Debug)]
pub(crate) struct GateState {
    base: Instant,
    /// Nanoseconds after `base` at which the gate closes by itself.
    deadline_nanos: AtomicU64,
    closed: AtomicBool,
}

impl GateState {
    pub(crate) fn new(deadline: Instant) -> Arc<Self> {
        let base = Instant::now();
        let state = Self {
            base,
            deadline_nanos: AtomicU64::new(0),
            closed: AtomicBool::new(false),
        };
        state.set_deadline(deadline);
        Arc::new(state)
    }

    /// Moves the deadline (a renewal succeeded).
    pub(crate) fn set_deadline(&self, deadline: Instant) {
        let nanos = deadline.saturating_duration_since(self.base).as_nanos();
        self.deadline_nanos
            .store(u64::try_from(nanos).unwrap_or(u64::MAX), Ordering::Release);
    }

    /// Closes the gate for good.
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Release);
    }

    /// Whether the handler may be polled now.
    pub(crate) fn is_open(&self) -> bool {
        if self.closed.load(Ordering::Acquire) {
            return false;
        }
        let elapsed = Instant::now()
            .saturating_duration_since(self.base)
            .as_nanos();
        elapsed < u128::from(self.deadline_nanos.load(Ordering::Acquire))
    }
}

/// A future polled only while its [`GateState`] is open.
pub(crate) struct Gated<F> {
    inner: Pin<Box<F>>,
    state: Arc<GateState>,
}

impl<F> Gated<F> {
    pub(crate) fn new(inner: F, state: Arc<GateState>) -> Self {
        Self {
            inner: Box::pin(inner),
            state,
        }
    }
}

impl<F: Future> Future for Gated<F> {
    type Output = Result<F::Output, Stopped>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if !self.state.is_open() {
            return Poll::Ready(Err(Stopped));
        }
        self.inner.as_mut().poll(cx).map(Ok)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;
    use std::time::Duration;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn an_open_gate_lets_the_future_run_to_the_end() {
        let state = GateState::new(Instant::now() + Duration::from_secs(10));
        let out = Gated::new(async { 7 }, state).await;
        assert_eq!(out, Ok(7));
    }

    #[tokio::test(start_paused = true)]
    async fn past_its_deadline_the_handler_is_never_polled_again() {
        let steps = Arc::new(AtomicUsize::new(0));
        let state = GateState::new(Instant::now() + Duration::from_millis(250));
        let counted = Arc::clone(&steps);
        let handler = async move {
            loop {
                counted.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        };
        let out = Gated::new(handler, state).await;
        assert_eq!(out, Err(Stopped));
        // Polled at 0, 100 and 200 ms; the wake at 300 ms found the gate closed.
        assert_eq!(steps.load(Ordering::SeqCst), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn a_moved_deadline_keeps_it_open_and_close_stops_it_at_once() {
        let state = GateState::new(Instant::now() + Duration::from_millis(50));
        state.set_deadline(Instant::now() + Duration::from_secs(60));
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(state.is_open());
        state.close();
        assert!(!state.is_open());
        let out = Gated::new(async { 1 }, state).await;
        assert_eq!(out, Err(Stopped));
    }
}
