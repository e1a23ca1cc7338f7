use super::*;
use crate::store::Pause;

mod sharded;

fn at(s: u32) -> DateTime<Utc> {
    "2026-03-02T12:00:00Z".parse::<DateTime<Utc>>().unwrap() + TimeDelta::seconds(s.into())
}

fn state() -> TaskState {
    TaskState::for_tests("t", "*/10 * * * * *")
}

fn run(id: i64, tick: u32, started: u32, took: Option<u32>, status: RunStatus) -> RunRecord {
    RunRecord {
        started_at: Some(at(started)),
        finished_at: took.map(|t| at(started + t)),
        status,
        ..RunRecord::example(id, "t", at(tick))
    }
}

/// Facts of a strip from the start of the test's minute, with the grace of its schedule.
fn facts<'a>(
    state: &'a TaskState,
    runs: &'a [&'a RunRecord],
    skips: &'a [&'a SkipRecord],
    now: u32,
) -> Facts<'a> {
    Facts {
        state,
        runs,
        more_runs: false,
        skips,
        now: at(now),
        since: at(0),
        missed_grace: None,
        jitter: Duration::ZERO,
        waiting: None,
    }
}

fn outcomes(marks: &[Mark]) -> Vec<(u32, &'static str, Option<&'static str>)> {
    marks
        .iter()
        .map(|m| {
            let reason = match &m.fate {
                Fate::Skipped { reason, .. } => Some(reason.as_str()),
                _ => None,
            };
            (
                (m.at - at(0)).num_seconds() as u32,
                m.fate.outcome(),
                reason,
            )
        })
        .collect()
}

fn every_ten_seconds() -> ScheduleSpec {
    ScheduleSpec::parse("*/10 * * * * *", "UTC").unwrap()
}

#[test]
fn each_tick_gets_its_run_its_skip_or_missed() {
    let spec = every_ten_seconds();
    let mut retried = run(3, 20, 21, Some(1), RunStatus::Succeeded);
    retried.attempt = 2;
    retried.trigger = Trigger::Retry;
    let mut manual = run(4, 25, 25, Some(2), RunStatus::Failed);
    manual.trigger = Trigger::Manual;
    let runs = [
        run(1, 10, 11, Some(3), RunStatus::Succeeded),
        run(2, 20, 20, Some(1), RunStatus::Failed),
        retried,
        manual,
    ];
    let runs: Vec<&RunRecord> = runs.iter().collect();
    let overlap = SkipRecord::new("t", SkipReason::Overlap, at(30), at(40), 2);
    let skips = [&overlap];
    let state = state();
    let strip = strip(Some(&spec), &facts(&state, &runs, &skips, 72), 100);
    let marks = &strip.marks;
    assert_eq!(
        outcomes(marks),
        [
            (10, "succeeded", None),
            (20, "succeeded", None),
            (25, "failed", None),
            (30, "skipped", Some("overlap")),
            (40, "skipped", Some("overlap")),
            (50, "missed", None),
            (60, "missed", None),
            (70, "due", None),
        ],
        "the tick at 0 predates anything known and is left out"
    );
    let Fate::Ran { late, duration, .. } = &marks[0].fate else {
        panic!("{:?}", marks[0])
    };
    assert_eq!(
        (*late, *duration),
        (Some(TimeDelta::seconds(1)), Some(TimeDelta::seconds(3)))
    );
    let Fate::Ran {
        attempts,
        run_id,
        trigger,
        ..
    } = &marks[1].fate
    else {
        panic!("{:?}", marks[1])
    };
    assert_eq!((*attempts, *run_id, *trigger), (2, 3, Trigger::Retry));
    let Fate::Ran { late, trigger, .. } = &marks[2].fate else {
        panic!("{:?}", marks[2])
    };
    assert_eq!(*trigger, Trigger::Manual);
    assert_eq!(*late, None, "a manual run is never late");
    assert!(strip.complete);
}

