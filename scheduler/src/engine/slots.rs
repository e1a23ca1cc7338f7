//! Handler slots: at most `max_concurrent` handlers of a node run at once, each holding a slot
//! from its start to its end.
//!
//! A run that starts at once is claimed only into a free slot, taken with the claim. A run
//! claimed ahead of its tick takes its slot on the tick instead (it waits for one there, first
//! come first served), so a tick of many more rows than slots is claimed ahead whole, not a
//! slot's worth before the tick and the rest after it, a claim per batch of finished handlers.
//! How many may wait so is bounded by the slots free when they are claimed: at most
//! [`QUEUED_PER_SLOT`] per free slot, those already waiting included. A node whose slots are all
//! taken claims nothing, ahead or not: the other nodes take the work.
//!
//! A run waiting for a slot waits only while slots come free: one that sees none come free
//! for its stall time (the lock lifetime; from its tick, or from the last one freed) gives up
//! its place, and its run is handed back unstarted for a node with a free slot (this one
//! claims nothing until one of its own frees up). So handlers that hang without a timeout hold
//! their own slots, never the runs queued behind them.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

/// How many runs claimed ahead of their tick may wait for each free handler slot.
pub(crate) const QUEUED_PER_SLOT: usize = 10;

/// A node's handler slots, and the runs claimed ahead that wait for one.
#[derive(Debug)]
pub(crate) struct Slots {
    permits: Arc<Semaphore>,
    queue: Arc<Queue>,
    /// Told each time a handler gives its slot back.
    freed: Notify,
    /// The claim loop's last pass could have claimed more with a slot more: all were taken, or
    /// due rows were left for want of one, or waited for a share of a limit a handler here
    /// holds. A handler's end wakes the loop only then.
    wanted: AtomicBool,
}

/// How many runs one claim may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Room {
    /// Runs that start at once: the free slots.
    pub now: usize,
    /// All runs, those claimed ahead of their tick included.
    pub all: usize,
}

impl Slots {
    pub(crate) fn new(max_concurrent: usize) -> Self {
        Self {
            permits: Arc::new(Semaphore::new(max_concurrent)),
            queue: Arc::new(Queue {
                waiting: AtomicUsize::new(0),
                epoch: Instant::now(),
                freed_at: AtomicU64::new(0),
            }),
            freed: Notify::new(),
            wanted: AtomicBool::new(false),
        }
    }

    /// Free slots now.
    pub(crate) fn free(&self) -> usize {
        self.permits.available_permits()
    }

    /// How many runs a claim may take with `free` slots free (zero if the node cannot start
    /// runs promptly), claiming ahead of ticks or not.
    pub(crate) fn room(&self, free: usize, ahead: bool) -> Room {
        let queued = self.queue.waiting.load(Ordering::Relaxed);
        let all = if ahead {
            free.saturating_mul(QUEUED_PER_SLOT).saturating_sub(queued)
        } else {
            0
        };
        Room {
            now: free,
            all: all.max(free),
        }
    }

    /// The slot of a run claimed now: a free one if there is one, else a place among the runs
    /// waiting for one (`starts_now`: the run's start has come).
    pub(crate) fn claim(&self, starts_now: bool) -> Slot {
        if starts_now && let Ok(permit) = Arc::clone(&self.permits).try_acquire_owned() {
            return Slot::Held(permit);
        }
        self.queue.waiting.fetch_add(1, Ordering::Relaxed);
        Slot::Queued {
            permits: Arc::clone(&self.permits),
            ticket: Ticket(Arc::clone(&self.queue)),
        }
    }

    /// Tells [`Self::freed`]'s waiters that a handler gave its slot back; true if the claim
    /// loop wants to hear of it (see [`Self::want`]).
    pub(crate) fn notify_freed(&self) -> bool {
        self.queue.freed_now();
        self.freed.notify_waiters();
        self.wanted.load(Ordering::Relaxed)
    }

    /// Says whether the claim loop wants to be woken when a handler ends (its last pass found
    /// it short of slots, or rows waiting for a share of a limit).
    pub(crate) fn want(&self, wanted: bool) {
        self.wanted.store(wanted, Ordering::Relaxed);
    }

    /// Waits at most `wait` for `batch` slots to be free (without taking them).
    pub(crate) async fn freed(&self, batch: usize, wait: Duration) {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let freed = self.freed.notified();
            if self.free() >= batch {
                return;
            }
            if tokio::time::timeout_at(deadline, freed).await.is_err() {
                return;
            }
        }
    }
}

/// A claimed run's handler slot: held, or waited for.
#[derive(Debug)]
pub(crate) enum Slot {
    /// Taken with the claim.
    Held(OwnedSemaphorePermit),
    /// To be taken when the run starts (it was claimed ahead of its tick, or found none free).
    Queued {
        permits: Arc<Semaphore>,
        ticket: Ticket,
    },
}

