//! Runs a claimed run's handler until it returns or is stopped, wherever the task says it runs:
//! on a thread of the node's handler pool ([`in_process`], the default) or in a child process
//! of its own ([`isolated`], `isolation = "process"`).
//!
//! Both apply the same stop rules, and report them the same way (how the handler ended, why it
//! was asked to stop) for [`outcome::decide`](super::outcome::decide) to judge:
//!
//! | event | asked to stop | stopped by force |
//! |---|---|---|
//! | node shutdown | at once (`ctx.cancelled()`; SIGTERM to a child) | when the shutdown timeout ends |
//! | timeout | at the timeout | a grace later: a tenth of the timeout, 100 ms to 10 s |
//! | lock lost (not renewable) | at once | before the lock could expire (`Lease::stop_at`) |
//! | lock taken over | at once | at once |
//! | an operator's cancel (through the lease) | at once | [`CANCEL_GRACE`] later (10 s) |
//!
//! "Stopped by force" differs: a child process is killed (SIGKILL to its process group), which
//! always works; an in-process handler is stopped at its next `.await` (its gate closes), and one
//! that never reaches an `.await` cannot be stopped at all: the process stops itself before the
//! lock could pass to another node ([`super::failstop`]).
//!
//! The rules live once, in [`drive`]; each place a handler runs says only how to wait for its
//! end, how to ask it to stop and how to stop it by force ([`Running`]).
//!
//! Before that, a run claimed ahead waits for its tick ([`Waiting`]): an in-process handler on
//! the handler pool, which starts it on the tick by itself; a child process from here.

mod in_process;
#[cfg(unix)]
mod isolated;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::OwnedSemaphorePermit;
use tokio::time::Instant;

use super::outcome::{Ending, StopReason};
use super::shared::Shared;
use super::slots::{Slot, Stalled};
use super::watchdog::{Lease, LockLoss};
pub(super) use crate::operate::CANCEL_GRACE;
use crate::policy::Isolation;
use crate::registry::TaskDescriptor;
use crate::run_log::RunLogLines;
use crate::store::{Cancellation, ClaimedRun};

/// Where an isolated run's log lines go; `None` for an in-process run (its span is captured).
pub(super) type ChildLog = Option<RunLogLines>;

/// A claimed run waiting for its tick.
pub(super) struct Waiting(Wait);

enum Wait {
    /// Handed to the node's handler pool, which starts it on its tick.
    OnThePool(&'static TaskDescriptor, in_process::Dispatched),
    /// Started from here at this instant, with this handler slot: a child process, or a task
    /// not registered here.
    FromHere(Instant, Option<Slot>),
    /// Started from here, holding its slot until it ends.
    Started { _slot: OwnedSemaphorePermit },
}

impl Waiting {
    /// Readies `claimed` to start at `start_at`: an in-process handler is handed to the pool
    /// now, with everything it needs, so nothing of the engine's stands between its tick and
    /// its start.
    pub(super) fn prepare(
        shared: &Arc<Shared>,
        claimed: &ClaimedRun,
        lease: &Lease,
        start_at: Instant,
        slot: Slot,
    ) -> Self {
        match shared.registry.get(&claimed.task_name) {
            Some(descriptor) if descriptor.options.isolation != Some(Isolation::Process) => {
                let dispatched =
                    in_process::dispatch(shared, claimed, descriptor, lease, start_at, slot);
                Waiting(Wait::OnThePool(descriptor, dispatched))
            }
            _ => Waiting(Wait::FromHere(start_at, Some(slot))),
        }
    }

    /// Waits for the run's start: when it started, or why it never will (a drain began, an
    /// operator cancelled it).
    pub(super) async fn began(
        &mut self,
        shared: &Shared,
        lease: &Lease,
    ) -> Result<Instant, StopReason> {
        match &mut self.0 {
            Wait::OnThePool(_, dispatched) => dispatched.began(shared, lease).await,
            Wait::Started { .. } => Ok(Instant::now()),
            Wait::FromHere(start_at, slot) => {
                let Some(slot) = slot.take() else {
                    return Err(StopReason::Shutdown);
                };
                // Boxed: a timer is large, and thousands of runs wait on the pool's instead.
                let permit = Box::pin(from_here(shared, lease, *start_at, slot)).await?;
                self.0 = Wait::Started { _slot: permit };
                Ok(Instant::now())
            }
        }
    }

