//! Runs one claimed run: the handler on a thread of its own (see [`super::runtime`]) behind its
//! lock's poll gate, told to stop on shutdown or lock loss and stopped when it must be (the
//! process stops itself rather than let a handler that cannot be stopped outlive its lock, see
//! [`super::failstop`]), panics caught, the outcome decided by [`outcome::decide`] and handed to
//! the completer together with the lease, which keeps the lock renewed until the outcome is
//! recorded. What the handler logs inside the run's span is captured by [`crate::run_log`] and
//! written before the outcome.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::OwnedSemaphorePermit;
use tokio::time::Instant;
use tracing::Instrument;

use super::Shared;
use super::completer::Completion;
use super::failstop;
use super::gate::{Gated, Stopped};
use super::outcome::{self, Ending, StopReason};
use super::runtime::Joined;
use super::watchdog::{Lease, LockLoss};
use crate::TaskContext;
use crate::events::{RunRef, SchedulerEvent};
use crate::run_log::RunLogCapture;
use crate::schedule::ScheduleSpec;
use crate::store::{
    ClaimedRun, LockKey, Requeue, RunFinish, RunStatus, SkipReason, SkipRecord, Trigger,
};
use crate::ticks::{RUN_COUNTED_TICKS, skipped_ticks};
use chrono::{DateTime, TimeDelta, Utc};

/// Runs `claimed` holding one handler slot (`permit`), freed as soon as the handler is done so
/// the claim loop can refill it while the outcome is being recorded. `lease` was taken when the
/// claim was sent; the handler starts at `start_at` (later than now if its tick was claimed
/// ahead of it).
pub(crate) async fn run(
    shared: Arc<Shared>,
    claimed: ClaimedRun,
    spec: Option<ScheduleSpec>,
    lease: Lease,
    permit: OwnedSemaphorePermit,
    claim_sent: Instant,
    start_at: Instant,
) {
    let span = tracing::info_span!(
        "task_run",
        task = %claimed.task_name,
        run_id = claimed.run_id,
        scheduled_at = %claimed.scheduled_at,
        attempt = claimed.attempt,
        trigger = %claimed.trigger,
        node = %shared.node_id,
    );
    async move {
        if start_at > Instant::now() {
            // Claimed ahead of its tick: start on it. A drain that begins meanwhile hands the
            // run back unstarted, like a run claimed while the node drains.
            tokio::select! {
                () = tokio::time::sleep_until(start_at) => {}
                () = shared.handlers_cancel.cancelled() => {}
            }
        }
        let started = Instant::now();
        let was_started = !shared.handlers_cancel.is_cancelled();
        let mut capture = None;
        let (ending, stop, lease) = if !was_started {
            // Claimed while the node began to drain: hand it back untouched.
            (Ending::NotStarted, Some(StopReason::Shutdown), lease)
        } else {
            tracing::info!("run started");
            shared.events.emit(SchedulerEvent::RunStarted {
                run: run_ref(&shared, &claimed),
            });
            shared.metrics.run_started(
                &claimed.task_name,
                claimed.scheduled_at,
                claimed.trigger.as_str(),
                db_clock(&claimed, claim_sent),
            );
            // What the handler logs inside this span is kept with the run.
            capture = RunLogCapture::start(
                &tracing::Span::current(),
                claimed.run_id,
                Arc::clone(&shared.store),
            );
            execute(&shared, &claimed, lease).await
        };
        drop(permit);
        shared.wake.notify_one();
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
            decision.end.clone(),
            decision.failures,
        );
        let now = db_clock(&claimed, claim_sent);
        if decision.hand_over {
            // The same run again at once; the run that serves it accounts for later ticks.
            finish.requeue = Some(outcome::requeue_of(
                claimed.trigger,
                claimed.scheduled_at,
                claimed.attempt,
                claimed.triggered_by.clone(),
                now,
            ));
        } else if let Some(spec) = spec {
            if claimed.trigger == Trigger::Schedule {
                finish.skips = account_skips(&claimed, spec.clone()).await;
            }
            if decision.may_retry {
                plan_retry(&shared, &claimed, &spec, &mut finish, now);
            }
        }
        emit_end(&shared, &claimed, &finish, duration_ms);
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
        record(&shared, finish, lease).await;
    }
    .instrument(span)
    .await
}

