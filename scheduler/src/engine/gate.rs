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
//! (CPU work or blocking I/O without an `.await`) runs until it yields. The gate tells how long
//! the poll in progress has been running ([`GateState::blocked_for`]), so the runner can tell a
//! handler that will return at its next `.await` from one that cannot be stopped, and stop the
//! node before that handler's lock could expire (fail-stop, see `RELIABILITY.md`).
//!
//! Handlers run on the handler pool (see `super::runtime`): closing the gate wakes the
//! handler, so one parked at an `.await` returns [`Stopped`] at once, whichever thread it is on.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

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
    /// When the poll in progress began, in nanoseconds after `base` plus one; 0: none.
    polling_since: AtomicU64,
    /// The handler's waker, woken when the gate closes.
    waker: Mutex<Option<Waker>>,
}

impl GateState {
    pub(crate) fn new(deadline: Instant) -> Arc<Self> {
        let base = Instant::now();
        let state = Self {
            base,
            deadline_nanos: AtomicU64::new(0),
            closed: AtomicBool::new(false),
            polling_since: AtomicU64::new(0),
            waker: Mutex::new(None),
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

    /// Closes the gate for good, and wakes the handler so that it is stopped at once if it is
    /// parked at an `.await`.
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Release);
        let waker = self.waker.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    /// How long the handler has been inside one poll, if it is inside one now: a handler that
    /// blocks its thread (CPU work, blocking I/O) stays inside a poll for as long as it blocks.
    pub(crate) fn blocked_for(&self) -> Option<Duration> {
        let since = self.polling_since.load(Ordering::Acquire);
        (since != 0).then(|| {
            let now = self.nanos_now().saturating_add(1);
            Duration::from_nanos(now.saturating_sub(since))
        })
    }

    fn nanos_now(&self) -> u64 {
        u64::try_from(
            Instant::now()
                .saturating_duration_since(self.base)
                .as_nanos(),
        )
        .unwrap_or(u64::MAX)
    }

    fn remember(&self, waker: &Waker) {
        let mut slot = self.waker.lock().unwrap_or_else(|p| p.into_inner());
        if !slot.as_ref().is_some_and(|w| w.will_wake(waker)) {
            *slot = Some(waker.clone());
        }
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

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        // The waker first: a close after the check below wakes this poll's waker.
        this.state.remember(cx.waker());
        if !this.state.is_open() {
            return Poll::Ready(Err(Stopped));
        }
        let _polling = Polling::start(&this.state);
        this.inner.as_mut().poll(cx).map(Ok)
    }
}

/// Marks a poll in progress for as long as it lasts (also when the handler panics).
struct Polling<'a>(&'a GateState);

impl<'a> Polling<'a> {
    fn start(state: &'a GateState) -> Self {
        state
            .polling_since
            .store(state.nanos_now().saturating_add(1), Ordering::Release);
        Polling(state)
    }
}

impl Drop for Polling<'_> {
    fn drop(&mut self) {
        self.0.polling_since.store(0, Ordering::Release);
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

    #[test]
    fn closing_wakes_a_handler_parked_on_another_thread_and_a_blocked_poll_shows() {
        let state = GateState::new(Instant::now() + Duration::from_secs(60));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let (entered, started) = std::sync::mpsc::channel();
        let parked = Gated::new(
            async move {
                // Blocks its thread for a moment, then parks forever.
                entered.send(()).unwrap();
                std::thread::sleep(Duration::from_millis(200));
                std::future::pending::<()>().await;
            },
            Arc::clone(&state),
        );
        let handle = runtime.handle().clone();
        let thread = std::thread::spawn(move || handle.block_on(parked));
        started.recv().unwrap();
        assert!(state.blocked_for().is_some(), "inside a blocking poll");
        while state.blocked_for().is_some() {
            std::thread::sleep(Duration::from_millis(5));
        }
        state.close();
        assert_eq!(thread.join().unwrap(), Err(Stopped));
    }
}
