//! The calendar's rules on the wall clock, across DST changes, and its refusals.

use chrono::{DateTime, Utc};
use chrono_tz::Tz;

use super::*;
use crate::schedule::ScheduleSpec;

fn at(s: &str) -> DateTime<Utc> {
    s.parse().unwrap()
}

fn calendar(json: &str, on_blocked: OnBlocked, zone: &str) -> Calendar {
    let rules: CalendarRules = serde_json::from_str(json).unwrap();
    Calendar::new(rules, on_blocked, zone.parse::<Tz>().unwrap()).unwrap()
}

fn refusal(json: &str) -> String {
    let rules: CalendarRules = serde_json::from_str(json).unwrap();
    Calendar::new(rules, OnBlocked::Skip, Tz::UTC)
        .unwrap_err()
        .to_string()
}

#[test]
fn a_window_spanning_the_spring_forward_gap_blocks_the_hour_that_happens() {
    // New York, 2026-03-08: 02:00 EST becomes 03:00 EDT. 01:00-03:00 on the wall clock is
    // 06:00Z to 07:00Z: one real hour.
    let cal = calendar(
        r#"{"weekly": [{"days": ["sun"], "from": "01:00", "to": "03:00"}]}"#,
        OnBlocked::Skip,
        "America/New_York",
    );
    assert!(!cal.is_blocked(at("2026-03-08T05:59:59Z")));
    assert!(cal.is_blocked(at("2026-03-08T06:00:00Z")));
    assert!(cal.is_blocked(at("2026-03-08T06:59:59Z")));
    assert!(!cal.is_blocked(at("2026-03-08T07:00:00Z")));
    assert_eq!(
        cal.next_allowed(at("2026-03-08T06:30:00Z")),
        Some(at("2026-03-08T07:00:00Z"))
    );
    // A week later (EDT) the same window is two real hours: 05:00Z to 07:00Z.
    assert!(cal.is_blocked(at("2026-03-15T05:00:00Z")));
    assert_eq!(
        cal.next_allowed(at("2026-03-15T05:00:00Z")),
        Some(at("2026-03-15T07:00:00Z"))
    );
}

#[test]
fn a_window_inside_the_gap_blocks_nothing_and_one_ending_in_it_ends_after_it() {
    let inside = calendar(
        r#"{"weekly": [{"days": ["sun"], "from": "02:00", "to": "02:30"}]}"#,
        OnBlocked::Skip,
        "America/New_York",
    );
    // Every second of that day is allowed: 02:00-02:29 never shows on the clock.
    for minute in 0..120 {
        let t = at("2026-03-08T06:00:00Z") + chrono::TimeDelta::minutes(minute);
        assert!(!inside.is_blocked(t), "{t}");
    }
    let ending_in_gap = calendar(
        r#"{"weekly": [{"days": ["sun"], "from": "01:30", "to": "02:30"}]}"#,
        OnBlocked::Skip,
        "America/New_York",
    );
    // 01:30 EST is 06:30Z; the clock shows 03:00 EDT (07:00Z) right after 01:59:59.
    assert_eq!(
        ending_in_gap.next_allowed(at("2026-03-08T06:45:00Z")),
        Some(at("2026-03-08T07:00:00Z"))
    );
}

#[test]
fn a_window_in_the_repeated_hour_blocks_both_of_its_occurrences() {
    // New York, 2026-11-01: 01:00-01:59 happens in EDT (05:00Z) and again in EST (06:00Z).
    let cal = calendar(
        r#"{"weekly": [{"days": ["sun"], "from": "01:00", "to": "01:30"}]}"#,
        OnBlocked::Skip,
        "America/New_York",
    );
    assert!(cal.is_blocked(at("2026-11-01T05:10:00Z")));
    assert!(!cal.is_blocked(at("2026-11-01T05:40:00Z")));
    assert!(cal.is_blocked(at("2026-11-01T06:10:00Z")));
    assert!(!cal.is_blocked(at("2026-11-01T06:30:00Z")));
    assert_eq!(
        cal.next_allowed(at("2026-11-01T05:10:00Z")),
        Some(at("2026-11-01T05:30:00Z")),
        "the first occurrence ends at its own 01:30"
    );
    assert_eq!(
        cal.next_allowed(at("2026-11-01T06:10:00Z")),
        Some(at("2026-11-01T06:30:00Z"))
    );
}

