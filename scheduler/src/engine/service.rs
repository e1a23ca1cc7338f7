//! The loop every background service of a node shares (River's maintenance services): run one
//! pass, pause, repeat until stopped; after a failure, back off (exponentially, unless the
//! service says otherwise), log the first failure of an outage once and its end once.
//!
//! A service is a [`Service`]: its `run_once` does one pass and returns what it did, so tests
//! call it directly, with no sleeping; `pause_after` turns that into the next pause (or `None`:
//! the service is done). The loop owns waiting, waking and logging, and catches a pass that
//! panics (see `super::health`): the service runs again or the node fail-stops, never a
//! service that stopped without a word.

use std::fmt::Display;
use std::time::Duration;

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::health::{CatchUnwind, FailStop, Health, MAX_PANICS_IN_A_ROW, OnPanic};
use crate::events::EventBus;
use crate::metrics::Metrics;

/// Exponential backoff for retries against the store: 250 ms doubling to 10 s.
pub(crate) fn backoff(attempt: u32) -> Duration {
    Duration::from_millis(250u64.saturating_mul(1 << attempt.min(6))).min(Duration::from_secs(10))
}

/// A random fraction in [0, 1), for jitter (no cryptographic quality needed).
pub(crate) fn random_fraction() -> f64 {
    use std::hash::{BuildHasher, Hasher};
    let random = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    (random % 1_000_000) as f64 / 1_000_000.0
}

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

    /// What a panic of a pass leads to: by default the service runs again (see
    /// `super::health`).
    fn on_panic(&self) -> OnPanic {
        OnPanic::Restart
    }

    /// Where the first failure of an outage is raised as `scheduler.error` (none: only logged).
    fn events(&self) -> Option<&crate::events::EventBus> {
        None
    }
}

/// What a service runs under: its name (for the health registry, the metric, the test hook),
/// and where a panic is reported (see `super::health`).
pub(crate) struct Care<'a> {
    /// The service's short name (`claimer`, `renewer`, ...).
    pub(crate) name: &'static str,
    pub(crate) health: &'a Health,
    pub(crate) events: &'a EventBus,
    pub(crate) metrics: &'a Metrics,
    /// Stops the process (`failstop::exit_service`; unit tests pass one that panics).
    pub(crate) fail_stop: FailStop,
    /// The node's wall clock: a test that moves it ends every pause (see `crate::clock`).
    pub(crate) clock: &'a crate::clock::Clock,
}

/// Runs `service` until `stop` is cancelled (or it is done); pauses end early on `wake`, and when
/// a test moves the node's clock (so the next pass sees the new time at once). A pass
/// that panics is caught and reported, and the service runs again after a backoff, or the node
/// fail-stops (see `super::health`).
pub(crate) async fn run<S: Service>(
    mut service: S,
    stop: CancellationToken,
    wake: Option<&Notify>,
    care: &Care<'_>,
) {
    let name = care.name;
    care.health.running(name);
    let mut failures = 0u32;
    let mut panics = 0u32;
    // Pauses stay on Tokio's clock (so a pacing pause stays real in tests); a test that moves
    // the wall clock ends them, as a change notification would.
    let mut moves = care.clock.moves();
    // On a test's clock, a step returns once every service has made a pass at the new time
    // (see `crate::clock`); not waited for: a pass that only waits or may run long, which is
    // what a cancel-safe pass is (the change listener's, the pruner's).
    let on_clock = if service.cancel_safe() {
        None
    } else {
        care.clock.join()
    };
    while !stop.is_cancelled() {
        let cancel_safe = service.cancel_safe();
        let what = service.what();
        let seen = on_clock.as_ref().map(|c| (c, c.pass_begins()));
        let outcome = {
            let pass = std::pin::pin!(async {
                super::health::injected_panic(name);
                match service.run_once().await {
                    Ok(pass) => Ok(service.pause_after(pass)),
                    Err(e) => Err(e),
                }
            });
            let pass = CatchUnwind(pass);
            if cancel_safe {
                tokio::select! {
                    outcome = pass => outcome,
                    _ = stop.cancelled() => break,
                }
            } else {
                pass.await
            }
        };
        if let Some((on_clock, moves)) = seen {
            on_clock.pass_ended(moves);
        }
        let pause = match outcome {
            Err(message) => {
                panics += 1;
                let restarts =
                    service.on_panic() == OnPanic::Restart && panics < MAX_PANICS_IN_A_ROW;
                report_panic(care, what, &message, panics, restarts);
                if !restarts {
                    let why = if panics >= MAX_PANICS_IN_A_ROW {
                        format!("panicked {panics} times in a row (last: {message})")
                    } else {
                        format!("panicked and cannot be restarted safely ({message})")
                    };
                    (care.fail_stop)(name, &why);
                }
                backoff(panics)
            }
            Ok(Ok(next)) => {
                if failures > 0 {
                    tracing::info!(after_failures = failures, "{what} works again");
                    failures = 0;
                }
                if panics > 0 {
                    tracing::info!(
                        service = name,
                        after_panics = panics,
                        "{what} runs again after panicking"
                    );
                    care.health.running(name);
                    panics = 0;
                }
                match next {
                    Some(pause) => pause,
                    None => break,
                }
            }
            Ok(Err(e)) => {
                failures += 1;
                let pause = service.pause_after_failure(failures);
                if failures == 1 {
                    tracing::warn!(error = %e, retry_in = ?pause, "{what} failed; retrying");
                    if let Some(events) = service.events() {
                        events.emit(crate::events::SchedulerEvent::InternalError {
                            what: what.to_owned(),
                            error: crate::redact::redact_text(&e.to_string()),
                        });
                    }
                } else {
                    tracing::debug!(error = %e, retry_in = ?pause, failures, "{what} still failing");
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
                () = moves.next() => Woke::Notified,
                _ = stop.cancelled() => break,
            },
            None => tokio::select! {
                _ = tokio::time::sleep(pause) => Woke::Timer,
                () = moves.next() => Woke::Notified,
                _ = stop.cancelled() => break,
            },
        };
        service.woke(woke);
    }
    care.health.ended(name);
}

/// A pass of `what` panicked (`panics` in a row): logged at error, raised as `scheduler.error`,
/// counted, and shown in the health registry.
pub(crate) fn report_panic(
    care: &Care<'_>,
    what: &str,
    message: &str,
    panics: u32,
    restarts: bool,
) {
    let name = care.name;
    care.metrics.service_panicked(name);
    care.health.panicked(name, message, restarts);
    let next = if restarts {
        "it runs again after a backoff"
    } else {
        "the node stops (fail-stop)"
    };
    tracing::error!(service = name, panic = %message, panics_in_a_row = panics, "{what} panicked; {next}");
    care.events
        .emit(crate::events::SchedulerEvent::InternalError {
            what: format!("{what} (the {name} service panicked; {next})"),
            error: message.to_owned(),
        });
}

#[cfg(test)]
mod tests;
