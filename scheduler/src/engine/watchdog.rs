//! The lock watchdog: keeps the locks of a node's runs alive, and tells each run when its lock
//! can no longer be trusted. Handlers never see the lock.
//!
//! One [`LockWatchdog`] per node renews its held locks in a single statement every half renew
//! interval (1,000 long handlers cost one write per pass, not 1,000), fenced by owner and token;
//! a lock claimed or renewed less than half an interval ago waits for the next pass. A
//! run holds a [`Lease`] from its claim until its outcome is *recorded*, not just until its
//! handler returns: while an outcome waits to be written (the database is slow or away), the
//! lock stays renewed, so no other node mistakes the finished run for a dead one.
//!
//! Each lease has two local deadlines, counted on the monotonic clock from the moment the last
//! successful renewal (or the claim) was *sent* — the database set the expiry from its own clock
//! at a later moment plus the lifetime, so both fall before the expiry whatever the clock skew
//! or the round trip:
//!
//! - **warn** (`lifetime - margin - grace`): [`Lease::lost`] resolves, and the runner asks the
//!   handler to stop;
//! - **stop** (`lifetime - margin`): the run's [gate](super::gate) closes and the handler is
//!   never polled again.
//!
//! A lock is also lost at once when a renewal does not return it (another node released it).
//!
//! **Cancel requests** reach a run through its lease too ([`Lease::cancel_requested`]): after
//! each pass that renewed locks the watchdog asks the store whether anyone asked to cancel one
//! of its runs (a lookup in an index of cancelled runs, nearly always empty), and it asks at
//! once when the change listener hears of a cancel ([`LockWatchdog::check_cancels_soon`]). So
//! a cancel reaches its run's node within a renew interval even when notifications are lost
//! (through a pooler without a listen URL, another process on an SQLite file).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use super::gate::GateState;
use crate::store::{Cancellation, LockKey, Store};
use signals::Signals;

/// Why a run's lock can no longer be trusted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum LockLoss {
    /// Another node holds the lock now (it expired and was released), or it was released.
    TakenOver,
    /// Renewal kept failing (database unreachable) until the warn deadline.
    Unrenewable(String),
}

impl LockLoss {
    pub(crate) fn describe(&self) -> String {
        match self {
            LockLoss::TakenOver => "lock lost: another node released it after it expired".into(),
            LockLoss::Unrenewable(e) => {
                format!("lock could not be renewed before it would expire ({e})")
            }
        }
    }
}

/// The local deadlines of a lease, as offsets from the instant a renewal was sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LeaseTimes {
    /// The lock lifetime in the database.
    pub lifetime: Duration,
    /// How long before the expiry the gate closes.
    pub margin: Duration,
    /// How long before the gate closes the handler is asked to stop.
    pub grace: Duration,
}

impl LeaseTimes {
    /// The deadlines for `lifetime`: margin and grace are a tenth of it each, bounded (at least
    /// 10 ms; the margin at most 2 s, the grace at most 5 s). For every lifetime the gate closes
    /// strictly before the expiry, and the handler is told strictly before that.
    pub(crate) fn for_lifetime(lifetime: Duration) -> Self {
        let tenth = lifetime / 10;
        Self {
            lifetime,
            margin: tenth.clamp(Duration::from_millis(10), Duration::from_secs(2)),
            grace: tenth.clamp(Duration::from_millis(10), Duration::from_secs(5)),
        }
    }

    fn stop_after(&self, sent: Instant) -> Instant {
        sent + self.lifetime - self.margin
    }

    fn warn_after(&self, sent: Instant) -> Instant {
        sent + self.warn_offset()
    }

    /// How long after a renewal is sent the warn deadline comes.
    fn warn_offset(&self) -> Duration {
        self.lifetime - self.margin - self.grace
    }

    /// How long after a renewal is sent a handler that cannot be stopped must be gone: half the
    /// margin before the lock can expire.
    fn fail_stop_offset(&self) -> Duration {
        self.lifetime - self.margin / 2
    }
}

struct Held {
    key: LockKey,
    times: LeaseTimes,
    /// When the claim or the last successful renewal of this lock was sent.
    renewed: Instant,
    /// The same on a test's clock (`None` on the system clock): a test that moves the clock
    /// ages the lock in the store, so it is renewed on the clock's age too.
    renewed_on_clock: Option<chrono::DateTime<chrono::Utc>>,
    /// The run's outcome is being written (the write releases the lock).
    writing: bool,
    gate: Arc<GateState>,
    signals: Arc<Signals>,
}

