//! The lock watchdog: keeps a running handler's lock alive, and says when it can no longer be
//! trusted. The handler never sees the lock.
//!
//! Every renewal is fenced by owner and token. The watchdog counts lock time on the node's
//! monotonic clock from the moment each renewal was *sent*: the database set the expiry to its
//! own clock at a later moment plus the lifetime, so the local deadline always falls before the
//! database's one, whatever the clock skew between the two machines.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use uuid::Uuid;

use crate::store::{RenewOutcome, Store};

/// Why a run's lock can no longer be trusted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum LockLoss {
    /// Another node holds the lock now (it expired and was taken over), or it was released.
    TakenOver,
    /// Renewal kept failing (database unreachable) until the safety margin before expiry.
    Unrenewable(String),
}

impl LockLoss {
    pub(crate) fn describe(&self) -> String {
        match self {
            LockLoss::TakenOver => "lock lost: another node took it over after it expired".into(),
            LockLoss::Unrenewable(e) => {
                format!("lock lost: could not renew it before it expired ({e})")
            }
        }
    }
}

/// Renews one run's lock until told to stop or until the lock is lost.
pub(crate) struct LockWatchdog {
    store: Arc<dyn Store>,
    task_name: String,
    node_id: String,
    token: Uuid,
    lifetime: Duration,
    renew_every: Duration,
    margin: Duration,
    /// The local instant by which the handler must have stopped.
    deadline: Instant,
}

impl LockWatchdog {
    /// `confirmed_at` is when the claim that took the lock was sent.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        store: Arc<dyn Store>,
        task_name: &str,
        node_id: &str,
        token: Uuid,
        lifetime: Duration,
        renew_every: Duration,
        margin: Duration,
        confirmed_at: Instant,
    ) -> Self {
        Self {
            store,
            task_name: task_name.to_owned(),
            node_id: node_id.to_owned(),
            token,
            lifetime,
            renew_every,
            margin,
            deadline: confirmed_at + lifetime - margin,
        }
    }

    /// One renewal: `Ok(())` when the lock was extended, `Err(TakenOver)` when it is gone.
    /// A database error is returned as `Ok(Err(..))` so the caller can retry.
    pub(crate) async fn renew_once(&mut self) -> Result<Result<(), sqlx::Error>, LockLoss> {
        let sent = Instant::now();
        match self
            .store
            .renew_lock(&self.task_name, &self.node_id, self.token, self.lifetime)
            .await
        {
            Ok(RenewOutcome::Renewed(_)) => {
                self.deadline = sent + self.lifetime - self.margin;
                Ok(Ok(()))
            }
            Ok(RenewOutcome::Lost) => Err(LockLoss::TakenOver),
            Err(e) => Ok(Err(e)),
        }
    }

    /// Renews every `renew_every` (retrying sooner after a failure) and returns only when the
    /// lock is lost. Cancel-safe: drop it to stop renewing.
    pub(crate) async fn guard(mut self) -> LockLoss {
        let mut next = Instant::now() + self.renew_every;
        let mut last_error: Option<String> = None;
        loop {
            tokio::select! {
                _ = tokio::time::sleep_until(next) => {}
                _ = tokio::time::sleep_until(self.deadline) => {
                    return LockLoss::Unrenewable(
                        last_error.unwrap_or_else(|| "renewal did not complete in time".into()),
                    );
                }
            }
            match self.renew_once().await {
                Ok(Ok(())) => {
                    if last_error.take().is_some() {
                        tracing::info!(task = %self.task_name, "lock renewal works again");
                    }
                    next = Instant::now() + self.renew_every;
                }
                Ok(Err(e)) => {
                    if last_error.is_none() {
                        tracing::warn!(task = %self.task_name, error = %e, "lock renewal failed; retrying until the lock would expire");
                    }
                    last_error = Some(e.to_string());
                    next = Instant::now() + (self.renew_every / 4).max(Duration::from_millis(50));
                }
                Err(loss) => return loss,
            }
            if Instant::now() >= self.deadline {
                return LockLoss::Unrenewable(
                    last_error.unwrap_or_else(|| "renewal was too slow".into()),
                );
            }
        }
    }
}
