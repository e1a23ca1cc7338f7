//! The completer: records the end of runs in batches, as River's batch completer does. Each
//! runner hands over its outcome together with its lease and waits for the acknowledgement;
//! while one write is in flight, the next outcomes queue up and go out together, so a burst of
//! 1,000 finishing runs costs a handful of statements, not 1,000.
//!
//! An outcome is never silently dropped while the node runs: the lease keeps its lock renewed,
//! so no other node mistakes the finished run for a dead one while it waits.
//!
//! - A store that is unreachable is retried every quarter renew interval, as long as the node
//!   runs (the flush at shutdown has a deadline).
//! - A batch the store *rejects* (bad data) is split in halves until the one bad outcome is
//!   alone; that one is written again without its error text, and dropped (logged) only if even
//!   that is refused. One poisoned outcome never holds back the others.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Notify, mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::health::CatchUnwind;
use super::service::Care;
use super::watchdog::{Lease, LockWatchdog};
use crate::store::{RunFinish, Store, StoreError};

/// The most outcomes written in one statement.
const MAX_BATCH: usize = 1_000;

/// An outcome to record, the lease that keeps its lock alive until then, and who to tell.
pub(crate) struct Completion {
    pub(crate) finish: RunFinish,
    pub(crate) lease: Option<Lease>,
    pub(crate) recorded: oneshot::Sender<()>,
}

/// What the completer works with.
pub(crate) struct Completer {
    pub(crate) store: Arc<dyn Store>,
    /// Renews the locks of the runs whose outcomes wait, and is told which are being written.
    pub(crate) watchdog: Arc<LockWatchdog>,
    /// Wakes the claim loop after each batch.
    pub(crate) wake: Arc<Notify>,
    /// Cancelled at the very end of a shutdown: writes are no longer retried.
    pub(crate) flush_deadline: CancellationToken,
}

/// Runs until `stop` is cancelled; by then every runner has had its outcome acknowledged
/// (the engine stops the completer only after all runners finished).
///
/// A panic fail-stops the node (see `super::health`): the outcomes it held would be lost while
/// their runs' locks are no longer renewed, so it cannot just run again.
pub(crate) async fn run(
    completer: Completer,
    queue: mpsc::UnboundedReceiver<Completion>,
    stop: CancellationToken,
    care: &Care<'_>,
) {
    care.health.running(care.name);
    let work = std::pin::pin!(complete(&completer, queue, stop));
    match CatchUnwind(work).await {
        Ok(()) => care.health.ended(care.name),
        Err(message) => {
            super::service::report_panic(care, "recording the end of runs", &message, 1, false);
            (care.fail_stop)(
                care.name,
                &format!("panicked and cannot be restarted safely ({message})"),
            );
        }
    }
}

async fn complete(
    completer: &Completer,
    mut queue: mpsc::UnboundedReceiver<Completion>,
    stop: CancellationToken,
) {
    loop {
        let first = tokio::select! {
            next = queue.recv() => match next {
                Some(c) => c,
                None => return,
            },
            _ = stop.cancelled() => return,
        };
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match queue.try_recv() {
                Ok(c) => batch.push(c),
                Err(_) => break,
            }
        }
        super::health::injected_panic("completer");
        record(completer, &mut batch).await;
        for c in batch {
            drop(c.lease);
            let _ = c.recorded.send(());
        }
        completer.wake.notify_one();
    }
}

/// Writes `batch`, splitting it around rejected outcomes and retrying through outages until the
/// flush deadline of a shutdown.
async fn record(completer: &Completer, batch: &mut [Completion]) {
    let mut pending: Vec<(usize, usize)> = vec![(0, batch.len())];
    let mut failures = 0u32;
    while let Some((from, to)) = pending.pop() {
        let finishes: Vec<RunFinish> = batch[from..to].iter().map(|c| c.finish.clone()).collect();
        let runs = || finishes.iter().map(|f| f.run_id);
        completer.watchdog.writing(runs(), true);
        let written = completer.store.finish_runs(&finishes).await;
        if written.is_err() {
            completer.watchdog.writing(runs(), false);
        }
        match written {
            Ok(results) => {
                if failures > 0 {
                    tracing::info!(
                        runs = finishes.len(),
                        "recorded the end of runs after retrying"
                    );
                    failures = 0;
                }
                for r in results.iter().filter(|r| !r.lock_held) {
                    tracing::warn!(
                        run_id = r.run_id,
                        "another node had released the lock when the run's end was recorded"
                    );
                }
            }
            Err(e) if e.is_transient() => {
                if completer.flush_deadline.is_cancelled() {
                    tracing::error!(error = %e, runs = to - from, "gave up recording the end of runs at shutdown; other nodes will find their locks expired and treat the runs as lost");
                    continue;
                }
                if failures == 0 {
                    tracing::warn!(error = %e, runs = to - from, "could not record the end of runs; retrying while their locks are kept alive");
                }
                failures += 1;
                pending.push((from, to));
                tokio::select! {
                    _ = tokio::time::sleep(completer.watchdog.retry_pause()) => {}
                    _ = completer.flush_deadline.cancelled() => {}
                }
            }
            Err(e) => {
                if to - from > 1 {
                    let middle = from + (to - from) / 2;
                    pending.push((middle, to));
                    pending.push((from, middle));
                } else {
                    rescue_rejected(completer, &mut batch[from], e).await;
                }
            }
        }
    }
}

/// One outcome the store refused: written again without its error text, or dropped.
async fn rescue_rejected(completer: &Completer, completion: &mut Completion, error: StoreError) {
    let finish = &mut completion.finish;
    tracing::error!(run_id = finish.run_id, error = %error, "the store refused a run's outcome; recording it without its error text");
    finish.end.error = Some(format!(
        "(the error text could not be stored: {})",
        crate::engine::outcome::clean_error(&error.to_string())
    ));
    finish.skips.clear();
    for attempt in 0..3u32 {
        match completer
            .store
            .finish_runs(std::slice::from_ref(finish))
            .await
        {
            Ok(_) => return,
            Err(e) if e.is_transient() && !completer.flush_deadline.is_cancelled() => {
                tokio::time::sleep(Duration::from_millis(100) * (attempt + 1)).await;
            }
            Err(e) => {
                tracing::error!(run_id = finish.run_id, error = %e, "dropped a run's outcome the store refuses; its lock will expire and the run be treated as lost");
                return;
            }
        }
    }
}