/// A run handed over before it started has no start; the tick's lateness is that of the run
/// that took it over, and a tick no run started has neither lateness nor duration.
#[test]
fn a_run_that_never_started_neither_times_nor_delays_its_tick() {
    let spec = every_ten_seconds();
    let mut handed_over = run(1, 10, 10, Some(0), RunStatus::Interrupted);
    handed_over.started_at = None;
    let took_over = run(2, 10, 13, Some(1), RunStatus::Succeeded);
    let mut never = run(3, 20, 20, Some(0), RunStatus::Interrupted);
    never.started_at = None;
    let runs = [handed_over, took_over, never];
    let runs: Vec<&RunRecord> = runs.iter().collect();
    let state = state();
    let marks = strip(Some(&spec), &facts(&state, &runs, &[], 25), 100).marks;
    let Fate::Ran { late, duration, .. } = &marks[0].fate else {
        panic!("{:?}", marks[0])
    };
    assert_eq!(
        (*late, *duration),
        (Some(TimeDelta::seconds(3)), Some(TimeDelta::seconds(1)))
    );
    let Fate::Ran { late, duration, .. } = &marks[1].fate else {
        panic!("{:?}", marks[1])
    };
    assert_eq!((*late, *duration), (None, None));
}

#[test]
fn ticks_not_recorded_yet_are_skipped_while_paused_or_overlapped() {
    let spec = every_ten_seconds();
    let runs = [run(1, 10, 10, None, RunStatus::Running)];
    let runs: Vec<&RunRecord> = runs.iter().collect();
    let state = state();
    let marks = strip(Some(&spec), &facts(&state, &runs, &[], 31), 100).marks;
    assert_eq!(
        outcomes(&marks),
        [
            (10, "running", None),
            (20, "skipped", Some("overlap")),
            (30, "skipped", Some("overlap")),
        ]
    );
    let Fate::Ran { duration, .. } = &marks[0].fate else {
        panic!("{:?}", marks[0])
    };
    assert_eq!(*duration, Some(TimeDelta::seconds(21)), "so far");

    let mut paused = state;
    paused.pause = Some(Pause::new(at(15), "ops", "checking", None));
    assert_eq!(
        outcomes(&strip(Some(&spec), &facts(&paused, &[], &[], 41), 100).marks),
        [
            (20, "skipped", Some("paused")),
            (30, "skipped", Some("paused")),
            (40, "skipped", Some("paused")),
        ]
    );
}

#[test]
fn ticks_of_a_disabled_task_are_skipped_from_when_it_was_disabled() {
    let spec = every_ten_seconds();
    let runs = [run(1, 10, 10, Some(1), RunStatus::Succeeded)];
    let runs: Vec<&RunRecord> = runs.iter().collect();
    let mut disabled = state();
    disabled.enabled = false;
    disabled.disabled_at = Some(at(25));
    assert_eq!(
        outcomes(&strip(Some(&spec), &facts(&disabled, &runs, &[], 41), 100).marks),
        [
            (10, "succeeded", None),
            (20, "missed", None),
            (30, "skipped", Some("disabled")),
            (40, "skipped", Some("disabled")),
        ]
    );
}

#[test]
fn a_tick_is_due_within_its_missed_grace_and_missed_after_it() {
    let spec = every_ten_seconds();
    let mut state = state();
    state.missed_since = Some(at(10));
    let strip_at = |now, fixed| {
        let facts = Facts {
            missed_grace: fixed,
            ..facts(&state, &[], &[], now)
        };
        outcomes(&strip(Some(&spec), &facts, 100).marks)
    };
    // The schedule's grace: half of 10 s, at least 5 s.
    assert_eq!(strip_at(14, None), [(10, "due", None)]);
    assert_eq!(strip_at(15, None), [(10, "missed", None)]);
    // A fixed grace, the node's setting.
    let minute = Some(Duration::from_secs(60));
    assert_eq!(strip_at(15, minute), [(10, "due", None)]);
    assert_eq!(strip_at(71, minute).first(), Some(&(10, "missed", None)));
}