/// Renews every lock this node holds.
pub(crate) struct LockWatchdog {
    store: Arc<dyn Store>,
    node_id: Arc<str>,
    renew_every: Duration,
    /// The wall clock the store ages locks by (see `crate::clock`).
    clock: crate::clock::Clock,
    held: Mutex<HashMap<i64, Held>>,
    last_error: Mutex<Option<String>>,
    /// The node stopped: nothing is renewed any more.
    stopped: std::sync::atomic::AtomicBool,
    /// Wakes the cancel check (the change listener heard of a cancel).
    cancel_check: tokio::sync::Notify,
}

/// One run's claim on its lock, from the claim until its outcome is recorded;
/// [`lost`](Lease::lost) resolves when the lock can no longer be trusted. Dropping it stops the
/// renewals.
pub(crate) struct Lease {
    watchdog: Arc<LockWatchdog>,
    run_id: i64,
    times: LeaseTimes,
    gate: Arc<GateState>,
    signals: Arc<Signals>,
}

impl LockWatchdog {
    pub(crate) fn new(
        store: Arc<dyn Store>,
        node_id: Arc<str>,
        renew_every: Duration,
        clock: crate::clock::Clock,
    ) -> Self {
        Self {
            store,
            node_id,
            renew_every,
            clock,
            held: Mutex::new(HashMap::new()),
            last_error: Mutex::new(None),
            stopped: std::sync::atomic::AtomicBool::new(false),
            cancel_check: tokio::sync::Notify::new(),
        }
    }

    fn held(&self) -> std::sync::MutexGuard<'_, HashMap<i64, Held>> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts renewing the lock of run `run_id`, taken for `lifetime` by a claim sent at `sent`.
    pub(crate) fn hold(
        self: &Arc<Self>,
        run_id: i64,
        key: LockKey,
        lifetime: Duration,
        sent: Instant,
    ) -> Lease {
        let times = LeaseTimes::for_lifetime(lifetime);
        let gate = GateState::new(times.stop_after(sent));
        let signals = Arc::new(Signals::new(times.warn_after(sent)));
        self.held().insert(
            run_id,
            Held {
                key,
                times,
                renewed: sent,
                renewed_on_clock: self.clock.test_now(),
                writing: false,
                gate: Arc::clone(&gate),
                signals: Arc::clone(&signals),
            },
        );
        Lease {
            watchdog: Arc::clone(self),
            run_id,
            times,
            gate,
            signals,
        }
    }

    /// Asks the store whether anyone asked to cancel a run this node holds (one whose outcome
    /// is not being written, and whose lease was not told yet), and tells the leases of those
    /// somebody did. Returns how many were told; asks nothing when no run is held.
    pub(crate) async fn check_cancels(&self) -> crate::store::StoreResult<usize> {
        let runs: Vec<i64> = self
            .held()
            .iter()
            .filter(|(_, h)| !h.writing && h.signals.state().cancel.is_none())
            .map(|(run, _)| *run)
            .collect();
        if runs.is_empty() {
            return Ok(0);
        }
        let requests = self.store.cancel_requests(&runs).await?;
        let held = self.held();
        let mut told = 0;
        for request in requests {
            if let Some(h) = held.get(&request.run_id)
                && h.signals.state().cancel.is_none()
            {
                h.signals.change(|s| s.cancel = Some(request));
                told += 1;
            }
        }
        Ok(told)
    }

    /// Has the cancel check ([`CancelCheck`]) look at once (a cancel was requested somewhere).
    pub(crate) fn check_cancels_soon(&self) {
        self.cancel_check.notify_one();
    }

    /// What wakes the cancel check.
    pub(crate) fn cancel_wake(&self) -> &tokio::sync::Notify {
        &self.cancel_check
    }

    /// Whether this node holds `key` (a run of its own, running or waiting for its outcome to
    /// be recorded). Such a lock is never rescued by this node.
    pub(crate) fn holds(&self, key: &LockKey) -> bool {
        self.held().values().any(|h| &h.key == key)
    }

    /// Marks the locks of `runs` as being released by the write of their outcomes (`true`), or
    /// no longer (`false`: the write failed and is retried later).
    pub(crate) fn writing(&self, runs: impl IntoIterator<Item = i64>, on: bool) {
        let mut held = self.held();
        for run in runs {
            if let Some(h) = held.get_mut(&run) {
                h.writing = on;
            }
        }
    }

