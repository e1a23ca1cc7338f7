//! Where a node's work runs: the engine's own services on a runtime of their own, and every
//! handler on a thread of its own, so that no handler can hold up the node.
//!
//! A handler that blocks its thread (`std::thread::sleep`, a synchronous client, heavy parsing:
//! the most common mistake in async Rust) or spins on the CPU used to hold one of the runtime's
//! few worker threads; with as many of them as the machine has cores, nothing else ran on that
//! runtime: not the lock renewals (so other nodes took the locks over while the handlers still
//! ran), not the claims, not the other tasks' handlers. Now:
//!
//! - **The engine runtime** ([`engine`]): one multi-threaded runtime per process, shared by
//!   every node in it, for the claim loop, the lock watchdog, the completer, the heartbeat and
//!   maintenance, the change listener, config sync, alert delivery and the admin server. No
//!   user code runs on its workers; it is never shut down (its I/O, such as the store's pooled
//!   connections, outlives any one node).
//! - **The handler pool** ([`HandlerThreads`], see [`pool`]): a few threads of the node's own
//!   poll its handler futures, and the pool grows by one thread for every thread that stays
//!   inside one poll for longer than [`pool::BLOCKED_AFTER`], so a handler that blocks holds its
//!   own thread and nothing else, while a burst of quick handlers costs no thread wake-up each.
//!   The futures run in the context of the runtime the application started the node from
//!   (`Scheduler::run_until`'s caller), so what a handler creates or spawns (timers, sockets,
//!   `tokio::spawn`) belongs to the application's runtime, as if it ran there.
//! - **Started on their tick by the pool** ([`HandlerThreads::spawn_at`]): a run claimed ahead
//!   of its tick is handed to the pool at once and waits for the tick on the pool's own timers,
//!   so at the tick a pool thread wakes and polls the handler, and none of the engine's work per
//!   run (its span, its log capture, the handler's context) stands between the two.
//!
//! The pool also tells the claim loop when this node cannot start what it claimed (a handler
//! dispatched long ago has still not been polled, because the machine's CPUs are taken by
//! spinning handlers or threads cannot be created): the node then stops claiming until its runs
//! start promptly again, and other nodes take the work.

mod pool;
mod timers;

use std::collections::HashMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use tokio::runtime::{Handle, Runtime};
use tokio::sync::oneshot;
use tokio::time::Instant;

/// Worker threads of the engine runtime: at least 2 (a claim and a renewal never wait for
/// each other), at most 4 (the engine's work is mostly waiting for the store).
fn engine_workers() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get().clamp(2, 4))
}

/// Threads of a node's handler pool that are not blocked: as many as the machine has cores, at
/// least 2.
fn handler_workers() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get().max(2))
}

/// A dispatched handler not yet polled after this long means the node cannot run
/// what it claims (see [`HandlerThreads::late_start`]).
pub(crate) const LATE_START: Duration = Duration::from_secs(1);

/// The engine runtime, built on first use.
///
/// # Errors
///
/// The runtime's threads could not be created (the message says why).
pub(crate) fn engine() -> Result<&'static Runtime, String> {
    static ENGINE: OnceLock<Result<Runtime, String>> = OnceLock::new();
    ENGINE
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(engine_workers())
                .thread_name("scheduler-engine")
                .enable_all()
                .build()
                .map_err(|e| format!("cannot start the scheduler's engine runtime: {e}"))
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// What a handler's future hands back: its output, or the panic that ended it.
pub(crate) type Joined<T> = Result<T, Box<dyn std::any::Any + Send + 'static>>;

/// Runs a node's handlers on its handler pool, in the context of the application's runtime.
#[derive(Debug)]
pub(crate) struct HandlerThreads {
    pool: Arc<pool::Pool>,
    /// Handlers dispatched and not yet polled, with when they were due to start.
    waiting: Arc<Mutex<HashMap<u64, Instant>>>,
    next: AtomicU64,
}

impl HandlerThreads {
    /// Handlers run in the context of `context` (the application's runtime; `None`: the
    /// engine's own); the pool is watched from `engine` (the engine runtime) and counts the
    /// threads it replaces in `replaced`.
    pub(crate) fn new(context: Option<Handle>, engine: Handle, replaced: Counter) -> Self {
        let context = context.unwrap_or_else(|| engine.clone());
        Self {
            pool: pool::Pool::new(context, handler_workers(), &engine, replaced),
            waiting: Arc::default(),
            next: AtomicU64::new(0),
        }
    }

