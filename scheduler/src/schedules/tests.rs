use chrono::{DateTime, Utc};

use super::upsert::plan_upsert;
use super::*;
use crate::ScheduleSpec;
use crate::instance::MAX_ARGS_BYTES;
use crate::store::{InstanceFacts, InstancePlan, InstanceTask};

fn at(s: &str) -> DateTime<Utc> {
    s.parse().unwrap()
}

fn task(enabled: bool) -> InstanceTask {
    InstanceTask {
        enabled,
        shards: 1,
        node_pin: None,
        jitter: None,
        calendar: None,
        pause: None,
    }
}

fn checked(schedule: Schedule) -> (InstanceWrite, ScheduleSpec) {
    schedule.check(true).unwrap()
}

fn refusal(schedule: Schedule) -> InstanceRefusal {
    match schedule.check(true) {
        Err(crate::Error::Instance(r)) => r,
        other => panic!("not refused: {other:?}"),
    }
}

fn record(write: &InstanceWrite, next: Option<DateTime<Utc>>) -> InstanceRecord {
    InstanceRecord {
        task: write.task.clone(),
        key: write.key.clone(),
        cron: write.cron.clone(),
        timezone: write.timezone.clone(),
        args: write.args.clone(),
        enabled: true,
        next_run_at: next,
        next_tick: None,
        jitter: None,
        last_scheduled_at: None,
        removed: false,
        source: crate::store::InstanceSource::Runtime,
        tags: write.tags.clone(),
        limit: write.limit.clone(),
        calendar: write.calendar.clone(),
    }
}

