//! Jitter: where each row's next start is written, and from which window. A task's config
//! entry sets its window over its attribute's; every path that writes a row's next run (a
//! reconcile creating, enabling or rescheduling a task or a declared instance, an instance upsert
//! from Rust or the command line, the upkeep's repair, a resume) writes its start at its offset
//! in the row's window, its tick beside it. Judged by the rows as written and by what the
//! handlers themselves recorded (their tick and their start, on the clock the nodes decide by),
//! never by timings. The many-instances spread is `jitter`'s, which this shares the handlers'
//! record with.

use crate::common;
use crate::jitter::{CRON, JitterLog, OWN_WINDOW, SLACK, TASK_WINDOW, record};

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use common::*;
use scheduler::config::{InstanceConfig, TaskConfig};
use scheduler::testing::jitter::start_of;
use scheduler::testing::operate::{self, Actor};
use scheduler::testing::reconciler::Reconciler;
use scheduler::{Schedule, ScheduleSpec, Schedules, TaskContext, task};

on_both_backends! {
    threads = 2;
    a_tasks_config_entry_sets_its_window_over_the_attributes,
    every_first_tick_a_reconcile_or_an_upsert_writes_starts_at_its_offset,
    the_upkeeps_repair_starts_the_first_tick_at_its_offset,
    a_resume_starts_the_next_tick_at_its_offset,
}

/// A task of its own row, its window set by its config entry (2 s) over its attribute's (4 s).
#[task(name = "jit.own", jitter = "4s")]
async fn jit_own(ctx: TaskContext) {
    record(&ctx);
}

/// The task's own row every ten seconds, with a config entry's `jitter: 2s`: every tick (the
/// first one too, written by the reconcile that created the row) starts at its offset in the
/// entry's 2 s window, not the attribute's 4 s, and each runs once.
async fn a_tasks_config_entry_sets_its_window_over_the_attributes(db: &TestDb) {
    let log = Arc::new(JitterLog {
        runs: Mutex::default(),
        clock: db.clock().cloned(),
    });
    let entry = scheduler::config::TaskConfig {
        jitter: Some("2s".into()),
        ..entry("jit.own", CRON)
    };
    let running = start(
        node(db, "a", tasks("jit.own"))
            .config_document(doc(vec![entry]))
            .state(Arc::clone(&log))
            .build()
            .unwrap(),
    );
    wait_stepping(db, Duration::from_secs(120), "four ticks run", || async {
        log.runs.lock().unwrap().len() >= 4
    })
    .await;
    running.stop().await;
    let spec = ScheduleSpec::parse(CRON, "UTC").unwrap();
    let window = Duration::from_secs(2);
    let runs = log.runs.lock().unwrap().clone();
    let mut ticks = BTreeSet::new();
    for (_, tick, started, _) in &runs {
        assert!(ticks.insert(*tick), "{tick} ran twice");
        let due = start_of("jit.own", &spec, *tick, window);
        assert!(
            *started >= due,
            "{tick}: started at {started}, before {due}"
        );
        let late = TimeDelta::from_std(window + SLACK).unwrap();
        assert!(*started <= *tick + late, "{tick}: started at {started}");
    }
    // The entry's window, not the attribute's: the next start written is inside 2 s.
    let state = db.task("jit.own").await;
    if let Some(next) = state.next_run_at {
        let tick = spec.next_after(next - TimeDelta::seconds(10)).unwrap();
        assert_eq!(next, start_of("jit.own", &spec, tick, window), "{state:?}");
    }
}

/// A task whose first ticks the tests below follow: each run records its key, tick and start.
#[task(name = "jitfirst.task", jitter = "4s")]
async fn jit_first(ctx: TaskContext) {
    record(&ctx);
}

/// A task the upkeep repairs (its row has no next run), its window the attribute's.
#[task(name = "jitstuck.task", jitter = "4s")]
async fn jit_stuck(ctx: TaskContext) {
    record(&ctx);
}

/// The next run row `row` holds starts its tick at its offset in `window`: its start is the
/// jitter function's for its tick, and its tick is one of `spec`'s. Returns the tick.
async fn starts_at_its_offset(
    db: &TestDb,
    row: &str,
    spec: &ScheduleSpec,
    window: Duration,
    path: &str,
) -> DateTime<Utc> {
    let state = db.task(row).await;
    let (Some(start), Some(tick)) = (state.next_run_at, state.next_tick) else {
        panic!("{path}: {row} has no next run: {state:?}");
    };
    assert_eq!(
        spec.next_after(tick - TimeDelta::milliseconds(1)),
        Some(tick),
        "{path}: {row}'s tick {tick} is one of its schedule's"
    );
    assert_eq!(
        start,
        start_of(row, spec, tick, window),
        "{path}: {row} starts its tick {tick} at its offset in {window:?}"
    );
    tick
}