    /// One renewal of the held locks that need it. Passes run every half renew interval and
    /// leave out locks claimed or renewed less than half an interval ago: a lock held for long
    /// is renewed every half interval, and none goes longer than one interval (plus a pass)
    /// without a renewal, as when every lock was renewed every interval, while a burst's fresh
    /// locks are not rewritten as their outcomes are being written. Also left out: locks whose
    /// outcome is being written, unless half their time to the warn deadline has passed: that
    /// write releases them, and a renewal of the same rows would wait for it or make it wait (at
    /// a burst of 10,000 runs, outcome batches took 350 ms instead of 25 ms). Returns how many
    /// were extended and found busy; locks neither extended nor busy are told they were taken over.
    pub(crate) async fn renew_once(&self) -> crate::store::StoreResult<Renewed> {
        let sent = Instant::now();
        let sent_on_clock = self.clock.test_now();
        let fresh = self.renew_pause() / 2;
        let batch: Vec<(i64, LockKey, LeaseTimes)> = self
            .held()
            .iter()
            .filter(|(_, h)| {
                let mut age = sent.saturating_duration_since(h.renewed);
                if let (Some(now), Some(then)) = (sent_on_clock, h.renewed_on_clock) {
                    age = age.max((now - then).to_std().unwrap_or_default());
                }
                age >= fresh && !(h.writing && age < h.times.warn_offset() / 2)
            })
            .map(|(run, h)| (*run, h.key.clone(), h.times))
            .collect();
        if batch.is_empty() {
            return Ok(Renewed::default());
        }
        let locks: Vec<(LockKey, Duration)> = batch
            .iter()
            .map(|(_, k, t)| (k.clone(), t.lifetime))
            .collect();
        let renewal = match self.store.renew_locks(&self.node_id, &locks).await {
            Ok(renewal) => renewal,
            Err(e) => {
                // Logged by the service loop; kept for the runs whose lock it costs.
                *self.last_error.lock().unwrap_or_else(|p| p.into_inner()) = Some(e.to_string());
                return Err(e);
            }
        };
        self.last_error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        let renewed: std::collections::HashSet<LockKey> = renewal.renewed.into_iter().collect();
        let busy: std::collections::HashSet<LockKey> = renewal.busy.into_iter().collect();
        let mut held = self.held();
        for (run, key, times) in &batch {
            let Some(h) = held.get_mut(run) else { continue }; // recorded meanwhile
            if renewed.contains(key) {
                h.renewed = sent;
                h.renewed_on_clock = sent_on_clock;
                h.gate.set_deadline(times.stop_after(sent));
                h.signals.change(|s| s.warn = times.warn_after(sent));
            } else if !busy.contains(key) {
                h.signals.change(|s| s.taken_over = true);
            }
            // Busy: another transaction held the row. Still ours, not extended: as after a
            // failed renewal, its deadlines stand and the next try comes soon.
        }
        Ok(Renewed {
            renewed: renewed.len(),
            busy: busy.len(),
        })
    }

    /// The pause between renewals: the renew interval, or a fifth of the shortest lock lifetime
    /// held (a task with a short `lock_lifetime` of its own) if that is shorter.
    fn renew_pause(&self) -> Duration {
        self.held()
            .values()
            .map(|h| h.times.lifetime / 5)
            .min()
            .map_or(self.renew_every, |d| d.min(self.renew_every))
            .max(Duration::from_millis(20))
    }

    /// The pause before retrying a failed renewal (also the completer's): a quarter of the renew
    /// interval, so an owner back in touch with the database renews well within the time other
    /// nodes wait before releasing its expired locks.
    pub(crate) fn retry_pause(&self) -> Duration {
        (self.renew_every / 4).max(Duration::from_millis(20))
    }

    /// Renews nothing from now on (the node stopped); leases still held learn why when they
    /// are lost.
    pub(crate) fn stop(&self) {
        self.stopped
            .store(true, std::sync::atomic::Ordering::Release);
    }

    fn last_error(&self) -> String {
        if self.stopped.load(std::sync::atomic::Ordering::Acquire) {
            return "its node stopped renewing its locks".into();
        }
        self.last_error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .unwrap_or_else(|| "renewal did not complete in time".into())
    }
}

/// What one renewal pass did: how many locks it extended, and how many it found busy (their
/// rows held by another transaction: still this node's, tried again a quarter interval later).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Renewed {
    pub renewed: usize,
    pub busy: usize,
}

/// Renews every renew interval, a quarter of it after a failure or a busy lock.
pub(crate) struct Renewer(
    pub(crate) Arc<LockWatchdog>,
    pub(crate) Arc<crate::metrics::Metrics>,
);