    /// Polls `future` to its end on the handler pool; the receiver gets its output, or its
    /// panic. Dropping the receiver does not stop the future (close its gate for that).
    #[cfg(test)]
    pub(crate) fn spawn<F>(&self, future: F) -> oneshot::Receiver<Joined<F::Output>>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.spawn_at(Instant::now(), future)
    }

    /// Polls `future` on the handler pool from `start_at` on (at once if that has passed) to
    /// its end; the receiver gets its output, or its panic. Until `start_at` the future waits
    /// on the pool's own timers. Dropping the receiver does not stop the future.
    pub(crate) fn spawn_at<F>(
        &self,
        start_at: Instant,
        future: F,
    ) -> oneshot::Receiver<Joined<F::Output>>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let (done, joined) = oneshot::channel();
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        lock(&self.waiting).insert(id, start_at.max(Instant::now()));
        let waiting = Arc::clone(&self.waiting);
        let tick = self.pool.sleep_until(start_at.into_std());
        // Boxed here, not inside the block below, where it would keep its place twice (as
        // captured, and as boxed): thousands of runs may wait for their tick at once.
        let future = Box::pin(future);
        self.pool.spawn(async move {
            tick.await;
            lock(&waiting).remove(&id);
            drop(waiting);
            let _ = done.send(CatchUnwind(future).await);
        });
        joined
    }

    /// Whether a handler due more than [`LATE_START`] ago has still not been polled.
    pub(crate) fn late_start(&self) -> bool {
        let now = Instant::now();
        lock(&self.waiting)
            .values()
            .any(|at| now.saturating_duration_since(*at) > LATE_START)
    }
}

#[cfg(test)]
impl HandlerThreads {
    /// How many threads the pool has now.
    fn threads(&self) -> usize {
        self.pool.threads()
    }
}