#[test]
fn a_holiday_is_the_whole_local_day_however_long_it_is() {
    // Berlin: 2026-03-29 has 23 hours (CET to CEST), 2026-10-25 has 25 (CEST to CET).
    let cal = calendar(
        r#"{"dates": ["2026-03-29", "2026-10-25", "2026-10-03"]}"#,
        OnBlocked::Skip,
        "Europe/Berlin",
    );
    assert!(!cal.is_blocked(at("2026-03-28T22:59:59Z")));
    assert!(cal.is_blocked(at("2026-03-28T23:00:00Z")));
    assert_eq!(
        cal.next_allowed(at("2026-03-29T12:00:00Z")),
        Some(at("2026-03-29T22:00:00Z")),
        "a 23-hour day"
    );
    assert!(cal.is_blocked(at("2026-10-24T22:00:00Z")));
    assert_eq!(
        cal.next_allowed(at("2026-10-24T22:00:00Z")),
        Some(at("2026-10-25T23:00:00Z")),
        "a 25-hour day"
    );
    assert_eq!(
        cal.next_allowed(at("2026-10-03T09:00:00Z")),
        Some(at("2026-10-03T22:00:00Z"))
    );
}

#[test]
fn a_daily_job_skips_a_holiday_and_keeps_the_dst_policy_on_other_days() {
    // 02:30 does not exist in New York on 2026-03-08: the job runs at 03:00 EDT (07:00Z); the
    // 9th is a holiday; the 10th runs at 02:30 EDT.
    let zone: Tz = "America/New_York".parse().unwrap();
    let cal = calendar(
        r#"{"dates": ["2026-03-09"]}"#,
        OnBlocked::Skip,
        "America/New_York",
    );
    let spec = ScheduleSpec::new("30 2 * * *", zone)
        .unwrap()
        .with_calendar(cal);
    let fires: Vec<_> = spec
        .iter_after(at("2026-03-07T12:00:00Z"))
        .take(2)
        .collect();
    assert_eq!(
        fires,
        [at("2026-03-08T07:00:00Z"), at("2026-03-10T06:30:00Z")]
    );
    // On 2026-11-01 the 01:30 job still runs once, then the holiday on the 2nd is skipped.
    let cal = calendar(
        r#"{"dates": ["2026-11-02"]}"#,
        OnBlocked::Skip,
        "America/New_York",
    );
    let spec = ScheduleSpec::new("30 1 * * *", zone)
        .unwrap()
        .with_calendar(cal);
    let fires: Vec<_> = spec
        .iter_after(at("2026-11-01T00:00:00Z"))
        .take(2)
        .collect();
    assert_eq!(
        fires,
        [at("2026-11-01T05:30:00Z"), at("2026-11-03T06:30:00Z")]
    );
}

#[test]
fn next_allowed_moves_blocked_ticks_and_folds_them_into_one() {
    // Every minute, weekdays 12:00-13:00 blocked: the 60 ticks of the lunch hour run once at
    // 13:00, then the schedule goes on.
    let cal = calendar(
        r#"{"weekly": [{"days": ["mon-fri"], "from": "12:00", "to": "13:00"}]}"#,
        OnBlocked::NextAllowed,
        "UTC",
    );
    let spec = ScheduleSpec::new("* * * * *", Tz::UTC)
        .unwrap()
        .with_calendar(cal);
    let fires: Vec<_> = spec
        .iter_after(at("2026-03-02T11:58:00Z"))
        .take(4)
        .collect();
    assert_eq!(
        fires,
        [
            at("2026-03-02T11:59:00Z"),
            at("2026-03-02T13:00:00Z"),
            at("2026-03-02T13:01:00Z"),
            at("2026-03-02T13:02:00Z"),
        ]
    );
    // A daily 09:00 job on a holiday moves to the first instant after it (midnight), in the
    // task's zone.
    let cal = calendar(
        r#"{"dates": ["2026-10-01"]}"#,
        OnBlocked::NextAllowed,
        "Asia/Shanghai",
    );
    let spec = ScheduleSpec::new("0 9 * * *", chrono_tz::Asia::Shanghai)
        .unwrap()
        .with_calendar(cal);
    let fires: Vec<_> = spec
        .iter_after(at("2026-09-30T12:00:00Z"))
        .take(2)
        .collect();
    assert_eq!(
        fires,
        [at("2026-10-01T16:00:00Z"), at("2026-10-02T01:00:00Z")]
    );
}

