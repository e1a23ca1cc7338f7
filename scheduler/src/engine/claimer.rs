//! The claim loop: sleeps until the earliest thing this node could claim is due, claims due ticks
//! in batches bounded by free handler slots, and hands each run to the runner.
//!
//! No busy polling: the loop sleeps until the store's next wake time, wakes early on a change
//! notification (another node released a lock, a config was applied) or when one of its own
//! handlers finishes, and re-checks at least every poll interval as a safety net.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{Shared, backoff, runner};
use crate::schedule::SpecCache;
use crate::store::{ClaimPlan, DueTask, RescuedLock};

/// How long to wait before looking again when something was due but nothing could be claimed
/// (another node was claiming the same rows at that instant).
const CONTENDED_RETRY: Duration = Duration::from_millis(20);
/// How long to wait for a batch of handler slots to free up after filling all of them.
const REFILL_WAIT: Duration = Duration::from_millis(5);
/// Missed ticks are counted up to this many (`ticks_collapsed` saturates there), so a claim
/// after a long outage of an every-second task stays cheap.
const MAX_COUNTED_TICKS: usize = 10_000;

/// What one claim pass did.
#[derive(Debug, Default)]
pub(crate) struct ClaimPass {
    /// Locks released because they expired.
    pub rescued: Vec<RescuedLock>,
    /// Runs started.
    pub claimed: usize,
    /// No free handler slot: wait for a handler to finish.
    pub saturated: bool,
    /// Something was due but nothing could be claimed.
    pub contended: bool,
    /// Every free slot was filled: more may be due.
    pub filled: bool,
    /// How long until something may be due (`None`: nothing scheduled).
    pub wake_in: Option<Duration>,
}

/// The plan for a due task: the tick it serves, the next run strictly after the DB's now, and how
/// many ticks in between are folded into this run (never a burst of catch-up runs).
pub(crate) fn plan_claim(specs: &SpecCache, task: &DueTask, db_now: DateTime<Utc>) -> ClaimPlan {
    match specs.get_named(&task.cron, &task.timezone) {
        Ok(spec) => {
            let from = db_now.max(task.next_run_at);
            let collapsed = spec.count_fires(task.next_run_at, db_now, MAX_COUNTED_TICKS);
            ClaimPlan {
                scheduled_at: task.next_run_at,
                next_run_at: spec.next_after(from),
                ticks_collapsed: i32::try_from(collapsed).unwrap_or(i32::MAX),
            }
        }
        Err(e) => {
            tracing::error!(task = %task.name, cron = %task.cron, error = %e, "stored schedule is invalid; running this tick and not scheduling another until the config fixes it");
            ClaimPlan {
                scheduled_at: task.next_run_at,
                next_run_at: None,
                ticks_collapsed: 0,
            }
        }
    }
}

pub(crate) struct ClaimLoop {
    shared: Arc<Shared>,
    specs: SpecCache,
}

