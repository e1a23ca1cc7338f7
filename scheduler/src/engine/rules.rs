//! The engine's decisions inside a claim ([`ClaimRules`]): when an expired lock may be
//! released, what a due task's run serves and schedules next, and which ticks a run stands for
//! without running them.
//!
//! **Takeover.** A lock past its expiry is released only after this node, while it could reach
//! the store, has watched it stay expired, with the same token, for a whole takeover wait (the
//! renew interval by default). An owner that is alive renews its locks every renew interval —
//! also the locks of runs whose outcome is still waiting to be written, and also after they
//! expired, since renewal is fenced by token, not expiry — and retries a failed renewal every
//! quarter interval. So a lock still expired after the wait belongs to a node that could not
//! reach the store for a lock lifetime plus the wait while this one could: dead, paused or cut
//! off, and already stopped its handler (it does so before the lock can expire). A database
//! outage that every node saw does not count: the watching starts when this node is back, and
//! the owner is back too. This node never releases a lock it holds itself.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use tokio::time::Instant;

use super::TaskPolicy;
use super::outcome;
use super::watchdog::LockWatchdog;
use crate::TaskRegistry;
use crate::policy::Misfire;
use crate::schedule::{FireSpan, ScheduleSpec, SpecCache};
use crate::store::{
    ClaimPlan, ClaimRules, DueDecision, DueTask, ExpiredLock, LockKey, NextRun, RescueDecision,
    SkipReason, SkipRecord, Trigger,
};

/// Ticks counted one by one for a skip record, at most; beyond, the record says "at least".
/// (A schedule that repeats every minute, hour or day in a zone of fixed offset, UTC say, is
/// counted by arithmetic instead, exactly and at no cost per tick: `ScheduleSpec::span`.)
pub(crate) const MAX_COUNTED_TICKS: usize = 1_000_000;

/// Ticks the end of one late run counts one by one, at most (the ticks it folded in, misfire
/// `once`): its outcome waits for the count, and a burst of runs after a long outage would each
/// walk up to [`MAX_COUNTED_TICKS`] (500 of them put a node's load at 123). 10,000 is nearly
/// three hours of an every-second schedule, a week of an every-minute one; beyond, the record
/// says "at least". (Arithmetic counts, as in UTC, are exact whatever the number.)
pub(crate) const RUN_COUNTED_TICKS: usize = 10_000;

/// Ticks one claim counts one by one, at most, over all the tasks it plans: the planning runs
/// inside the claim transaction, after the node started the lease clock of the runs it claims,
/// so it must not take a noticeable part of a lease. A search takes 0.2 to 3.5 µs
/// (BENCHMARKS.md, "Next fire time"): 200,000 of them, 40 to 700 ms. Each task gets an even
/// share for the most rows a claim can hold (`max_concurrent`), and at least
/// [`MIN_CLAIM_TICKS_PER_TASK`].
pub(crate) const CLAIM_TICK_BUDGET: usize = 200_000;

/// The fewest ticks a claim counts one by one for a task, however many tasks it may hold.
pub(crate) const MIN_CLAIM_TICKS_PER_TASK: usize = 10;

/// How many ticks a claim counts one by one per task, with `max_concurrent` handler slots.
pub(crate) fn claim_tick_cap(max_concurrent: usize) -> usize {
    (CLAIM_TICK_BUDGET / max_concurrent.max(1)).clamp(MIN_CLAIM_TICKS_PER_TASK, MAX_COUNTED_TICKS)
}

/// Expired locks being watched before release.
#[derive(Debug, Default)]
pub(crate) struct Takeover {
    /// When each expired lock was first seen expired (local monotonic clock).
    watched: Mutex<HashMap<LockKey, Instant>>,
}

impl Takeover {
    fn watched(&self) -> std::sync::MutexGuard<'_, HashMap<LockKey, Instant>> {
        self.watched.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// After a pass: forget locks no longer expired (renewed or released) and report when the
    /// next watched one is due for a decision.
    pub(crate) fn retain_waiting(
        &self,
        waiting: &[ExpiredLock],
        wait: Duration,
    ) -> Option<Instant> {
        let mut watched = self.watched();
        watched.retain(|k, _| waiting.iter().any(|l| &l.key == k));
        watched.values().map(|seen| *seen + wait).min()
    }

