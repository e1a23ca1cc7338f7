//! Runs one claimed run: the handler run by [`super::execute`] (on a thread of the node's or in
//! a process of its own, told to stop on shutdown, timeout, lock loss or an operator's cancel
//! (which reaches it through its lease, see [`super::watchdog`]) and stopped when it must be),
//! the outcome decided by [`outcome::decide`] and handed to
//! the completer together with the lease, which keeps the lock renewed until the outcome is
//! recorded. What the handler logs inside the run's span is captured by [`crate::run_log`] and
//! written before the outcome.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tracing::Instrument;

use super::completer::Completion;
use super::execute;
use super::health::CatchUnwind;
use super::outcome::{self, Ending, StopReason};
use super::shared::Shared;
use super::slots::Slot;
use super::watchdog::Lease;
use crate::events::{RunRef, SchedulerEvent};
use crate::run_log::RunLogCapture;
use crate::schedule::ScheduleSpec;
use crate::store::{ClaimedRun, LockKey, RunFinish, RunStatus, Trigger};
use chrono::{DateTime, TimeDelta, Utc};
#[cfg(test)]
use ending::retry_delay;
use ending::{account_skips, emit_end, plan_retry};

/// Runs `claimed` in one handler slot (`slot`: held already, or taken on its tick if it was
/// claimed ahead of it), freed as soon as the handler is done so the claim loop can refill it
/// while the outcome is being recorded. `lease` was taken when the claim was sent; the handler
/// starts at `start_at` (later than now if its tick was claimed ahead of it).
///
/// The future is built here, not as an `async fn`: what it holds while it waits for its tick
/// (10,000 runs claimed ahead of one, each a spawned task) is only the run's own state, once;
/// what the run needs from its start to its end is boxed and given back when the handler has
/// ended, while its outcome waits for its batch to be written.
pub(crate) fn run(
    shared: Arc<Shared>,
    claimed: ClaimedRun,
    spec: Option<ScheduleSpec>,
    lease: Lease,
    slot: Slot,
    claim_sent: Instant,
    start_at: Instant,
) -> impl Future<Output = ()> + Send {
    // What a panic of this run's bookkeeping needs to end the run anyway (see `bookkeeping_panicked`).
    let keeper = Arc::clone(&shared);
    let started_cell = Arc::new(std::sync::OnceLock::new());
    let fallback = Fallback {
        run_id: claimed.run_id,
        lock: LockKey::new(claimed.task_name.clone(), claimed.lock_token),
        gate: Arc::clone(lease.gate()),
        started_at: Arc::clone(&started_cell),
    };
    let span = tracing::info_span!(
        "task_run",
        task = %claimed.task_name,
        run_id = claimed.run_id,
        scheduled_at = %claimed.scheduled_at,
        attempt = claimed.attempt,
        trigger = %claimed.trigger,
        node = %shared.node_id,
    );
    let work = async move {
        let isolated = execute::is_isolated(&shared, &claimed.task_name);
        // What the handler logs inside this span is kept with the run, from before its start
        // (an in-process handler is started on its tick by the handler pool, not from here);
        // an isolated run's log is what its process writes.
        let capture = if isolated {
            None
        } else {
            RunLogCapture::start(
                &tracing::Span::current(),
                claimed.run_id,
                Arc::clone(&shared.store),
            )
        };
        let mut waiting = execute::Waiting::prepare(&shared, &claimed, &lease, start_at, slot);
        let began = waiting.began(&shared, &lease).await;
        // What follows the start is boxed: a run waiting for its tick (10,000 of them, claimed
        // ahead of one) holds only what it needs until then.
        let (finish, lease) = Box::pin(after_start(
            &shared,
            claimed,
            spec,
            lease,
            waiting,
            capture,
            began,
            started_cell,
            isolated,
            claim_sent,
        ))
        .await;
        if let Some(recorded) = hand_over(&shared, finish, lease) {
            let _ = recorded.await;
        }
    }
    .instrument(span.clone());
    // Boxed here, not pinned inside the block below: a future moved into another's frame
    // keeps its place there twice (as captured, and as pinned).
    let mut work = Box::pin(work);
    async move {
        if let Err(message) = CatchUnwind(work.as_mut()).await {
            let _entered = span.enter();
            Box::pin(bookkeeping_panicked(&keeper, fallback, &message)).await;
        }
    }
}