/// The store's clock now, as estimated from the claim: its clock then, plus the time elapsed on
/// this node's monotonic clock (so a node's own wall clock never decides what is due).
fn db_clock(claimed: &ClaimedRun, claim_sent: Instant) -> DateTime<Utc> {
    let elapsed = TimeDelta::from_std(claim_sent.elapsed()).unwrap_or(TimeDelta::zero());
    claimed.claimed_at + elapsed
}

/// A failed or timed-out run with retries left is tried again after its backoff, unless the
/// retry would reach the task's next scheduled tick: then it gives way (recorded). Manual runs
/// are not retried (whoever asked sees the outcome).
fn plan_retry(
    shared: &Shared,
    claimed: &ClaimedRun,
    spec: &ScheduleSpec,
    finish: &mut RunFinish,
    now: DateTime<Utc>,
) {
    if !matches!(finish.end.status, RunStatus::Failed | RunStatus::TimedOut)
        || claimed.trigger == Trigger::Manual
    {
        return;
    }
    let Some(descriptor) = shared.registry.get(&claimed.task_name) else {
        return;
    };
    let settings = shared.settings.task_settings(&descriptor.options);
    let retries = i32::try_from(settings.retries).unwrap_or(i32::MAX);
    if claimed.attempt > retries {
        return;
    }
    let at = now
        + TimeDelta::from_std(retry_delay(settings.backoff, claimed.attempt))
            .unwrap_or(TimeDelta::zero());
    let next_tick = spec.next_after(now);
    if next_tick.is_some_and(|next| at >= next) {
        let mut skip = SkipRecord::new(
            &claimed.task_name,
            SkipReason::RetryGaveWay,
            claimed.scheduled_at,
            claimed.scheduled_at,
            1,
        );
        skip.run_id = Some(claimed.run_id);
        tracing::info!(
            next_attempt = claimed.attempt + 1,
            "the retry would reach the next tick: it gives way to it"
        );
        finish.skips.push(skip);
        return;
    }
    let attempt = claimed.attempt + 1;
    tracing::info!(next_attempt = attempt, retry_at = %at, "retry scheduled");
    shared.events.emit(SchedulerEvent::RetryScheduled {
        run: run_ref(shared, claimed),
        next_attempt: attempt,
        retry_at: at,
    });
    finish.requeue = Some(Requeue::Retry {
        tick: claimed.scheduled_at,
        attempt,
        at,
    });
}