    /// When the next watched lock is due for a decision, if any is watched.
    pub(crate) fn next_decision(&self, wait: Duration) -> Option<Instant> {
        self.watched().values().map(|seen| *seen + wait).min()
    }

    /// Forgets everything seen: after a failure to reach the store, watching starts over.
    pub(crate) fn reset(&self) {
        self.watched().clear();
    }
}

/// A due task whose stored schedule this binary cannot read (a newer node wrote it, or the row
/// was edited by hand).
#[derive(Debug, Clone)]
pub(crate) struct Unreadable {
    pub name: String,
    pub cron: String,
    pub timezone: String,
    pub due: DateTime<Utc>,
    pub error: String,
}

/// A task planned to run: its schedule and the next run scheduled after this one.
pub(crate) type Planned = (ScheduleSpec, Option<DateTime<Utc>>);

/// The claim policy of one node.
pub(crate) struct Rules<'a> {
    pub registry: &'a TaskRegistry,
    pub specs: &'a SpecCache,
    pub watchdog: &'a Arc<LockWatchdog>,
    pub takeover: &'a Takeover,
    pub takeover_wait: Duration,
    pub settings: &'a super::Settings,
    /// How far ahead of its tick the claim runs (see [`Rules::claiming_ahead`]).
    pub ahead: TimeDelta,
    /// The schedules (and next runs) of the tasks planned to run in this claim.
    pub planned: Mutex<HashMap<String, Planned>>,
    /// Tasks left alone because their stored schedule cannot be read.
    pub unreadable: Mutex<Vec<Unreadable>>,
}

impl<'a> Rules<'a> {
    pub(crate) fn new(
        registry: &'a TaskRegistry,
        specs: &'a SpecCache,
        watchdog: &'a Arc<LockWatchdog>,
        takeover: &'a Takeover,
        takeover_wait: Duration,
        settings: &'a super::Settings,
    ) -> Self {
        Self {
            registry,
            specs,
            watchdog,
            takeover,
            takeover_wait,
            settings,
            ahead: TimeDelta::zero(),
            planned: Mutex::new(HashMap::new()),
            unreadable: Mutex::new(Vec::new()),
        }
    }

    /// Plans the ticks a claim takes ahead (due within `ahead`) as of their own time.
    pub(crate) fn claiming_ahead(mut self, ahead: Duration) -> Self {
        self.ahead = TimeDelta::from_std(ahead).unwrap_or(TimeDelta::zero());
        self
    }

    fn policy_of(&self, task: &str) -> TaskPolicy {
        match self.registry.get(task) {
            Some(d) => self.settings.policy_of(&d.options),
            None => self
                .settings
                .policy_of(&crate::registry::TaskOptions::DEFAULT),
        }
    }

    fn unreadable(&self, task: &DueTask, error: String) -> DueDecision {
        self.unreadable
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(Unreadable {
                name: task.name.clone(),
                cron: task.cron.clone(),
                timezone: task.timezone.clone(),
                due: task.next_run_at.unwrap_or_default(),
                error,
            });
        DueDecision::Leave
    }

    fn remember(&self, task: &str, spec: ScheduleSpec, next: Option<DateTime<Utc>>) {
        self.planned
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(task.to_owned(), (spec, next));
    }
}