/// The run from its start (or from why it never started, `began`) to its end: the outcome to
/// record, and the lease that keeps the lock until it is.
#[expect(
    clippy::too_many_arguments,
    reason = "the runner's state, handed on once"
)]
async fn after_start(
    shared: &Arc<Shared>,
    claimed: ClaimedRun,
    spec: Option<ScheduleSpec>,
    lease: Lease,
    waiting: execute::Waiting,
    mut capture: Option<RunLogCapture>,
    began: Result<Instant, StopReason>,
    started_cell: Arc<std::sync::OnceLock<DateTime<Utc>>>,
    isolated: bool,
    claim_sent: Instant,
) -> (RunFinish, Lease) {
    let started = *began.as_ref().unwrap_or(&Instant::now());
    // The handler's start on the store's clock: recorded with the run's end (none for a run
    // that never started) and observed as its lag, one value for the history, the
    // dashboard's lateness and the metric. A test's clock is read, not estimated: it may
    // have been moved during the claim, which the claim's round trip does not show.
    let started_at = began.is_ok().then(|| {
        shared
            .settings
            .clock
            .test_now()
            .unwrap_or_else(|| db_clock_at(&claimed, claim_sent, started))
    });
    if let Some(at) = started_at {
        let _ = started_cell.set(at);
    }
    let (ending, stop, lease) = match began {
        Err(why) => {
            if let StopReason::Cancelled(by) = &why {
                tracing::info!(by = %by, "cancelled before it started");
            }
            // Cancelled, or claimed while the node began to drain: handed back untouched.
            (Ending::NotStarted, Some(why), lease)
        }
        Ok(_) => {
            tracing::info!("run started");
            shared.events.emit(SchedulerEvent::RunStarted {
                run: run_ref(shared, &claimed),
            });
            // Lateness counts from the run's start: a jittered tick's offset is not late.
            shared.metrics.run_started(
                &claimed.task_name,
                claimed.due_at,
                claimed.trigger.as_str(),
                started_at.unwrap_or_else(|| db_clock(&claimed, claim_sent)),
            );
            let child_log = isolated.then(|| {
                let external = RunLogCapture::external(claimed.run_id, Arc::clone(&shared.store));
                let lines = external.lines();
                capture = Some(external);
                lines
            });
            let levels = shared.levels(&claimed.task_name);
            if let (Some(within), Some(started_at)) =
                (levels.and_then(|l| l.sla.start_within), started_at)
            {
                started_late(shared, &claimed, started_at, within);
            }
            // Boxed: only the runs going on hold it (a few hundred), not the thousands of
            // runs whose outcomes wait for their batch to be written.
            let running = Box::pin(waiting.run(shared, &claimed, lease, started, child_log));
            match levels.and_then(|l| l.sla.warn_after) {
                None => running.await,
                Some(warn_after) => {
                    // The warning does not stop the run: it is raised once, and the run goes on.
                    // An instant beyond the clock's range is never reached (no panic).
                    let warn_at = started.checked_add(warn_after);
                    let warned = async move {
                        match warn_at {
                            Some(at) => tokio::time::sleep_until(at).await,
                            None => std::future::pending().await,
                        }
                    };
                    tokio::pin!(running);
                    tokio::select! {
                        ended = &mut running => ended,
                        () = warned => {
                            tracing::warn!(warn_after = ?warn_after, "run still going past its warning");
                            shared.events.emit(SchedulerEvent::Slow {
                                run: run_ref(shared, &claimed),
                                warn_after_ms: u64::try_from(warn_after.as_millis())
                                    .unwrap_or(u64::MAX),
                            });
                            running.await
                        }
                    }
                }
            }
        }
    };
    let was_started = started_at.is_some();
    super::health::injected_panic("runner");
    // The handler's slot was given back with its end: the claim loop is woken if it waits for
    // one (or for a share of a limit), not after every run of a burst.
    if shared.slots.notify_freed() {
        shared.wake.notify_one();
    }
    let recovery = shared
        .task_settings(&claimed.task_name)
        .map_or(crate::policy::Recovery::Rerun, |(settings, _)| {
            settings.recovery
        });
    let decision = outcome::decide(ending, stop.as_ref(), recovery);
    let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let status = decision.end.status;
    match status {
        RunStatus::Succeeded => tracing::info!(duration_ms, result = %status, "run finished"),
        _ => tracing::warn!(
            duration_ms,
            result = %status,
            error = decision.end.error.as_deref().unwrap_or(""),
            "run finished"
        ),
    }
    let mut finish = RunFinish::new(
        claimed.run_id,
        LockKey::new(claimed.task_name.clone(), claimed.lock_token),
        started_at,
        decision.end.clone(),
        decision.failures,
    );
    finish.last_run = decision.last_run;
    let now = db_clock(&claimed, claim_sent);
    if decision.hand_over {
        // The same run again at once; the run that serves it accounts for later ticks.
        finish.requeue = outcome::requeue_of(
            claimed.trigger,
            claimed.scheduled_at,
            claimed.attempt,
            claimed.triggered_by.clone(),
            now,
            was_started,
        );
    } else if let Some(spec) = spec {
        if claimed.trigger == Trigger::Schedule {
            finish.skips = account_skips(&claimed, spec.clone()).await;
        }
        if decision.may_retry {
            plan_retry(shared, &claimed, &spec, &mut finish, now);
        }
    }
    emit_end(shared, &claimed, &finish, duration_ms);
    shared.metrics.run_ended(
        &claimed.task_name,
        status.as_str(),
        claimed.trigger.as_str(),
        started.elapsed().as_secs_f64(),
        was_started,
        chrono::Utc::now(),
    );
    if let Some(capture) = capture {
        // Before the outcome: whoever sees the run ended finds its whole log.
        capture.finish().await;
    }
    (finish, lease)
}

