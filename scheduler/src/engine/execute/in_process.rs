//! An in-process run: the handler on a thread of the node's handler pool (see
//! [`super::super::runtime`]) behind its lock's poll gate. A handler parked at an `.await` is
//! stopped by closing the gate; one that blocks its thread cannot be stopped, and the process
//! stops itself rather than let it outlive its lock (see [`super::super::failstop`]).
//!
//! A run claimed ahead of its tick is handed to the pool at once ([`dispatch`]) and started
//! there on the tick by the pool's thread, unless the engine calls it off first (a drain, an
//! operator's cancel): one atomic step ([`StartLine`]) decides which of the two came first, so
//! a run is either started or handed back, never both.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::super::failstop;
use super::super::gate::{Gated, Stopped};
use super::super::outcome::{Ending, StopReason};
use super::super::runtime::Joined;
use super::super::shared::Shared;
use super::super::slots::{Slot, Stalled};
use super::super::watchdog::{Lease, LockLoss};
use super::{Running, Timeout, drive, far};
use crate::TaskContext;
use crate::registry::TaskDescriptor;
use crate::store::ClaimedRun;

/// Hands the handler to the pool, to start at `start_at` with its handler slot (taken there
/// when the run was claimed ahead) unless it is called off before; a run due already with its
/// slot held is started now (the pool polls it as soon as it can).
pub(super) fn dispatch(
    shared: &Arc<Shared>,
    claimed: &ClaimedRun,
    descriptor: &'static TaskDescriptor,
    lease: &Lease,
    start_at: Instant,
    slot: Slot,
) -> Dispatched {
    let cancel = shared.handlers_cancel.child_token();
    let ctx = TaskContext::new(
        Arc::from(descriptor.name),
        claimed.run_id,
        claimed.scheduled_at,
        Arc::clone(&shared.node_id),
        cancel.clone(),
        shared.state.clone(),
    )
    .with_fencing_token(u64::try_from(claimed.fencing_token).unwrap_or(0))
    .with_shard(claimed.shard)
    .with_broadcast(crate::shard::row_node(&claimed.task_name).is_some());
    // An instance's run (`task/key`) reads its key and arguments; a manual run its override.
    let ctx = ctx.with_row_args(&claimed.task_name, claimed.args.clone());
    let handler = descriptor.handler;
    let gate = Arc::clone(lease.gate());
    let now = Instant::now();
    // Due already, its slot held and the node not draining: started now, as if from here.
    let started_now = (start_at <= now && slot.is_held() && !shared.handlers_cancel.is_cancelled())
        .then_some(now);
    let line = Arc::new(StartLine(AtomicU8::new(if started_now.is_some() {
        STARTED
    } else {
        WAITING
    })));
    let (began_tx, began) = tokio::sync::oneshot::channel();
    let draining = shared.handlers_cancel.clone();
    let stall = shared.settings.lock_lifetime;
    let its_line = Arc::clone(&line);
    let run = async move {
        // A drain that began before the tick hands the run back unstarted.
        if draining.is_cancelled() {
            its_line.call_off();
        }
        // Its slot, held until the handler's end (the future's): a run claimed ahead waits for
        // one on its tick, as long as the node's slots come free. (Boxed: only the runs on their
        // tick wait so, not the thousands waiting for it.)
        let slot = tokio::select! {
            biased;
            taken = Box::pin(slot.take(stall)) => match taken {
                Ok(permit) => permit,
                Err(Stalled(waited)) => {
                    if its_line.call_off() {
                        let _ = began_tx.send(Err(StopReason::NoSlot(waited)));
                    }
                    return None;
                }
            },
            () = draining.cancelled() => {
                its_line.call_off();
                return None;
            }
        };
        if !its_line.start() {
            return None;
        }
        if started_now.is_none() {
            let _ = began_tx.send(Ok(Instant::now()));
        }
        // Calling the handler inside the future means even a panic while building it is caught.
        let ended = Gated::new(async move { handler(ctx).await }, gate).await;
        drop(slot);
        Some(ended)
    };
    let join = shared.handlers().spawn_at(start_at, run.in_current_span());
    Dispatched {
        line,
        started_now,
        began,
        cancel,
        join,
    }
}

