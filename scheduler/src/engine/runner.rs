//! Runs one claimed run: the handler in its own tokio task holding a lock lease, panics
//! caught, the outcome recorded, the lock released.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::OwnedSemaphorePermit;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::Shared;
use super::completer::Completion;
use super::watchdog::LockLoss;
use crate::TaskContext;
use crate::error::error_chain;
use crate::store::{ClaimedRun, RunOutcome, RunStatus};

/// How long a handler may take to stop after it was told its lock is lost, at most.
const LOST_GRACE_MAX: Duration = Duration::from_secs(5);

/// Runs `claimed` holding one handler slot (`permit`), freed as soon as the handler is done so
/// the claim loop can refill it while the outcome is being recorded.
pub(crate) async fn run(
    shared: Arc<Shared>,
    claimed: ClaimedRun,
    confirmed_at: Instant,
    permit: OwnedSemaphorePermit,
) {
    let span = tracing::info_span!(
        "task_run",
        task = %claimed.task_name,
        run_id = claimed.run_id,
        scheduled_at = %claimed.scheduled_at,
        node = %shared.node_id,
    );
    async move {
        let started = Instant::now();
        if claimed.ticks_collapsed > 0 {
            tracing::info!(ticks_collapsed = claimed.ticks_collapsed, "run started (missed ticks folded into this run)");
        } else {
            tracing::info!("run started");
        }
        let (status, error) = execute(&shared, &claimed, confirmed_at).await;
        drop(permit);
        shared.wake.notify_one();
        let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        match status {
            RunStatus::Succeeded => tracing::info!(duration_ms, result = %status, "run finished"),
            _ => tracing::warn!(duration_ms, result = %status, error = error.as_deref().unwrap_or(""), "run finished"),
        }
        let outcome = RunOutcome {
            run_id: claimed.run_id,
            task_name: claimed.task_name.clone(),
            lock_token: claimed.lock_token,
            status,
            error,
            hand_over: (status == RunStatus::Cancelled).then_some(claimed.scheduled_at),
        };
        record(&shared, outcome).await;
    }
    .instrument(span)
    .await
}

async fn execute(
    shared: &Arc<Shared>,
    claimed: &ClaimedRun,
    confirmed_at: Instant,
) -> (RunStatus, Option<String>) {
    let Some(descriptor) = shared.registry.get(&claimed.task_name) else {
        // Claims are filtered by the registered names, so this is a bug, not a user error.
        return (
            RunStatus::Failed,
            Some("task is not registered on this node".into()),
        );
    };
    let cancel = shared.handlers_cancel.child_token();
    let ctx = TaskContext::new(
        Arc::from(claimed.task_name.as_str()),
        claimed.run_id,
        claimed.scheduled_at,
        Arc::clone(&shared.node_id),
        cancel.clone(),
        shared.state.clone(),
    );
    let handler = descriptor.handler;
    // Calling the handler inside the spawned task means even a panic while building the future is
    // caught as a JoinError.
    let mut handle = tokio::spawn(async move { handler(ctx).await }.in_current_span());
    let mut lease = shared.watchdog.hold(
        claimed.run_id,
        &claimed.task_name,
        claimed.lock_token,
        confirmed_at,
    );
    tokio::select! {
        joined = &mut handle => from_join(joined),
        loss = lease.lost() => {
            tracing::error!(reason = %loss.describe(), "stopping the handler: its lock can no longer be trusted");
            stop_after_loss(&cancel, &mut handle, &loss, shared.settings.lock_lifetime).await;
            (RunStatus::Lost, Some(loss.describe()))
        }
        _ = shared.hard_stop.cancelled() => {
            handle.abort();
            let _ = handle.await;
            (RunStatus::Cancelled, Some("node shut down before the handler finished; handed over".into()))
        }
    }
}

/// Tells the handler to stop, gives it a short grace, then aborts it. The watchdog's deadline
/// already keeps a margin before the lock's expiry in the database.
async fn stop_after_loss(
    cancel: &CancellationToken,
    handle: &mut tokio::task::JoinHandle<Result<(), crate::registry::TaskError>>,
    loss: &LockLoss,
    lifetime: Duration,
) {
    cancel.cancel();
    let grace = match loss {
        // Somebody else may already be running it: stop at once.
        LockLoss::TakenOver => Duration::ZERO,
        LockLoss::Unrenewable(_) => (lifetime / 20).min(LOST_GRACE_MAX),
    };
    if tokio::time::timeout(grace, &mut *handle).await.is_err() {
        handle.abort();
        let _ = (&mut *handle).await;
    }
}

fn from_join(
    joined: Result<Result<(), crate::registry::TaskError>, tokio::task::JoinError>,
) -> (RunStatus, Option<String>) {
    match joined {
        Ok(Ok(())) => (RunStatus::Succeeded, None),
        Ok(Err(e)) => (RunStatus::Failed, Some(error_chain(&*e))),
        Err(e) if e.is_panic() => {
            let payload = e.into_panic();
            let msg = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "non-string panic payload".into());
            (RunStatus::Failed, Some(format!("handler panicked: {msg}")))
        }
        Err(_) => (RunStatus::Cancelled, Some("handler was cancelled".into())),
    }
}

/// Hands the outcome to the completer and waits until it is recorded (or given up on).
async fn record(shared: &Shared, outcome: RunOutcome) {
    let (recorded, done) = tokio::sync::oneshot::channel();
    if shared
        .completions
        .send(Completion { outcome, recorded })
        .is_ok()
    {
        let _ = done.await;
    }
}
