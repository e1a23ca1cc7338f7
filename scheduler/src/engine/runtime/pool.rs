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
//!   [`BLOCKED_AFTER`] that is *held by its handler* stops counting as active and a new worker
//!   is started in its place, by the supervisor, which checks every [`CHECK_EVERY`] while work
//!   waits and no worker is idle. When the blocked poll ends, its worker takes its place back
//!   if there is room, and otherwise ends. Each replacement counts in
//!   `scheduler_handler_threads_replaced_total`.
//! - **Held, not merely late** (Linux): a long poll is not always the handler's doing. On a
//!   machine whose CPUs are oversubscribed (many nodes on two cores, a burst of ticks) a worker
//!   is often taken off its CPU for longer than [`BLOCKED_AFTER`] in the middle of a quick
//!   poll, and a new thread would only add to the queue for the CPU. So the supervisor asks the
//!   kernel what the thread is doing (`/proc/self/task/TID/stat` and `schedstat`): asleep in the
//!   kernel (`std::thread::sleep`, a synchronous client, a lock) is held; running or waiting
//!   for a CPU is held only once it has used [`BLOCKED_AFTER`] of CPU time since the supervisor
//!   first saw the poll over its limit (a handler that spins). Where the kernel cannot be asked
//!   (other systems, no `/proc`), every poll over the limit counts as held.
//! - **Every worker runs in the context of the application's runtime**, so what a handler
//!   creates or spawns (timers, sockets, `tokio::spawn`) belongs to that runtime.
//! - **Timers of its own** ([`Pool::sleep_until`], see [`super::timers`]): a handler dispatched
//!   ahead of its tick waits for it on the pool; an idle worker waits for the earliest timer and
//!   polls what it wakes, and the supervisor fires the timers that come due while every worker
//!   is busy.
//! - When the node's [`Pool`] is closed, idle workers end once no timer is left; work still
//!   queued or woken later is run by workers started for it.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use async_task::Runnable;
use prometheus_client::metrics::counter::Counter;
use tokio::runtime::Handle;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::timers::{self, Timers};

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
    /// How many polls the worker has begun: tells one long poll from the next.
    polls: AtomicU64,
    /// Replaced while blocked: no longer counted as active.
    replaced: AtomicBool,
    /// The thread's kernel id (Linux; 0 until the thread has started, or elsewhere).
    tid: AtomicI32,
    /// The supervisor's first look at a poll over the limit: which poll (`polls`) and the
    /// thread's CPU time then, in nanoseconds.
    seen_poll: AtomicU64,
    seen_cpu: AtomicU64,
}

impl Worker {
    fn new() -> Self {
        Self {
            polling_since: AtomicU64::new(0),
            polls: AtomicU64::new(0),
            replaced: AtomicBool::new(false),
            tid: AtomicI32::new(0),
            seen_poll: AtomicU64::new(0),
            seen_cpu: AtomicU64::new(0),
        }
    }

    /// Whether the poll numbered `poll`, over the limit, is held by its handler (see the
    /// module's documentation).
    fn held(&self, poll: u64) -> bool {
        let Some((state, cpu)) = thread::look(self.tid.load(Ordering::Acquire)) else {
            return true;
        };
        if state != thread::State::OnCpu {
            return true;
        }
        if self.seen_poll.swap(poll, Ordering::AcqRel) != poll {
            self.seen_cpu.store(cpu, Ordering::Release);
            return false;
        }
        let limit = u64::try_from(BLOCKED_AFTER.as_nanos()).unwrap_or(u64::MAX);
        cpu.saturating_sub(self.seen_cpu.load(Ordering::Acquire)) > limit
    }
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
    /// Futures waiting for an instant ([`Pool::sleep_until`]).
    timers: Timers,
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
    /// Counts replacements.
    replaced: Counter,
}

