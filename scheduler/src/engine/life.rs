//! The two ends of a node's life: start-up (the store prepared and the node registered,
//! retried until the store answers, then the config and the services) and the drain (claims
//! stopped, handlers asked to stop and waited for, their last outcomes recorded).

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::config_sync::ConfigSync;
use super::settings::{FLUSH_TIMEOUT, HARD_STOP_WAIT};
use super::shared::Shared;
use super::{maintenance, service};
use crate::store::StoreError;

impl super::Engine {
    pub(super) async fn start(&self, shared: &Arc<Shared>, config: Option<&mut ConfigSync>) {
        service::run(
            Startup {
                shared: Arc::clone(shared),
                migrate: self.migrate,
            },
            CancellationToken::new(),
            None,
            &shared.care("startup"),
        )
        .await;
        shared
            .started
            .store(true, std::sync::atomic::Ordering::Release);
        // The first reconcile happens before any claim, so a changed schedule applies at once.
        match config {
            Some(config) => {
                if let Err(e) = config.apply_pending().await {
                    tracing::error!(error = %e, "the task config could not be applied yet; tasks keep their stored state until it is");
                }
            }
            None => tracing::warn!(
                "no task config (SCHEDULER_CONFIG): tasks run as stored in the database"
            ),
        }
    }

    /// Stops claiming and every background service, asks handlers to stop, waits up to the
    /// shutdown timeout, stops what is left (their ticks are handed over), and waits for the
    /// last outcomes to be recorded (up to the flush timeout).
    pub(super) async fn drain(
        &self,
        shared: &Arc<Shared>,
        stop: CancellationToken,
        workers: TaskTracker,
    ) {
        let running = shared.tracker.len();
        tracing::info!(running, timeout = ?shared.settings.shutdown_timeout, "shutting down: no new claims, asking running handlers to stop");
        // Handlers first: a run claimed from here on is handed back without starting.
        shared.handlers_cancel.cancel();
        stop.cancel();
        let deadline = tokio::time::Instant::now() + shared.settings.shutdown_timeout;
        // A claim in flight finishes first, so its runs are handed back, not forgotten.
        if tokio::time::timeout_at(deadline, workers.wait())
            .await
            .is_err()
        {
            tracing::warn!(
                "a background service (a claim in flight?) did not stop by the shutdown timeout"
            );
        }
        shared.tracker.close();
        if tokio::time::timeout_at(deadline, shared.tracker.wait())
            .await
            .is_err()
        {
            tracing::warn!(
                still_running = shared.tracker.len(),
                "shutdown timeout elapsed: stopping the remaining handlers and handing their ticks over"
            );
            shared.hard_stop.cancel();
        }
        let flush = tokio::time::Instant::now() + HARD_STOP_WAIT + FLUSH_TIMEOUT;
        if tokio::time::timeout_at(flush, shared.tracker.wait())
            .await
            .is_err()
        {
            shared.flush_deadline.cancel();
            if tokio::time::timeout(HARD_STOP_WAIT, shared.tracker.wait())
                .await
                .is_err()
            {
                tracing::error!(
                    still_running = shared.tracker.len(),
                    "some handlers did not stop (they block their threads); exiting without their outcomes: other nodes will treat those runs as lost"
                );
            }
        }
    }
}

/// Start-up: migrations (unless disabled) and the node's registration, retried with backoff
/// until the store answers.
struct Startup {
    shared: Arc<Shared>,
    migrate: bool,
}

impl service::Service for Startup {
    type Pass = ();
    type Error = StoreError;

    fn what(&self) -> &'static str {
        "preparing the store (migrations, node registration)"
    }

    async fn run_once(&mut self) -> std::result::Result<(), StoreError> {
        if self.migrate {
            self.shared.store.migrate().await?;
        }
        self.shared
            .store
            .register_node(&maintenance::node_info(
                &self.shared.node_id,
                &self.shared.names,
            ))
            .await
    }

    fn pause_after(&mut self, (): ()) -> Option<Duration> {
        None
    }
}