/// Whether a dispatched run has started: on the tick the pool's thread moves it from
/// [`WAITING`] to [`STARTED`] (to [`CALLED_OFF`] if the node drains), the engine to
/// [`CALLED_OFF`] before it (a drain, an operator's cancel); the first to move decides. A run
/// due when it was dispatched is [`STARTED`] from the first.
#[derive(Debug)]
struct StartLine(AtomicU8);

const WAITING: u8 = 0;
const STARTED: u8 = 1;
const CALLED_OFF: u8 = 2;

impl StartLine {
    /// True if the run is started (now, or by the engine when it was dispatched).
    fn start(&self) -> bool {
        match self
            .0
            .compare_exchange(WAITING, STARTED, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) | Err(STARTED) => true,
            Err(_) => false,
        }
    }

    fn call_off(&self) -> bool {
        self.0
            .compare_exchange(WAITING, CALLED_OFF, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }
}

/// A handler handed to the pool, waiting for its tick there.
pub(super) struct Dispatched {
    line: Arc<StartLine>,
    /// Due when it was dispatched: started then.
    started_now: Option<Instant>,
    /// When the pool's thread started it (a run dispatched ahead of its tick), or why it
    /// called it off (no slot came free).
    began: tokio::sync::oneshot::Receiver<Result<Instant, StopReason>>,
    /// Its `ctx.cancelled()`.
    cancel: CancellationToken,
    join: HandlerJoin,
}

impl Dispatched {
    /// Waits until the handler starts (when) or is called off before it could (why): a drain
    /// that begins, or an operator's cancel.
    pub(super) async fn began(
        &mut self,
        shared: &Shared,
        lease: &Lease,
    ) -> Result<Instant, StopReason> {
        if let Some(at) = self.started_now {
            return Ok(at);
        }
        // The pool's word wakes this task (a drain or a cancel before it calls the run off).
        let called_off = tokio::select! {
            at = &mut self.began => return at.unwrap_or(Err(StopReason::Shutdown)),
            () = shared.handlers_cancel.cancelled() => StopReason::Shutdown,
            request = lease.cancel_requested() => StopReason::Cancelled(request.by),
        };
        if self.line.call_off() {
            return Err(called_off);
        }
        // The pool's thread moved first: started (the stop rules see the drain or the cancel
        // next), or called off by the drain or for want of a slot.
        (&mut self.began).await.unwrap_or(Err(StopReason::Shutdown))
    }

    /// Runs the started handler (started at `started`) until it returns or is stopped; returns
    /// how it ended, why it was asked to stop (if it was), and the lease.
    pub(super) async fn run(
        self,
        shared: &Arc<Shared>,
        claimed: &ClaimedRun,
        descriptor: &'static TaskDescriptor,
        lease: Lease,
        started: Instant,
    ) -> (Ending, Option<StopReason>, Lease) {
        let settings = shared.settings.task_settings(&descriptor.options);
        let timeout = Timeout::of(settings.timeout, started);
        let mut running = OnItsThread {
            claimed,
            cancel: self.cancel,
            join: self.join,
        };
        drive(shared, &mut running, timeout, lease).await
    }
}

/// A handler on a thread of the node's pool.
struct OnItsThread<'a> {
    claimed: &'a ClaimedRun,
    /// Its `ctx.cancelled()`.
    cancel: CancellationToken,
    join: HandlerJoin,
}

impl Running for OnItsThread<'_> {
    const WHAT: &'static str = "the handler";

    async fn ended(&mut self) -> Ending {
        from_join((&mut self.join).await)
    }

    fn ask(&mut self) {
        self.cancel.cancel();
    }

    async fn force(&mut self, lease: &mut Lease, lost: Option<LockLoss>) -> Ending {
        hard_stop(self.claimed, lease, &mut self.join, lost).await
    }
}

/// What a dispatched handler's future returns: `None` if it was called off before its start,
/// else what its gated future returned.
type HandlerOutput = Option<Result<Result<(), crate::registry::TaskError>, Stopped>>;

/// Where a handler's thread hands back what it returned.
type HandlerJoin = tokio::sync::oneshot::Receiver<Joined<HandlerOutput>>;

/// How long a handler whose lock was found taken over may take to leave its poll before the
/// process stops itself: another node may be running the task already.
const TAKEN_OVER_WAIT: Duration = Duration::from_millis(50);

