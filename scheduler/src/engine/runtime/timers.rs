//! The handler pool's own timers: a handler dispatched ahead of its tick waits for the tick on
//! the pool, and a worker of the pool wakes on it and polls the handler. Nothing else (no
//! engine thread, no runtime's timer driver) stands between the tick and the handler's start.
//!
//! The timers are kept under the pool's lock ([`Timers`]); idle workers wait for the earliest
//! one, and the pool's supervisor fires those that come due while every worker is busy.

use std::collections::BTreeMap;
use std::task::Waker;
use std::time::Instant;

/// A registered timer: its deadline, and a number that tells timers with one deadline apart.
pub(super) type Key = (Instant, u64);

/// The wake-ups registered with a pool, earliest first.
#[derive(Debug, Default)]
pub(super) struct Timers {
    by_deadline: BTreeMap<Key, Waker>,
    next: u64,
}

impl Timers {
    /// Registers a wake-up of `waker` at `at`, in place of `former` (this timer's earlier
    /// registration, if it is still there); returns the new key and whether it is now the
    /// earliest of all (the waiting workers must look again).
    pub(super) fn set(&mut self, former: Option<Key>, at: Instant, waker: &Waker) -> (Key, bool) {
        if let Some(key) = former
            && let Some(registered) = self.by_deadline.get_mut(&key)
        {
            registered.clone_from(waker);
            return (key, false);
        }
        let key = (at, self.next);
        self.next = self.next.wrapping_add(1);
        self.by_deadline.insert(key, waker.clone());
        let earliest = self
            .by_deadline
            .first_key_value()
            .is_some_and(|(k, _)| *k == key);
        (key, earliest)
    }

    /// Forgets the timer `key` (its future was dropped, or it found its deadline passed).
    pub(super) fn cancel(&mut self, key: Key) {
        self.by_deadline.remove(&key);
    }

    /// The earliest deadline, if any timer is set.
    pub(super) fn next(&self) -> Option<Instant> {
        self.by_deadline.first_key_value().map(|((at, _), _)| *at)
    }

    /// Whether a timer's deadline has come by `now`.
    pub(super) fn due(&self, now: Instant) -> bool {
        self.next().is_some_and(|at| at <= now)
    }

    /// Takes the wakers of every timer due by `now`, earliest first (wake them outside the
    /// pool's lock: waking schedules onto the pool).
    pub(super) fn take_due(&mut self, now: Instant) -> Vec<Waker> {
        let later = self.by_deadline.split_off(&(now, u64::MAX));
        std::mem::replace(&mut self.by_deadline, later)
            .into_values()
            .collect()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.by_deadline.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::Wake;
    use std::time::Duration;

    use super::*;

    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn timers_come_due_in_order_and_a_cancelled_or_re_set_one_fires_once() {
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(Arc::clone(&count));
        let base = Instant::now();
        let at = |ms| base + Duration::from_millis(ms);
        let mut timers = Timers::default();
        assert_eq!(timers.next(), None);
        let (late, earliest) = timers.set(None, at(20), &waker);
        assert!(earliest, "the only timer is the earliest");
        let (_, earliest) = timers.set(None, at(10), &waker);
        assert!(earliest, "an earlier one wakes the waiting workers");
        let (same, earliest) = timers.set(None, at(10), &waker);
        assert!(!earliest, "one more at the same deadline is not earlier");
        let (again, earliest) = timers.set(Some(same), at(10), &waker);
        assert_eq!(
            (again, earliest),
            (same, false),
            "polled again: the same timer"
        );
        let (gone, _) = timers.set(None, at(30), &waker);
        timers.cancel(gone);
        assert_eq!(timers.next(), Some(at(10)));
        assert!(!timers.due(at(9)));
        assert!(timers.due(at(10)));
        assert_eq!(timers.take_due(at(10)).len(), 2, "both timers due at 10 ms");
        assert_eq!(timers.next(), Some(at(20)));
        assert!(timers.take_due(at(19)).is_empty());
        let fired = timers.take_due(at(40));
        assert_eq!(fired.len(), 1, "the cancelled timer at 30 ms is not fired");
        fired.into_iter().for_each(Waker::wake);
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        assert!(timers.is_empty());
        // Fired already: polled again before its deadline, it is registered anew.
        let (renewed, _) = timers.set(Some(late), at(50), &waker);
        assert_ne!(renewed, late);
        assert_eq!(timers.next(), Some(at(50)));
    }
}
