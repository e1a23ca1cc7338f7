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
//! - **Handler threads** ([`HandlerThreads`]): each run's handler future is polled on a thread of
//!   its own, taken from a pool that grows past blocked threads and keeps idle ones for a
//!   minute, so a handler that blocks holds its own thread and nothing else. The future runs in
//!   the context of the runtime the application started the node from (`Scheduler::run_until`'s
//!   caller), so what a handler creates or spawns (timers, sockets, `tokio::spawn`) belongs to
//!   the application's runtime, as if it ran there.
//!
//! The pool also tells the claim loop when this node cannot start what it claimed (a handler
//! dispatched long ago still waits for its thread, because the machine's CPUs are taken by
//! spinning handlers or threads cannot be created): the node then stops claiming until its runs
//! start promptly again, and other nodes take the work.

use std::collections::HashMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use tokio::runtime::{Handle, Runtime};
use tokio::sync::oneshot;
use tokio::time::Instant;

/// Worker threads of the engine runtime: at least 2 (a claim and a renewal never wait for
/// each other), at most 4 (the engine's work is mostly waiting for the store).
fn engine_workers() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get().clamp(2, 4))
}

/// The most handler threads the process keeps at once (a node's `max_concurrent` bounds its
/// own).
const MAX_HANDLER_THREADS: usize = 1 << 16;

/// How long an idle handler thread is kept for the next run.
const HANDLER_THREAD_KEEP_ALIVE: Duration = Duration::from_secs(60);

/// A dispatched handler still waiting for its thread after this long means the node cannot run
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
                .max_blocking_threads(MAX_HANDLER_THREADS)
                .thread_keep_alive(HANDLER_THREAD_KEEP_ALIVE)
                .enable_all()
                .build()
                .map_err(|e| format!("cannot start the scheduler's engine runtime: {e}"))
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// What a handler's thread hands back: its future's output, or the panic that ended it.
pub(crate) type Joined<T> = Result<T, Box<dyn std::any::Any + Send + 'static>>;

/// Runs handlers, each on a thread of its own, in the context of the application's runtime.
#[derive(Debug)]
pub(crate) struct HandlerThreads {
    /// The runtime handler futures belong to.
    context: Handle,
    /// The pool the threads come from (the engine runtime's blocking pool).
    pool: Handle,
    /// Handlers dispatched and not yet on their thread, with when they were dispatched.
    waiting: Mutex<HashMap<u64, Instant>>,
    next: AtomicU64,
}

impl HandlerThreads {
    /// Handlers run in the context of `context` (the application's runtime; `None`: the
    /// engine's own), on threads of `pool`'s blocking pool.
    pub(crate) fn new(context: Option<Handle>, pool: Handle) -> Self {
        Self {
            context: context.unwrap_or_else(|| pool.clone()),
            pool,
            waiting: Mutex::new(HashMap::new()),
            next: AtomicU64::new(0),
        }
    }

    /// Polls `future` to its end on a thread of its own; the receiver gets its output, or its
    /// panic. Dropping the receiver does not stop the future (close its gate for that).
    pub(crate) fn spawn<F>(
        self: &std::sync::Arc<Self>,
        future: F,
    ) -> oneshot::Receiver<Joined<F::Output>>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let (done, joined) = oneshot::channel();
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.waiting_map().insert(id, Instant::now());
        let threads = std::sync::Arc::clone(self);
        self.pool.spawn_blocking(move || {
            threads.waiting_map().remove(&id);
            let context = threads.context.clone();
            drop(threads);
            let out = std::panic::catch_unwind(AssertUnwindSafe(|| context.block_on(future)));
            let _ = done.send(out);
        });
        joined
    }

    /// Whether a handler dispatched more than [`LATE_START`] ago still waits for its thread.
    pub(crate) fn late_start(&self) -> bool {
        let now = Instant::now();
        self.waiting_map()
            .values()
            .any(|at| now.saturating_duration_since(*at) > LATE_START)
    }

    fn waiting_map(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Instant>> {
        self.waiting.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::AtomicUsize;

    use super::*;

    #[test]
    fn blocked_handlers_hold_only_their_own_threads() {
        let runtime = engine().unwrap();
        let app = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let threads = Arc::new(HandlerThreads::new(
            Some(app.handle().clone()),
            runtime.handle().clone(),
        ));
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
        release.wait();
        for joined in blocked {
            runtime.block_on(joined).unwrap().unwrap();
        }
    }

    #[test]
    fn a_panic_is_handed_back() {
        let runtime = engine().unwrap();
        let threads = Arc::new(HandlerThreads::new(None, runtime.handle().clone()));
        let joined = runtime
            .block_on(threads.spawn(async { panic!("boom") }))
            .unwrap();
        let payload = joined.unwrap_err();
        assert_eq!(payload.downcast_ref::<&str>(), Some(&"boom"));
    }
}