/// The application binary's `instances upsert`, as an operator runs it (no registry, no config).
fn cli_upsert(db: &TestDb, task: &str, key: &str, cron: &str) {
    let out = app_output(db, &["instances", "upsert", task, key, "--cron", cron]);
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Every path that writes a row's first next run writes its start at its offset in the row's
/// window, its tick beside it: a reconcile creating the task and a config-declared instance, an
/// instance made from Rust (`Schedules::new`, which knows only the attribute's window) and one
/// made with the command line (which knows none), each without a window of its own, all in the
/// entry's 2 s; a reconcile disabling and enabling the task again (its instances with it), and
/// one changing the schedules. Then a node runs them: the first run of each starts at or after
/// that start, by the handler's own record.
async fn every_first_tick_a_reconcile_or_an_upsert_writes_starts_at_its_offset(db: &TestDb) {
    let window = Duration::from_secs(2);
    let declared = |cron: &str| {
        vec![InstanceConfig {
            key: "cfg-1".into(),
            cron: cron.into(),
            ..Default::default()
        }]
    };
    let document = |cron: &str, enabled: bool| {
        doc(vec![TaskConfig {
            jitter: Some("2s".into()),
            enabled,
            instances: declared(cron),
            ..entry("jitfirst.task", cron)
        }])
    };
    let rows = [
        "jitfirst.task",
        "jitfirst.task/cfg-1",
        "jitfirst.task/op-1",
        "jitfirst.task/rt-1",
    ];
    let reconciler = Reconciler::new(
        db.node_store(2),
        tasks("jitfirst."),
        chrono_tz::Tz::UTC,
        "operator",
    );
    let spec = ScheduleSpec::parse(CRON, "UTC").unwrap();
    let report = reconciler.reconcile(&document(CRON, true)).await.unwrap();
    assert!(report.refused.is_empty(), "{report:?}");
    for row in &rows[..2] {
        starts_at_its_offset(db, row, &spec, window, "created").await;
    }
    // Instances without their own window: from Rust (the attribute's 4 s is all it knows) and
    // from the command line (it knows none): the task's 2 s, as the reconcile stored it.
    cli_upsert(db, "jitfirst.task", "op-1", CRON);
    starts_at_its_offset(db, rows[2], &spec, window, "the command line's upsert").await;
    let schedules = Schedules::new(db.node_store(2), &tasks("jitfirst."), "test");
    schedules
        .upsert(Schedule::new("jitfirst.task", "rt-1").cron(CRON))
        .await
        .unwrap();
    starts_at_its_offset(db, rows[3], &spec, window, "Schedules' upsert").await;

    // Disabled, then enabled again: each from its next tick, at its offset.
    reconciler.reconcile(&document(CRON, false)).await.unwrap();
    for row in rows {
        assert!(!db.task(row).await.enabled, "{row} disabled");
    }
    let report = reconciler.reconcile(&document(CRON, true)).await.unwrap();
    assert!(report.enabled.len() >= 4, "{report:?}");
    for row in rows {
        starts_at_its_offset(db, row, &spec, window, "enabled").await;
    }

    // Rescheduled: the task's and the declared instance's schedules change.
    let moved = "5/10 * * * * *";
    let moved_spec = ScheduleSpec::parse(moved, "UTC").unwrap();
    reconciler.reconcile(&document(moved, true)).await.unwrap();
    let mut first = BTreeMap::new();
    for (row, spec) in [
        (rows[0], &moved_spec),
        (rows[1], &moved_spec),
        (rows[2], &spec),
        (rows[3], &spec),
    ] {
        let tick = starts_at_its_offset(db, row, spec, window, "rescheduled").await;
        first.insert(row, (tick, spec.clone()));
    }

    // A node runs them: each row's first run is the tick written above, started at or after
    // its start (by the handler's record: a start on the tick would be before it).
    let log = Arc::new(JitterLog {
        runs: Mutex::default(),
        clock: db.clock().cloned(),
    });
    let running = start(
        node(db, "a", tasks("jitfirst."))
            .config_document(document(moved, true))
            .state(Arc::clone(&log))
            .build()
            .unwrap(),
    );
    let key_of = |row: &str| row.split_once('/').map_or("", |(_, key)| key).to_owned();
    wait_stepping(
        db,
        Duration::from_secs(120),
        "a run of every row",
        || async {
            let runs = log.runs.lock().unwrap();
            rows.iter()
                .all(|row| runs.iter().any(|r| r.0 == key_of(row)))
        },
    )
    .await;
    running.stop().await;
    let runs = log.runs.lock().unwrap().clone();
    for row in rows {
        let (tick, spec) = &first[row];
        let (_, ran, started, _) = runs
            .iter()
            .filter(|r| r.0 == key_of(row))
            .min_by_key(|r| r.1)
            .unwrap();
        // The tick written (a node slow to start may have run a later one first).
        assert!(
            ran >= tick,
            "{row}: its first run serves {ran}, before {tick}"
        );
        let due = start_of(row, spec, *ran, window);
        assert!(
            *started >= due,
            "{row} {ran}: started at {started}, before {due}"
        );
    }
}

/// An enabled row with no next run (a node that could not read its schedule cleared it), no
/// config to reconcile: the node's upkeep schedules it again from its stored cron, its first
/// tick at its offset in the attribute's window, and the handler starts it no earlier.
async fn the_upkeeps_repair_starts_the_first_tick_at_its_offset(db: &TestDb) {
    db.insert_task("jitstuck.task", CRON, None).await;
    let log = Arc::new(JitterLog {
        runs: Mutex::default(),
        clock: db.clock().cloned(),
    });
    let running = start(
        node(db, "a", tasks("jitstuck."))
            .state(Arc::clone(&log))
            .build()
            .unwrap(),
    );
    wait_stepping(db, Duration::from_secs(60), "a run", || async {
        !log.runs.lock().unwrap().is_empty()
    })
    .await;
    running.stop().await;
    let spec = ScheduleSpec::parse(CRON, "UTC").unwrap();
    let (_, tick, started, _) = log.runs.lock().unwrap()[0].clone();
    let due = start_of("jitstuck.task", &spec, tick, TASK_WINDOW);
    assert!(started >= due, "{tick}: started at {started}, before {due}");
    let late = TimeDelta::from_std(TASK_WINDOW + SLACK).unwrap();
    assert!(started <= tick + late, "{tick}: started at {started}");
}

/// A task paused and resumed, with its instances: its window the attribute's.
#[task(name = "jitresume.task", jitter = "4s")]
async fn jit_resume(ctx: TaskContext) {
    record(&ctx);
}

/// A resume that moves the next run (the paused ticks passed) writes the next tick's start at
/// its offset in the row's window, the tick beside it, as a claim or a reconcile would: the
/// task's own row and its instances resumed with it (one without a window of its own, one with
/// its own), and an instance paused and resumed on its own. Then the first run of each after
/// the resume starts at or after that start, by the handler's own record.
async fn a_resume_starts_the_next_tick_at_its_offset(db: &TestDb) {
    let log = Arc::new(JitterLog {
        runs: Mutex::default(),
        clock: db.clock().cloned(),
    });
    let config = doc(vec![entry("jitresume.task", CRON)]);
    let builder = node_with(db, "a", tasks("jitresume."), config, &log);
    let running = started(db, builder, &["jitresume.task"]).await;
    let schedules = running.schedules.clone();
    for schedule in [
        Schedule::new("jitresume.task", "i-1").cron(CRON),
        Schedule::new("jitresume.task", "i-2")
            .cron(CRON)
            .jitter(OWN_WINDOW),
        Schedule::new("jitresume.task", "i-3").cron(CRON),
    ] {
        schedules.upsert(schedule).await.unwrap();
    }
    let ops = Actor::new("ops", "test");
    for (row, reason) in [
        ("jitresume.task/i-3", "on its own"),
        ("jitresume.task", "all"),
    ] {
        assert!(
            operate::pause(db.api(), row, &ops, reason, None)
                .await
                .unwrap()
        );
    }
    // Past every row's next start (a tick up to 10 s away, shifted by up to 6 s): the resume
    // writes a new one for each (a start still ahead would be kept as it is).
    db.elapse(Duration::from_secs(10) + OWN_WINDOW + Duration::from_secs(1))
        .await;
    let resumed_at = db.now();
    for row in ["jitresume.task", "jitresume.task/i-3"] {
        let ended = operate::resume(db.api(), row, &ops).await.unwrap();
        assert!(ended.is_some(), "{row} was paused");
    }
    let spec = ScheduleSpec::parse(CRON, "UTC").unwrap();
    let rows = [
        ("jitresume.task", TASK_WINDOW),
        ("jitresume.task/i-1", TASK_WINDOW),
        ("jitresume.task/i-2", OWN_WINDOW),
        ("jitresume.task/i-3", TASK_WINDOW),
    ];
    let mut first = BTreeMap::new();
    for (row, window) in rows {
        let tick = starts_at_its_offset(db, row, &spec, window, "resumed").await;
        assert!(
            tick > resumed_at,
            "{row}: its next tick {tick} is after the resume"
        );
        first.insert(row, tick);
    }

    let key_of = |row: &str| row.split_once('/').map_or("", |(_, key)| key).to_owned();
    let ran_after = |row: &str| {
        log.runs
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r.0 == key_of(row) && r.1 >= first[row])
            .min_by_key(|r| r.1)
            .cloned()
    };
    wait_stepping(
        db,
        Duration::from_secs(120),
        "a run of every row after the resume",
        || async { rows.iter().all(|(row, _)| ran_after(row).is_some()) },
    )
    .await;
    running.stop().await;
    for (row, window) in rows {
        let (_, tick, started, _) = ran_after(row).unwrap();
        let due = start_of(row, &spec, tick, window);
        assert!(
            started >= due,
            "{row} {tick}: started at {started}, before {due}"
        );
        let late = TimeDelta::from_std(window + SLACK).unwrap();
        assert!(started <= tick + late, "{row} {tick}: started at {started}");
    }
}
