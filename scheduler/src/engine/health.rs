//! The health of a node's background services, and what happens when one panics: no service
//! ever stops silently.
//!
//! Every background service (the loop in `service`, the completer, a run's own bookkeeping in
//! `runner`) runs its passes under [`CatchUnwind`]. A pass that panics is treated like a failed
//! pass, louder: logged at error with the panic's message, raised as `scheduler.error` (which
//! reaches alerts), counted in `scheduler_service_panics_total{service}`, and the service is
//! marked `restarting` here until a pass succeeds again; it runs again after a backoff. After
//! [`MAX_PANICS_IN_A_ROW`] panics with no good pass between them, or at the first panic of a
//! service that cannot be restarted safely (the completer and the lock renewal: their state is
//! the runs' locks), the node fail-stops: it exits with [`super::FAIL_STOP_EXIT_CODE`] and the
//! reason on standard error (see `failstop`), so that its supervisor restarts it. A node never
//! answers its probes while one of its services is dead: `/readyz` answers 503 naming every
//! service that is not `running`, and `/api/nodes` shows this node's services, and every node's
//! services that are down as their `reporter` wrote them to the store.

use std::any::Any;
use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Mutex;
use std::task::{Context, Poll};

/// Panics in a row (no good pass between them) after which a restartable service fail-stops its
/// node instead of running again.
pub(crate) const MAX_PANICS_IN_A_ROW: u32 = 5;

/// What a service does when a pass panics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OnPanic {
    /// Run again after a backoff (up to [`MAX_PANICS_IN_A_ROW`] panics in a row).
    Restart,
    /// Stop the node at once: the service's state cannot be rebuilt by running it again.
    FailStop,
}

/// The state of one service, as the probes and `/api/nodes` show it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(not(feature = "admin"), allow(dead_code))]
pub(crate) struct ServiceStatus {
    /// The service's short name (`claimer`, `completer`, `renewer`, ...).
    pub(crate) name: &'static str,
    /// `running`, `restarting` (a pass panicked, it runs again after a backoff) or `stopping`
    /// (it cannot go on: the node is fail-stopping).
    pub(crate) state: &'static str,
    /// Panics since the node started.
    pub(crate) panics: u64,
    /// The last panic's message, if any.
    pub(crate) last_panic: Option<String>,
}

impl ServiceStatus {
    /// Whether the service is doing its work.
    pub(crate) fn is_up(&self) -> bool {
        self.state == "running"
    }
}

/// The node's registry of service states (one per node, in `Shared`).
#[derive(Debug, Default)]
pub(crate) struct Health {
    services: Mutex<BTreeMap<&'static str, ServiceStatus>>,
    /// Wakes the `reporter`: a service went down or came back.
    changed: tokio::sync::Notify,
}

impl Health {
    fn with<R>(&self, name: &'static str, change: impl FnOnce(&mut ServiceStatus) -> R) -> R {
        let mut services = self.services.lock().unwrap_or_else(|p| p.into_inner());
        let status = services.entry(name).or_insert_with(|| ServiceStatus {
            name,
            state: "running",
            panics: 0,
            last_panic: None,
        });
        let was = status.state;
        let result = change(status);
        if status.state != was {
            self.changed.notify_one();
        }
        result
    }

    /// `name` runs (started, or a pass succeeded after a panic).
    pub(crate) fn running(&self, name: &'static str) {
        self.with(name, |s| s.state = "running");
    }

    /// A pass of `name` panicked with `message`; it `restarts` or the node stops.
    pub(crate) fn panicked(&self, name: &'static str, message: &str, restarts: bool) {
        self.with(name, |s| {
            s.panics += 1;
            s.last_panic = Some(message.to_owned());
            s.state = if restarts { "restarting" } else { "stopping" };
        });
    }

    /// `name` ended as it should (done, or the node stopped it): no longer shown.
    pub(crate) fn ended(&self, name: &'static str) {
        self.services
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(name);
    }

    /// Every service known, by name.
    pub(crate) fn services(&self) -> Vec<ServiceStatus> {
        self.services
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .cloned()
            .collect()
    }

    /// Notified when a service goes down or comes back (what wakes the `reporter`).
    pub(crate) fn changed(&self) -> &tokio::sync::Notify {
        &self.changed
    }

