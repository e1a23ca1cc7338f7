//! What the lock watchdog tells a run's lease ([`Signals`]).

use std::sync::Mutex;

use tokio::time::Instant;

use crate::store::Cancellation;

/// What the watchdog tells a run's lease: its warn deadline (moved by each renewal), whether
/// its lock was taken over, and an operator's request to cancel it, once known. One small
/// allocation per run (two watch channels and a cancellation token took about 1 KB, times the
/// 10,000 runs of a tick claimed ahead).
pub(super) struct Signals {
    state: Mutex<Signal>,
    /// Told each time the state changes.
    pub(super) changed: tokio::sync::Notify,
}

pub(super) struct Signal {
    pub(super) warn: Instant,
    pub(super) taken_over: bool,
    pub(super) cancel: Option<Cancellation>,
}

impl Signals {
    /// No takeover and no cancel known yet; the warn deadline `warn`.
    pub(super) fn new(warn: Instant) -> Self {
        Self {
            state: Mutex::new(Signal {
                warn,
                taken_over: false,
                cancel: None,
            }),
            changed: tokio::sync::Notify::new(),
        }
    }

    pub(super) fn state(&self) -> std::sync::MutexGuard<'_, Signal> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Changes the state and tells every waiter.
    pub(super) fn change(&self, change: impl FnOnce(&mut Signal)) {
        change(&mut self.state());
        self.changed.notify_waiters();
    }

    pub(super) fn warn(&self) -> Instant {
        self.state().warn
    }
}
