//! The time the engine and the SQLite store decide by: [`Clock`], the system clock unless a test
//! injects a [`TestClock`] (through the hidden `scheduler::testing::clock`).
//!
//! What follows the clock: every wall-clock instant a decision is made from. On SQLite that is
//! all of them, because the store binds "now" from Rust (`write_tx!`, `read!`, the claim's start
//! times): the next tick, misfire and missed grace, lock expiry as the store judges it, retries'
//! backoff (a retry's due time), pauses and snoozes, heartbeats and the live-node window. In the
//! engine: the SLA deadlines, how late a run started for its incident, the lock renewer (it
//! renews a lock the clock has aged, as well as one Tokio's clock has), and the services' pauses,
//! which a move of the clock ends (see [`Clock::moves`]). On PostgreSQL the database decides by
//! its own `now()`; a test clock there moves only the engine's judgements, so it serves SQLite.
//!
//! What does not follow it: the waits of I/O and pacing, which stay on Tokio's real clock
//! (operation timeouts, pool acquire deadlines, `timeout_at` in `write_tx!`, a claim's contention
//! backoff, the pauses between services' passes, the lease's warn and fail-stop instants, the
//! drain timeout, the webhook's delivery retries). Tokio's paused clock (`start_paused`) would
//! move those too: it auto-advances whenever the runtime is idle, also while sqlx's SQLite
//! worker thread, a socket or a handler thread is busy, so an operation timeout or a lease would
//! run out spuriously. It serves unit tests of pure waiting (`engine::gate`, `engine::service`),
//! not a node.
//!
//! Nor does a run claimed ahead wait for its tick on this clock: the claim gives it the clock's
//! distance to the tick, and it waits that long on the handler pool's timer (Tokio's clock),
//! then for a handler slot, giving up after a lock lifetime of Tokio's clock too. A move while
//! it waits brings neither nearer, so a run claimed after a step past its tick can start at
//! once, before a run of an earlier tick claimed ahead before the step.
//!
//! The test clock never moves backwards, and moves forwards only by [`TestClock::advance`] or
//! [`TestClock::step`]; between them it either flows with the wall clock (shifted by what was
//! skipped, [`TestClock::new`]) or stands still ([`TestClock::frozen_at`]). A step waits for every
//! service's pass at the new time, the renewer's included, so a lock held by a running handler
//! stays renewed through steps of less than half its lifetime each.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use tokio::sync::{Notify, watch};

/// How long [`TestClock::step`] waits for the services on the clock to look at the new time.
const STEP_DEADLINE: Duration = Duration::from_secs(60);

/// Where the engine and the SQLite store take the wall-clock time from: the system clock, or a
/// test's.
#[derive(Clone, Default)]
pub(crate) enum Clock {
    /// `Utc::now()`.
    #[default]
    System,
    /// A clock a test moves.
    Test(TestClock),
}

impl std::fmt::Debug for Clock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Clock::System => f.write_str("Clock::System"),
            Clock::Test(c) => write!(f, "Clock::Test({})", c.now()),
        }
    }
}

impl Clock {
    /// The current time.
    #[inline]
    pub(crate) fn now(&self) -> DateTime<Utc> {
        match self {
            Clock::System => Utc::now(),
            Clock::Test(clock) => clock.now(),
        }
    }

    /// The time on a test's clock; `None` on the system clock (so a caller that needs the
    /// wall-clock time only to follow a test's clock pays nothing otherwise).
    pub(crate) fn test_now(&self) -> Option<DateTime<Utc>> {
        match self {
            Clock::System => None,
            Clock::Test(clock) => Some(clock.now()),
        }
    }

    /// The moves of the clock from now on (none on the system clock): a service's pause ends on
    /// one, as on a change notification, so its next pass sees the new time.
    pub(crate) fn moves(&self) -> Moves {
        Moves(match self {
            Clock::System => None,
            Clock::Test(clock) => Some(clock.inner.moved.subscribe()),
        })
    }