impl Drop for HandlerThreads {
    fn drop(&mut self) {
        self.pool.close();
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// A future whose panic is its output.
struct CatchUnwind<F>(Pin<Box<F>>);

impl<F: Future> Future for CatchUnwind<F> {
    type Output = Joined<F::Output>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let inner = self.0.as_mut();
        match std::panic::catch_unwind(AssertUnwindSafe(|| inner.poll(cx))) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(out)) => Poll::Ready(Ok(out)),
            Err(panic) => Poll::Ready(Err(panic)),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::AtomicUsize;

    use super::*;

    /// A one-worker application runtime, and a pool whose handlers run in its context.
    fn in_an_app(runtime: &Runtime) -> (Runtime, HandlerThreads) {
        let app = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let threads = HandlerThreads::new(
            Some(app.handle().clone()),
            runtime.handle().clone(),
            Counter::default(),
        );
        (app, threads)
    }

    #[test]
    fn blocked_handlers_hold_only_their_own_threads() {
        let runtime = engine().unwrap();
        let (app, threads) = in_an_app(runtime);
        let threads = Arc::new(threads);
        // More blocked handlers than the machine has cores, and than either runtime has workers.
        let release = Arc::new(std::sync::Barrier::new(9));
        let blocked: Vec<_> = (0..8)
            .map(|_| {
                let release = Arc::clone(&release);
                threads.spawn(async move {
                    release.wait();
                })
            })
            .collect();
        // A handler that awaits a timer of the application's runtime still runs at once.
        let quick = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&quick);
        let done = threads.spawn(async move {
            tokio::time::sleep(Duration::from_millis(10)).await;
            counted.fetch_add(1, Ordering::SeqCst);
            tokio::runtime::Handle::current().id()
        });
        let ran_on = runtime.block_on(done).unwrap().unwrap();
        assert_eq!(quick.load(Ordering::SeqCst), 1);
        assert_eq!(ran_on, app.handle().id(), "in the application's runtime");
        assert!(!threads.late_start());
        assert!(threads.threads() > 8, "a thread for each blocked handler");
        release.wait();
        for joined in blocked {
            runtime.block_on(joined).unwrap().unwrap();
        }
        // The threads that were replaced while blocked end once their handlers return.
        let settled = std::time::Instant::now() + Duration::from_secs(30);
        while threads.threads() > handler_workers() && std::time::Instant::now() < settled {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(threads.threads(), handler_workers());
    }

    #[test]
    fn a_burst_of_quick_handlers_runs_on_the_pools_threads_in_the_apps_context() {
        let runtime = engine().unwrap();
        let app = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let threads = HandlerThreads::new(
            Some(app.handle().clone()),
            runtime.handle().clone(),
            Counter::default(),
        );
        let joined: Vec<_> = (0..1000)
            .map(|i| {
                threads.spawn(async move {
                    tokio::task::yield_now().await;
                    let name = std::thread::current().name().map(str::to_owned);
                    (i, name, tokio::runtime::Handle::current().id())
                })
            })
            .collect();
        for (i, joined) in joined.into_iter().enumerate() {
            let (n, name, context) = runtime.block_on(joined).unwrap().unwrap();
            assert_eq!(n, i);
            assert_eq!(name.as_deref(), Some("scheduler-handler"));
            assert_eq!(context, app.handle().id());
        }
    }

    #[test]
    fn handlers_dispatched_ahead_start_on_their_instant_on_the_pools_threads() {
        let runtime = engine().unwrap();
        let (_app, threads) = in_an_app(runtime);
        let start = |at: Instant| {
            threads.spawn_at(at, async move {
                let now = Instant::now();
                let name = std::thread::current().name().map(str::to_owned);
                (at, now, name)
            })
        };
        // One far ahead first, then a burst due sooner: the waiting workers look again.
        let far = start(Instant::now() + Duration::from_secs(3));
        let at = Instant::now() + Duration::from_millis(100);
        let burst: Vec<_> = (0..200).map(|_| start(at)).collect();
        assert!(
            !threads.late_start(),
            "not late while they wait for their tick"
        );
        for joined in burst {
            let (at, began, name) = runtime.block_on(joined).unwrap().unwrap();
            assert!(began >= at, "never before its instant");
            assert_eq!(name.as_deref(), Some("scheduler-handler"));
        }
        let sooner_done = Instant::now();
        let (far_at, began, _) = runtime.block_on(far).unwrap().unwrap();
        assert!(began >= far_at);
        assert!(
            sooner_done < far_at,
            "the burst did not wait for the later timer registered before it"
        );
        // Due already: at once.
        let (_, began, _) = runtime
            .block_on(start(Instant::now() - Duration::from_secs(1)))
            .unwrap()
            .unwrap();
        assert!(began <= Instant::now());
    }

    #[test]
    fn a_handler_comes_due_while_every_worker_is_blocked_and_still_starts() {
        let runtime = engine().unwrap();
        let threads = HandlerThreads::new(None, runtime.handle().clone(), Counter::default());
        // Dispatched first, so an idle worker holds its timer...
        let at = Instant::now() + Duration::from_millis(300);
        let due = threads.spawn_at(at, async move { Instant::now() });
        // ...then every worker blocks before it comes due: none is idle to fire it.
        let workers = handler_workers();
        let release = Arc::new(std::sync::Barrier::new(workers + 1));
        let blocked: Vec<_> = (0..workers)
            .map(|_| {
                let release = Arc::clone(&release);
                threads.spawn(async move {
                    release.wait();
                })
            })
            .collect();
        // The supervisor fires the timer, and a worker started in a blocked one's place runs it.
        // (A bound so that a pool that never fires it fails rather than hangs.)
        let began = runtime
            .block_on(async { tokio::time::timeout(Duration::from_secs(60), due).await })
            .expect("the handler never started: nothing fired its timer")
            .unwrap()
            .unwrap();
        assert!(began >= at);
        release.wait();
        for joined in blocked {
            runtime.block_on(joined).unwrap().unwrap();
        }
    }

    #[test]
    fn a_dropped_pool_still_finishes_its_handlers_and_its_threads_end() {
        let runtime = engine().unwrap();
        let threads = HandlerThreads::new(None, runtime.handle().clone(), Counter::default());
        let joined = threads.spawn(async {
            tokio::time::sleep(Duration::from_millis(50)).await;
            7
        });
        let pool = Arc::downgrade(&threads.pool);
        drop(threads);
        assert_eq!(runtime.block_on(joined).unwrap().unwrap(), 7);
        let settled = std::time::Instant::now() + Duration::from_secs(30);
        while pool.upgrade().is_some() && std::time::Instant::now() < settled {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(
            pool.upgrade().is_none(),
            "the pool and its threads are gone"
        );
    }

    #[test]
    fn a_panic_is_handed_back() {
        let runtime = engine().unwrap();
        let threads = Arc::new(HandlerThreads::new(
            None,
            runtime.handle().clone(),
            Counter::default(),
        ));
        let joined = runtime
            .block_on(threads.spawn(async { panic!("boom") }))
            .unwrap();
        let payload = joined.unwrap_err();
        assert_eq!(payload.downcast_ref::<&str>(), Some(&"boom"));
    }
}
