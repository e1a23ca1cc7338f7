use chrono::TimeDelta;

use super::*;

fn at(s: i64) -> DateTime<Utc> {
    "2026-03-02T12:00:00Z".parse::<DateTime<Utc>>().unwrap() + TimeDelta::seconds(s)
}

fn paused(next_run_at: Option<DateTime<Utc>>, next_tick: Option<DateTime<Utc>>) -> TaskState {
    TaskState {
        next_run_at,
        next_tick,
        ..TaskState::for_tests("t", "*/10 * * * * *")
    }
}

/// The ticks a pause skipped start at the tick the row was to start, not at its jittered
/// start (which comes after the tick): the tick at 10 s, starting at 13 s, is recorded.
#[test]
fn a_resume_records_the_pending_tick_of_a_jittered_start() {
    let shifted = paused(Some(at(13)), Some(at(10)));
    let plan = resume_plan(&shifted, std::time::Duration::ZERO, at(25));
    assert_eq!(plan.next_run_at, Some(at(30)));
    assert_eq!(plan.skips.len(), 1, "{:?}", plan.skips);
    assert_eq!(
        (plan.skips[0].first_tick, plan.skips[0].last_tick),
        (at(10), at(20))
    );
    // Without jitter, the same.
    let plain = paused(Some(at(10)), Some(at(10)));
    assert_eq!(
        resume_plan(&plain, std::time::Duration::ZERO, at(25)).skips,
        plan.skips
    );
}

/// A resume that moves the next run writes the next tick's start at its offset in the row's
/// window, the tick beside it, as a claim would; a next run still ahead is kept as it is.
#[test]
fn a_resume_starts_the_next_tick_at_its_offset() {
    let window = std::time::Duration::from_secs(4);
    let spec = ScheduleSpec::parse("*/10 * * * * *", "UTC").unwrap();
    let start = crate::ticks::jitter::start_of("t", &spec, at(30), window);
    assert!(start > at(30), "this tick's offset is not zero: {start}");
    let plan = resume_plan(&paused(Some(at(10)), Some(at(10))), window, at(25));
    assert_eq!(
        (plan.next_run_at, plan.next_tick),
        (Some(start), Some(at(30)))
    );
    // An instance's row: its own offset (its key is hashed).
    let row = TaskState {
        name: "t/k".into(),
        ..paused(Some(at(10)), None)
    };
    let plan = resume_plan(&row, window, at(25));
    let own = crate::ticks::jitter::start_of("t/k", &spec, at(30), window);
    assert_eq!(
        (plan.next_run_at, plan.next_tick),
        (Some(own), (own != at(30)).then_some(at(30)))
    );
    // Ahead: kept, its tick with it (the store keeps the row's).
    let ahead = resume_plan(&paused(Some(at(33)), Some(at(30))), window, at(25));
    assert_eq!((ahead.next_run_at, ahead.next_tick), (Some(at(33)), None));
    assert!(ahead.skips.is_empty());
}