/// The pause before retry `attempt + 1`: `backoff` doubled per earlier attempt, capped at a
/// day, with "equal jitter" (half fixed, half random) so nodes retrying together drift apart.
pub(crate) fn retry_delay(backoff: Duration, attempt: i32) -> Duration {
    let exp = u32::try_from(attempt.saturating_sub(1))
        .unwrap_or(0)
        .min(20);
    let full = backoff
        .saturating_mul(1u32 << exp)
        .min(Duration::from_secs(86_400));
    full / 2 + (full / 2).mul_f64(super::random_fraction())
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

/// The events of a run's end: how it ended, and the ticks it stands for.
fn emit_end(shared: &Shared, claimed: &ClaimedRun, finish: &RunFinish, duration_ms: u64) {
    let run = run_ref(shared, claimed);
    let error = finish.end.error.clone().unwrap_or_default();
    shared.events.emit(match finish.end.status {
        RunStatus::Succeeded => SchedulerEvent::RunSucceeded { run, duration_ms },
        RunStatus::Interrupted if finish.requeue.is_none() => {
            SchedulerEvent::RunAbandoned { run, reason: error }
        }
        RunStatus::Interrupted => SchedulerEvent::RunInterrupted { run, reason: error },
        RunStatus::TimedOut => SchedulerEvent::RunTimedOut {
            run,
            error,
            duration_ms,
        },
        _ => SchedulerEvent::RunFailed {
            run,
            error,
            duration_ms,
        },
    });
    for skip in &finish.skips {
        // (ticks a run stands for, and a retry that gave way)
        shared.report_skip(skip, false);
    }
}

async fn account_skips(claimed: &ClaimedRun, spec: ScheduleSpec) -> Vec<crate::store::SkipRecord> {
    let (task, scheduled, claimed_at, previous, run_id) = (
        claimed.task_name.clone(),
        claimed.scheduled_at,
        claimed.claimed_at,
        claimed.previous_finished_at,
        claimed.run_id,
    );
    let count = move || {
        skipped_ticks(
            &task,
            &spec,
            scheduled,
            claimed_at,
            previous,
            Some(run_id),
            RUN_COUNTED_TICKS,
        )
    };
    if claimed_at - scheduled < chrono::TimeDelta::minutes(10) {
        count()
    } else {
        // Many ticks to walk after a long outage: off the async workers.
        tokio::task::spawn_blocking(count).await.unwrap_or_default()
    }
}

/// Runs the handler until it returns or is stopped; returns how it ended, why it was asked to
/// stop (if it was), and the lease.
async fn execute(
    shared: &Arc<Shared>,
    claimed: &ClaimedRun,
    mut lease: Lease,
) -> (Ending, Option<StopReason>, Lease) {
    let Some(descriptor) = shared.registry.get(&claimed.task_name) else {
        // Claims are filtered by the registered names, so this is a bug, not a user error.
        return (
            Ending::Returned(Err("task is not registered on this node".into())),
            None,
            lease,
        );
    };
    let cancel = shared.handlers_cancel.child_token();
    let ctx = TaskContext::new(
        Arc::from(claimed.task_name.as_str()),
        claimed.run_id,
        claimed.scheduled_at,
        Arc::clone(&shared.node_id),
        cancel.clone(),
        shared.state.clone(),
    );
    let handler = descriptor.handler;
    let settings = shared.settings.task_settings(&descriptor.options);
    let started = Instant::now();
    // Past the timeout the handler is told; a grace later it is stopped.
    let timeout = settings.timeout.map(|t| {
        let grace = (t / 10).clamp(Duration::from_millis(100), Duration::from_secs(10));
        (t, started + t, started + t + grace)
    });
    let gate = Arc::clone(lease.gate());
    // Calling the handler inside the future means even a panic while building it is caught.
    let mut handle = shared
        .handlers()
        .spawn(Gated::new(async move { handler(ctx).await }, gate).in_current_span());
    let mut stop: Option<StopReason> = None;
    let mut lock_lost = false;
    let mut timed_out = false;
    let far = Instant::now() + Duration::from_secs(86_400 * 365);
    let ending = loop {
        let stop_at = lease.stop_at();
        tokio::select! {
            joined = &mut handle => break from_join(joined),
            loss = lease.lost(), if !lock_lost => {
                let taken_over = loss == LockLoss::TakenOver;
                if taken_over {
                    // Somebody else may already be running it: not one more step, not even the
                    // one that would see the request to stop (the handler's thread polls it as
                    // soon as it is woken).
                    lease.gate().close();
                }
                cancel.cancel();
                lock_lost = true;
                shared.metrics.lock_lost(taken_over);
                tracing::error!(reason = %loss.describe(), "asking the handler to stop: its lock can no longer be trusted");
                stop = Some(StopReason::LockLost(loss.clone()));
                if taken_over {
                    // Somebody else may already be running it: stop at once.
                    break hard_stop(claimed, &mut lease, &mut handle, Some(loss)).await;
                }
            }
            // Whatever else is going on (a drain, too), a lost lock's deadline stands.
            _ = tokio::time::sleep_until(stop_at), if lock_lost => {
                if Instant::now() >= lease.stop_at() {
                    let loss = match &stop {
                        Some(StopReason::LockLost(loss)) => Some(loss.clone()),
                        _ => None,
                    };
                    break hard_stop(claimed, &mut lease, &mut handle, loss).await;
                }
            }
            _ = tokio::time::sleep_until(timeout.map_or(far, |t| t.1)), if timeout.is_some() && !timed_out => {
                timed_out = true;
                cancel.cancel();
                let limit = timeout.expect("guarded").0;
                tracing::warn!(timeout = ?limit, "the run exceeded its timeout: asking the handler to stop");
                stop.get_or_insert(StopReason::Timeout(limit));
            }
            _ = tokio::time::sleep_until(timeout.map_or(far, |t| t.2)), if timed_out => {
                break hard_stop(claimed, &mut lease, &mut handle, None).await;
            }
            _ = shared.handlers_cancel.cancelled(), if stop.is_none() => {
                stop = Some(StopReason::Shutdown);
            }
            _ = shared.hard_stop.cancelled() => {
                stop.get_or_insert(StopReason::Shutdown);
                break hard_stop(claimed, &mut lease, &mut handle, None).await;
            }
        }
    };
    // The handler may have seen the shutdown and returned in the same instant the loop would
    // have noticed it: the request counts all the same.
    if stop.is_none() && shared.handlers_cancel.is_cancelled() {
        stop = Some(StopReason::Shutdown);
    }
    (ending, stop, lease)
}

/// What a handler's gated future returns.
type HandlerOutput = Result<Result<(), crate::registry::TaskError>, Stopped>;

/// Where a handler's thread hands back what it returned.
type HandlerJoin = tokio::sync::oneshot::Receiver<Joined<HandlerOutput>>;

/// How long a handler whose lock was found taken over may take to leave its poll before the
/// process stops itself: another node may be running the task already.
const TAKEN_OVER_WAIT: Duration = Duration::from_millis(50);

/// Closes the gate, which stops a handler parked at an `.await` at once, and waits for the
/// handler to be gone. A handler that blocks its thread cannot be stopped: it is waited for as
/// long as its lock is kept (renewals go on while the database answers and the node runs); once
/// the lock cannot be kept (`lost` now or later: not renewed past its fail-stop deadline, or
/// taken over), the process stops itself (see [`failstop`]).
async fn hard_stop(
    claimed: &ClaimedRun,
    lease: &mut Lease,
    handle: &mut HandlerJoin,
    mut lost: Option<LockLoss>,
) -> Ending {
    let gate = Arc::clone(lease.gate());
    gate.close();
    let mut taken_over_at = matches!(lost, Some(LockLoss::TakenOver)).then(Instant::now);
    let mut reported = false;
    let report_at = Instant::now() + Duration::from_secs(1);
    let far = Instant::now() + Duration::from_secs(86_400 * 365);
    let mut recheck = Instant::now();
    let joined = loop {
        let fail_stop_at = match (&lost, taken_over_at) {
            (_, Some(at)) => at + TAKEN_OVER_WAIT,
            (Some(_), None) => lease.fail_stop_at(),
            (None, None) => far,
        };
        tokio::select! {
            joined = &mut *handle => break joined,
            loss = lease.lost(), if lost.is_none() => {
                if loss == LockLoss::TakenOver {
                    taken_over_at = Some(Instant::now());
                }
                lost = Some(loss);
            }
            _ = tokio::time::sleep_until(report_at), if !reported => {
                reported = true;
                tracing::error!(
                    "the handler did not stop when stopped: it is blocking its thread (CPU work \
                     or blocking I/O without an .await) and cannot be stopped until it yields; \
                     its lock is kept while the database answers, and the node stops itself if \
                     it cannot be"
                );
            }
            _ = tokio::time::sleep_until(fail_stop_at.max(recheck)), if lost.is_some() => {
                if taken_over_at.is_none() && Instant::now() < lease.fail_stop_at() {
                    continue; // renewed meanwhile (the database is back): the deadline moved on
                }
                if gate.blocked_for().is_none() {
                    // Parked at an .await: the closed gate never polls it again, and it is
                    // on its way out.
                    recheck = Instant::now() + Duration::from_millis(10);
                    continue;
                }
                let why = match lost.as_ref().expect("guarded") {
                    LockLoss::TakenOver => "another node released its lock".to_owned(),
                    LockLoss::Unrenewable(e) => {
                        format!("its lock could not be renewed before it could expire ({e})")
                    }
                };
                failstop::exit_now(&claimed.task_name, claimed.run_id, &why);
            }
        }
    };
    match from_join(joined) {
        // It returned in the same instant: its own result stands.
        Ending::Returned(r) => Ending::Returned(r),
        Ending::Panicked(p) => Ending::Panicked(p),
        _ => Ending::Stopped,
    }
}

fn from_join(
    joined: Result<Joined<HandlerOutput>, tokio::sync::oneshot::error::RecvError>,
) -> Ending {
    match joined {
        Ok(Ok(Ok(result))) => Ending::Returned(result),
        Ok(Ok(Err(Stopped))) => Ending::Stopped,
        Ok(Err(payload)) => {
            let msg = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "non-string panic payload".into());
            Ending::Panicked(msg)
        }
        // The thread went away without a word (its runtime shut down).
        Err(_) => Ending::Stopped,
    }
}

/// Hands the outcome (and the lease, renewed until it is written) to the completer and waits
/// until it is recorded or given up on.
async fn record(shared: &Shared, finish: RunFinish, lease: Lease) {
    let (recorded, done) = tokio::sync::oneshot::channel();
    if shared
        .completions
        .send(Completion {
            finish,
            lease: Some(lease),
            recorded,
        })
        .is_ok()
    {
        let _ = done.await;
    }
}