impl ClaimRules for Rules<'_> {
    fn rescue(&self, lock: &ExpiredLock, db_now: DateTime<Utc>) -> RescueDecision {
        if self.watchdog.holds(&lock.key) {
            // Ours: the run is going, or its outcome is on its way. Look again later.
            self.takeover
                .watched()
                .insert(lock.key.clone(), Instant::now());
            return RescueDecision::Wait;
        }
        let mut watched = self.takeover.watched();
        let seen = *watched.entry(lock.key.clone()).or_insert_with(Instant::now);
        if seen.elapsed() < self.takeover_wait {
            return RescueDecision::Wait;
        }
        watched.remove(&lock.key);
        outcome::unknown(lock, db_now)
    }

    fn plan(&self, task: &DueTask, db_now: DateTime<Utc>) -> DueDecision {
        let policy = self.policy_of(&task.name);
        let spec = match self.specs.get_named(&task.cron, &task.timezone) {
            Ok(spec) => spec,
            Err(e) if task.pause.is_none() && task.manual.is_none() => {
                return self.unreadable(task, e.to_string());
            }
            Err(e) => {
                // A manual run or the end of a pause needs no schedule to be read; the schedule
                // itself waits for a node that can read it.
                return match plan_without_schedule(task, &policy) {
                    Some(decision) => decision,
                    None => self.unreadable(task, e.to_string()),
                };
            }
        };
        // A tick claimed ahead is planned as if claimed on it (nothing about it is late, the
        // next run is the one after it); the run starts on it.
        let as_of = match task.next_run_at {
            Some(tick)
                if task.enabled
                    && task.pause.is_none()
                    && tick > db_now
                    && tick <= db_now + self.ahead =>
            {
                tick
            }
            _ => db_now,
        };
        let cap = claim_tick_cap(self.settings.max_concurrent);
        let decision = decide_due(task, &spec, &policy, as_of, cap);
        if let DueDecision::Run(plan) = &decision {
            let next = match plan.next_run_at {
                NextRun::Set(next) => next,
                NextRun::Keep => task.next_run_at,
            };
            self.remember(&task.name, spec, next);
        }
        decision
    }
}

/// What is due for `task`, by the engine's rules, in this order:
///
/// 1. an expired pause ends: its ticks are recorded `paused`, the schedule resumes after it;
/// 2. a manual run, as asked;
/// 3. a scheduled tick: a pending retry gives way to it (recorded `retry_gave_way`); with
///    `misfire = "skip"` a tick later than its misfire grace is skipped with every other due
///    tick (recorded), otherwise it runs (late) and the ticks after it are accounted for by
///    the run;
/// 4. a retry that is due.
///
/// Skip records count at most `cap` ticks each one by one (see [`CLAIM_TICK_BUDGET`]).
pub(crate) fn decide_due(
    task: &DueTask,
    spec: &ScheduleSpec,
    policy: &TaskPolicy,
    db_now: DateTime<Utc>,
    cap: usize,
) -> DueDecision {
    if let Some(pause) = &task.pause {
        let end = pause.until.unwrap_or(db_now).min(db_now);
        let skips = match task.next_run_at {
            Some(first) if first <= end => {
                ticks_between(&task.name, spec, first, end, SkipReason::Paused, cap)
            }
            _ => Vec::new(),
        };
        let next = match task.next_run_at {
            Some(next) if next > end => Some(next),
            _ => spec.next_after(end),
        };
        return DueDecision::Skip {
            next_run_at: NextRun::Set(next),
            clear_retry: false,
            clear_pause: true,
            skips,
        };
    }
    if let Some(plan) = manual_plan(task, policy, db_now) {
        return DueDecision::Run(plan);
    }
    let tick_due = task.enabled && task.next_run_at.is_some_and(|t| t <= db_now);
    if let (true, Some(tick)) = (tick_due, task.next_run_at) {
        let mut skips = Vec::new();
        let clear_retry = task.retry.is_some();
        if let Some(retry) = &task.retry {
            skips.push(SkipRecord::new(
                &task.name,
                SkipReason::RetryGaveWay,
                retry.tick,
                retry.tick,
                1,
            ));
        }
        if policy.misfire == Misfire::Skip && db_now - tick > misfire_grace(spec, tick) {
            skips.extend(skipped_ticks(
                &task.name,
                spec,
                tick - TimeDelta::microseconds(1),
                db_now,
                task.last_finished_at,
                None,
                cap,
            ));
            return DueDecision::Skip {
                next_run_at: NextRun::Set(spec.next_after(db_now)),
                clear_retry,
                clear_pause: false,
                skips,
            };
        }
        let mut plan = ClaimPlan::scheduled(
            tick,
            spec.next_after(db_now.max(tick)),
            policy.recovery,
            policy.lock_lifetime,
        );
        plan.clear_retry = clear_retry;
        plan.skips = skips;
        return DueDecision::Run(plan);
    }
    match &task.retry {
        Some(retry) if task.enabled && retry.at <= db_now => {
            let mut plan =
                ClaimPlan::scheduled(retry.tick, None, policy.recovery, policy.lock_lifetime);
            plan.trigger = Trigger::Retry;
            plan.attempt = retry.attempt;
            plan.next_run_at = NextRun::Keep;
            plan.clear_retry = true;
            DueDecision::Run(plan)
        }
        _ => DueDecision::Leave,
    }
}