/// Closes the gate, which stops a handler parked at an `.await` at once, and waits for the
/// handler to be gone. A handler that blocks its thread cannot be stopped: it is waited for as
/// long as its lock is kept (renewals go on while the database answers and the node runs); once
/// the lock cannot be kept (`lost` now or later: not renewed past its fail-stop deadline, or
/// taken over), the process stops itself (see [`failstop`]).
async fn hard_stop(
    claimed: &ClaimedRun,
    lease: &mut Lease,
    handle: &mut HandlerJoin,
    mut lost: Option<LockLoss>,
) -> Ending {
    let gate = Arc::clone(lease.gate());
    gate.close();
    let mut taken_over_at = matches!(lost, Some(LockLoss::TakenOver)).then(Instant::now);
    let mut reported = false;
    let report_at = Instant::now() + Duration::from_secs(1);
    let far = far();
    let mut recheck = Instant::now();
    let joined = loop {
        let fail_stop_at = match (&lost, taken_over_at) {
            (_, Some(at)) => at + TAKEN_OVER_WAIT,
            (Some(_), None) => lease.fail_stop_at(),
            (None, None) => far,
        };
        tokio::select! {
            joined = &mut *handle => break joined,
            loss = lease.lost(), if lost.is_none() => {
                if loss == LockLoss::TakenOver {
                    taken_over_at = Some(Instant::now());
                }
                lost = Some(loss);
            }
            _ = tokio::time::sleep_until(report_at), if !reported => {
                reported = true;
                tracing::error!(
                    "the handler did not stop when stopped: it is blocking its thread (CPU work \
                     or blocking I/O without an .await) and cannot be stopped until it yields; \
                     its lock is kept while the database answers, and the node stops itself if \
                     it cannot be"
                );
            }
            _ = tokio::time::sleep_until(fail_stop_at.max(recheck)), if lost.is_some() => {
                if taken_over_at.is_none() && Instant::now() < lease.fail_stop_at() {
                    continue; // renewed meanwhile (the database is back): the deadline moved on
                }
                if gate.blocked_for().is_none() {
                    // Parked at an .await: the closed gate never polls it again, and it is
                    // on its way out.
                    recheck = Instant::now() + Duration::from_millis(10);
                    continue;
                }
                let why = match lost.as_ref().expect("guarded") {
                    LockLoss::TakenOver => "another node released its lock".to_owned(),
                    LockLoss::Unrenewable(e) => {
                        format!("its lock could not be renewed before it could expire ({e})")
                    }
                };
                failstop::exit_now(&claimed.task_name, claimed.run_id, &why);
            }
        }
    };
    match from_join(joined) {
        // It returned in the same instant: its own result stands.
        Ending::Returned(r) => Ending::Returned(r),
        Ending::Panicked(p) => Ending::Panicked(p),
        _ => Ending::Stopped(None),
    }
}

fn from_join(
    joined: Result<Joined<HandlerOutput>, tokio::sync::oneshot::error::RecvError>,
) -> Ending {
    match joined {
        Ok(Ok(Some(Ok(result)))) => Ending::Returned(result),
        Ok(Ok(Some(Err(Stopped)))) => Ending::Stopped(None),
        Ok(Ok(None)) => Ending::NotStarted,
        Ok(Err(payload)) => {
            let msg = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "non-string panic payload".into());
            Ending::Panicked(msg)
        }
        // The thread went away without a word (its runtime shut down).
        Err(_) => Ending::Stopped(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pool's start on the tick and the engine's call-off (a drain, a cancel) race for one
    /// atomic step: exactly one of them wins, whatever the interleaving.
    #[test]
    fn a_dispatched_run_is_either_started_or_called_off_never_both() {
        for _ in 0..2_000 {
            let line = Arc::new(StartLine(AtomicU8::new(WAITING)));
            let barrier = Arc::new(std::sync::Barrier::new(2));
            let (pool_line, pool_barrier) = (Arc::clone(&line), Arc::clone(&barrier));
            let pool = std::thread::spawn(move || {
                pool_barrier.wait();
                pool_line.start()
            });
            barrier.wait();
            let called_off = line.call_off();
            let started = pool.join().unwrap();
            assert!(
                started != called_off,
                "started {started}, called off {called_off}"
            );
            assert!(!line.call_off(), "decided once");
            assert_eq!(line.start(), started, "decided once");
        }
        // Due when dispatched: started by the engine, and the pool cannot call it off.
        let line = StartLine(AtomicU8::new(STARTED));
        assert!(!line.call_off());
        assert!(line.start());
    }
}
