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
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::{Notify, mpsc, oneshot};
use tokio::task::JoinSet;
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
#[derive(Clone)]
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
    let written = Arc::new(AtomicU64::new(0));
    let mut retries: JoinSet<Vec<Unwritten>> = JoinSet::new();
    loop {
        let first = tokio::select! {
            next = queue.recv() => match next {
                Some(c) => c,
                None => break,
            },
            Some(ended) = retries.join_next() => {
                retry_ended(completer, &written, &mut retries, ended);
                continue;
            }
            _ = stop.cancelled() => break,
        };
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match queue.try_recv() {
                Ok(c) => batch.push(c),
                Err(_) => break,
            }
        }
        super::health::injected_panic("completer");
        for unwritten in record(completer, &written, batch).await {
            tracing::warn!(error = %unwritten.error, runs = unwritten.group.len(), "could not record the end of runs; retrying while their locks are kept alive");
            retries.spawn(retry(completer.clone(), Arc::clone(&written), unwritten));
        }
        completer.wake.notify_one();
    }
    // Every runner has had its outcome acknowledged by now (see `run`), so no retry is left;
    // one that were would end at the flush deadline.
    while let Some(ended) = retries.join_next().await {
        retry_ended(completer, &written, &mut retries, ended);
    }
}

/// Outcomes a transient failure left unwritten, and that failure.
struct Unwritten {
    group: Vec<Completion>,
    /// The failure, in words.
    error: String,
    /// Whether it said a row the write needs is locked by another transaction.
    locked: bool,
}

/// A retry ended: the parts it split off are retried each on its own; its panic is the
/// completer's (see `run`).
fn retry_ended(
    completer: &Completer,
    written: &Arc<AtomicU64>,
    retries: &mut JoinSet<Vec<Unwritten>>,
    ended: Result<Vec<Unwritten>, tokio::task::JoinError>,
) {
    match ended {
        Ok(parts) => {
            for part in parts {
                retries.spawn(retry(completer.clone(), Arc::clone(written), part));
            }
        }
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(_) => {} // cancelled: only when the set is dropped
    }
}

/// Writes `batch`, split in halves around outcomes the store rejects; acknowledges each outcome
/// written (or dropped as refused), counts the writes in `written`, and returns the parts a
/// transient failure left unwritten.
async fn record(
    completer: &Completer,
    written: &AtomicU64,
    batch: Vec<Completion>,
) -> Vec<Unwritten> {
    let mut unwritten = Vec::new();
    let mut pending = vec![batch];
    while let Some(mut group) = pending.pop() {
        let finishes: Vec<RunFinish> = group.iter().map(|c| c.finish.clone()).collect();
        let runs = || finishes.iter().map(|f| f.run_id);
        completer.watchdog.writing(runs(), true);
        let result = completer.store.finish_runs(&finishes).await;
        if result.is_err() {
            completer.watchdog.writing(runs(), false);
        }
        match result {
            Ok(results) => {
                written.fetch_add(1, Ordering::SeqCst);
                for r in results.iter().filter(|r| !r.lock_held) {
                    tracing::warn!(
                        run_id = r.run_id,
                        "another node had released the lock when the run's end was recorded"
                    );
                }
                acknowledge(group);
            }
            Err(error) if error.is_transient() => unwritten.push(Unwritten {
                group,
                locked: matches!(error, StoreError::Conflict { .. }),
                error: error.to_string(),
            }),
            Err(e) => {
                if group.len() > 1 {
                    let back = group.split_off(group.len() / 2);
                    pending.push(back);
                    pending.push(group);
                } else {
                    rescue_rejected(completer, &mut group[0], e).await;
                    acknowledge(group);
                }
            }
        }
    }
    unwritten
}

/// Tells the runners their outcomes are recorded (or will never be), and lets their leases go.
fn acknowledge(group: Vec<Completion>) {
    for c in group {
        drop(c.lease);
        let _ = c.recorded.send(());
    }
}

/// Writes `unwritten` again every retry pause until it is written or the flush deadline of a
/// shutdown passes, while newer outcomes are written beside it. A group of several that fails
/// again while another write succeeded meanwhile (the store works; something in this group
/// does not), or because a row it needs is locked, is split in halves, each retried on its own
/// (returned to the caller): a row held by a transaction that does not end (a server process
/// frozen inside it) then holds back no outcome but the one that needs it.
async fn retry(
    completer: Completer,
    written: Arc<AtomicU64>,
    mut unwritten: Unwritten,
) -> Vec<Unwritten> {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(completer.watchdog.retry_pause()) => {}
            _ = completer.flush_deadline.cancelled() => {}
        }
        if completer.flush_deadline.is_cancelled() {
            tracing::error!(error = %unwritten.error, runs = unwritten.group.len(), "gave up recording the end of runs at shutdown; other nodes will find their locks expired and treat the runs as lost");
            acknowledge(unwritten.group);
            return Vec::new();
        }
        let before = written.load(Ordering::SeqCst);
        let runs = unwritten.group.len();
        let mut left = record(&completer, &written, unwritten.group).await;
        let Some(again) = left.pop() else {
            tracing::info!(runs, "recorded the end of runs after retrying");
            completer.wake.notify_one();
            return Vec::new();
        };
        if !left.is_empty() {
            // Split around a rejected outcome, and more than one part failed: each on its own.
            left.push(again);
            return left;
        }
        unwritten = again;
        let others_wrote = written.load(Ordering::SeqCst) != before;
        if unwritten.group.len() > 1 && (others_wrote || unwritten.locked) {
            let back = unwritten.group.split_off(unwritten.group.len() / 2);
            tracing::debug!(
                runs,
                error = %unwritten.error,
                "the end of runs still not recorded while the store works: retried in halves"
            );
            return vec![
                Unwritten {
                    group: back,
                    error: unwritten.error.clone(),
                    locked: unwritten.locked,
                },
                unwritten,
            ];
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