impl Slot {
    /// Whether the slot is held already.
    pub(crate) fn is_held(&self) -> bool {
        matches!(self, Slot::Held(_))
    }

    /// The slot, once it is free (held until the permit is dropped), or [`Stalled`] if none of
    /// the node's slots came free for `stall` while it waited.
    pub(crate) async fn take(self, stall: Duration) -> Result<OwnedSemaphorePermit, Stalled> {
        match self {
            Slot::Held(permit) => Ok(permit),
            Slot::Queued { permits, ticket } => {
                // The node's semaphore is never closed.
                let acquire = permits.acquire_owned();
                tokio::pin!(acquire);
                let mut since = Instant::now();
                loop {
                    tokio::select! {
                        biased;
                        permit = &mut acquire => {
                            return Ok(permit.unwrap_or_else(|_| {
                                unreachable!("the handler slots are never closed")
                            }));
                        }
                        () = tokio::time::sleep_until(since + stall) => {
                            // A slot freed meanwhile (taken by a run ahead of this one): the
                            // node is serving its queue; wait on from then.
                            match ticket.0.freed_since(since) {
                                Some(freed) => since = freed,
                                None => return Err(Stalled(stall)),
                            }
                        }
                    }
                }
            }
        }
    }
}

/// No handler slot of the node came free for this long while a run waited for one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stalled(pub Duration);

/// The runs waiting for a slot: how many, and when a slot was last given back.
#[derive(Debug)]
struct Queue {
    waiting: AtomicUsize,
    epoch: Instant,
    /// Milliseconds from `epoch` to the last slot given back.
    freed_at: AtomicU64,
}

impl Queue {
    fn freed_now(&self) {
        let ms = u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.freed_at.fetch_max(ms, Ordering::Relaxed);
    }

    /// When a slot was last given back, if after `since`.
    fn freed_since(&self, since: Instant) -> Option<Instant> {
        let at = self.epoch + Duration::from_millis(self.freed_at.load(Ordering::Relaxed));
        (at > since).then_some(at)
    }
}

/// A run's place among those waiting for a slot; counted until dropped.
#[derive(Debug)]
pub(crate) struct Ticket(Arc<Queue>);

impl Drop for Ticket {
    fn drop(&mut self) {
        self.0.waiting.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LONG: Duration = Duration::from_secs(3600);

    #[test]
    fn a_claim_ahead_may_queue_ten_runs_per_free_slot_those_waiting_included() {
        let slots = Slots::new(4);
        assert_eq!(slots.room(4, false), Room { now: 4, all: 4 });
        assert_eq!(slots.room(4, true), Room { now: 4, all: 40 });
        let waiting: Vec<Slot> = (0..35).map(|_| slots.claim(false)).collect();
        assert_eq!(slots.room(4, true), Room { now: 4, all: 5 });
        assert_eq!(
            slots.room(0, true),
            Room { now: 0, all: 0 },
            "no free slot: nothing"
        );
        drop(waiting);
        assert_eq!(
            slots.room(4, true).all,
            40,
            "a dropped place is no longer counted"
        );
    }

    #[tokio::test]
    async fn a_queued_run_takes_its_slot_when_one_frees_up() {
        let slots = Slots::new(1);
        let held = slots.claim(true);
        assert!(held.is_held());
        let queued = slots.claim(true);
        assert!(!queued.is_held(), "no slot free: it waits for one");
        let held = held.take(LONG).await.unwrap();
        let waiter = tokio::spawn(queued.take(LONG));
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        drop(held);
        let permit = waiter.await.unwrap().unwrap();
        assert_eq!(slots.free(), 0);
        assert_eq!(slots.room(1, true).all, 10, "it no longer waits");
        drop(permit);
        assert_eq!(slots.free(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_queued_run_gives_up_only_when_no_slot_frees_for_its_stall_time() {
        const STALL: Duration = Duration::from_secs(20);
        let slots = Slots::new(1);
        let held = slots.claim(true).take(STALL).await.unwrap();
        let first = tokio::spawn(slots.claim(false).take(STALL));
        let second = tokio::spawn(slots.claim(false).take(STALL));
        tokio::time::sleep(Duration::from_secs(15)).await;
        // The held slot is given back and taken by the first in line: the node serves its
        // queue, so the second waits on, a stall time from then.
        drop(held);
        slots.notify_freed();
        let first = first
            .await
            .unwrap()
            .expect("the first takes the freed slot");
        tokio::time::sleep(Duration::from_secs(19)).await;
        assert!(
            !second.is_finished(),
            "a slot freed 19 s ago: it still waits"
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(second.await.unwrap().unwrap_err(), Stalled(STALL));
        assert_eq!(slots.room(1, true).all, 10, "it no longer waits");
        drop(first);
        assert_eq!(slots.free(), 1);
    }
}