#[test]
fn a_schedule_is_checked_before_anything_is_written() {
    let s = || Schedule::new("t", "k").cron("* * * * * *");
    assert!(matches!(
        s().check(false),
        Err(crate::Error::Instance(InstanceRefusal::UnknownTask { .. }))
    ));
    assert!(matches!(
        refusal(Schedule::new("t", "a/b").cron("* * * * *")),
        InstanceRefusal::BadKey { .. }
    ));
    assert!(matches!(
        refusal(Schedule::new("t", "k")),
        InstanceRefusal::NoCron { .. }
    ));
    assert!(matches!(
        s().cron("0 61 * * *").check(true),
        Err(crate::Error::Schedule(_))
    ));
    assert!(matches!(
        s().timezone("Mars/Olympus").check(true),
        Err(crate::Error::Schedule(_))
    ));
    assert!(matches!(
        refusal(s().args_json("{tenant: 1")),
        InstanceRefusal::ArgsNotJson { .. }
    ));
    let big = serde_json::Value::String("x".repeat(MAX_ARGS_BYTES));
    assert!(matches!(
        refusal(s().args(big)),
        InstanceRefusal::ArgsTooLarge { .. }
    ));
    // Text is stored compact, as a value is.
    let (write, _) = checked(s().args_json(r#"{ "tenant" : 42 }"#));
    assert_eq!(write.args.as_deref(), Some(r#"{"tenant":42}"#));
    let (write, _) = checked(s().args(serde_json::json!({"tenant": 42})));
    assert_eq!(write.args.as_deref(), Some(r#"{"tenant":42}"#));
    assert_eq!(write.timezone, "UTC");
}

#[test]
fn an_upsert_keeps_the_next_run_unless_the_schedule_changed() {
    let now = at("2026-01-01T00:00:10.500Z");
    let (write, spec) = checked(Schedule::new("t", "k").cron("*/5 * * * * *"));
    let plan = |task: Option<InstanceTask>, existing: Option<InstanceRecord>| {
        plan_upsert(
            &write,
            &spec,
            Duration::ZERO,
            &InstanceFacts { task, existing },
            now,
        )
    };
    assert_eq!(plan(None, None), InstancePlan::NoTask);
    let sharded = InstanceTask {
        shards: 2,
        ..task(true)
    };
    assert!(
        matches!(plan(Some(sharded), None), InstancePlan::Write { .. }),
        "a task with shards has instances (each of its rows planned as this one)"
    );
    let broadcast = InstanceTask {
        node_pin: Some(String::new()),
        ..task(true)
    };
    assert!(
        matches!(plan(Some(broadcast), None), InstancePlan::Write { .. }),
        "a broadcast task has instances (each node's row planned as this one)"
    );
    // New: the first tick after now.
    let first = at("2026-01-01T00:00:15Z");
    assert_eq!(
        plan(Some(task(true)), None),
        InstancePlan::Write {
            enabled: true,
            next_run_at: Some(first),
            next_tick: None,
            pause: None,
        }
    );
    // A disabled task: disabled, nothing scheduled.
    assert_eq!(
        plan(Some(task(false)), None),
        InstancePlan::Write {
            enabled: false,
            next_run_at: None,
            next_tick: None,
            pause: None,
        }
    );
    // Unchanged schedule: its next run is kept (even one in the past: the claim's misfire).
    let kept = at("2026-01-01T00:00:05Z");
    assert_eq!(
        plan(Some(task(true)), Some(record(&write, Some(kept)))),
        InstancePlan::Write {
            enabled: true,
            next_run_at: Some(kept),
            next_tick: None,
            pause: None,
        }
    );
    // A changed cron: recomputed, never at or before the tick last claimed.
    let mut old = record(&write, Some(kept));
    old.cron = "* * * * * *".into();
    old.last_scheduled_at = Some(at("2026-01-01T00:00:20Z"));
    assert_eq!(
        plan(Some(task(true)), Some(old)),
        InstancePlan::Write {
            enabled: true,
            next_run_at: Some(at("2026-01-01T00:00:25Z")),
            next_tick: None,
            pause: None,
        }
    );
    // Back after its removal: scheduled afresh.
    let mut removed = record(&write, None);
    removed.removed = true;
    assert_eq!(
        plan(Some(task(true)), Some(removed)),
        InstancePlan::Write {
            enabled: true,
            next_run_at: Some(first),
            next_tick: None,
            pause: None,
        }
    );
}

#[test]
fn an_upsert_of_a_key_the_config_declares_is_refused() {
    let now = at("2026-01-01T00:00:10.500Z");
    let (write, spec) = checked(Schedule::new("t", "k").cron("*/5 * * * * *"));
    let plan = |existing: InstanceRecord| {
        plan_upsert(
            &write,
            &spec,
            Duration::ZERO,
            &InstanceFacts {
                task: Some(task(true)),
                existing: Some(existing),
            },
            now,
        )
    };
    let mut owned = record(&write, None);
    owned.source = crate::store::InstanceSource::Config;
    assert_eq!(plan(owned.clone()), InstancePlan::ConfigOwned);
    // One the config declared and that was removed since (its run in flight) is no one's.
    owned.removed = true;
    assert!(matches!(plan(owned), InstancePlan::Write { .. }));
}

#[test]
fn an_upsert_starts_the_first_tick_at_its_offset_and_a_new_jitter_moves_it() {
    let now = at("2026-01-01T00:00:10.500Z");
    let (write, spec) = checked(
        Schedule::new("t", "k")
            .cron("0 * * * * *")
            .jitter(Duration::from_secs(30)),
    );
    assert_eq!(write.jitter, Some(Duration::from_secs(30)));
    let tick = at("2026-01-01T00:01:00Z");
    let start = crate::ticks::jitter::start_of("t/k", &spec, tick, Duration::from_secs(30));
    assert!(
        start > tick && start < at("2026-01-01T00:01:30Z"),
        "{start}"
    );
    let plan = |existing| {
        plan_upsert(
            &write,
            &spec,
            Duration::from_secs(30),
            &InstanceFacts {
                task: Some(task(true)),
                existing,
            },
            now,
        )
    };
    let shifted = InstancePlan::Write {
        enabled: true,
        next_run_at: Some(start),
        next_tick: Some(tick),
        pause: None,
    };
    assert_eq!(plan(None), shifted);
    // Written with its jitter: kept as it is.
    let mut same = record(&write, Some(start));
    same.next_tick = Some(tick);
    same.jitter = write.jitter;
    assert_eq!(plan(Some(same.clone())), shifted);
    // Written without: the start moves to its offset.
    let mut before = same;
    before.jitter = None;
    before.next_run_at = Some(tick);
    before.next_tick = None;
    assert_eq!(plan(Some(before)), shifted);
    // Text reads as a duration; out of range or not one is refused.
    let (write, _) = checked(Schedule::new("t", "k").cron("* * * * *").jitter("1m 30s"));
    assert_eq!(write.jitter, Some(Duration::from_secs(90)));
    for bad in ["soon", "2days"] {
        assert!(matches!(
            refusal(Schedule::new("t", "k").cron("* * * * *").jitter(bad)),
            InstanceRefusal::BadJitter { .. }
        ));
    }
}

/// An instance without a window of its own takes its task's as the reconcile stored it on the
/// task's row, whatever the writer knows (the admin API and the command line know none): its
/// first tick starts at its offset; its own window still wins.
#[test]
fn an_upsert_without_its_own_window_starts_at_its_offset_in_the_tasks_stored_window() {
    let now = at("2026-01-01T00:00:10.500Z");
    let window = Duration::from_secs(30);
    let tick = at("2026-01-01T00:01:00Z");
    let stored = InstanceTask {
        jitter: Some(window),
        ..task(true)
    };
    let plan = |schedule: Schedule, task: InstanceTask| {
        let (write, spec) = checked(schedule);
        // The operator surfaces' window: none.
        plan_upsert(
            &write,
            &spec,
            Duration::ZERO,
            &InstanceFacts {
                task: Some(task),
                existing: None,
            },
            now,
        )
    };
    let spec = ScheduleSpec::parse("0 * * * * *", "UTC").unwrap();
    let start = crate::ticks::jitter::start_of("t/k", &spec, tick, window);
    assert!(start > tick, "{start}");
    let schedule = Schedule::new("t", "k").cron("0 * * * * *");
    assert_eq!(
        plan(schedule.clone(), stored.clone()),
        InstancePlan::Write {
            enabled: true,
            next_run_at: Some(start),
            next_tick: Some(tick),
            pause: None,
        }
    );
    // None stored (a task no reconcile wrote since): the writer's (here none).
    assert_eq!(
        plan(schedule.clone(), task(true)),
        InstancePlan::Write {
            enabled: true,
            next_run_at: Some(tick),
            next_tick: None,
            pause: None,
        }
    );
    // Its own window over its task's.
    let own = Duration::from_secs(5);
    let own_start = crate::ticks::jitter::start_of("t/k", &spec, tick, own);
    assert_eq!(
        plan(schedule.jitter(own), stored),
        InstancePlan::Write {
            enabled: true,
            next_run_at: Some(own_start),
            next_tick: (own_start != tick).then_some(tick),
            pause: None,
        }
    );
}

/// The task's pause in force goes with the write (the instance takes it unless paused); one
/// ended by its `until` does not, nor does a task not paused give any.
#[test]
fn an_upsert_takes_the_pause_of_its_task_in_force() {
    let now = at("2026-01-01T00:00:10Z");
    let (write, spec) = checked(Schedule::new("t", "k").cron("*/15 * * * * *"));
    let plan = |pause: Option<crate::store::Pause>| {
        let facts = InstanceFacts {
            task: Some(InstanceTask {
                pause,
                ..task(true)
            }),
            existing: None,
        };
        match plan_upsert(&write, &spec, Duration::ZERO, &facts, now) {
            InstancePlan::Write { pause, .. } => pause,
            other => panic!("not written: {other:?}"),
        }
    };
    let since = at("2026-01-01T00:00:00Z");
    let held = crate::store::Pause::new(since, "ops", "maintenance", None);
    assert_eq!(plan(Some(held.clone())), Some(held));
    let until = crate::store::Pause::new(since, "ops", "window", Some(at("2026-01-01T00:01:00Z")));
    assert_eq!(plan(Some(until.clone())), Some(until));
    let ended = crate::store::Pause::new(since, "ops", "over", Some(now));
    assert_eq!(plan(Some(ended)), None);
    assert_eq!(plan(None), None);
}

#[test]
fn an_upsert_s_first_run_skips_the_ticks_its_task_s_calendar_blocks() {
    let now = at("2026-12-24T23:59:00Z");
    let calendar = crate::schedule::TaskCalendar::new(
        vec!["christmas".into()],
        crate::schedule::OnBlocked::Skip,
        crate::schedule::CalendarRules {
            dates: vec!["2026-12-25".into()],
            ..Default::default()
        },
    );
    let (write, spec) = checked(Schedule::new("t", "k").cron("0 0 * * * *"));
    let facts = InstanceFacts {
        task: Some(InstanceTask {
            calendar: Some(calendar.to_stored()),
            ..task(true)
        }),
        existing: None,
    };
    match plan_upsert(&write, &spec, Duration::ZERO, &facts, now) {
        InstancePlan::Write { next_run_at, .. } => {
            assert_eq!(
                next_run_at,
                Some(at("2026-12-26T00:00:00Z")),
                "the 25th is blocked"
            );
        }
        other => panic!("not written: {other:?}"),
    }
    let facts = InstanceFacts {
        task: Some(task(true)),
        existing: None,
    };
    match plan_upsert(&write, &spec, Duration::ZERO, &facts, now) {
        InstancePlan::Write { next_run_at, .. } => {
            assert_eq!(next_run_at, Some(at("2026-12-25T00:00:00Z")), "no calendar");
        }
        other => panic!("not written: {other:?}"),
    }
}