    /// A service's place on the clock, for [`TestClock::step`] to wait for its passes (`None`
    /// on the system clock).
    pub(crate) fn join(&self) -> Option<OnClock> {
        match self {
            Clock::System => None,
            Clock::Test(clock) => {
                let mut state = clock.state();
                let key = state.next_key;
                state.next_key += 1;
                let moves = state.moves;
                state.looked.insert(key, moves);
                Some(OnClock {
                    clock: clock.clone(),
                    key,
                })
            }
        }
    }
}

/// The moves of a [`Clock`] a service has not seen yet (see [`Clock::moves`]).
pub(crate) struct Moves(Option<watch::Receiver<u64>>);

impl Moves {
    /// Resolves at the next move of the clock not seen yet (at once if one happened since the
    /// last); never on the system clock.
    pub(crate) async fn next(&mut self) {
        let moved = match &mut self.0 {
            Some(moved) => moved.changed().await.is_ok(),
            None => false,
        };
        if !moved {
            std::future::pending::<()>().await;
        }
    }
}

/// A service's place on a [`TestClock`]: its loop (`engine::service::run`) says when a pass begins
/// and ends, so a test's [`TestClock::step`] returns once every service of every node on the
/// clock has made a pass at the new time. Dropped when the service ends.
pub(crate) struct OnClock {
    clock: TestClock,
    key: u64,
}

impl OnClock {
    /// A pass begins: which move of the clock it sees.
    pub(crate) fn pass_begins(&self) -> u64 {
        self.clock.state().moves
    }

    /// The pass that began at move `moves` ended (did its work, found none, or failed).
    pub(crate) fn pass_ended(&self, moves: u64) {
        let mut state = self.clock.state();
        if let Some(seen) = state.looked.get_mut(&self.key) {
            *seen = (*seen).max(moves);
        }
        drop(state);
        self.clock.inner.looked.notify_waiters();
    }
}

impl Drop for OnClock {
    fn drop(&mut self) {
        self.clock.state().looked.remove(&self.key);
        self.clock.inner.looked.notify_waiters();
    }
}

/// Not public API: a wall clock a test moves, for the engine and the SQLite store (see the
/// module docs of `scheduler::testing::clock`).
///
/// Clones share one clock. Give the same clock to the store
/// (`SqliteStoreBuilder::test_clock`) and to every node on it (`SchedulerBuilder::test_clock`);
/// then [`step`](Self::step) moves time forward and returns once every service of every node has
/// made a pass at the new time (claimed what was due, renewed, beat, judged what was missed), so
/// "nothing ran in three seconds" is three steps, not three seconds.
#[derive(Clone)]
pub struct TestClock {
    inner: Arc<Inner>,
}

struct Inner {
    state: Mutex<State>,
    /// Bumped on every move; services' pauses end on it.
    moved: watch::Sender<u64>,
    /// A service ended a pass, or left the clock.
    looked: Notify,
}

struct State {
    /// Standing still at this time; `None`: flowing with the wall clock, shifted by `skipped`.
    frozen: Option<DateTime<Utc>>,
    /// How far the clock was moved ahead of the wall clock while flowing.
    skipped: TimeDelta,
    /// How often the clock was moved.
    moves: u64,
    /// Per service on the clock: the latest move one of its passes began at and ended.
    looked: HashMap<u64, u64>,
    next_key: u64,
}

impl std::fmt::Debug for TestClock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestClock")
            .field("now", &self.now())
            .finish_non_exhaustive()
    }
}

impl Default for TestClock {
    fn default() -> Self {
        Self::new()
    }
}

impl TestClock {
    fn with(frozen: Option<DateTime<Utc>>) -> Self {
        TestClock {
            inner: Arc::new(Inner {
                state: Mutex::new(State {
                    frozen,
                    skipped: TimeDelta::zero(),
                    moves: 0,
                    looked: HashMap::new(),
                    next_key: 0,
                }),
                moved: watch::Sender::new(0),
                looked: Notify::new(),
            }),
        }
    }

