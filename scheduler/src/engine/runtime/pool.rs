//! The handler pool: a few worker threads poll every handler future of a node, and the pool
//! grows by one thread for each worker that stays inside one poll for longer than
//! [`BLOCKED_AFTER`] (a handler that blocks its thread or spins on the CPU), so a blocked
//! handler holds its own thread and nothing else, and a burst of a thousand quick handlers costs
//! no thread wake-up per handler.
//!
//! - **Tasks**: each handler future is an [`async_task`] task; its waker puts it on the pool's
//!   one queue (any worker may poll it next; nothing waits behind a blocked worker).
//! - **Workers**: at most `target` of them count as *active*; an idle one waits on the queue.
//!   Scheduling wakes an idle worker, or starts one while fewer than `target` are active.
//! - **Blocked workers are replaced**: a worker inside one poll for longer than
//!   [`BLOCKED_AFTER`] stops counting as active and a new worker is started in its place (by
//!   whoever notices first: the supervisor, checking every [`CHECK_EVERY`] while work waits and
//!   no worker is idle, or a scheduling that finds no idle worker). When the blocked poll ends,
//!   its worker takes its place back if there is room, and otherwise ends.
//! - **Every worker runs in the context of the application's runtime**, so what a handler
//!   creates or spawns (timers, sockets, `tokio::spawn`) belongs to that runtime.
//! - When the node's [`Pool`] is closed, idle workers end; work still queued or woken later
//!   is run by workers started for it.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::time::Duration;

use async_task::Runnable;
use tokio::runtime::Handle;
use tokio::sync::Notify;
use tokio::time::Instant;

/// A worker inside one poll for longer than this is replaced by a new one.
pub(crate) const BLOCKED_AFTER: Duration = Duration::from_millis(10);

/// How often the supervisor looks for blocked workers while work waits and no worker is idle.
const CHECK_EVERY: Duration = Duration::from_millis(5);

/// The most worker threads one pool has at once, blocked ones included.
const MAX_WORKERS: usize = 1 << 16;

/// One worker, as the others see it.
#[derive(Debug)]
struct Worker {
    /// When the poll in progress began, in nanoseconds after the pool's base plus one; 0: none.
    polling_since: AtomicU64,
    /// Replaced while blocked: no longer counted as active.
    replaced: AtomicBool,
}

#[derive(Debug, Default)]
struct State {
    queue: VecDeque<Runnable>,
    /// Workers waiting for work.
    idle: usize,
    /// Workers counted against `target` (not replaced).
    active: usize,
    /// Every live worker, replaced ones included.
    workers: Vec<Arc<Worker>>,
    /// No new work comes (the node is gone): idle workers end.
    closed: bool,
}

/// A node's handler pool.
#[derive(Debug)]
pub(crate) struct Pool {
    /// The runtime handler futures belong to.
    context: Handle,
    /// Active workers wanted.
    target: usize,
    base: Instant,
    state: Mutex<State>,
    available: Condvar,
    /// Wakes the supervisor: every worker is busy and work waits.
    busy: Arc<Notify>,
}

impl Pool {
    /// A pool of `target` active workers polling in the context of `context`, supervised by a
    /// task on `supervisor` (the engine runtime).
    pub(crate) fn new(context: Handle, target: usize, supervisor: &Handle) -> Arc<Self> {
        let busy = Arc::new(Notify::new());
        let pool = Arc::new(Self {
            context,
            target: target.max(1),
            base: Instant::now(),
            state: Mutex::new(State::default()),
            available: Condvar::new(),
            busy: Arc::clone(&busy),
        });
        supervisor.spawn(supervise(Arc::downgrade(&pool), busy));
        pool
    }

    /// Polls `future` on the pool until it ends. Its output is dropped: send it somewhere.
    pub(crate) fn spawn<F>(self: &Arc<Self>, future: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        // A task keeps its pool alive: one woken after its node closed the pool still gets a
        // worker.
        let pool = Arc::clone(self);
        let schedule = move |runnable: Runnable| pool.schedule(runnable);
        let (runnable, task) = async_task::spawn(future, schedule);
        task.detach();
        runnable.schedule();
    }

    /// How many worker threads the pool has now, blocked ones included.
    #[cfg(test)]
    pub(crate) fn threads(&self) -> usize {
        self.lock().workers.len()
    }

    /// No more work is coming: idle workers end.
    pub(crate) fn close(&self) {
        self.lock().closed = true;
        self.available.notify_all();
        self.busy.notify_one();
    }

    fn schedule(self: &Arc<Self>, runnable: Runnable) {
        let mut state = self.lock();
        state.queue.push_back(runnable);
        if state.idle > 0 {
            drop(state);
            self.available.notify_one();
            return;
        }
        if state.active < self.target {
            self.start_worker(&mut state);
            return;
        }
        // Every active worker is busy: replace the blocked ones now, and have the supervisor
        // watch the others for as long as work waits.
        self.replace_blocked(&mut state);
        drop(state);
        self.busy.notify_one();
    }

    /// Whether work waits with no idle worker to take it.
    fn starved(state: &State) -> bool {
        !state.queue.is_empty() && state.idle == 0
    }