    /// Runs the started handler (started at `started`) until it returns or is stopped; returns
    /// how it ended, why it was asked to stop (if it was), and the lease. `log` receives an
    /// isolated child's output.
    pub(super) async fn run(
        self,
        shared: &Arc<Shared>,
        claimed: &ClaimedRun,
        lease: Lease,
        started: Instant,
        log: ChildLog,
    ) -> (Ending, Option<StopReason>, Lease) {
        match self.0 {
            Wait::OnThePool(descriptor, dispatched) => {
                dispatched
                    .run(shared, claimed, descriptor, lease, started)
                    .await
            }
            Wait::FromHere(..) | Wait::Started { .. } => {
                // The slot (held since the start) is given back with the handler's end.
                let _slot = self.0;
                execute(shared, claimed, lease, log).await
            }
        }
    }
}

/// Waits for the start of a run started from here: its tick, then its handler slot; the slot,
/// or why the run never starts (a drain began, an operator cancelled it).
async fn from_here(
    shared: &Shared,
    lease: &Lease,
    start_at: Instant,
    slot: Slot,
) -> Result<OwnedSemaphorePermit, StopReason> {
    if start_at > Instant::now() {
        tokio::select! {
            () = tokio::time::sleep_until(start_at) => {}
            () = shared.handlers_cancel.cancelled() => {}
            request = lease.cancel_requested() => {
                return Err(StopReason::Cancelled(request.by));
            }
        }
    }
    let permit = tokio::select! {
        biased;
        () = shared.handlers_cancel.cancelled() => return Err(StopReason::Shutdown),
        request = lease.cancel_requested() => {
            return Err(StopReason::Cancelled(request.by));
        }
        taken = slot.take(shared.settings.lock_lifetime) => match taken {
            Ok(permit) => permit,
            Err(Stalled(waited)) => return Err(StopReason::NoSlot(waited)),
        },
    };
    if shared.handlers_cancel.is_cancelled() {
        return Err(StopReason::Shutdown);
    }
    Ok(permit)
}

/// Runs `claimed`'s handler in a child process until it ends or is stopped; returns how it
/// ended, why it was asked to stop (if it was), and the lease. `log` receives the child's
/// output. (An in-process handler is run by the pool, see [`Waiting::prepare`].)
async fn execute(
    shared: &Arc<Shared>,
    claimed: &ClaimedRun,
    lease: Lease,
    log: ChildLog,
) -> (Ending, Option<StopReason>, Lease) {
    let Some(descriptor) = shared.registry.get(&claimed.task_name) else {
        // Claims are filtered by the registered names, so this is a bug, not a user error.
        return (
            Ending::Returned(Err("task is not registered on this node".into())),
            None,
            lease,
        );
    };
    match (descriptor.options.isolation, log) {
        #[cfg(unix)]
        (Some(Isolation::Process), Some(log)) => {
            isolated::execute(shared, claimed, descriptor, lease, log).await
        }
        #[cfg(not(unix))]
        (Some(Isolation::Process), _) => (
            Ending::Crashed(
                "process isolation needs a Unix system: the run was not started".into(),
            ),
            None,
            lease,
        ),
        // An in-process task (handed to the pool by `Waiting::prepare`, never here), or an
        // isolated one without a log (the runner always gives it one): a bug, not a user error.
        _ => (
            Ending::Crashed("internal error: the run was not started (no way to run it)".into()),
            None,
            lease,
        ),
    }
}

/// Whether runs of `task` run in a child process (and so need a log fed from outside).
pub(super) fn is_isolated(shared: &Shared, task: &str) -> bool {
    shared
        .registry
        .get(task)
        .is_some_and(|d| d.options.isolation == Some(Isolation::Process))
}

/// A run's timeout: when the handler is asked to stop, and when it is stopped by force.
#[derive(Debug, Clone, Copy)]
struct Timeout {
    limit: Duration,
    ask_at: Instant,
    force_at: Instant,
}

impl Timeout {
    /// The timeout `limit` of a run that started at `started`; past it the handler is asked to
    /// stop, and a grace later (a tenth of it, 100 ms to 10 s) stopped by force.
    fn of(limit: Option<Duration>, started: Instant) -> Option<Self> {
        limit.map(|limit| {
            let grace = (limit / 10).clamp(Duration::from_millis(100), Duration::from_secs(10));
            Timeout {
                limit,
                ask_at: started + limit,
                force_at: started + limit + grace,
            }
        })
    }
}

/// An operator's cancel of a running run: who asked, and when its grace runs out.
#[derive(Debug, Clone)]
struct Cancelled {
    by: String,
    force_at: Instant,
}

impl Cancelled {
    /// A cancel heard now: the handler is stopped by force [`CANCEL_GRACE`] from now.
    fn now(request: Cancellation) -> Self {
        Cancelled {
            by: request.by,
            force_at: Instant::now() + CANCEL_GRACE,
        }
    }

    /// Why the run was asked to stop, as the outcome sees it: a cancel outranks every other
    /// reason (a shutdown or a timeout may have come first; the operator still asked for the
    /// tick not to run again), though not their deadlines, which the loops keep.
    fn outranks(cancelled: Option<Self>, stop: Option<StopReason>) -> Option<StopReason> {
        match cancelled {
            Some(c) => Some(StopReason::Cancelled(c.by)),
            None => stop,
        }
    }
}

/// An instant so far ahead it never comes (for a `select!` branch that is switched off).
fn far() -> Instant {
    Instant::now() + Duration::from_secs(86_400 * 365)
}

/// A started handler, as the stop rules see it, wherever it runs.
trait Running: Send {
    /// What it is, for log lines ("the handler", "the run's process").
    const WHAT: &'static str;

