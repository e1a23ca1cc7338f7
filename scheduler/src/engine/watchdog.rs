//! The lock watchdog: keeps the locks of a node's running handlers alive, and tells each run
//! when its lock can no longer be trusted. Handlers never see the lock.
//!
//! One [`LockWatchdog`] per node renews every held lock in a single statement per renew interval
//! (1,000 long handlers cost one write every 20 s by default, not 1,000), fenced by owner and
//! token. Each run holds a [`Lease`] that resolves when its lock is lost:
//!
//! - **taken over**: the renewal did not return it (it expired and another node took it, or it
//!   was released);
//! - **unrenewable**: no renewal succeeded before the run's local deadline (database
//!   unreachable).
//!
//! Deadlines are counted on the node's monotonic clock from the moment a renewal was *sent*: the
//! database set the expiry from its own clock at a later moment plus the lifetime, so the local
//! deadline (less a safety margin) always falls before the database's, whatever the clock skew.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::store::Store;

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

struct Held {
    task_name: String,
    token: Uuid,
    deadline: watch::Sender<Instant>,
    taken_over: CancellationToken,
}

/// Renews every lock this node holds.
pub(crate) struct LockWatchdog {
    store: Arc<dyn Store>,
    node_id: Arc<str>,
    lifetime: Duration,
    renew_every: Duration,
    margin: Duration,
    held: Mutex<HashMap<i64, Held>>,
    last_error: Mutex<Option<String>>,
}

/// One run's claim on its lock; [`lost`](Lease::lost) resolves when the lock is gone.
/// Dropping it stops the renewals.
pub(crate) struct Lease {
    watchdog: Arc<LockWatchdog>,
    run_id: i64,
    deadline: watch::Receiver<Instant>,
    taken_over: CancellationToken,
}

impl LockWatchdog {
    pub(crate) fn new(
        store: Arc<dyn Store>,
        node_id: Arc<str>,
        lifetime: Duration,
        renew_every: Duration,
        margin: Duration,
    ) -> Self {
        Self {
            store,
            node_id,
            lifetime,
            renew_every,
            margin,
            held: Mutex::new(HashMap::new()),
            last_error: Mutex::new(None),
        }
    }

    /// Starts renewing the lock of run `run_id`, taken by a claim sent at `confirmed_at`.
    pub(crate) fn hold(
        self: &Arc<Self>,
        run_id: i64,
        task_name: &str,
        token: Uuid,
        confirmed_at: Instant,
    ) -> Lease {
        let (deadline, receiver) = watch::channel(confirmed_at + self.lifetime - self.margin);
        let taken_over = CancellationToken::new();
        self.held.lock().unwrap_or_else(|p| p.into_inner()).insert(
            run_id,
            Held {
                task_name: task_name.to_owned(),
                token,
                deadline,
                taken_over: taken_over.clone(),
            },
        );
        Lease {
            watchdog: Arc::clone(self),
            run_id,
            deadline: receiver,
            taken_over,
        }
    }

    /// One renewal of every held lock. Returns how many were extended; locks not extended are
    /// told they were taken over.
    pub(crate) async fn renew_once(&self) -> Result<usize, sqlx::Error> {
        let batch: Vec<(i64, String, Uuid)> = self
            .held
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|(run, h)| (*run, h.task_name.clone(), h.token))
            .collect();
        if batch.is_empty() {
            return Ok(0);
        }
        let sent = Instant::now();
        let locks: Vec<(String, Uuid)> = batch.iter().map(|(_, n, t)| (n.clone(), *t)).collect();
        let renewed = match self
            .store
            .renew_locks(&self.node_id, &locks, self.lifetime)
            .await
        {
            Ok(renewed) => renewed,
            Err(e) => {
                let mut last = self.last_error.lock().unwrap_or_else(|p| p.into_inner());
                if last.is_none() {
                    tracing::warn!(error = %e, locks = batch.len(), "lock renewal failed; retrying until the locks would expire");
                }
                *last = Some(e.to_string());
                return Err(e);
            }
        };
        if self
            .last_error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .is_some()
        {
            tracing::info!("lock renewal works again");
        }
        let renewed: std::collections::HashSet<(String, Uuid)> = renewed.into_iter().collect();
        let held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        for (run, name, token) in &batch {
            let Some(h) = held.get(run) else { continue }; // finished meanwhile
            if renewed.contains(&(name.clone(), *token)) {
                h.deadline.send_replace(sent + self.lifetime - self.margin);
            } else {
                h.taken_over.cancel();
            }
        }
        Ok(renewed.len())
    }

    /// Renews every renew interval (sooner after a failure) until `stop` is cancelled.
    pub(crate) async fn run(self: Arc<Self>, stop: CancellationToken) {
        loop {
            let pause = match self.renew_once().await {
                Ok(_) => self.renew_every,
                Err(_) => (self.renew_every / 4).max(Duration::from_millis(50)),
            };
            tokio::select! {
                _ = tokio::time::sleep(pause) => {}
                _ = stop.cancelled() => return,
            }
        }
    }

    fn last_error(&self) -> String {
        self.last_error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .unwrap_or_else(|| "renewal did not complete in time".into())
    }
}

impl Lease {
    /// Resolves when the lock is lost. Cancel-safe.
    pub(crate) async fn lost(&mut self) -> LockLoss {
        loop {
            let deadline = *self.deadline.borrow_and_update();
            tokio::select! {
                _ = self.taken_over.cancelled() => return LockLoss::TakenOver,
                _ = tokio::time::sleep_until(deadline) => {
                    if *self.deadline.borrow() <= deadline {
                        return LockLoss::Unrenewable(self.watchdog.last_error());
                    }
                }
                changed = self.deadline.changed() => {
                    if changed.is_err() {
                        // The watchdog forgot this lease; only Drop does that.
                        std::future::pending::<()>().await;
                    }
                }
            }
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.watchdog
            .held
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&self.run_id);
    }
}