impl ClaimLoop {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        Self {
            shared,
            specs: SpecCache::default(),
        }
    }

    /// One pass: claim everything due now that fits in the free handler slots. With
    /// `known_due` (the loop slept until a due time the store gave it) the wake-time query is
    /// skipped and the claim runs at once.
    pub(crate) async fn run_once(&self, known_due: bool) -> Result<ClaimPass, sqlx::Error> {
        let shared = &self.shared;
        if !known_due {
            let info = shared.store.next_wake(&shared.names).await?;
            if info.wake_at.is_none_or(|w| w > info.db_now) {
                let wake_in = info
                    .wake_at
                    .map(|w| (w - info.db_now).to_std().unwrap_or(Duration::ZERO));
                return Ok(ClaimPass {
                    wake_in,
                    ..ClaimPass::default()
                });
            }
        }
        let limit = shared.permits.available_permits();
        let sent = Instant::now();
        let planner = |task: &DueTask, db_now| plan_claim(&self.specs, task, db_now);
        let (rescued, claimed) = shared
            .store
            .claim_due(
                &shared.node_id,
                &shared.names,
                limit,
                shared.settings.lock_lifetime,
                &planner,
            )
            .await?;
        for lock in &rescued {
            tracing::warn!(
                task = %lock.task_name,
                previous_owner = %lock.previous_owner,
                lost_run_id = lock.lost_run_id,
                "released an expired lock; its run is recorded lost and the tick runs again"
            );
        }
        let n = claimed.len();
        if n > 0 {
            tracing::debug!(claimed = n, limit, elapsed = ?sent.elapsed(), "claimed due runs");
        }
        for run in claimed {
            let Ok(permit) = Arc::clone(&shared.permits).try_acquire_owned() else {
                // Only this loop acquires permits and it claimed no more than were free.
                unreachable!("claimed more runs than free handler slots");
            };
            let task_shared = Arc::clone(shared);
            shared
                .tracker
                .spawn(runner::run(task_shared, run, sent, permit));
        }
        Ok(ClaimPass {
            claimed: n,
            filled: n == limit && limit > 0,
            saturated: limit == 0,
            contended: n == 0 && rescued.is_empty() && limit > 0,
            rescued,
            wake_in: Some(Duration::ZERO),
        })
    }

    /// Claims until `stop` is cancelled, surviving database outages with backoff.
    pub(crate) async fn run(self, stop: CancellationToken) {
        let shared = Arc::clone(&self.shared);
        let poll = shared.settings.poll_interval;
        let refill_batch = u32::try_from((shared.settings.max_concurrent / 2).max(1)).unwrap_or(1);
        let mut failures = 0u32;
        let mut known_due = false;
        while !stop.is_cancelled() {
            let pass = self.run_once(std::mem::take(&mut known_due)).await;
            if let Ok(pass) = &pass
                && pass.filled
            {
                // Every free slot was taken and more is probably due: let a batch of slots free
                // up (briefly) so the next claim is one transaction for many tasks, not one per
                // finished handler, and claim again without asking for the wake time first.
                let _ =
                    tokio::time::timeout(REFILL_WAIT, shared.permits.acquire_many(refill_batch))
                        .await;
                known_due = true;
                continue;
            }
            let mut due_at_end = false;
            let pause = match pass {
                Ok(pass) => {
                    if failures > 0 {
                        tracing::info!(
                            after_failures = failures,
                            "database reachable again; scheduling resumed"
                        );
                        failures = 0;
                    }
                    if pass.claimed > 0 || !pass.rescued.is_empty() {
                        Duration::ZERO
                    } else if pass.saturated {
                        poll
                    } else if pass.contended {
                        CONTENDED_RETRY
                    } else {
                        match pass.wake_in {
                            Some(w) if w < poll => {
                                due_at_end = true;
                                w
                            }
                            _ => poll,
                        }
                    }
                }
                Err(e) => {
                    let pause = backoff(failures);
                    if failures == 0 {
                        tracing::error!(error = %e, retry_in = ?pause, "cannot reach the database; running handlers continue, claiming paused");
                    } else {
                        tracing::debug!(error = %e, retry_in = ?pause, "database still unreachable");
                    }
                    failures += 1;
                    pause
                }
            };
            if pause.is_zero() {
                continue;
            }
            tokio::select! {
                _ = tokio::time::sleep(pause) => known_due = due_at_end,
                _ = shared.wake.notified() => {}
                _ = stop.cancelled() => break,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    fn due(cron: &str, next: &str) -> DueTask {
        DueTask {
            name: "t".into(),
            cron: cron.into(),
            timezone: "UTC".into(),
            next_run_at: at(next),
        }
    }

    #[test]
    fn an_on_time_claim_serves_its_tick_and_schedules_the_next() {
        let plan = plan_claim(
            &SpecCache::default(),
            &due("* * * * *", "2026-01-01T10:00:00Z"),
            at("2026-01-01T10:00:00.004Z"),
        );
        assert_eq!(plan.scheduled_at, at("2026-01-01T10:00:00Z"));
        assert_eq!(plan.next_run_at, Some(at("2026-01-01T10:01:00Z")));
        assert_eq!(plan.ticks_collapsed, 0);
    }

    #[test]
    fn a_late_claim_folds_the_missed_ticks_into_one_run() {
        let plan = plan_claim(
            &SpecCache::default(),
            &due("* * * * *", "2026-01-01T10:00:00Z"),
            at("2026-01-01T10:05:30Z"),
        );
        assert_eq!(plan.scheduled_at, at("2026-01-01T10:00:00Z"));
        assert_eq!(plan.ticks_collapsed, 5, "10:01 to 10:05");
        assert_eq!(
            plan.next_run_at,
            Some(at("2026-01-01T10:06:00Z")),
            "strictly after now"
        );
    }

    #[test]
    fn a_long_outage_is_counted_up_to_the_cap() {
        let plan = plan_claim(
            &SpecCache::default(),
            &due("* * * * * *", "2026-01-01T00:00:00Z"),
            at("2026-01-02T00:00:00Z"),
        );
        assert_eq!(plan.ticks_collapsed, MAX_COUNTED_TICKS as i32);
        assert_eq!(plan.next_run_at, Some(at("2026-01-02T00:00:01Z")));
    }

    #[test]
    fn an_invalid_stored_schedule_runs_once_and_schedules_nothing() {
        let plan = plan_claim(
            &SpecCache::default(),
            &due("61 * * * *", "2026-01-01T10:00:00Z"),
            at("2026-01-01T10:00:01Z"),
        );
        assert_eq!(plan.next_run_at, None);
    }
}