/// The bookkeeping of a run panicked (a bug): reported like a service's panic (logged at error,
/// `scheduler.error`, `scheduler_service_panics_total{service="runner"}`), and the run ends
/// `failed` with the panic's message, its lock released, so that its task runs on. Its handler
/// is stopped first (its gate closed); a handler that blocks its thread cannot be stopped, and
/// its lock is no longer renewed: the node fail-stops rather than let the task overlap itself.
/// What the runner keeps aside to end its run should its bookkeeping panic.
struct Fallback {
    run_id: i64,
    lock: LockKey,
    gate: Arc<super::gate::GateState>,
    /// The handler's start on the store's clock, once known.
    started_at: Arc<std::sync::OnceLock<DateTime<Utc>>>,
}

async fn bookkeeping_panicked(shared: &Shared, fallback: Fallback, message: &str) {
    let Fallback {
        run_id,
        lock,
        gate,
        started_at,
    } = fallback;
    let care = shared.care("runner");
    care.metrics.service_panicked("runner");
    tracing::error!(service = "runner", panic = %message, "the bookkeeping of a run panicked; the run is recorded failed");
    shared.events.emit(SchedulerEvent::InternalError {
        what: format!(
            "the bookkeeping of run {run_id} of task {} (it panicked; the run is recorded failed)",
            lock.task_name
        ),
        error: message.to_owned(),
    });
    gate.close();
    if gate.blocked_for().is_some() {
        (care.fail_stop)(
            "runner",
            &format!(
                "panicked while the handler of task {} (run {run_id}) blocks its thread, whose \
                 lock can no longer be kept ({message})",
                lock.task_name
            ),
        );
    }
    let end = crate::store::RunEnd::new(
        RunStatus::Failed,
        Some(outcome::clean_error(&format!(
            "internal error in the scheduler (not the handler): {message}"
        ))),
    );
    let finish = RunFinish::new(
        run_id,
        lock,
        started_at.get().copied(),
        end,
        crate::store::FailureCount::Keep,
    );
    let (recorded, done) = tokio::sync::oneshot::channel();
    if shared
        .completions
        .send(Completion {
            finish,
            lease: None,
            recorded,
        })
        .is_ok()
    {
        let _ = done.await;
    }
    shared.wake.notify_one();
}

