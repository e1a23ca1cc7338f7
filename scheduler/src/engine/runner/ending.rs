//! What a run's end records besides how it ended: the retry it plans, the ticks it stands for,
//! and the events that say so.

use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};

use crate::engine::shared::Shared;
use crate::events::SchedulerEvent;
use crate::schedule::ScheduleSpec;
use crate::store::{ClaimedRun, Requeue, RunFinish, RunStatus, SkipReason, SkipRecord, Trigger};
use crate::ticks::{RUN_COUNTED_TICKS, skipped_ticks};

/// A failed or timed-out run with retries left is tried again after its backoff, unless the
/// retry would reach the task's next scheduled tick: then it gives way (recorded). Manual runs
/// and backfill runs are not retried (whoever asked sees the outcome).
pub(super) fn plan_retry(
    shared: &Shared,
    claimed: &ClaimedRun,
    spec: &ScheduleSpec,
    finish: &mut RunFinish,
    now: DateTime<Utc>,
) {
    if !matches!(finish.end.status, RunStatus::Failed | RunStatus::TimedOut)
        || matches!(claimed.trigger, Trigger::Manual | Trigger::Backfill)
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
        run: super::run_ref(shared, claimed),
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
pub(super) fn retry_delay(backoff: Duration, attempt: i32) -> Duration {
    let exp = u32::try_from(attempt.saturating_sub(1))
        .unwrap_or(0)
        .min(20);
    let full = backoff
        .saturating_mul(1u32 << exp)
        .min(Duration::from_secs(86_400));
    full / 2 + (full / 2).mul_f64(crate::engine::service::random_fraction())
}

/// The events of a run's end: how it ended, and the ticks it stands for.
pub(super) fn emit_end(
    shared: &Shared,
    claimed: &ClaimedRun,
    finish: &RunFinish,
    duration_ms: u64,
) {
    let run = super::run_ref(shared, claimed);
    let error = finish.end.error.clone().unwrap_or_default();
    shared.events.emit(match finish.end.status {
        RunStatus::Succeeded => SchedulerEvent::RunSucceeded { run, duration_ms },
        RunStatus::Interrupted if finish.requeue.is_none() => {
            SchedulerEvent::RunAbandoned { run, reason: error }
        }
        RunStatus::Interrupted => SchedulerEvent::RunInterrupted { run, reason: error },
        RunStatus::Cancelled => SchedulerEvent::RunCancelled { run, reason: error },
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

pub(super) async fn account_skips(
    claimed: &ClaimedRun,
    spec: ScheduleSpec,
) -> Vec<crate::store::SkipRecord> {
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