impl Pool {
    /// A pool of `target` active workers polling in the context of `context`, supervised by a
    /// task on `supervisor` (the engine runtime); `replaced` counts the workers replaced.
    pub(crate) fn new(
        context: Handle,
        target: usize,
        supervisor: &Handle,
        replaced: Counter,
    ) -> Arc<Self> {
        let busy = Arc::new(Notify::new());
        let pool = Arc::new(Self {
            context,
            target: target.max(1),
            base: Instant::now(),
            state: Mutex::new(State::default()),
            available: Condvar::new(),
            busy: Arc::clone(&busy),
            replaced,
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

    /// A future that ends at `at`, woken by the pool itself (see [`super::timers`]); poll it
    /// only inside a future of this pool.
    pub(crate) fn sleep_until(self: &Arc<Self>, at: std::time::Instant) -> Sleep {
        Sleep {
            pool: Arc::clone(self),
            at,
            key: None,
        }
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
        // Every active worker is busy: the supervisor watches them for as long as work waits.
        drop(state);
        self.busy.notify_one();
    }

    /// Whether work waits with no idle worker to take it.
    fn starved(state: &State) -> bool {
        !state.queue.is_empty() && state.idle == 0
    }

    /// The workers inside one poll for longer than [`BLOCKED_AFTER`] and not yet replaced,
    /// each with the number of its poll.
    fn long_polls(&self, state: &State) -> Vec<(Arc<Worker>, u64)> {
        let now = self.nanos_now();
        let limit = u64::try_from(BLOCKED_AFTER.as_nanos()).unwrap_or(u64::MAX);
        state
            .workers
            .iter()
            .filter_map(|w| {
                let since = w.polling_since.load(Ordering::Acquire);
                let poll = w.polls.load(Ordering::Acquire);
                let long = since != 0 && now.saturating_add(1).saturating_sub(since) > limit;
                (long && !w.replaced.load(Ordering::Acquire)).then(|| (Arc::clone(w), poll))
            })
            .collect()
    }

    /// Replaces the workers of `held` still inside the same poll, and starts workers while
    /// fewer than `target` are active and work waits.
    fn replace(self: &Arc<Self>, state: &mut State, held: &[(Arc<Worker>, u64)]) {
        for (worker, poll) in held {
            let same_poll = worker.polling_since.load(Ordering::Acquire) != 0
                && worker.polls.load(Ordering::Acquire) == *poll;
            if same_poll && !worker.replaced.load(Ordering::Acquire) {
                worker.replaced.store(true, Ordering::Release);
                state.active -= 1;
                self.replaced.inc();
            }
        }
        while state.active < self.target && Self::starved(state) {
            if !self.start_worker(state) {
                break;
            }
        }
    }

    /// One look at the workers: replaces those held by their handlers, and fires the timers
    /// due while no worker is idle to do it; says when to look again.
    fn look(self: &Arc<Self>) -> Look {
        let long = self.long_polls(&self.lock());
        // Asking the kernel takes a few system calls: not under the pool's lock.
        let held: Vec<_> = long
            .into_iter()
            .filter(|(worker, poll)| worker.held(*poll))
            .collect();
        let mut state = self.lock();
        let now = std::time::Instant::now();
        if state.idle == 0 && state.timers.due(now) {
            state = self.fire_due(state, now);
        }
        self.replace(&mut state, &held);
        match state.timers.next() {
            // Due, and an idle worker is on its way to fire them: look again soon.
            _ if Self::starved(&state) => Look::Soon,
            Some(at) if at <= now => Look::Soon,
            Some(at) => Look::At(at),
            None => Look::WhenBusy,
        }
    }

    /// Starts a worker (counted as active); false if no thread could be had.
    fn start_worker(self: &Arc<Self>, state: &mut State) -> bool {
        if state.workers.len() >= MAX_WORKERS {
            return false;
        }
        let worker = Arc::new(Worker::new());
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
        me.tid.store(thread::id(), Ordering::Release);
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
            let now = std::time::Instant::now();
            if state.timers.due(now) {
                state = self.fire_due(state, now);
                continue;
            }
            let Some(runnable) = state.queue.pop_front() else {
                if state.closed && state.timers.is_empty() {
                    state.workers.retain(|w| !Arc::ptr_eq(w, me));
                    state.active -= 1;
                    return;
                }
                state.idle += 1;
                state = match state.timers.next() {
                    Some(at) => {
                        self.available
                            .wait_timeout(state, at.saturating_duration_since(now))
                            .unwrap_or_else(|p| p.into_inner())
                            .0
                    }
                    None => self
                        .available
                        .wait(state)
                        .unwrap_or_else(|p| p.into_inner()),
                };
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
            me.polls.fetch_add(1, Ordering::AcqRel);
            me.polling_since
                .store(self.nanos_now().saturating_add(1), Ordering::Release);
            // The futures catch their own panics (see `HandlerThreads::spawn`).
            runnable.run();
            me.polling_since.store(0, Ordering::Release);
            state = self.lock();
        }
    }

    /// Wakes the futures whose timers are due by `now`, outside the pool's lock (each wake puts
    /// its task on the queue, and wakes an idle worker); returns the lock taken again.
    fn fire_due<'a>(
        &'a self,
        mut state: MutexGuard<'a, State>,
        now: std::time::Instant,
    ) -> MutexGuard<'a, State> {
        let due = state.timers.take_due(now);
        drop(state);
        due.into_iter().for_each(std::task::Waker::wake);
        self.lock()
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

/// When the supervisor looks at the pool again.
enum Look {
    /// Work waits and no worker is idle, or timers are due: in [`CHECK_EVERY`].
    Soon,
    /// At the next timer's deadline (every worker may be busy then), or when work waits.
    At(std::time::Instant),
    /// When work waits with no idle worker.
    WhenBusy,
}

/// Watches the workers while work waits and none is idle, and fires the timers that come due
/// while no worker is idle; ends with the pool.
async fn supervise(pool: Weak<Pool>, busy: Arc<Notify>) {
    loop {
        let look = match pool.upgrade() {
            Some(pool) => pool.look(),
            None => return,
        };
        match look {
            Look::Soon => tokio::time::sleep(CHECK_EVERY).await,
            Look::At(at) => {
                tokio::select! {
                    () = tokio::time::sleep_until(Instant::from_std(at)) => {}
                    () = busy.notified() => {}
                }
            }
            Look::WhenBusy => busy.notified().await,
        }
    }
}

/// The future of [`Pool::sleep_until`].
#[derive(Debug)]
pub(crate) struct Sleep {
    pool: Arc<Pool>,
    at: std::time::Instant,
    /// Its registration with the pool's timers, once it has waited.
    key: Option<timers::Key>,
}

impl Future for Sleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        if std::time::Instant::now() >= this.at {
            if let Some(key) = this.key.take() {
                this.pool.lock().timers.cancel(key);
            }
            return Poll::Ready(());
        }
        let mut state = this.pool.lock();
        let (key, earliest) = state.timers.set(this.key, this.at, cx.waker());
        this.key = Some(key);
        let idle = state.idle > 0;
        drop(state);
        if earliest {
            // The idle workers (or the supervisor, while none is) wait for an earlier instant.
            if idle {
                this.pool.available.notify_all();
            }
            this.pool.busy.notify_one();
        }
        Poll::Pending
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            self.pool.lock().timers.cancel(key);
        }
    }
}

/// What the kernel says of a worker's thread.
mod thread;

#[cfg(test)]
mod tests;
