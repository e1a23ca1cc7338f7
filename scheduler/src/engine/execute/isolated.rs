//! An isolated run (`isolation = "process"`): the handler in a child process of this binary
//! ([`crate::isolation`]), while this node keeps the lock. Asking it to stop is SIGTERM (its
//! `ctx.cancelled()` fires); stopping it by force is SIGKILL to its process group, which always
//! works, so an isolated handler never needs the node to stop itself (no fail-stop): whatever
//! it does, the node outlives it.

use std::sync::Arc;

use tokio::time::Instant;

use super::super::outcome::{Ending, StopReason};
use super::super::shared::Shared;
use super::super::watchdog::{Lease, LockLoss};
use super::{Running, Timeout, drive};
use crate::isolation::{ChildCommand, ChildExit, ChildRun, RunIdentity};
use crate::registry::TaskDescriptor;
use crate::run_log::RunLogLines;
use crate::store::ClaimedRun;

pub(super) async fn execute(
    shared: &Arc<Shared>,
    claimed: &ClaimedRun,
    descriptor: &'static TaskDescriptor,
    lease: Lease,
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
    .trigger(claimed.trigger)
    .fencing_token(u64::try_from(claimed.fencing_token).unwrap_or(0))
    .shard(claimed.shard)
    .args(claimed.args.clone());
    let started = Instant::now();
    let child = match ChildCommand::new(identity)
        .memory_limit(descriptor.options.memory_limit)
        .max_processes(descriptor.options.max_processes)
        .cpu_limit(descriptor.options.cpu_limit)
        .max_file_size(descriptor.options.max_file_size)
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
    drive(shared, &mut InAChild(child), timeout, lease).await
}

/// A handler in a child process.
struct InAChild(ChildRun);

impl Running for InAChild {
    const WHAT: &'static str = "the run's process";

    async fn ended(&mut self) -> Ending {
        ending_of(self.0.wait().await)
    }

    fn ask(&mut self) {
        ask(&mut self.0);
    }

    /// SIGKILL always works: whatever the lock's state, the child is gone when this returns.
    async fn force(&mut self, _: &mut Lease, _: Option<LockLoss>) -> Ending {
        ending_of(kill(&mut self.0).await)
    }
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