fn manual_plan(task: &DueTask, policy: &TaskPolicy, db_now: DateTime<Utc>) -> Option<ClaimPlan> {
    let manual = task.manual.as_ref().filter(|m| m.at <= db_now)?;
    let mut plan = ClaimPlan::scheduled(manual.at, None, policy.recovery, policy.lock_lifetime);
    plan.trigger = Trigger::Manual;
    plan.triggered_by = manual.by.clone();
    plan.next_run_at = NextRun::Keep;
    Some(plan)
}

/// A manual run, when the schedule itself cannot be read here.
fn plan_without_schedule(task: &DueTask, policy: &TaskPolicy) -> Option<DueDecision> {
    manual_plan(task, policy, DateTime::<Utc>::MAX_UTC).map(DueDecision::Run)
}

/// How late a tick may be claimed before `misfire = "skip"` skips it: half the interval to the
/// next tick, at least 1 s, at most 60 s (Quartz's default threshold).
pub(crate) fn misfire_grace(spec: &ScheduleSpec, tick: DateTime<Utc>) -> TimeDelta {
    let interval = spec
        .next_after(tick)
        .map_or(TimeDelta::seconds(120), |n| n - tick);
    (interval / 2).clamp(TimeDelta::seconds(1), TimeDelta::seconds(60))
}

/// The ticks from `first` to `last` (both included) as one record of `reason` (none if empty),
/// counting at most `cap` one by one.
pub(crate) fn ticks_between(
    task: &str,
    spec: &ScheduleSpec,
    first: DateTime<Utc>,
    last: DateTime<Utc>,
    reason: SkipReason,
    cap: usize,
) -> Vec<SkipRecord> {
    spec.span(first - TimeDelta::microseconds(1), last, cap)
        .map(|span| record_of(task, reason, span, last, None))
        .into_iter()
        .collect()
}

/// One skip record for `span`; one that is not exact ends at `until` and says "at least".
fn record_of(
    task: &str,
    reason: SkipReason,
    span: FireSpan,
    until: DateTime<Utc>,
    run_id: Option<i64>,
) -> SkipRecord {
    let ticks = i64::try_from(span.count).unwrap_or(i64::MAX);
    let mut record = SkipRecord::new(task, reason, span.first, span.last, ticks);
    record.run_id = run_id;
    if !span.exact {
        record.exact = false;
        record.last_tick = until;
    }
    record
}

