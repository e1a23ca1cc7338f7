//! An in-process run: the handler on a thread of the node's handler pool (see
//! [`super::super::runtime`]) behind its lock's poll gate. A handler parked at an `.await` is
//! stopped by closing the gate; one that blocks its thread cannot be stopped, and the process
//! stops itself rather than let it outlive its lock (see [`super::super::failstop`]).

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::super::Shared;
use super::super::failstop;
use super::super::gate::{Gated, Stopped};
use super::super::outcome::{Ending, StopReason};
use super::super::runtime::Joined;
use super::super::watchdog::{Lease, LockLoss};
use super::{Running, Timeout, drive, far};
use crate::TaskContext;
use crate::registry::TaskDescriptor;
use crate::store::ClaimedRun;

/// Runs the handler until it returns or is stopped; returns how it ended, why it was asked to
/// stop (if it was), and the lease.
pub(super) async fn execute(
    shared: &Arc<Shared>,
    claimed: &ClaimedRun,
    descriptor: &'static TaskDescriptor,
    lease: Lease,
) -> (Ending, Option<StopReason>, Lease) {
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
    let handler = descriptor.handler;
    let settings = shared.settings.task_settings(&descriptor.options);
    let timeout = Timeout::of(settings.timeout, Instant::now());
    let gate = Arc::clone(lease.gate());
    // Calling the handler inside the future means even a panic while building it is caught.
    let join = shared
        .handlers()
        .spawn(Gated::new(async move { handler(ctx).await }, gate).in_current_span());
    let mut running = OnItsThread {
        claimed,
        cancel,
        join,
    };
    drive(shared, &mut running, timeout, lease).await
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

/// What a handler's gated future returns.
type HandlerOutput = Result<Result<(), crate::registry::TaskError>, Stopped>;

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
        Ok(Ok(Ok(result))) => Ending::Returned(result),
        Ok(Ok(Err(Stopped))) => Ending::Stopped(None),
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
