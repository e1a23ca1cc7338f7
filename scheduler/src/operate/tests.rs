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
    let plan = resume_plan(&shifted, at(25));
    assert_eq!(plan.next_run_at, Some(at(30)));
    assert_eq!(plan.skips.len(), 1, "{:?}", plan.skips);
    assert_eq!(
        (plan.skips[0].first_tick, plan.skips[0].last_tick),
        (at(10), at(20))
    );
    // Without jitter, the same.
    let plain = paused(Some(at(10)), Some(at(10)));
    assert_eq!(resume_plan(&plain, at(25)).skips, plan.skips);
}