/// The ticks in `(after, until]` that did not get a run of their own (a run serving `after`,
/// claimed at `until`, stands for them). Ticks due while the previous run was still running (up
/// to `previous_finished_at`) are an overlap; later ones a misfire (no node ran the task in
/// time). At most two records, one per reason, tied to `run_id` if given; at most `cap` ticks
/// counted one by one over both (beyond, the last record says "at least").
pub(crate) fn skipped_ticks(
    task: &str,
    spec: &ScheduleSpec,
    after: DateTime<Utc>,
    until: DateTime<Utc>,
    previous_finished_at: Option<DateTime<Utc>>,
    run_id: Option<i64>,
    cap: usize,
) -> Vec<SkipRecord> {
    let split = previous_finished_at
        .filter(|f| *f > after)
        .map(|f| f.min(until));
    let segments = match split {
        Some(f) => [
            Some((after, f, SkipReason::Overlap)),
            Some((f, until, SkipReason::Misfire)),
        ],
        None => [Some((after, until, SkipReason::Misfire)), None],
    };
    let mut records: Vec<SkipRecord> = Vec::new();
    let mut left = cap;
    for (low, high, reason) in segments.into_iter().flatten() {
        if left == 0 {
            // Out of ticks to walk: say so if this part has any.
            if let Some(last) = records.last_mut()
                && spec.next_after(low).is_some_and(|t| t <= high)
            {
                last.exact = false;
                last.last_tick = until;
            }
            break;
        }
        let Some(span) = spec.span(low, high, left) else {
            continue;
        };
        if span.walked {
            left -= usize::try_from(span.count).unwrap_or(left).min(left);
        }
        let exact = span.exact;
        records.push(record_of(task, reason, span, until, run_id));
        if !exact {
            break;
        }
    }
    records
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    #[test]
    fn an_on_time_run_stands_for_no_other_tick() {
        let spec = ScheduleSpec::parse("* * * * * *", "UTC").unwrap();
        let skips = skipped_ticks(
            "t",
            &spec,
            at("2026-01-01T00:00:00Z"),
            at("2026-01-01T00:00:00.400Z"),
            None,
            Some(1),
            MAX_COUNTED_TICKS,
        );
        assert!(skips.is_empty());
    }

    #[test]
    fn ticks_during_the_previous_run_are_an_overlap_and_later_ones_a_misfire() {
        let spec = ScheduleSpec::parse("* * * * * *", "UTC").unwrap();
        let skips = skipped_ticks(
            "t",
            &spec,
            at("2026-01-01T00:00:00Z"),
            at("2026-01-01T00:00:05.500Z"),
            Some(at("2026-01-01T00:00:02.500Z")),
            Some(9),
            MAX_COUNTED_TICKS,
        );
        assert_eq!(skips.len(), 2, "{skips:?}");
        assert_eq!(skips[0].reason, SkipReason::Overlap);
        assert_eq!(
            (skips[0].first_tick, skips[0].last_tick, skips[0].ticks),
            (at("2026-01-01T00:00:01Z"), at("2026-01-01T00:00:02Z"), 2)
        );
        assert_eq!(skips[1].reason, SkipReason::Misfire);
        assert_eq!(
            (skips[1].first_tick, skips[1].last_tick, skips[1].ticks),
            (at("2026-01-01T00:00:03Z"), at("2026-01-01T00:00:05Z"), 3)
        );
        assert!(skips.iter().all(|s| s.exact && s.run_id == Some(9)));
    }

    #[test]
    fn a_very_long_outage_is_counted_up_to_a_bound_and_says_so() {
        // A zone with daylight saving: its ticks are walked one by one.
        let spec = ScheduleSpec::parse("* * * * * *", "Europe/London").unwrap();
        let skips = skipped_ticks(
            "t",
            &spec,
            at("2026-01-01T00:00:00Z"),
            at("2026-01-20T00:00:00Z"),
            None,
            Some(1),
            1_000,
        );
        assert_eq!(skips.len(), 1);
        assert_eq!(skips[0].ticks, 1_000);
        assert!(!skips[0].exact);
        assert_eq!(skips[0].last_tick, at("2026-01-20T00:00:00Z"));
    }

    #[test]
    fn a_very_long_outage_in_utc_is_counted_exactly_on_both_sides_of_the_previous_end() {
        let spec = ScheduleSpec::parse("* * * * * *", "UTC").unwrap();
        let skips = skipped_ticks(
            "t",
            &spec,
            at("2026-01-01T00:00:00Z"),
            at("2026-01-20T00:00:00.500Z"),
            Some(at("2026-01-02T00:00:00Z")),
            Some(1),
            1_000,
        );
        assert_eq!(skips.len(), 2, "{skips:?}");
        assert_eq!(skips[0].reason, SkipReason::Overlap);
        assert_eq!(skips[0].ticks, 86_400);
        assert_eq!(skips[0].last_tick, at("2026-01-02T00:00:00Z"));
        assert_eq!(skips[1].reason, SkipReason::Misfire);
        assert_eq!(skips[1].ticks, 18 * 86_400);
        assert_eq!(skips[1].first_tick, at("2026-01-02T00:00:01Z"));
        assert_eq!(skips[1].last_tick, at("2026-01-20T00:00:00Z"));
        assert!(skips.iter().all(|s| s.exact));
    }

    #[test]
    fn the_bound_is_shared_by_the_overlap_and_the_misfire() {
        let spec = ScheduleSpec::parse("* * * * * *", "Europe/Paris").unwrap();
        let skips = skipped_ticks(
            "t",
            &spec,
            at("2026-01-01T00:00:00Z"),
            at("2026-01-01T01:00:00Z"),
            Some(at("2026-01-01T00:00:10Z")),
            None,
            10,
        );
        assert_eq!(skips.len(), 1, "{skips:?}");
        assert_eq!((skips[0].reason, skips[0].ticks), (SkipReason::Overlap, 10));
        assert!(!skips[0].exact);
        assert_eq!(skips[0].last_tick, at("2026-01-01T01:00:00Z"));

        let skips = skipped_ticks(
            "t",
            &spec,
            at("2026-01-01T00:00:00Z"),
            at("2026-01-01T01:00:00Z"),
            Some(at("2026-01-01T00:00:04Z")),
            None,
            10,
        );
        assert_eq!(skips.len(), 2, "{skips:?}");
        assert_eq!((skips[0].ticks, skips[0].exact), (4, true));
        assert_eq!((skips[1].ticks, skips[1].exact), (6, false));
    }

    #[test]
    fn a_claim_counts_ticks_within_its_budget() {
        assert_eq!(claim_tick_cap(1_000), 200);
        assert_eq!(claim_tick_cap(1), MAX_COUNTED_TICKS.min(CLAIM_TICK_BUDGET));
        assert_eq!(claim_tick_cap(1_000_000), MIN_CLAIM_TICKS_PER_TASK);
    }

    /// The walk `skipped_ticks` did before it counted spans: the reference.
    fn walked_skips(
        spec: &ScheduleSpec,
        after: DateTime<Utc>,
        until: DateTime<Utc>,
        previous_finished_at: Option<DateTime<Utc>>,
    ) -> Vec<(SkipReason, DateTime<Utc>, DateTime<Utc>, i64)> {
        let mut records: Vec<(SkipReason, DateTime<Utc>, DateTime<Utc>, i64)> = Vec::new();
        for tick in spec.iter_after(after).take_while(|t| *t <= until) {
            let reason = if previous_finished_at.is_some_and(|f| tick <= f) {
                SkipReason::Overlap
            } else {
                SkipReason::Misfire
            };
            match records.last_mut() {
                Some(r) if r.0 == reason => {
                    r.2 = tick;
                    r.3 += 1;
                }
                _ => records.push((reason, tick, tick, 1)),
            }
        }
        records
    }

    #[test]
    fn skipped_ticks_agree_with_walking_them() {
        let after = at("2026-01-01T00:00:00.250Z");
        for zone in ["UTC", "Europe/Berlin"] {
            for expression in ["* * * * * *", "*/7 * * * * *", "*/5 * * * *"] {
                let spec = ScheduleSpec::parse(expression, zone).unwrap();
                for until_s in [0, 1, 3, 600, 3_601] {
                    let until = after + TimeDelta::seconds(until_s) + TimeDelta::milliseconds(7);
                    for finished_ms in [
                        None,
                        Some(-5_000),
                        Some(0),
                        Some(999),
                        Some(1_000),
                        Some(300_500),
                        Some(4_000_000),
                    ] {
                        let finished = finished_ms.map(|ms| after + TimeDelta::milliseconds(ms));
                        let got: Vec<_> = skipped_ticks(
                            "t",
                            &spec,
                            after,
                            until,
                            finished,
                            None,
                            MAX_COUNTED_TICKS,
                        )
                        .into_iter()
                        .map(|r| (r.reason, r.first_tick, r.last_tick, r.ticks))
                        .collect();
                        assert_eq!(
                            got,
                            walked_skips(&spec, after, until, finished),
                            "{expression} in {zone}, until +{until_s}s, finished {finished_ms:?}"
                        );
                    }
                }
            }
        }
    }
}