#[test]
fn a_tick_its_row_waits_to_run_for_a_limit_is_waiting_and_so_are_the_ticks_after_it() {
    let spec = every_ten_seconds();
    let runs = [run(1, 10, 10, Some(1), RunStatus::Succeeded)];
    let runs: Vec<&RunRecord> = runs.iter().collect();
    let state = state();
    // It waits to run the tick at 20 (past its grace), and 30 and 40 came meanwhile.
    let waiting = Facts {
        waiting: Some(at(20)),
        ..facts(&state, &runs, &[], 41)
    };
    assert_eq!(
        outcomes(&strip(Some(&spec), &waiting, 100).marks),
        [
            (10, "succeeded", None),
            (20, "waiting", None),
            (30, "waiting", None),
            (40, "waiting", None),
        ]
    );
    // Not waiting: the same ticks are missed, the latest due.
    assert_eq!(
        outcomes(&strip(Some(&spec), &facts(&state, &runs, &[], 41), 100).marks),
        [
            (10, "succeeded", None),
            (20, "missed", None),
            (30, "missed", None),
            (40, "due", None),
        ]
    );
    // A row that never ran nor skipped shows the tick it waits for, not the ones before.
    let fresh = Facts {
        waiting: Some(at(20)),
        ..facts(&state, &[], &[], 31)
    };
    assert_eq!(
        outcomes(&strip(Some(&spec), &fresh, 100).marks),
        [(20, "waiting", None), (30, "waiting", None)]
    );
}

#[test]
fn a_skip_record_names_the_run_that_stands_for_its_ticks() {
    let spec = every_ten_seconds();
    let runs = [run(7, 10, 45, Some(1), RunStatus::Succeeded)];
    let runs: Vec<&RunRecord> = runs.iter().collect();
    let mut misfire = SkipRecord::new("t", SkipReason::Misfire, at(20), at(40), 3);
    misfire.run_id = Some(7);
    let state = state();
    let marks = strip(Some(&spec), &facts(&state, &runs, &[&misfire], 46), 100).marks;
    assert_eq!(marks.len(), 4);
    for mark in &marks[1..] {
        assert_eq!(
            mark.fate,
            Fate::Skipped {
                reason: SkipReason::Misfire,
                run_id: Some(7)
            }
        );
    }
}

#[test]
fn a_strip_keeps_the_latest_ticks_and_says_when_older_ones_are_unknown() {
    let spec = every_ten_seconds();
    let state = state();
    // Newest first, as read: the read stopped at its limit, at the run of the tick at 30.
    let runs = [
        run(3, 50, 50, Some(1), RunStatus::Succeeded),
        run(2, 40, 40, Some(1), RunStatus::Succeeded),
        run(1, 30, 30, Some(1), RunStatus::Succeeded),
    ];
    let runs: Vec<&RunRecord> = runs.iter().collect();
    let cut = Facts {
        more_runs: true,
        ..facts(&state, &runs, &[], 51)
    };
    let strip_of = |facts: &Facts<'_>, count| strip(Some(&spec), facts, count);
    let all = strip_of(&cut, 100);
    assert_eq!(
        outcomes(&all.marks),
        [
            (30, "succeeded", None),
            (40, "succeeded", None),
            (50, "succeeded", None),
        ],
        "ticks before the oldest run read are not guessed at"
    );
    assert!(!all.complete, "the ticks at 10 and 20 are not known");
    let latest = strip_of(&cut, 2);
    assert_eq!(latest.marks, &all.marks[1..]);
    assert!(latest.complete, "the count is full");
    let whole = strip_of(&facts(&state, &runs, &[], 51), 100);
    assert!(whole.complete);
    assert!(
        !strip(None, &facts(&state, &runs, &[], 51), 100).complete,
        "without a schedule, missing ticks cannot be told"
    );
}

