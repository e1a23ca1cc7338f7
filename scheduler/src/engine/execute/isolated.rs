//! An isolated run (`isolation = "process"`): the handler in a child process of this binary
//! ([`crate::isolation`]), while this node keeps the lock. Asking it to stop is SIGTERM (its
//! `ctx.cancelled()` fires); stopping it by force is SIGKILL to its process group, which always
//! works, so an isolated handler never needs the node to stop itself (no fail-stop): whatever
//! it does, the node outlives it.

use std::sync::Arc;

use tokio::time::Instant;

use super::super::Shared;
use super::super::outcome::{Ending, StopReason};
use super::super::watchdog::{Lease, LockLoss};
use super::{CANCEL_GRACE, Cancelled, Timeout, far};
use crate::isolation::{ChildCommand, ChildExit, ChildRun, RunIdentity};
use crate::registry::TaskDescriptor;
use crate::run_log::RunLogLines;
use crate::store::ClaimedRun;

pub(super) async fn execute(
    shared: &Arc<Shared>,
    claimed: &ClaimedRun,
    descriptor: &'static TaskDescriptor,
    mut lease: Lease,
    log: RunLogLines,
) -> (Ending, Option<StopReason>, Lease) {
    let settings = shared.settings.task_settings(&descriptor.options);
    let identity = RunIdentity::new(
        claimed.task_name.as_str(),
        claimed.run_id,
        claimed.scheduled_at,
        &*shared.node_id,
    )
    .attempt(claimed.attempt)
    .trigger(claimed.trigger);
    let started = Instant::now();
    let mut child = match ChildCommand::new(identity)
        .memory_limit(descriptor.options.memory_limit)
        .spawn(log)
        .await
    {
        Ok(child) => child,
        Err(error) => {
            tracing::error!(error = %error, "the run's process could not be started");
            return (Ending::Crashed(error.to_string()), None, lease);
        }
    };
    tracing::debug!(pid = child.pid(), "the run's process started");
    let timeout = Timeout::of(settings.timeout, started);
    let mut stop: Option<StopReason> = None;
    let mut lock_lost = false;
    let mut timed_out = false;
    let mut cancelled: Option<Cancelled> = None;
    let exit = loop {
        let stop_at = lease.stop_at();
        tokio::select! {
            exit = child.wait() => break exit,
            request = lease.cancel_requested(), if cancelled.is_none() => {
                tracing::warn!(by = %request.by, grace = ?CANCEL_GRACE, "the run was cancelled: asking its process to stop");
                ask(&mut child);
                cancelled = Some(Cancelled::now(request));
            }
            _ = tokio::time::sleep_until(cancelled.as_ref().map_or_else(far, |c| c.force_at)), if cancelled.is_some() => {
                tracing::warn!("the cancelled run's process did not stop within the grace: killing it");
                break kill(&mut child).await;
            }
            loss = lease.lost(), if !lock_lost => {
                lock_lost = true;
                let taken_over = loss == LockLoss::TakenOver;
                shared.metrics.lock_lost(taken_over);
                stop = Some(StopReason::LockLost(loss.clone()));
                if taken_over {
                    // Somebody else may already be running it: not one more instant.
                    tracing::error!(reason = %loss.describe(), "killing the run's process: its lock was taken over");
                    break kill(&mut child).await;
                }
                tracing::error!(reason = %loss.describe(), "asking the run's process to stop: its lock can no longer be trusted");
                ask(&mut child);
            }
            // Whatever else is going on (a drain, too), a lost lock's deadline stands.
            _ = tokio::time::sleep_until(stop_at), if lock_lost => {
                if Instant::now() >= lease.stop_at() {
                    tracing::error!("killing the run's process before its lock could expire");
                    break kill(&mut child).await;
                }
            }
            _ = tokio::time::sleep_until(timeout.map_or_else(far, |t| t.ask_at)), if timeout.is_some() && !timed_out => {
                timed_out = true;
                let limit = timeout.expect("guarded").limit;
                tracing::warn!(timeout = ?limit, "the run exceeded its timeout: asking its process to stop");
                stop.get_or_insert(StopReason::Timeout(limit));
                ask(&mut child);
            }
            _ = tokio::time::sleep_until(timeout.map_or_else(far, |t| t.force_at)), if timed_out => {
                tracing::warn!("the run's process did not stop after its timeout: killing it");
                break kill(&mut child).await;
            }
            _ = shared.handlers_cancel.cancelled(), if stop.is_none() => {
                stop = Some(StopReason::Shutdown);
                ask(&mut child);
            }
            _ = shared.hard_stop.cancelled() => {
                stop.get_or_insert(StopReason::Shutdown);
                tracing::warn!("the run's process did not stop before the shutdown timeout: killing it");
                break kill(&mut child).await;
            }
        }
    };
    if stop.is_none() && shared.handlers_cancel.is_cancelled() {
        stop = Some(StopReason::Shutdown);
    }
    (ending_of(exit), Cancelled::outranks(cancelled, stop), lease)
}

/// Asks the child to stop (SIGTERM: its `ctx.cancelled()` fires).
fn ask(child: &mut ChildRun) {
    if let Err(error) = child.terminate() {
        tracing::warn!(error = %error, "cannot signal the run's process");
    }
}

/// Stops the child by force (SIGKILL to its process group) and waits for it.
async fn kill(child: &mut ChildRun) -> ChildExit {
    if let Err(error) = child.kill() {
        tracing::error!(error = %error, "cannot kill the run's process");
    }
    child.wait().await
}

/// How the run ended, from how its child did: the handler's own verdict when it gave one; a
/// signal the node sent is a stop by force; anything else that ended the process (a crash, an
/// abort, running out of memory, an early exit, failing to start) a failure with what happened.
fn ending_of(exit: ChildExit) -> Ending {
    match exit {
        ChildExit::Succeeded => Ending::Returned(Ok(())),
        ChildExit::Failed { error } => Ending::Returned(Err(error.into())),
        ChildExit::Panicked { message } => Ending::Panicked(message),
        ChildExit::Signalled {
            sent_by_node: true, ..
        } => Ending::Stopped(Some(exit.to_string())),
        ChildExit::NotStarted { .. }
        | ChildExit::OutOfMemory { .. }
        | ChildExit::Signalled { .. }
        | ChildExit::Exited { .. } => Ending::Crashed(exit.to_string()),
    }
}
