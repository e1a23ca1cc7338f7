//! The loop every background service of a node shares (River's maintenance services): run one
//! pass, pause, repeat until stopped; after a failure, back off (exponentially, unless the
//! service says otherwise), log the first failure of an outage once and its end once.
//!
//! A service is a [`Service`]: its `run_once` does one pass and returns what it did, so tests
//! call it directly, with no sleeping; `pause_after` turns that into the next pause (or `None`:
//! the service is done). The loop owns waiting, waking and logging.

use std::fmt::Display;
use std::time::Duration;

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::backoff;

/// What ended a pause.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Woke {
    /// The pause ran out.
    Timer,
    /// The node's wake-up fired (a change notification, a handler finished).
    Notified,
}

/// One background service of a node.
pub(crate) trait Service: Send {
    /// What one pass did.
    type Pass: Send;
    /// Why a pass failed.
    type Error: Display + Send;

    /// What the service does, for logs ("claiming", "the heartbeat", ...).
    fn what(&self) -> &'static str;

    /// One pass.
    fn run_once(&mut self) -> impl Future<Output = Result<Self::Pass, Self::Error>> + Send;

    /// The pause after a successful pass; `None`: the service is done.
    fn pause_after(&mut self, pass: Self::Pass) -> Option<Duration>;

    /// The pause after the `failures`-th failure in a row (from 1).
    fn pause_after_failure(&mut self, failures: u32) -> Duration {
        backoff(failures - 1)
    }

    /// Told how a pause ended.
    fn woke(&mut self, _by: Woke) {}

    /// Whether a pass may be dropped half-way when the node stops (a pass that only waits, like
    /// the change listener's). Default false: a pass runs to its end (a claim in flight must
    /// finish, so its runs are handed back, not forgotten).
    fn cancel_safe(&self) -> bool {
        false
    }

    /// Where the first failure of an outage is raised as `scheduler.error` (none: only logged).
    fn events(&self) -> Option<&crate::events::EventBus> {
        None
    }
}

/// Runs `service` until `stop` is cancelled (or it is done); pauses end early on `wake`.
pub(crate) async fn run<S: Service>(
    mut service: S,
    stop: CancellationToken,
    wake: Option<&Notify>,
) {
    let mut failures = 0u32;
    while !stop.is_cancelled() {
        let pass = if service.cancel_safe() {
            tokio::select! {
                pass = service.run_once() => pass,
                _ = stop.cancelled() => return,
            }
        } else {
            service.run_once().await
        };
        let pause = match pass {
            Ok(pass) => {
                if failures > 0 {
                    tracing::info!(after_failures = failures, "{} works again", service.what());
                    failures = 0;
                }
                match service.pause_after(pass) {
                    Some(pause) => pause,
                    None => return,
                }
            }
            Err(e) => {
                failures += 1;
                let pause = service.pause_after_failure(failures);
                if failures == 1 {
                    tracing::warn!(error = %e, retry_in = ?pause, "{} failed; retrying", service.what());
                    if let Some(events) = service.events() {
                        events.emit(crate::events::SchedulerEvent::InternalError {
                            what: service.what().to_owned(),
                            error: crate::redact::redact_text(&e.to_string()),
                        });
                    }
                } else {
                    tracing::debug!(error = %e, retry_in = ?pause, failures, "{} still failing", service.what());
                }
                pause
            }
        };
        if pause.is_zero() {
            continue;
        }
        let woke = match wake {
            Some(wake) => tokio::select! {
                _ = tokio::time::sleep(pause) => Woke::Timer,
                _ = wake.notified() => Woke::Notified,
                _ = stop.cancelled() => return,
            },
            None => tokio::select! {
                _ = tokio::time::sleep(pause) => Woke::Timer,
                _ = stop.cancelled() => return,
            },
        };
        service.woke(woke);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    /// Fails twice, then succeeds three times and is done.
    struct Flaky {
        calls: Arc<AtomicU32>,
    }

    impl Service for Flaky {
        type Pass = u32;
        type Error = &'static str;

        fn what(&self) -> &'static str {
            "the flaky service"
        }

        async fn run_once(&mut self) -> Result<u32, &'static str> {
            let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
            if n <= 2 { Err("down") } else { Ok(n) }
        }

        fn pause_after(&mut self, pass: u32) -> Option<Duration> {
            (pass < 5).then_some(Duration::from_secs(1))
        }
    }

    #[tokio::test(start_paused = true)]
    async fn backs_off_after_failures_and_stops_when_done() {
        let calls = Arc::new(AtomicU32::new(0));
        let started = tokio::time::Instant::now();
        run(
            Flaky {
                calls: Arc::clone(&calls),
            },
            CancellationToken::new(),
            None,
        )
        .await;
        assert_eq!(calls.load(Ordering::SeqCst), 5);
        // 250 ms + 500 ms of backoff, then two 1 s pauses.
        assert_eq!(started.elapsed(), Duration::from_millis(2_750));
    }

    #[tokio::test(start_paused = true)]
    async fn stops_when_told() {
        let stop = CancellationToken::new();
        stop.cancel();
        let calls = Arc::new(AtomicU32::new(0));
        run(
            Flaky {
                calls: Arc::clone(&calls),
            },
            stop,
            None,
        )
        .await;
        assert_eq!(calls.load(Ordering::SeqCst), 0);
    }
}