#[test]
fn a_window_holds_its_count_of_ticks_whatever_the_interval() {
    let now = at(0);
    let weekdays = ScheduleSpec::parse("0 9 * * MON-FRI", "UTC").unwrap();
    let start = window_start(&weekdays, now, 10);
    assert!(weekdays.count_fires(start, now, 100) >= 10);
    let secondly = ScheduleSpec::parse("* * * * * *", "UTC").unwrap();
    let start = window_start(&secondly, now, 30);
    assert_eq!(secondly.count_fires(start, now, 100), 31);
    // Nightly, monthly, yearly, and a schedule of leap days only: 30 ticks back, and not
    // much more (the window is what bounds the walk over the ticks).
    for cron in ["0 3 * * *", "0 0 1 * *", "0 0 1 1 *", "0 0 29 2 *"] {
        let spec = ScheduleSpec::parse(cron, "UTC").unwrap();
        let start = window_start(&spec, now, 30);
        let fires = spec.count_fires(start, now, 1_000);
        assert!(
            (30..=130).contains(&fires),
            "{cron}: {fires} ticks from {start}"
        );
    }
}

#[test]
fn a_daily_strip_shows_its_last_30_ticks_from_the_stored_history() {
    // A nightly task with 40 nights of runs: the strip holds the latest 30, none missed.
    let spec = ScheduleSpec::parse("0 3 * * *", "UTC").unwrap();
    let now = "2026-03-02T12:00:00Z".parse::<DateTime<Utc>>().unwrap();
    let nights: Vec<RunRecord> = (0..40)
        .map(|d| {
            let tick =
                "2026-03-02T03:00:00Z".parse::<DateTime<Utc>>().unwrap() - TimeDelta::days(d);
            RunRecord {
                scheduled_at: tick,
                started_at: Some(tick),
                finished_at: Some(tick + TimeDelta::seconds(5)),
                ..run(100 - d, 0, 0, Some(5), RunStatus::Succeeded)
            }
        })
        .collect();
    let runs: Vec<&RunRecord> = nights.iter().collect();
    let mut state = state();
    state.cron = "0 3 * * *".into();
    let facts = Facts {
        state: &state,
        runs: &runs,
        more_runs: false,
        skips: &[],
        now,
        since: window_start(&spec, now, 30),
        missed_grace: None,
        jitter: Duration::ZERO,
        waiting: None,
    };
    let strip = strip(Some(&spec), &facts, 30);
    assert_eq!(strip.marks.len(), 30);
    assert!(strip.marks.iter().all(|m| m.fate.outcome() == "succeeded"));
    assert!(strip.complete);
}

/// With jitter, a tick's lateness counts from its start (the tick plus its offset in the task's
/// window), as the start-delay metric does: a run that started on its start was on time; and a
/// tick not started is due until its missed grace has passed after its start.
#[test]
fn lateness_and_the_missed_grace_count_from_the_ticks_jittered_start() {
    let spec = every_ten_seconds();
    let window = Duration::from_secs(8);
    let state = state();
    let start = |tick: u32| crate::ticks::jitter::start_of("t", &spec, at(tick), window);
    // Ticks whose offsets (the hash's, fixed) pass the grace: the test means something.
    let offset = |tick: u32| (start(tick) - at(tick)).to_std().unwrap();
    assert!(offset(20) >= Duration::from_secs(6), "{:?}", offset(20));
    assert!(offset(40) >= Duration::from_secs(6), "{:?}", offset(40));
    let mut on_start = run(1, 20, 0, Some(1), RunStatus::Succeeded);
    on_start.started_at = Some(start(20) + TimeDelta::milliseconds(250));
    let runs = [on_start];
    let runs: Vec<&RunRecord> = runs.iter().collect();
    let ran = Facts {
        jitter: window,
        ..facts(&state, &runs, &[], 30)
    };
    let marks = strip(Some(&spec), &ran, 100).marks;
    match &marks[0].fate {
        Fate::Ran { late, .. } => assert_eq!(*late, Some(TimeDelta::milliseconds(250))),
        other => panic!("{other:?}"),
    }
    // Not started: due until its grace (5 s here) after its start, not after its tick.
    let mut state = state;
    state.missed_since = Some(at(40));
    let grace_end = start(40) + TimeDelta::seconds(5);
    let now = (grace_end - at(0)).num_seconds() as u32 - 1;
    let waiting = Facts {
        jitter: window,
        ..facts(&state, &[], &[], now)
    };
    assert_eq!(
        outcomes(&strip(Some(&spec), &waiting, 100).marks).first(),
        Some(&(40, "due", None)),
        "its start {}",
        start(40)
    );
}
