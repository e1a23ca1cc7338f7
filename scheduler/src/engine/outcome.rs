//! How a run ends: the one rule, for every path (a handler that returned, one stopped at
//! shutdown or on lock loss, one never started, and a run whose node vanished).
//!
//! | how it ended | asked to stop? | status | its tick |
//! |---|---|---|---|
//! | returned `Ok` | either | `succeeded` | done |
//! | returned an error | no | `failed` | per the task's retries |
//! | returned an error | yes (shutdown, lock lost) | `interrupted` | `rerun`: handed over, due again at once; `never`: not run again |
//! | stopped by the engine (did not return in time; an isolated run's process killed) | yes | `interrupted` | `rerun`: handed over; `never`: not run again |
//! | returned an error, or stopped, after its timeout | yes (timeout) | `timed_out` | `rerun`: per the task's retries; `never`: not run again |
//! | panicked | no | `failed` | per the task's retries |
//! | panicked | yes | `failed` | `rerun`: per the task's retries; `never`: not run again |
//! | isolated run's process crashed, aborted, ran out of memory or exited early (no verdict) | no | `failed` (with the signal or exit code) | per the task's retries |
//! | the same | yes | `failed` | `rerun`: per the task's retries; `never`: not run again |
//! | never started (claimed as the node began to drain, or no handler slot came free) | yes | `interrupted` | handed over (both); a backfill's tick goes back to its backfill |
//! | unknown (its node stopped renewing the lock) | — | `lost` | per the task's [`Recovery`]: `rerun` makes it due again, `never` does not |
//! | returned an error | yes (cancelled by an operator) | `cancelled` | not run again (both) |
//! | stopped by the engine (did not return within [`CANCEL_GRACE`](crate::operate::CANCEL_GRACE); an isolated run's process killed) | yes (cancelled) | `cancelled` | not run again (both) |
//! | panicked, or an isolated run's process crashed | yes (cancelled) | `cancelled` | not run again (both) |
//! | never started (cancelled before its tick came) | yes (cancelled) | `cancelled` | not run again (both) |
//! | unknown (its node stopped renewing the lock after a cancel was requested) | — | `cancelled` | not run again (both) |
//!
//! The last column follows one rule: a run whose handler was asked to stop, or stopped by force,
//! did its work to an unknown extent; an at-most-once task (`recovery = "never"`) never runs such
//! a tick again, on any path. Only a failure the handler reported on its own is retried. A run
//! an operator cancelled is never run again, whatever its task's recovery: the operator asked
//! for it not to run. A cancel outranks every other request to stop (it may come after a
//! shutdown began, or past a timeout); a handler that returns `Ok` after any of them finished
//! its work, and is `succeeded`.
//!
//! A run that never started and is handed over is history, not the task's last run: the
//! task's last status, error and end stay those of the run that last ran (no handler ran, and
//! its tick runs again at once). Every other ending, a cancelled run that never started
//! included (its tick is not run again), is the task's last run.
//!
//! A shard's run (a task with `shards = N`, see [`crate::shard`]) ends by this same table: each
//! shard has its own lock and row, so "its tick" above is that shard's share of the tick (a lost
//! shard is rerun, or not, on its own; the other shards are untouched). The tick is done when
//! every shard's run has ended.
//!
//! A handler that was told to stop says "I did not finish" by returning an error (idiomatically
//! [`Interrupted`](crate::Interrupted), from [`TaskContext::interrupted`](crate::TaskContext)),
//! and "I did finish" by returning `Ok`.

use chrono::{DateTime, Utc};

use super::watchdog::LockLoss;
use crate::causes::error_chain;
use crate::registry::TaskError;
use crate::store::{
    ExpiredLock, FailureCount, LastRun, Recovery, Requeue, RescueDecision, RunEnd, RunStatus,
    Trigger,
};

/// Error texts are stored at most this long (bytes), then cut with a marker.
pub(crate) const MAX_ERROR_BYTES: usize = 8 * 1024;

