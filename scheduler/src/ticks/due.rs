//! What is due for a task at an instant, and what a claim does about it ([`decide_due`]): an
//! expired pause ends, a manual run, a scheduled tick (late or not, folding or skipping the ticks
//! after it), a retry. The store asks the engine's claim rules inside its claim transaction, with
//! its clock; they read the task's schedule and settings and come here.

use chrono::{DateTime, TimeDelta, Utc};

use super::{calendar_skips, misfire_grace, skipped_ticks, ticks_between};
use crate::policy::Misfire;
use crate::registry::TaskSettings;
use crate::schedule::ScheduleSpec;
use crate::store::{ClaimPlan, DueDecision, DueTask, NextRun, SkipReason, SkipRecord, Trigger};

/// What is due for `task`, by the engine's rules, in this order:
///
/// 1. an expired pause ends: its ticks are recorded `paused`, the schedule resumes after it;
/// 2. a manual run, as asked;
/// 3. a scheduled tick: a pending retry gives way to it (recorded `retry_gave_way`); with
///    `misfire = "skip"` a tick later than its misfire grace is skipped with every other due
///    tick (recorded), otherwise it runs (late) and the ticks after it are accounted for by
///    the run; the ticks the task's calendar blocked since the previous scheduled run are
///    recorded (`calendar`) by the claim that runs;
/// 4. a retry that is due;
/// 5. a backfill tick that is due (an operator's backfill runs only when the task has nothing
///    else to do, and through the same lock: never beside the task's own runs).
///
/// Skip records count at most `cap` ticks each one by one (see `count::CLAIM_TICK_BUDGET`).
///
/// A tick is due from its start (`next_run_at`: the tick shifted by the row's jitter window
/// `jitter`, see [`super::jitter`]), and late from there; the run serves the tick itself, and
/// every next tick it schedules starts at its own offset.
pub(crate) fn decide_due(
    task: &DueTask,
    spec: &ScheduleSpec,
    settings: &TaskSettings,
    jitter: std::time::Duration,
    db_now: DateTime<Utc>,
    cap: usize,
) -> DueDecision {
    let next_run = |tick| super::jitter::next_run(&task.name, spec, tick, jitter);
    if let Some(pause) = &task.pause {
        let end = pause.until.unwrap_or(db_now).min(db_now);
        let skips = match task.tick() {
            Some(first) if first <= end => {
                ticks_between(&task.name, spec, first, end, SkipReason::Paused, cap)
            }
            _ => Vec::new(),
        };
        let next = match task.tick() {
            Some(next) if next > end => NextRun::Keep,
            _ => next_run(spec.next_after(end)),
        };
        return DueDecision::Skip {
            next_run_at: next,
            clear_retry: false,
            clear_pause: true,
            skips,
        };
    }
    if let Some(plan) = manual_plan(task, settings, db_now) {
        return DueDecision::Run(plan);
    }
    let tick_due = task.enabled && task.next_run_at.is_some_and(|t| t <= db_now);
    if let (true, Some(start), Some(tick)) = (tick_due, task.next_run_at, task.tick()) {
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
        if settings.misfire == Misfire::Skip && db_now - start > misfire_grace(spec, tick) {
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
                next_run_at: next_run(spec.next_after(db_now)),
                clear_retry,
                clear_pause: false,
                skips,
            };
        }
        let mut plan = ClaimPlan::scheduled(tick, None, settings.recovery, settings.lock_lifetime);
        plan.starts_at = start;
        plan.next_run_at = next_run(spec.next_after(db_now.max(tick)));
        plan.clear_retry = clear_retry;
        if let Some(previous) = task.last_scheduled_at {
            skips.extend(calendar_skips(&task.name, spec, previous, tick, cap));
        }
        plan.skips = skips;
        return DueDecision::Run(plan);
    }
    match &task.retry {
        Some(retry) if task.enabled && retry.at <= db_now => {
            let mut plan =
                ClaimPlan::scheduled(retry.tick, None, settings.recovery, settings.lock_lifetime);
            plan.trigger = Trigger::Retry;
            plan.attempt = retry.attempt;
            plan.next_run_at = NextRun::Keep;
            plan.clear_retry = true;
            DueDecision::Run(plan)
        }
        _ => match backfill_plan(task, settings, db_now) {
            Some(plan) => DueDecision::Run(plan),
            None => DueDecision::Leave,
        },
    }
}

