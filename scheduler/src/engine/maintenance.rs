//! Node upkeep: the heartbeat that shows the node is alive, pruning of old run history, and the
//! change listener that wakes the claim loop early.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{Shared, backoff};

/// How often old runs are pruned.
pub(crate) const PRUNE_INTERVAL: Duration = Duration::from_secs(3600);

pub(crate) struct Maintenance {
    shared: Arc<Shared>,
    next_prune: Instant,
}

impl Maintenance {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        Self {
            shared,
            next_prune: Instant::now(),
        }
    }

    /// Heartbeat, and prune when due. Returns how many runs were pruned.
    pub(crate) async fn run_once(&mut self) -> Result<u64, sqlx::Error> {
        self.shared.store.heartbeat(&self.shared.node_id).await?;
        if Instant::now() < self.next_prune {
            return Ok(0);
        }
        let pruned = self
            .shared
            .store
            .prune_runs(self.shared.settings.run_retention)
            .await?;
        self.next_prune = Instant::now() + PRUNE_INTERVAL;
        if pruned > 0 {
            tracing::info!(pruned, retention = ?self.shared.settings.run_retention, "pruned old runs");
        }
        Ok(pruned)
    }

    pub(crate) async fn run(mut self, stop: CancellationToken) {
        let interval = self.shared.settings.heartbeat_interval;
        let mut failures = 0u32;
        while !stop.is_cancelled() {
            let pause = match self.run_once().await {
                Ok(_) => {
                    failures = 0;
                    interval
                }
                Err(e) => {
                    if failures == 0 {
                        tracing::warn!(error = %e, "heartbeat failed");
                    }
                    failures += 1;
                    backoff(failures).min(interval)
                }
            };
            tokio::select! {
                _ = tokio::time::sleep(pause) => {}
                _ = stop.cancelled() => break,
            }
        }
    }
}

/// Forwards change notifications from other nodes to the claim loop.
pub(crate) async fn listen(shared: Arc<Shared>, stop: CancellationToken) {
    let mut failures = 0u32;
    let mut listener = loop {
        match shared.store.listener().await {
            Ok(l) => break l,
            Err(e) => {
                tracing::warn!(error = %e, "cannot create the change listener; retrying");
                failures += 1;
                tokio::select! {
                    _ = tokio::time::sleep(backoff(failures)) => {}
                    _ = stop.cancelled() => return,
                }
            }
        }
    };
    failures = 0;
    loop {
        tokio::select! {
            received = listener.recv() => match received {
                Ok(()) => {
                    failures = 0;
                    shared.wake.notify_one();
                }
                Err(e) => {
                    if failures == 0 {
                        tracing::warn!(error = %e, "change listener lost its connection; reconnecting (the poll interval still applies)");
                    }
                    failures += 1;
                    tokio::select! {
                        _ = tokio::time::sleep(backoff(failures)) => {}
                        _ = stop.cancelled() => return,
                    }
                }
            },
            _ = stop.cancelled() => return,
        }
    }
}