#[test]
fn next_allowed_across_the_fall_back_hour() {
    // Berlin, 2026-10-25: 02:00-02:59 happens twice (00:00Z CEST, 01:00Z CET). A window
    // 02:00-03:00 blocks both; an every-30-minutes job's ticks in it move to 03:00 CET (02:00Z).
    let cal = calendar(
        r#"{"weekly": [{"days": ["sun"], "from": "02:00", "to": "03:00"}]}"#,
        OnBlocked::NextAllowed,
        "Europe/Berlin",
    );
    let spec = ScheduleSpec::new("*/30 * * * *", chrono_tz::Europe::Berlin)
        .unwrap()
        .with_calendar(cal);
    let fires: Vec<_> = spec
        .iter_after(at("2026-10-24T23:15:00Z"))
        .take(3)
        .collect();
    assert_eq!(
        fires,
        [
            at("2026-10-24T23:30:00Z"),
            at("2026-10-25T02:00:00Z"),
            at("2026-10-25T02:30:00Z"),
        ]
    );
}

#[test]
fn a_window_past_midnight_and_day_ranges_that_wrap() {
    let cal = calendar(
        r#"{"weekly": [{"days": ["fri"], "from": "22:00", "to": "06:00"}, {"days": ["sat-sun"], "from": "10:00", "to": "11:00"}]}"#,
        OnBlocked::Skip,
        "UTC",
    );
    // 2026-03-06 is a Friday.
    assert!(!cal.is_blocked(at("2026-03-06T21:59:59Z")));
    assert!(cal.is_blocked(at("2026-03-06T22:00:00Z")));
    assert!(cal.is_blocked(at("2026-03-07T05:59:59Z")));
    assert_eq!(
        cal.next_allowed(at("2026-03-06T23:00:00Z")),
        Some(at("2026-03-07T06:00:00Z"))
    );
    assert!(
        !cal.is_blocked(at("2026-03-06T03:00:00Z")),
        "Thursday night is free"
    );
    assert!(cal.is_blocked(at("2026-03-08T10:30:00Z")), "Sunday");
    let wrapping = calendar(
        r#"{"weekly": [{"days": ["fri-mon"]}]}"#,
        OnBlocked::Skip,
        "UTC",
    );
    assert!(wrapping.is_blocked(at("2026-03-09T12:00:00Z")), "Monday");
    assert!(!wrapping.is_blocked(at("2026-03-10T12:00:00Z")), "Tuesday");
    assert_eq!(
        wrapping.next_allowed(at("2026-03-06T12:00:00Z")),
        Some(at("2026-03-10T00:00:00Z")),
        "four whole days, one after the other"
    );
}

#[test]
fn ranges_on_the_wall_clock_or_at_an_instant_and_date_spans() {
    let cal = calendar(
        r#"{"ranges": [{"from": "2026-12-24T18:00", "to": "2026-12-27"},
                       {"from": "2026-06-01T00:00:00Z", "to": "2026-06-01T00:00:10Z"}],
            "dates": ["2026-08-01..2026-08-03"]}"#,
        OnBlocked::Skip,
        "Asia/Shanghai",
    );
    assert!(!cal.is_blocked(at("2026-12-24T09:59:59Z")));
    assert!(
        cal.is_blocked(at("2026-12-24T10:00:00Z")),
        "18:00 in Shanghai"
    );
    assert_eq!(
        cal.next_allowed(at("2026-12-25T00:00:00Z")),
        Some(at("2026-12-26T16:00:00Z"))
    );
    assert!(cal.is_blocked(at("2026-06-01T00:00:09Z")));
    assert!(!cal.is_blocked(at("2026-06-01T00:00:10Z")));
    assert!(cal.is_blocked(at("2026-08-02T12:00:00Z")));
    assert_eq!(
        cal.next_allowed(at("2026-07-31T16:00:00Z")),
        Some(at("2026-08-03T16:00:00Z"))
    );
}