impl super::service::Service for Renewer {
    type Pass = Renewed;
    type Error = crate::store::StoreError;

    fn what(&self) -> &'static str {
        "lock renewal"
    }

    async fn run_once(&mut self) -> crate::store::StoreResult<Renewed> {
        let result = self.0.renew_once().await;
        if !matches!(
            result,
            Ok(Renewed {
                renewed: 0,
                busy: 0
            })
        ) {
            self.1
                .renewal(matches!(result, Ok(Renewed { busy: 0, .. })));
        }
        if matches!(result, Ok(Renewed { renewed, .. }) if renewed > 0) {
            // Piggybacked on the renewal: a cancel whose notification was lost arrives here.
            if let Err(e) = self.0.check_cancels().await {
                tracing::debug!(error = %e, "could not look for cancel requests; next renewal");
            }
        }
        result
    }

    fn pause_after(&mut self, pass: Renewed) -> Option<Duration> {
        if pass.busy > 0 {
            // A lock not extended is tried again as after a failure.
            return Some(self.0.retry_pause());
        }
        // Half the interval: see renew_once.
        Some(self.0.renew_pause() / 2)
    }

    fn pause_after_failure(&mut self, _failures: u32) -> Duration {
        self.0.retry_pause()
    }

    /// The runs' locks depend on it: a renewal that panicked may have left a lease neither
    /// renewed nor told it was lost, so the node stops rather than guess.
    fn on_panic(&self) -> super::health::OnPanic {
        super::health::OnPanic::FailStop
    }
}

/// Looks for cancel requests of this node's runs as soon as the change listener hears of one
/// (the renewals look too, see the module docs).
pub(crate) struct CancelCheck(pub(crate) Arc<LockWatchdog>);

impl super::service::Service for CancelCheck {
    type Pass = usize;
    type Error = crate::store::StoreError;

    fn what(&self) -> &'static str {
        "looking for cancel requests"
    }

    async fn run_once(&mut self) -> crate::store::StoreResult<usize> {
        self.0.check_cancels().await
    }

    fn pause_after(&mut self, _told: usize) -> Option<Duration> {
        // Until the next notification; the renewals look in between.
        Some(Duration::from_secs(3600))
    }

    fn pause_after_failure(&mut self, _failures: u32) -> Duration {
        self.0.retry_pause()
    }
}

impl Lease {
    /// Resolves when an operator asked to cancel this run (at once if that is known already).
    /// Cancel-safe.
    /// The future borrows nothing, so it can be polled beside the lease's other futures.
    pub(crate) fn cancel_requested(&self) -> impl Future<Output = Cancellation> + Send + 'static {
        let signals = Arc::clone(&self.signals);
        async move {
            loop {
                // Registered before the look: a change after it is not missed.
                let changed = signals.changed.notified();
                if let Some(request) = signals.state().cancel.clone() {
                    return request;
                }
                changed.await;
            }
        }
    }

    /// Resolves when the lock can no longer be trusted: taken over, or not renewed by the warn
    /// deadline. Cancel-safe.
    pub(crate) async fn lost(&mut self) -> LockLoss {
        loop {
            // Registered before the look: a change after it is not missed.
            let changed = self.signals.changed.notified();
            let (warn, taken_over) = {
                let state = self.signals.state();
                (state.warn, state.taken_over)
            };
            if taken_over {
                return LockLoss::TakenOver;
            }
            tokio::select! {
                () = tokio::time::sleep_until(warn) => {
                    let state = self.signals.state();
                    if state.taken_over {
                        return LockLoss::TakenOver;
                    }
                    if state.warn <= warn {
                        drop(state);
                        return LockLoss::Unrenewable(self.watchdog.last_error());
                    }
                }
                () = changed => {}
            }
        }
    }

    /// The gate of this run's handler.
    pub(crate) fn gate(&self) -> &Arc<GateState> {
        &self.gate
    }

    /// The instant the gate closes by itself, unless renewed.
    pub(crate) fn stop_at(&self) -> Instant {
        self.signals.warn() + self.times.grace
    }

    /// The instant by which a handler that cannot be stopped must be gone, the process with it
    /// if need be (see `super::failstop`): strictly before the lock can expire, unless renewed.
    pub(crate) fn fail_stop_at(&self) -> Instant {
        self.signals.warn() - self.times.warn_offset() + self.times.fail_stop_offset()
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.watchdog.held().remove(&self.run_id);
    }
}

mod signals;
#[cfg(test)]
mod tests;