/// How the handler's run came to an end.
#[derive(Debug)]
pub(crate) enum Ending {
    /// The handler returned.
    Returned(Result<(), TaskError>),
    /// The handler panicked, with this message.
    Panicked(String),
    /// The engine stopped it by force before it returned (gate closed; an isolated run's
    /// process killed, with what happened to it).
    Stopped(Option<String>),
    /// An isolated run's process ended without the handler's verdict: it crashed (a signal
    /// the node did not send), aborted, ran out of memory, exited early, or could not start;
    /// with what happened.
    Crashed(String),
    /// It was never started.
    NotStarted,
}

/// Why the handler was asked to stop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum StopReason {
    /// The node is shutting down.
    Shutdown,
    /// The run's lock could not be kept.
    LockLost(LockLoss),
    /// The run took longer than its timeout.
    Timeout(std::time::Duration),
    /// An operator cancelled the run; who.
    Cancelled(String),
    /// No handler slot of the node came free for this long while the run waited for one.
    NoSlot(std::time::Duration),
}

impl StopReason {
    fn describe(&self) -> String {
        match self {
            StopReason::Shutdown => "the node shut down".into(),
            StopReason::LockLost(loss) => loss.describe(),
            StopReason::Timeout(t) => format!(
                "the run exceeded its timeout of {}",
                humantime::format_duration(*t)
            ),
            StopReason::Cancelled(by) => format!("cancelled by {by}"),
            StopReason::NoSlot(t) => format!(
                "no handler slot of its node came free for {} (every one held by runs that did \
                 not end)",
                humantime::format_duration(*t)
            ),
        }
    }
}

/// What the engine records for a run that ended on this node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Decision {
    pub end: RunEnd,
    /// Make the run's tick due again at once.
    pub hand_over: bool,
    /// The task's retries may run the tick again (a failure or timeout with retries left).
    pub may_retry: bool,
    pub failures: FailureCount,
    /// Whether it becomes the task's last run.
    pub last_run: LastRun,
}