/// A scheduled tick that starts later than its task's `sla.start_within` raises `task.late`,
/// unless the service-level watch raised it while the tick waited (one mark per tick, in the
/// store); marked off the run's way, so the handler never waits for it.
fn started_late(
    shared: &Arc<Shared>,
    claimed: &ClaimedRun,
    started_at: DateTime<Utc>,
    within: Duration,
) {
    if claimed.trigger != Trigger::Schedule
        || started_at - claimed.due_at <= TimeDelta::from_std(within).unwrap_or(TimeDelta::MAX)
    {
        return;
    }
    let shared = Arc::clone(shared);
    let (task, tick) = (claimed.task_name.clone(), claimed.scheduled_at);
    tokio::spawn(async move {
        let mark = crate::store::AlertMark::new(
            &task,
            "task.late",
            tick.to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
        );
        match shared.store.mark_alerts(&[mark]).await {
            Ok(won) if !won.is_empty() => {
                tracing::warn!(task = %task, scheduled_at = %tick, start_within = ?within, "a tick started later than its start deadline");
                shared.events.emit(SchedulerEvent::Late {
                    task,
                    scheduled_at: tick,
                    start_within_ms: u64::try_from(within.as_millis()).unwrap_or(u64::MAX),
                });
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(task = %task, error = %e, "could not record a late start"),
        }
    });
}

/// The store's clock now, as estimated from the claim: its clock then, plus the time elapsed on
/// this node's monotonic clock (so a node's own wall clock never decides what is due).
fn db_clock(claimed: &ClaimedRun, claim_sent: Instant) -> DateTime<Utc> {
    db_clock_at(claimed, claim_sent, Instant::now())
}

/// The store's clock at `at` (on this node's monotonic clock), as estimated from the claim.
fn db_clock_at(claimed: &ClaimedRun, claim_sent: Instant, at: Instant) -> DateTime<Utc> {
    let elapsed =
        TimeDelta::from_std(at.saturating_duration_since(claim_sent)).unwrap_or(TimeDelta::zero());
    claimed.claimed_at + elapsed
}

fn run_ref(shared: &Shared, claimed: &ClaimedRun) -> RunRef {
    RunRef {
        task: claimed.task_name.clone(),
        run_id: claimed.run_id,
        scheduled_at: claimed.scheduled_at,
        attempt: claimed.attempt,
        trigger: claimed.trigger.as_str().into(),
        node: shared.node_id.to_string(),
    }
}

/// Hands the outcome (and the lease, renewed until it is written) to the completer; the
/// receiver is told when it is recorded or given up on (`None`: the completer is gone).
fn hand_over(
    shared: &Shared,
    finish: RunFinish,
    lease: Lease,
) -> Option<tokio::sync::oneshot::Receiver<()>> {
    let (recorded, done) = tokio::sync::oneshot::channel();
    shared
        .completions
        .send(Completion {
            finish,
            lease: Some(lease),
            recorded,
        })
        .ok()
        .map(|_| done)
}

mod ending;
#[cfg(test)]
mod tests;
