//! Runs a claimed run's handler until it returns or is stopped, wherever the task says it runs:
//! on a thread of the node's handler pool ([`in_process`], the default) or in a child process
//! of its own ([`isolated`], `isolation = "process"`).
//!
//! Both apply the same stop rules, and report them the same way (how the handler ended, why it
//! was asked to stop) for [`outcome::decide`](super::outcome::decide) to judge:
//!
//! | event | asked to stop | stopped by force |
//! |---|---|---|
//! | node shutdown | at once (`ctx.cancelled()`; SIGTERM to a child) | when the shutdown timeout ends |
//! | timeout | at the timeout | a grace later: a tenth of the timeout, 100 ms to 10 s |
//! | lock lost (not renewable) | at once | before the lock could expire (`Lease::stop_at`) |
//! | lock taken over | at once | at once |
//! | an operator's cancel (through the lease) | at once | [`CANCEL_GRACE`] later (10 s) |
//!
//! "Stopped by force" differs: a child process is killed (SIGKILL to its process group), which
//! always works; an in-process handler is stopped at its next `.await` (its gate closes), and one
//! that never reaches an `.await` cannot be stopped at all: the process stops itself before the
//! lock could pass to another node ([`super::failstop`]).

mod in_process;
#[cfg(unix)]
mod isolated;

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::Shared;
use super::outcome::{Ending, StopReason};
use super::watchdog::Lease;
pub(super) use crate::operate::CANCEL_GRACE;
use crate::policy::Isolation;
use crate::run_log::RunLogLines;
use crate::store::{Cancellation, ClaimedRun};

/// Where an isolated run's log lines go; `None` for an in-process run (its span is captured).
pub(super) type ChildLog = Option<RunLogLines>;

/// Runs `claimed`'s handler until it returns or is stopped; returns how it ended, why it was
/// asked to stop (if it was), and the lease. `log` receives an isolated child's output.
pub(super) async fn execute(
    shared: &Arc<Shared>,
    claimed: &ClaimedRun,
    lease: Lease,
    log: ChildLog,
) -> (Ending, Option<StopReason>, Lease) {
    let Some(descriptor) = shared.registry.get(&claimed.task_name) else {
        // Claims are filtered by the registered names, so this is a bug, not a user error.
        return (
            Ending::Returned(Err("task is not registered on this node".into())),
            None,
            lease,
        );
    };
    match (descriptor.options.isolation, log) {
        #[cfg(unix)]
        (Some(Isolation::Process), Some(log)) => {
            isolated::execute(shared, claimed, descriptor, lease, log).await
        }
        #[cfg(not(unix))]
        (Some(Isolation::Process), _) => (
            Ending::Crashed(
                "process isolation needs a Unix system: the run was not started".into(),
            ),
            None,
            lease,
        ),
        _ => in_process::execute(shared, claimed, descriptor, lease).await,
    }
}

/// Whether runs of `task` run in a child process (and so need a log fed from outside).
pub(super) fn is_isolated(shared: &Shared, task: &str) -> bool {
    shared
        .registry
        .get(task)
        .is_some_and(|d| d.options.isolation == Some(Isolation::Process))
}

/// A run's timeout: when the handler is asked to stop, and when it is stopped by force.
#[derive(Debug, Clone, Copy)]
struct Timeout {
    limit: Duration,
    ask_at: Instant,
    force_at: Instant,
}

impl Timeout {
    /// The timeout `limit` of a run that started at `started`; past it the handler is asked to
    /// stop, and a grace later (a tenth of it, 100 ms to 10 s) stopped by force.
    fn of(limit: Option<Duration>, started: Instant) -> Option<Self> {
        limit.map(|limit| {
            let grace = (limit / 10).clamp(Duration::from_millis(100), Duration::from_secs(10));
            Timeout {
                limit,
                ask_at: started + limit,
                force_at: started + limit + grace,
            }
        })
    }
}

/// An operator's cancel of a running run: who asked, and when its grace runs out.
#[derive(Debug, Clone)]
struct Cancelled {
    by: String,
    force_at: Instant,
}

impl Cancelled {
    /// A cancel heard now: the handler is stopped by force [`CANCEL_GRACE`] from now.
    fn now(request: Cancellation) -> Self {
        Cancelled {
            by: request.by,
            force_at: Instant::now() + CANCEL_GRACE,
        }
    }

    /// Why the run was asked to stop, as the outcome sees it: a cancel outranks every other
    /// reason (a shutdown or a timeout may have come first; the operator still asked for the
    /// tick not to run again), though not their deadlines, which the loops keep.
    fn outranks(cancelled: Option<Self>, stop: Option<StopReason>) -> Option<StopReason> {
        match cancelled {
            Some(c) => Some(StopReason::Cancelled(c.by)),
            None => stop,
        }
    }
}

/// An instant so far ahead it never comes (for a `select!` branch that is switched off).
fn far() -> Instant {
    Instant::now() + Duration::from_secs(86_400 * 365)
}