    /// Waits for it to end by itself. Cancel-safe: dropped and called again by the loop.
    fn ended(&mut self) -> impl Future<Output = Ending> + Send;

    /// Asks it to stop (`ctx.cancelled()` fires; SIGTERM to a child). Called again is harmless.
    fn ask(&mut self);

    /// Stops it by force and waits until it is gone; `lost` says why the lock can no longer be
    /// trusted, if that is why (an in-process handler that cannot be stopped is waited for only
    /// while its lock can still be kept).
    fn force(
        &mut self,
        lease: &mut Lease,
        lost: Option<LockLoss>,
    ) -> impl Future<Output = Ending> + Send;
}

/// Applies the stop rules (the table above) to `running` until it ends: returns how it ended,
/// why it was asked to stop (if it was), and the lease.
async fn drive<R: Running>(
    shared: &Shared,
    running: &mut R,
    timeout: Option<Timeout>,
    mut lease: Lease,
) -> (Ending, Option<StopReason>, Lease) {
    let what = R::WHAT;
    let mut stop: Option<StopReason> = None;
    let mut lock_lost = false;
    let mut timed_out = false;
    let mut cancelled: Option<Cancelled> = None;
    // Why the lock can no longer be trusted, for a stop by force.
    let loss_of = |stop: &Option<StopReason>| match stop {
        Some(StopReason::LockLost(loss)) => Some(loss.clone()),
        _ => None,
    };
    let ending = loop {
        let stop_at = lease.stop_at();
        tokio::select! {
            ending = running.ended() => break ending,
            request = lease.cancel_requested(), if cancelled.is_none() => {
                tracing::warn!(by = %request.by, grace = ?CANCEL_GRACE, "the run was cancelled: asking {what} to stop");
                running.ask();
                cancelled = Some(Cancelled::now(request));
            }
            _ = tokio::time::sleep_until(cancelled.as_ref().map_or_else(far, |c| c.force_at)), if cancelled.is_some() => {
                tracing::warn!("the cancelled run's {what} did not stop within the grace: stopping it by force");
                break running.force(&mut lease, loss_of(&stop)).await;
            }
            loss = lease.lost(), if !lock_lost => {
                lock_lost = true;
                let taken_over = loss == LockLoss::TakenOver;
                shared.metrics.lock_lost(taken_over);
                stop = Some(StopReason::LockLost(loss.clone()));
                if taken_over {
                    // Somebody else may already be running it: not one more step.
                    tracing::error!(reason = %loss.describe(), "stopping {what} by force: its lock was taken over");
                    break running.force(&mut lease, Some(loss)).await;
                }
                tracing::error!(reason = %loss.describe(), "asking {what} to stop: its lock can no longer be trusted");
                running.ask();
            }
            // Whatever else is going on (a drain, too), a lost lock's deadline stands.
            _ = tokio::time::sleep_until(stop_at), if lock_lost => {
                if Instant::now() >= lease.stop_at() {
                    tracing::error!("stopping {what} by force before its lock could expire");
                    break running.force(&mut lease, loss_of(&stop)).await;
                }
            }
            _ = tokio::time::sleep_until(timeout.map_or_else(far, |t| t.ask_at)), if timeout.is_some() && !timed_out => {
                timed_out = true;
                let limit = timeout.expect("guarded").limit;
                tracing::warn!(timeout = ?limit, "the run exceeded its timeout: asking {what} to stop");
                stop.get_or_insert(StopReason::Timeout(limit));
                running.ask();
            }
            _ = tokio::time::sleep_until(timeout.map_or_else(far, |t| t.force_at)), if timed_out => {
                tracing::warn!("{what} did not stop after its timeout: stopping it by force");
                break running.force(&mut lease, None).await;
            }
            _ = shared.handlers_cancel.cancelled(), if stop.is_none() => {
                stop = Some(StopReason::Shutdown);
                running.ask();
            }
            _ = shared.hard_stop.cancelled() => {
                stop.get_or_insert(StopReason::Shutdown);
                tracing::warn!("{what} did not stop before the shutdown timeout: stopping it by force");
                break running.force(&mut lease, None).await;
            }
        }
    };
    // The handler may have seen the shutdown and ended in the same instant the loop would have
    // noticed it: the request counts all the same.
    if stop.is_none() && shared.handlers_cancel.is_cancelled() {
        stop = Some(StopReason::Shutdown);
    }
    (ending, Cancelled::outranks(cancelled, stop), lease)
}