    /// A clock that flows with the wall clock until moved: a test that never moves it sees the
    /// system clock.
    pub fn new() -> Self {
        Self::with(None)
    }

    /// A clock standing still at `at`: time passes only by [`advance`](Self::advance) and
    /// [`step`](Self::step).
    pub fn frozen_at(at: DateTime<Utc>) -> Self {
        Self::with(Some(at))
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.inner.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The current time on this clock.
    pub fn now(&self) -> DateTime<Utc> {
        let state = self.state();
        match state.frozen {
            Some(at) => at,
            None => Utc::now() + state.skipped,
        }
    }

    /// Moves the clock `by` forward and wakes the services of the nodes on it; returns at once.
    pub fn advance(&self, by: Duration) {
        let by = TimeDelta::from_std(by).expect("a step of a test clock fits in a TimeDelta");
        let moves = {
            let mut state = self.state();
            match &mut state.frozen {
                Some(at) => *at += by,
                None => state.skipped += by,
            }
            state.moves += 1;
            state.moves
        };
        self.inner.moved.send_replace(moves);
    }

    /// Moves the clock `by` forward and waits (on the real clock, at most a minute) until every
    /// service of the nodes on it has ended a pass that began after the move: what was due by
    /// the new time is claimed (its runs handed to their handlers; they may not have started
    /// yet), and what was not is not; a missed run is judged, a lock renewed. Not waited for:
    /// a cancel-safe pass (the change listener only waits; the pruner may run long). A step
    /// with no service on the clock (no node started yet) only moves it.
    ///
    /// # Panics
    ///
    /// If a service does not make a pass at the new time within a minute.
    pub async fn step(&self, by: Duration) {
        self.advance(by);
        let moves = self.state().moves;
        let all_looked = async {
            loop {
                let notified = self.inner.looked.notified();
                tokio::pin!(notified);
                notified.as_mut().enable();
                if self.state().looked.values().all(|seen| *seen >= moves) {
                    return;
                }
                notified.await;
            }
        };
        if tokio::time::timeout(STEP_DEADLINE, all_looked)
            .await
            .is_err()
        {
            panic!(
                "a service on the test clock made no pass within {STEP_DEADLINE:?} of a step to {}",
                self.now()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frozen_clock_moves_only_when_advanced() {
        let at = DateTime::<Utc>::from_timestamp(1_800_000_000, 0).unwrap();
        let clock = TestClock::frozen_at(at);
        assert_eq!(clock.now(), at);
        clock.advance(Duration::from_secs(90));
        assert_eq!(
            Clock::Test(clock.clone()).now(),
            at + TimeDelta::seconds(90)
        );
    }

    #[test]
    fn a_flowing_clock_keeps_what_was_skipped() {
        let clock = TestClock::new();
        clock.advance(Duration::from_secs(3600));
        let ahead = clock.now() - Utc::now();
        assert!(ahead > TimeDelta::minutes(59), "{ahead}");
    }

    #[tokio::test]
    async fn a_step_waits_for_every_service_to_look_at_the_new_time() {
        let clock = TestClock::frozen_at(Utc::now());
        let on = Clock::Test(clock.clone());
        let service = on.join().unwrap();
        let mut moves = on.moves();
        let step = tokio::spawn({
            let clock = clock.clone();
            async move { clock.step(Duration::from_secs(1)).await }
        });
        moves.next().await;
        // A pass that began before the move does not count.
        service.pass_ended(0);
        tokio::task::yield_now().await;
        assert!(!step.is_finished());
        let moves = service.pass_begins();
        service.pass_ended(moves);
        step.await.unwrap();
        // A service leaving the clock does not hold a step up.
        let step = clock.step(Duration::from_secs(1));
        drop(service);
        step.await;
    }
}
