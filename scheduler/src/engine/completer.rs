//! The completer: records the end of runs in batches, as River's batch completer does. Each
//! runner hands its outcome over and waits for the acknowledgement; while one write is in
//! flight, the next outcomes queue up and go out together, so a burst of 1,000 finishing runs
//! costs a handful of statements, not 1,000, and claims are not starved of connections.

use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{Shared, backoff};
use crate::store::{RunOutcome, RunStatus};

/// The most outcomes written in one statement.
const MAX_BATCH: usize = 1_000;

/// An outcome to record, and who to tell once it is.
pub(crate) struct Completion {
    pub(crate) outcome: RunOutcome,
    pub(crate) recorded: oneshot::Sender<()>,
}

/// Runs until `stop` is cancelled; by then every runner has had its outcome acknowledged
/// (the engine stops the completer only after all runners finished).
pub(crate) async fn run(
    shared: Arc<Shared>,
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
        record(&shared, &batch).await;
        for c in batch {
            let _ = c.recorded.send(());
        }
        shared.wake.notify_one();
    }
}

/// Writes one batch, retrying through a database outage for as long as a lock would live.
/// After that another node rescues the runs anyway.
async fn record(shared: &Shared, batch: &[Completion]) {
    let outcomes: Vec<RunOutcome> = batch.iter().map(|c| c.outcome.clone()).collect();
    let give_up = Instant::now() + shared.settings.lock_lifetime;
    let mut attempt = 0u32;
    loop {
        match shared.store.finish_runs(&outcomes).await {
            Ok(held) => {
                for o in &outcomes {
                    if o.status != RunStatus::Lost && !held.contains(&o.task_name) {
                        tracing::warn!(task = %o.task_name, run_id = o.run_id, "the lock had already been taken over when the run finished");
                    }
                }
                return;
            }
            Err(e) if Instant::now() < give_up && !shared.hard_stop_finished.is_cancelled() => {
                if attempt == 0 {
                    tracing::warn!(error = %e, runs = outcomes.len(), "could not record the end of runs; retrying");
                }
                tokio::time::sleep(backoff(attempt)).await;
                attempt += 1;
            }
            Err(e) => {
                tracing::error!(error = %e, runs = outcomes.len(), "gave up recording the end of runs; other nodes will mark them lost when their locks expire");
                return;
            }
        }
    }
}