/// The run of a due backfill tick: it serves that tick (`ctx.scheduled_at()`), moves nothing of
/// the schedule, and is never retried (a failed tick shows in the backfill's progress; a second
/// backfill of the range runs it again).
fn backfill_plan(
    task: &DueTask,
    settings: &TaskSettings,
    db_now: DateTime<Utc>,
) -> Option<ClaimPlan> {
    let backfill = task
        .backfill
        .as_ref()
        .filter(|b| task.enabled && b.at <= db_now)?;
    let mut plan = ClaimPlan::scheduled(
        backfill.tick,
        None,
        settings.recovery,
        settings.lock_lifetime,
    );
    plan.trigger = Trigger::Backfill;
    plan.triggered_by = Some(backfill.by.clone());
    plan.next_run_at = NextRun::Keep;
    plan.backfill_id = Some(backfill.id);
    Some(plan)
}

fn manual_plan(
    task: &DueTask,
    settings: &TaskSettings,
    db_now: DateTime<Utc>,
) -> Option<ClaimPlan> {
    let manual = task.manual.as_ref().filter(|m| m.at <= db_now)?;
    let mut plan = ClaimPlan::scheduled(manual.at, None, settings.recovery, settings.lock_lifetime);
    plan.trigger = Trigger::Manual;
    plan.triggered_by = manual.by.clone();
    plan.next_run_at = NextRun::Keep;
    Some(plan)
}