    /// Replaces every worker that has been inside one poll for longer than [`BLOCKED_AFTER`],
    /// and starts workers while fewer than `target` are active and work waits.
    fn replace_blocked(self: &Arc<Self>, state: &mut State) {
        let now = self.nanos_now();
        let limit = u64::try_from(BLOCKED_AFTER.as_nanos()).unwrap_or(u64::MAX);
        let blocked: Vec<Arc<Worker>> = state
            .workers
            .iter()
            .filter(|w| {
                let since = w.polling_since.load(Ordering::Acquire);
                since != 0
                    && now.saturating_add(1).saturating_sub(since) > limit
                    && !w.replaced.load(Ordering::Acquire)
            })
            .cloned()
            .collect();
        for worker in blocked {
            worker.replaced.store(true, Ordering::Release);
            state.active -= 1;
        }
        while state.active < self.target && Self::starved(state) {
            if !self.start_worker(state) {
                break;
            }
        }
    }

    /// Starts a worker (counted as active); false if no thread could be had.
    fn start_worker(self: &Arc<Self>, state: &mut State) -> bool {
        if state.workers.len() >= MAX_WORKERS {
            return false;
        }
        let worker = Arc::new(Worker {
            polling_since: AtomicU64::new(0),
            replaced: AtomicBool::new(false),
        });
        let pool = Arc::clone(self);
        let its = Arc::clone(&worker);
        let started = std::thread::Builder::new()
            .name("scheduler-handler".into())
            .spawn(move || pool.work(&its));
        match started {
            Ok(_) => {
                state.workers.push(worker);
                state.active += 1;
                true
            }
            Err(e) => {
                // The supervisor tries again while work waits; the claim loop sees the
                // handlers start late and stops claiming.
                tracing::warn!("cannot start a handler thread: {e}");
                false
            }
        }
    }

    fn work(self: &Arc<Self>, me: &Arc<Worker>) {
        let _context = self.context.enter();
        let mut state = self.lock();
        loop {
            if me.replaced.load(Ordering::Acquire) {
                if state.active >= self.target {
                    state.workers.retain(|w| !Arc::ptr_eq(w, me));
                    return;
                }
                me.replaced.store(false, Ordering::Release);
                state.active += 1;
            }
            let Some(runnable) = state.queue.pop_front() else {
                if state.closed {
                    state.workers.retain(|w| !Arc::ptr_eq(w, me));
                    state.active -= 1;
                    return;
                }
                state.idle += 1;
                state = self
                    .available
                    .wait(state)
                    .unwrap_or_else(|p| p.into_inner());
                state.idle -= 1;
                continue;
            };
            if !state.queue.is_empty() {
                // More waits: wake another idle worker (a wake-up may have gone to a worker that
                // was already awake), or have the supervisor watch if none is idle.
                if state.idle > 0 {
                    self.available.notify_one();
                } else {
                    self.busy.notify_one();
                }
            }
            drop(state);
            me.polling_since
                .store(self.nanos_now().saturating_add(1), Ordering::Release);
            // The futures catch their own panics (see `HandlerThreads::spawn`).
            runnable.run();
            me.polling_since.store(0, Ordering::Release);
            state = self.lock();
        }
    }

    fn nanos_now(&self) -> u64 {
        u64::try_from(
            Instant::now()
                .saturating_duration_since(self.base)
                .as_nanos(),
        )
        .unwrap_or(u64::MAX)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        // Ends the supervisor.
        self.busy.notify_one();
    }
}

/// Watches the workers while work waits and none is idle; ends with the pool.
async fn supervise(pool: Weak<Pool>, busy: Arc<Notify>) {
    loop {
        let watching = match pool.upgrade() {
            Some(pool) => {
                let mut state = pool.lock();
                pool.replace_blocked(&mut state);
                Pool::starved(&state)
            }
            None => return,
        };
        if watching {
            tokio::time::sleep(CHECK_EVERY).await;
        } else {
            busy.notified().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_queued_behind_a_blocked_worker_gets_a_new_one() {
        let engine = super::super::engine().unwrap();
        // One worker, which the first future blocks until the second one has run.
        let pool = Pool::new(engine.handle().clone(), 1, engine.handle());
        let (ran, quick_ran) = std::sync::mpsc::channel();
        let (unblock, blocked) = std::sync::mpsc::channel::<()>();
        let (done, finished) = std::sync::mpsc::channel();
        let first = done.clone();
        pool.spawn(async move {
            blocked.recv().unwrap();
            first.send("blocker").unwrap();
        });
        pool.spawn(async move {
            ran.send(()).unwrap();
            done.send("quick").unwrap();
        });
        // (A bound so that a pool that never replaces its worker fails rather than hangs.)
        let hang = Duration::from_secs(60);
        quick_ran
            .recv_timeout(hang)
            .expect("the second future never ran: nothing replaced the blocked worker");
        assert_eq!(finished.recv_timeout(hang).unwrap(), "quick");
        assert_eq!(pool.threads(), 2, "the blocked worker and its replacement");
        unblock.send(()).unwrap();
        assert_eq!(finished.recv_timeout(hang).unwrap(), "blocker");
        // The replaced worker ends once its poll returns: the pool is full again.
        let settled = std::time::Instant::now() + Duration::from_secs(30);
        while pool.threads() > 1 && std::time::Instant::now() < settled {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(pool.threads(), 1);
    }
}