/// The rule for a run that ended on this node; `recovery` is its task's.
///
/// A run's outcome is *known* when its handler returned, or panicked, without having been asked
/// to stop. Any other ending — asked to stop (shutdown, lost lock, timeout) and did not return
/// `Ok`, or stopped by force — leaves its work done to an unknown extent: with
/// `recovery = "rerun"` its tick runs again (handed over at once, or retried after a timeout),
/// with `recovery = "never"` it does not, on every path. A run that never started runs again in
/// every case.
pub(crate) fn decide(ending: Ending, stop: Option<&StopReason>, recovery: Recovery) -> Decision {
    let rerun = recovery == Recovery::Rerun;
    let end = |status, error: String| RunEnd {
        status,
        error: Some(clean_error(&error)),
    };
    // What an interruption's text says about the tick.
    let then = |handed_over: &str| {
        if rerun {
            handed_over.to_owned()
        } else {
            NOT_RUN_AGAIN.to_owned()
        }
    };
    match (ending, stop) {
        (Ending::Returned(Ok(())), _) => Decision {
            end: RunEnd {
                status: RunStatus::Succeeded,
                error: None,
            },
            hand_over: false,
            may_retry: false,
            failures: FailureCount::Reset,
            last_run: LastRun::Record,
        },
        (ending, Some(reason @ StopReason::Cancelled(_))) => {
            let what = match ending {
                Ending::Returned(Err(e)) => format!(": {}", error_chain(&*e)),
                // (`Ok` is matched first: `succeeded`.)
                Ending::Returned(Ok(())) => String::new(),
                Ending::Panicked(message) => format!("; then the handler panicked: {message}"),
                Ending::Crashed(detail) => format!("; then its process ended: {detail}"),
                Ending::Stopped(how) => format!(
                    "; the handler did not return within {} and was stopped{}",
                    humantime::format_duration(crate::operate::CANCEL_GRACE),
                    how.map_or_else(String::new, |how| format!(" ({how})"))
                ),
                Ending::NotStarted => "; before it started".to_owned(),
            };
            Decision {
                end: end(
                    RunStatus::Cancelled,
                    format!("{}{what}; {CANCELLED_NOT_RUN_AGAIN}", reason.describe()),
                ),
                hand_over: false,
                may_retry: false,
                failures: FailureCount::Keep,
                last_run: LastRun::Record,
            }
        }
        (Ending::Returned(Err(e)), None) => Decision {
            end: end(RunStatus::Failed, error_chain(&*e)),
            hand_over: false,
            may_retry: true,
            failures: FailureCount::Increment,
            last_run: LastRun::Record,
        },
        (ending @ (Ending::Panicked(_) | Ending::Crashed(_)), stop) => {
            let what = match ending {
                Ending::Panicked(message) => format!("handler panicked: {message}"),
                Ending::Crashed(detail) => detail,
                _ => unreachable!("matched above"),
            };
            Decision {
                end: end(
                    RunStatus::Failed,
                    match stop {
                        Some(reason) if !rerun => format!(
                            "{what} (after being asked to stop: {}); {NOT_RUN_AGAIN}",
                            reason.describe()
                        ),
                        _ => what,
                    },
                ),
                hand_over: false,
                may_retry: stop.is_none() || rerun,
                failures: FailureCount::Increment,
                last_run: LastRun::Record,
            }
        }
        (Ending::Returned(Err(e)), Some(reason @ StopReason::Timeout(_))) => Decision {
            end: end(
                RunStatus::TimedOut,
                if rerun {
                    format!("{}: {}", reason.describe(), error_chain(&*e))
                } else {
                    format!(
                        "{}: {}; {NOT_RUN_AGAIN}",
                        reason.describe(),
                        error_chain(&*e)
                    )
                },
            ),
            hand_over: false,
            may_retry: rerun,
            failures: FailureCount::Increment,
            last_run: LastRun::Record,
        },
        (Ending::Stopped(how), Some(reason @ StopReason::Timeout(_))) => Decision {
            end: end(
                RunStatus::TimedOut,
                format!(
                    "{}; the handler did not return and was stopped{}{}",
                    reason.describe(),
                    how.map_or_else(String::new, |how| format!(" ({how})")),
                    if rerun {
                        String::new()
                    } else {
                        format!("; {NOT_RUN_AGAIN}")
                    }
                ),
            ),
            hand_over: false,
            may_retry: rerun,
            failures: FailureCount::Increment,
            last_run: LastRun::Record,
        },
        (Ending::Returned(Err(e)), Some(reason)) => Decision {
            end: end(
                RunStatus::Interrupted,
                format!(
                    "{}; {}: {}",
                    reason.describe(),
                    then("handed over"),
                    error_chain(&*e)
                ),
            ),
            hand_over: rerun,
            may_retry: false,
            failures: FailureCount::Keep,
            last_run: LastRun::Record,
        },
        (Ending::Stopped(how), reason) => Decision {
            end: end(
                RunStatus::Interrupted,
                format!(
                    "{}; the handler did not return in time and was stopped{}; {}",
                    reason.map_or_else(|| "stopped".into(), StopReason::describe),
                    how.map_or_else(String::new, |how| format!(" ({how})")),
                    then("handed over")
                ),
            ),
            hand_over: rerun,
            may_retry: false,
            failures: FailureCount::Keep,
            last_run: LastRun::Record,
        },
        (Ending::NotStarted, stop) => Decision {
            end: end(
                RunStatus::Interrupted,
                match stop {
                    Some(reason @ StopReason::NoSlot(_)) => {
                        format!("{}; handed over before starting", reason.describe())
                    }
                    _ => "claimed as the node began shutting down; handed over before starting"
                        .into(),
                },
            ),
            hand_over: true,
            may_retry: false,
            failures: FailureCount::Keep,
            last_run: LastRun::Keep,
        },
    }
}

/// What the record of an at-most-once run that did not finish says about its tick.
pub(crate) const NOT_RUN_AGAIN: &str = "its outcome is unknown: not run again (recovery = never)";

/// What the record of a cancelled run says about its tick.
pub(crate) const CANCELLED_NOT_RUN_AGAIN: &str = "its tick is not run again";