/// A manual run, when the schedule itself cannot be read here.
pub(crate) fn plan_without_schedule(
    task: &DueTask,
    settings: &TaskSettings,
) -> Option<DueDecision> {
    manual_plan(task, settings, DateTime::<Utc>::MAX_UTC).map(DueDecision::Run)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::policy::Recovery;
    use crate::schedule::{Calendar, CalendarRules, OnBlocked};
    use crate::store::{Pause, PendingManual, PendingRetry};

    fn at(s: i64) -> DateTime<Utc> {
        "2026-03-02T12:00:00Z".parse::<DateTime<Utc>>().unwrap() + TimeDelta::seconds(s)
    }

    fn every_ten_seconds() -> ScheduleSpec {
        ScheduleSpec::parse("*/10 * * * * *", "UTC").unwrap()
    }

    fn settings(misfire: Misfire) -> TaskSettings {
        TaskSettings {
            timeout: None,
            retries: 0,
            backoff: Duration::from_secs(30),
            misfire,
            recovery: Recovery::Rerun,
            lock_lifetime: Duration::from_secs(20),
        }
    }

    fn due(next: i64) -> DueTask {
        DueTask {
            name: "t".into(),
            cron: "*/10 * * * * *".into(),
            timezone: "UTC".into(),
            calendar: None,
            enabled: true,
            next_run_at: Some(at(next)),
            last_scheduled_at: None,
            last_finished_at: None,
            retry: None,
            manual: None,
            pause: None,
            missed_since: None,
            backfill: None,
            shards: 1,
            node_pin: None,
            broadcast: None,
            args: None,
            manual_args: None,
            next_tick: None,
            jitter: None,
            tags: Default::default(),
            limit: None,
            limit_waiting_since: None,
        }
    }

    #[test]
    fn a_manual_run_reads_its_override_and_every_other_run_its_rows_arguments() {
        use crate::store::Trigger;
        let own = Some(r#"{"tenant":1}"#.to_owned());
        let asked = Some(r#"{"tenant":2}"#.to_owned());
        let task = DueTask {
            args: own.clone(),
            manual_args: asked.clone(),
            ..due(10)
        };
        assert_eq!(task.run_args(Trigger::Manual), (asked.clone(), asked));
        for trigger in [Trigger::Schedule, Trigger::Retry, Trigger::Backfill] {
            assert_eq!(task.run_args(trigger), (own.clone(), None), "{trigger:?}");
        }
        let plain = DueTask {
            args: own.clone(),
            ..due(10)
        };
        assert_eq!(plain.run_args(Trigger::Manual), (own, None));
    }

    fn decide(task: &DueTask, misfire: Misfire, now: i64) -> DueDecision {
        decide_due(
            task,
            &every_ten_seconds(),
            &settings(misfire),
            Duration::ZERO,
            at(now),
            1_000,
        )
    }

    fn run_of(decision: DueDecision) -> ClaimPlan {
        match decision {
            DueDecision::Run(plan) => plan,
            other => panic!("expected a run, got {other:?}"),
        }
    }

    fn summary(skips: &[SkipRecord]) -> Vec<(SkipReason, DateTime<Utc>, DateTime<Utc>, i64)> {
        skips
            .iter()
            .map(|s| (s.reason, s.first_tick, s.last_tick, s.ticks))
            .collect()
    }

    #[test]
    fn a_due_tick_runs_and_the_next_one_is_scheduled() {
        let plan = run_of(decide(&due(10), Misfire::Once, 11));
        assert_eq!(
            (plan.scheduled_at, plan.trigger, plan.attempt),
            (at(10), Trigger::Schedule, 1)
        );
        assert_eq!(plan.next_run_at, NextRun::Set(Some(at(20))));
        assert_eq!(
            (plan.recovery, plan.lock_lifetime),
            (Recovery::Rerun, Duration::from_secs(20))
        );
        assert!(plan.skips.is_empty());
        assert_eq!(
            decide(&due(10), Misfire::Once, 9),
            DueDecision::Leave,
            "not due yet"
        );
        let mut disabled = due(10);
        disabled.enabled = false;
        assert_eq!(decide(&disabled, Misfire::Once, 11), DueDecision::Leave);
    }

    #[test]
    fn a_jittered_tick_is_due_from_its_start_and_serves_the_tick() {
        let window = Duration::from_secs(5);
        let spec = every_ten_seconds();
        let mut task = due(0);
        task.name = "t/tenant-7".into();
        let start = super::super::jitter::start_of(&task.name, &spec, at(10), window);
        assert!(start > at(10) && start < at(15), "{start}");
        task.next_run_at = Some(start);
        task.next_tick = Some(at(10));
        let decide = |now| decide_due(&task, &spec, &settings(Misfire::Skip), window, now, 1_000);
        assert_eq!(
            decide(start - TimeDelta::milliseconds(1)),
            DueDecision::Leave,
            "not before its start"
        );
        let plan = run_of(decide(start));
        assert_eq!((plan.scheduled_at, plan.starts_at), (at(10), start));
        let next = super::super::jitter::start_of(&task.name, &spec, at(20), window);
        assert_eq!(
            plan.next_run_at,
            NextRun::Shifted {
                tick: at(20),
                start: next
            }
        );
        // The misfire grace (5 s here) counts from the start, not from the tick.
        assert!(matches!(
            decide(start + TimeDelta::milliseconds(4_900)),
            DueDecision::Run(_)
        ));
        assert!(matches!(
            decide(start + TimeDelta::milliseconds(5_100)),
            DueDecision::Skip { .. }
        ));
    }

    #[test]
    fn a_late_tick_runs_once_for_all_unless_the_task_skips_misfires() {
        // 25 s late, past the misfire grace of 5 s.
        let plan = run_of(decide(&due(10), Misfire::Once, 35));
        assert_eq!(plan.scheduled_at, at(10), "it serves the first tick");
        assert_eq!(plan.next_run_at, NextRun::Set(Some(at(40))));
        assert!(
            plan.skips.is_empty(),
            "the run's end records the ticks it stands for"
        );

        let DueDecision::Skip {
            next_run_at, skips, ..
        } = decide(&due(10), Misfire::Skip, 35)
        else {
            panic!("a skip task drops a tick past its grace");
        };
        assert_eq!(next_run_at, NextRun::Set(Some(at(40))));
        assert_eq!(summary(&skips), [(SkipReason::Misfire, at(10), at(30), 3)]);

        // Within the grace a skip task still runs.
        let plan = run_of(decide(&due(10), Misfire::Skip, 15));
        assert_eq!(plan.scheduled_at, at(10));
    }

    #[test]
    fn an_expired_pause_ends_and_records_the_ticks_it_held() {
        let mut paused = due(10);
        paused.pause = Some(Pause::new(at(5), "ops", "checking", Some(at(25))));
        let DueDecision::Skip {
            next_run_at,
            clear_pause,
            skips,
            ..
        } = decide(&paused, Misfire::Once, 27)
        else {
            panic!("an expired pause ends");
        };
        assert!(clear_pause);
        assert_eq!(next_run_at, NextRun::Set(Some(at(30))));
        assert_eq!(summary(&skips), [(SkipReason::Paused, at(10), at(20), 2)]);
    }

    #[test]
    fn a_pending_retry_gives_way_to_a_due_tick_and_runs_when_none_is_due() {
        let mut retrying = due(20);
        retrying.retry = Some(PendingRetry {
            tick: at(10),
            attempt: 2,
            at: at(15),
        });
        let plan = run_of(decide(&retrying, Misfire::Once, 21));
        assert_eq!(plan.scheduled_at, at(20));
        assert!(plan.clear_retry);
        assert_eq!(
            summary(&plan.skips),
            [(SkipReason::RetryGaveWay, at(10), at(10), 1)]
        );

        let plan = run_of(decide(&retrying, Misfire::Once, 16));
        assert_eq!(
            (plan.scheduled_at, plan.trigger, plan.attempt),
            (at(10), Trigger::Retry, 2)
        );
        assert_eq!(
            plan.next_run_at,
            NextRun::Keep,
            "a retry does not move the schedule"
        );
        assert!(plan.clear_retry);
    }

    /// Every second, with the seconds `from..to` (from 12:00:00) blocked.
    fn every_second_blocked(from: &str, to: &str, on_blocked: OnBlocked) -> ScheduleSpec {
        let rules: CalendarRules = serde_json::from_str(&format!(
            r#"{{"ranges": [{{"from": "2026-03-02T12:00:{from}Z", "to": "2026-03-02T12:00:{to}Z"}}]}}"#
        ))
        .unwrap();
        ScheduleSpec::parse("* * * * * *", "UTC")
            .unwrap()
            .with_calendar(Calendar::new(rules, on_blocked, chrono_tz::UTC).unwrap())
    }

    fn decide_with(spec: &ScheduleSpec, task: &DueTask, now: i64) -> DueDecision {
        decide_due(
            task,
            spec,
            &settings(Misfire::Once),
            Duration::ZERO,
            at(now),
            1_000,
        )
    }

    #[test]
    fn the_claim_after_a_blackout_records_the_ticks_the_calendar_skipped() {
        // 13..17 blocked: after the run of 12 the next is 17, and its claim records 13-16.
        let spec = every_second_blocked("13", "17", OnBlocked::Skip);
        assert_eq!(spec.next_after(at(12)), Some(at(17)));
        let mut task = due(17);
        task.last_scheduled_at = Some(at(12));
        let plan = run_of(decide_with(&spec, &task, 17));
        assert_eq!(plan.scheduled_at, at(17));
        assert_eq!(plan.next_run_at, NextRun::Set(Some(at(18))));
        assert_eq!(
            summary(&plan.skips),
            [(SkipReason::Calendar, at(13), at(16), 4)]
        );
        // The claim after it records nothing more; nor does a task never run before.
        task.next_run_at = Some(at(18));
        task.last_scheduled_at = Some(at(17));
        assert!(run_of(decide_with(&spec, &task, 18)).skips.is_empty());
        task.last_scheduled_at = None;
        assert!(run_of(decide_with(&spec, &task, 18)).skips.is_empty());
        // A task without a calendar records nothing either.
        let mut plain = due(20);
        plain.last_scheduled_at = Some(at(10));
        assert!(run_of(decide(&plain, Misfire::Once, 20)).skips.is_empty());
    }

    #[test]
    fn next_allowed_runs_once_for_the_moved_ticks_and_records_the_others() {
        // Blocked to a tick (17): the run serves 17 itself, every moved tick is recorded.
        let spec = every_second_blocked("13", "17", OnBlocked::NextAllowed);
        assert_eq!(spec.next_after(at(12)), Some(at(17)));
        let mut task = due(17);
        task.last_scheduled_at = Some(at(12));
        let plan = run_of(decide_with(&spec, &task, 17));
        assert_eq!(
            summary(&plan.skips),
            [(SkipReason::Calendar, at(13), at(16), 4)]
        );
        // Blocked to half a second past a tick: the run at 17.5 stands for the first moved
        // tick (14), the others (15-17) are recorded.
        let rules: CalendarRules = serde_json::from_str(
            r#"{"ranges": [{"from": "2026-03-02T12:00:13.500Z", "to": "2026-03-02T12:00:17.500Z"}]}"#,
        )
        .unwrap();
        let spec = ScheduleSpec::parse("* * * * * *", "UTC")
            .unwrap()
            .with_calendar(Calendar::new(rules, OnBlocked::NextAllowed, chrono_tz::UTC).unwrap());
        let moved = at(17) + TimeDelta::milliseconds(500);
        assert_eq!(spec.next_after(at(13)), Some(moved));
        assert_eq!(spec.next_after(moved), Some(at(18)), "folded: once");
        let mut task = due(0);
        task.next_run_at = Some(moved);
        task.last_scheduled_at = Some(at(13));
        let plan = run_of(decide_due(
            &task,
            &spec,
            &settings(Misfire::Once),
            Duration::ZERO,
            moved,
            1_000,
        ));
        assert_eq!(plan.scheduled_at, moved);
        assert_eq!(
            summary(&plan.skips),
            [(SkipReason::Calendar, at(15), at(17), 3)]
        );
    }

    #[test]
    fn a_manual_run_comes_before_a_due_tick_and_needs_no_schedule() {
        let mut asked = due(10);
        asked.manual = Some(PendingManual {
            at: at(12),
            by: Some("alice".into()),
        });
        let plan = run_of(decide(&asked, Misfire::Once, 13));
        assert_eq!((plan.scheduled_at, plan.trigger), (at(12), Trigger::Manual));
        assert_eq!(plan.triggered_by.as_deref(), Some("alice"));
        assert_eq!(plan.next_run_at, NextRun::Keep);
        let unreadable = plan_without_schedule(&asked, &settings(Misfire::Once)).map(run_of);
        assert_eq!(unreadable.map(|p| p.scheduled_at), Some(at(12)));
        assert_eq!(
            plan_without_schedule(&due(10), &settings(Misfire::Once)),
            None
        );
    }
}