    /// The services that are not doing their work now.
    pub(crate) fn down(&self) -> Vec<ServiceStatus> {
        self.services().into_iter().filter(|s| !s.is_up()).collect()
    }
}

/// A future that turns a panic inside its poll into `Err(message)` (`futures`'
/// `catch_unwind`, by hand). The future is borrowed pinned, so this one is `Unpin`.
pub(crate) struct CatchUnwind<'a, F: ?Sized>(pub(crate) Pin<&'a mut F>);

impl<F: Future + ?Sized> Future for CatchUnwind<'_, F> {
    type Output = Result<F::Output, String>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let inner = self.0.as_mut();
        match std::panic::catch_unwind(AssertUnwindSafe(|| inner.poll(cx))) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(output)) => Poll::Ready(Ok(output)),
            Err(payload) => Poll::Ready(Err(panic_message(payload.as_ref()))),
        }
    }
}

/// A panic's message, as `panic!` formatted it (secrets redacted).
pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> String {
    let text = if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "(a panic without a message)".to_owned()
    };
    crate::redact::redact_text(&text)
}

/// Stops the process: `service` cannot go on (`why`). The real one is `failstop::exit_service`;
/// unit tests pass one that panics instead.
pub(crate) type FailStop = fn(service: &str, why: &str) -> !;

/// The test-only hook (`test-hooks` feature): `SCHEDULER_TEST_PANIC=name[:count],...` makes
/// the next `count` passes (1 by default, `always`: every one) of each named service panic.
/// Without the feature this does nothing and reads nothing.
#[cfg(feature = "test-hooks")]
pub(crate) fn injected_panic(name: &str) {
    use std::collections::HashMap;
    use std::sync::OnceLock;
    static LEFT: OnceLock<Mutex<HashMap<String, Option<u64>>>> = OnceLock::new();
    let left = LEFT.get_or_init(|| {
        let spec = std::env::var("SCHEDULER_TEST_PANIC").unwrap_or_default();
        let plan = spec
            .split(',')
            .filter(|s| !s.trim().is_empty())
            .map(|entry| match entry.trim().split_once(':') {
                Some((name, "always")) => (name.to_owned(), None),
                Some((name, count)) => (name.to_owned(), Some(count.parse().unwrap_or(1))),
                None => (entry.trim().to_owned(), Some(1)),
            })
            .collect();
        Mutex::new(plan)
    });
    let fire = {
        let mut left = left.lock().unwrap_or_else(|p| p.into_inner());
        match left.get_mut(name) {
            Some(None) => true,
            Some(Some(n)) if *n > 0 => {
                *n -= 1;
                true
            }
            _ => false,
        }
    };
    if fire {
        panic!("injected panic in the {name} service (SCHEDULER_TEST_PANIC)");
    }
}

/// The test-only hook, compiled out (see the `test-hooks` feature).
#[cfg(not(feature = "test-hooks"))]
#[inline(always)]
pub(crate) fn injected_panic(_name: &str) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_panic_in_a_poll_is_an_error_with_its_message() {
        let fut = std::pin::pin!(async {
            tokio::task::yield_now().await;
            let value: Option<u8> = std::hint::black_box(None);
            value.expect("no value here")
        });
        let caught = CatchUnwind(fut).await;
        assert!(
            caught.as_ref().is_err_and(|m| m.contains("no value here")),
            "{caught:?}"
        );
        let fine = CatchUnwind(std::pin::pin!(async { 7 })).await;
        assert_eq!(fine, Ok(7));
    }

    #[test]
    fn the_registry_says_which_service_is_down_until_it_runs_again() {
        let health = Health::default();
        health.running("claimer");
        health.running("sla");
        assert!(health.down().is_empty());
        health.panicked("sla", "boom", true);
        let down = health.down();
        assert_eq!(down.len(), 1);
        assert_eq!((down[0].name, down[0].state), ("sla", "restarting"));
        assert_eq!(down[0].last_panic.as_deref(), Some("boom"));
        health.running("sla");
        assert!(health.down().is_empty());
        assert_eq!(health.services()[1].panics, 1);
        health.ended("sla");
        assert_eq!(health.services().len(), 1);
    }
}