/// The rule for a run whose outcome is unknown: its lock expired and was watched long enough
/// without its owner renewing it.
pub(crate) fn unknown(lock: &ExpiredLock, db_now: DateTime<Utc>) -> RescueDecision {
    let Some(run) = &lock.run else {
        // A lock without a running run (its holder died between claim and start, or its run
        // was already recorded): just release it.
        return RescueDecision::Release {
            run_end: None,
            requeue: None,
            failures: FailureCount::Keep,
        };
    };
    if let Some(by) = &run.cancel_requested_by {
        // The operator asked for it to stop; its node died before it could record that.
        let error = format!(
            "cancelled by {by}; its node {} stopped renewing the lock before recording the end \
             (killed, crashed, paused or cut off from the database); {CANCELLED_NOT_RUN_AGAIN}",
            lock.owner
        );
        return RescueDecision::Release {
            run_end: Some(RunEnd {
                status: RunStatus::Cancelled,
                error: Some(clean_error(&error)),
            }),
            requeue: None,
            failures: FailureCount::Keep,
        };
    }
    if let Some(node) = crate::shard::row_node(&lock.key.task_name) {
        // A broadcast run is its node's own work: recorded lost, never run elsewhere.
        let error = format!(
            "lock expired: node {} stopped renewing it (killed, crashed, paused or cut off from \
             the database); a broadcast run is node {node}'s own: not run on another node",
            lock.owner
        );
        return RescueDecision::Release {
            run_end: Some(RunEnd {
                status: RunStatus::Lost,
                error: Some(clean_error(&error)),
            }),
            requeue: None,
            failures: FailureCount::Increment,
        };
    }
    let rerun = run.recovery == Recovery::Rerun;
    let requeue = rerun
        .then(|| {
            requeue_of(
                run.trigger,
                run.scheduled_at,
                run.attempt,
                run.triggered_by.clone(),
                db_now,
                // (Its node may have started it: its outcome is unknown.)
                true,
            )
        })
        .flatten();
    let error = format!(
        "lock expired: node {} stopped renewing it (killed, crashed, paused or cut off from the database); {}",
        lock.owner,
        if rerun {
            "the tick runs again (recovery = rerun)"
        } else {
            "not run again (recovery = never)"
        }
    );
    RescueDecision::Release {
        run_end: Some(RunEnd {
            status: RunStatus::Lost,
            error: Some(clean_error(&error)),
        }),
        requeue,
        failures: FailureCount::Increment,
    }
}

/// The same run again, as soon as possible (`now`): the tick of a scheduled run, the same
/// attempt of a retry, the manual request of a manual run, the backfill's tick of a backfill's
/// run handed back before it `started` (no handler ran: the backfill runs its tick later, as if
/// it had never been claimed). A backfill's run that may have started is not run again: its
/// tick shows in the backfill's progress as the run ended (interrupted, lost), and a second
/// backfill of the range (which by default runs only the ticks without a successful run) runs
/// it again. Requeueing a backfill's tick as a tick would make a past tick the schedule's next
/// run.
pub(crate) fn requeue_of(
    trigger: Trigger,
    scheduled_at: DateTime<Utc>,
    attempt: i32,
    triggered_by: Option<String>,
    now: DateTime<Utc>,
    started: bool,
) -> Option<Requeue> {
    Some(match trigger {
        Trigger::Retry => Requeue::Retry {
            tick: scheduled_at,
            attempt,
            at: now,
        },
        Trigger::Manual => Requeue::Manual {
            at: scheduled_at,
            by: triggered_by,
        },
        Trigger::Backfill if !started => Requeue::Backfill(scheduled_at),
        Trigger::Backfill => return None,
        _ => Requeue::Tick(scheduled_at),
    })
}

/// An error text fit for logs and storage: secrets redacted (handler errors often quote the URL
/// or DSN they failed on), no NUL or other control characters but newline and tab (text
/// columns refuse NUL), at most [`MAX_ERROR_BYTES`], cut on a character boundary with a marker.
pub(crate) fn clean_error(text: &str) -> String {
    let mut clean: String = crate::redact::redact_text(text)
        .chars()
        .map(|c| {
            if c.is_control() && c != '\n' && c != '\t' {
                '\u{fffd}'
            } else {
                c
            }
        })
        .collect();
    if clean.len() > MAX_ERROR_BYTES {
        let total = clean.len();
        let marker = format!(" … [cut: {total} bytes in all]");
        let mut cut = MAX_ERROR_BYTES - marker.len();
        while !clean.is_char_boundary(cut) {
            cut -= 1;
        }
        clean.truncate(cut);
        clean.push_str(&marker);
    }
    clean
}

#[cfg(test)]
mod tests;