#[test]
fn a_skipping_every_second_job_jumps_a_weekend_in_one_step() {
    let cal = calendar(
        r#"{"weekly": [{"days": ["sat", "sun"]}]}"#,
        OnBlocked::Skip,
        "UTC",
    );
    let spec = ScheduleSpec::new("* * * * * *", Tz::UTC)
        .unwrap()
        .with_calendar(cal);
    assert_eq!(
        spec.next_after(at("2026-03-06T23:59:59Z")),
        Some(at("2026-03-09T00:00:00Z"))
    );
    assert_eq!(
        spec.cron_next_after(at("2026-03-06T23:59:59Z")),
        Some(at("2026-03-07T00:00:00Z"))
    );
}

#[test]
fn the_stored_form_round_trips_and_names_what_it_was_built_from() {
    let task = TaskCalendar::new(
        vec!["cn-holidays".into()],
        OnBlocked::Skip,
        serde_json::from_str(r#"{"dates": ["2026-10-01"]}"#).unwrap(),
    );
    let stored = task.to_stored();
    assert_eq!(TaskCalendar::from_stored(&stored).unwrap(), task);
    let compiled = task.compile(Tz::UTC).unwrap();
    assert_eq!(compiled.stored(), stored);
    assert_eq!(compiled.describe(), "calendar cn-holidays (skip)");
    assert!(TaskCalendar::from_stored(r#"{"rules": {"moon": []}}"#).is_err());
}

#[test]
fn refusals_name_the_rule_and_what_to_write() {
    let message = refusal(r#"{"dates": ["2026-02-30"]}"#);
    assert!(
        message.contains("`2026-02-30` is not a date; write YYYY-MM-DD"),
        "{message}"
    );
    let message = refusal(r#"{"dates": ["2026-10-07..2026-10-01"]}"#);
    assert!(message.contains("ends before it starts"), "{message}");
    let message = refusal(r#"{"weekly": [{"days": ["sat", "caturday"]}]}"#);
    assert!(message.contains("`caturday` is not a day"), "{message}");
    let message = refusal(r#"{"weekly": [{"days": []}]}"#);
    assert!(message.contains("no `days`"), "{message}");
    let message = refusal(r#"{"weekly": [{"days": ["mon"], "from": "25:00"}]}"#);
    assert!(message.contains("`25:00` is not a time"), "{message}");
    let message = refusal(r#"{"weekly": [{"days": ["mon"], "from": "24:00"}]}"#);
    assert!(message.contains("`24:00` is not a time"), "{message}");
    let message = refusal(r#"{"weekly": [{"days": ["mon"], "from": "12:00", "to": "12:00"}]}"#);
    assert!(message.contains("is empty"), "{message}");
    let message = refusal(r#"{"ranges": [{"from": "2026-01-02", "to": "2026-01-01"}]}"#);
    assert!(message.contains("ends at or before it starts"), "{message}");
    let message = refusal(r#"{"ranges": [{"from": "soon", "to": "2026-01-01"}]}"#);
    assert!(
        message.contains("range `from` `soon` is not a time"),
        "{message}"
    );
    let message = refusal(r#"{"weekly": [{"days": ["mon-sun"]}]}"#);
    assert!(message.contains("cover the whole week"), "{message}");
    let message = refusal(
        r#"{"weekly": [{"days": ["mon-fri"]}, {"days": ["fri"], "from": "20:00", "to": "00:00"},
                       {"days": ["sat-sun"]}]}"#,
    );
    assert!(message.contains("cover the whole week"), "{message}");
    // Nearly the whole week is fine: one free second.
    let rules: CalendarRules = serde_json::from_str(
        r#"{"weekly": [{"days": ["mon-sat"]}, {"days": ["sun"], "to": "23:59:59"}]}"#,
    )
    .unwrap();
    assert!(Calendar::new(rules, OnBlocked::Skip, Tz::UTC).is_ok());
}

/// A date whose comparisons are counted, to see how many a lookup makes.
#[derive(Debug, Clone, Copy)]
struct Counted(NaiveDate);

thread_local! {
    static COMPARISONS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

impl PartialEq for Counted {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == std::cmp::Ordering::Equal
    }
}
impl Eq for Counted {}
impl PartialOrd for Counted {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Counted {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        COMPARISONS.with(|c| c.set(c.get() + 1));
        self.0.cmp(&other.0)
    }
}

fn dates_json(dates: impl Iterator<Item = NaiveDate>) -> String {
    let dates: Vec<String> = dates.map(|d| format!("\"{d}\"")).collect();
    format!(r#"{{"dates": [{}]}}"#, dates.join(","))
}

#[test]
fn twenty_thousand_consecutive_dates_are_one_span_left_in_one_step() {
    let first = NaiveDate::from_ymd_opt(2026, 1, 1).unwrap();
    // Written last first, as a generated list may be.
    let days = (0..20_000u64)
        .rev()
        .map(|i| first.checked_add_days(chrono::Days::new(i)).unwrap());
    let cal = calendar(&dates_json(days), OnBlocked::Skip, "Asia/Shanghai");
    let last = first.checked_add_days(chrono::Days::new(19_999)).unwrap();
    assert_eq!(cal.dates, [(first, last)]);
    assert_eq!(cal.describe(), "calendar of 20000 rule(s) (skip)");
    // One block_end leaves all of them: next_allowed takes one step, not 20,000.
    let after = last.succ_opt().unwrap().and_time(NaiveTime::MIN);
    let after = wall_to_instant(after, cal.zone()).unwrap();
    assert_eq!(cal.block_end(at("2026-01-01T04:00:00Z")), Some(after));
    assert_eq!(cal.next_allowed(at("2026-01-01T04:00:00Z")), Some(after));
}

#[test]
fn twenty_thousand_separate_dates_are_found_by_binary_search() {
    let first = NaiveDate::from_ymd_opt(2026, 1, 1).unwrap();
    let day = |i: u64| first.checked_add_days(chrono::Days::new(i)).unwrap();
    let cal = calendar(
        &dates_json((0..20_000).map(|i| day(2 * i))),
        OnBlocked::Skip,
        "UTC",
    );
    assert_eq!(cal.dates.len(), 20_000);
    assert!(cal.dates.windows(2).all(|w| w[0].1 < w[1].0));
    let counted: Vec<(Counted, Counted)> = cal
        .dates
        .iter()
        .map(|(a, b)| (Counted(*a), Counted(*b)))
        .collect();
    for i in [0, 1, 2, 9_999, 20_000, 39_997, 39_998, 39_999, 50_000] {
        COMPARISONS.with(|c| c.set(0));
        let found = span_at_or_before(&counted, &Counted(day(i))).map(|(a, b)| (a.0, b.0));
        let comparisons = COMPARISONS.with(std::cell::Cell::get);
        // log2(20,000) is 14.3: a binary search, not a scan.
        assert!(comparisons <= 16, "{comparisons} comparisons for day {i}");
        let blocked = found.is_some_and(|(_, last)| day(i) <= last);
        assert_eq!(blocked, i % 2 == 0 && i < 40_000, "day {i}");
        let noon = day(i).and_hms_opt(12, 0, 0).unwrap().and_utc();
        assert_eq!(cal.is_blocked(noon), blocked, "day {i}");
    }
}

#[test]
fn overlapping_ranges_and_weekly_windows_are_merged() {
    let cal = calendar(
        r#"{"ranges": [{"from": "2026-01-01", "to": "2026-01-03"},
                       {"from": "2026-01-02", "to": "2026-01-05"},
                       {"from": "2026-01-05", "to": "2026-01-06"},
                       {"from": "2026-02-01", "to": "2026-02-02"}],
            "weekly": [{"days": ["sun"], "from": "22:00", "to": "02:00"},
                       {"days": ["mon"], "from": "01:00", "to": "03:00"}]}"#,
        OnBlocked::Skip,
        "UTC",
    );
    assert_eq!(cal.ranges.len(), 2);
    assert_eq!(cal.ranges[0].1, at("2026-01-06T00:00:00Z"));
    // Sunday 22:00 to Monday 03:00, found from either side of midnight.
    assert_eq!(
        cal.block_end(at("2026-03-01T23:00:00Z")),
        Some(at("2026-03-02T03:00:00Z"))
    );
    assert_eq!(
        cal.block_end(at("2026-03-02T00:30:00Z")),
        Some(at("2026-03-02T03:00:00Z"))
    );
    assert_eq!(cal.block_end(at("2026-03-02T03:00:00Z")), None);
}
