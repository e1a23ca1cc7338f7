//! Property test: a calendar's answer to "is this instant blocked?" (sorted, merged rules,
//! binary searches) is the answer of the rules read one by one, as the module docs state them,
//! for random rules in zones with daylight saving time.

use chrono::{DateTime, Datelike, NaiveDate, NaiveTime, TimeZone, Timelike, Utc};
use chrono_tz::Tz;
use proptest::prelude::*;
use scheduler::schedule::{Calendar, CalendarRules, OnBlocked, RangeRule, WeeklyRule};

const ZONES: [Tz; 3] = [
    chrono_tz::America::New_York,
    chrono_tz::Australia::Lord_Howe,
    chrono_tz::UTC,
];
const DAYS: [&str; 7] = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"];
/// 2026-01-01T00:00:00Z; instants and rules fall in the 60 days after it.
const START: i64 = 1_767_225_600;
const SPAN_DAYS: i64 = 60;

fn day(offset: i64) -> NaiveDate {
    NaiveDate::from_ymd_opt(2026, 1, 1).unwrap() + chrono::Days::new(offset as u64)
}

fn hm(minutes: u32) -> NaiveTime {
    NaiveTime::from_hms_opt(minutes / 60, minutes % 60, 0).unwrap()
}

#[derive(Debug, Clone)]
struct Rules {
    dates: Vec<(i64, i64)>,
    /// (days bitmask, from minute, to minute or None for 24:00)
    weekly: Vec<(u8, u32, Option<u32>)>,
    /// (from, to) in seconds after START, UTC.
    ranges: Vec<(i64, i64)>,
}

fn rules() -> impl Strategy<Value = Rules> {
    (
        prop::collection::vec((0..SPAN_DAYS, 0i64..4), 0..12),
        prop::collection::vec(
            (
                1u8..0x7f,
                (0u32..48).prop_map(|h| h * 30),
                prop::option::of((0u32..48).prop_map(|h| h * 30)),
            ),
            0..4,
        ),
        prop::collection::vec((0..SPAN_DAYS * 86_400, 1i64..200_000), 0..6),
    )
        .prop_map(|(dates, weekly, ranges)| Rules {
            dates: dates.into_iter().map(|(d, n)| (d, d + n)).collect(),
            weekly: weekly
                .into_iter()
                .filter(|(_, from, to)| *to != Some(*from))
                .collect(),
            ranges: ranges.into_iter().map(|(f, n)| (f, f + n)).collect(),
        })
}

impl Rules {
    fn written(&self) -> CalendarRules {
        let at = |s: i64| Utc.timestamp_opt(START + s, 0).unwrap().to_rfc3339();
        CalendarRules {
            dates: self
                .dates
                .iter()
                .map(|(a, b)| format!("{}..{}", day(*a), day(*b)))
                .collect(),
            weekly: self
                .weekly
                .iter()
                .map(|(days, from, to)| WeeklyRule {
                    days: (0..7)
                        .filter(|d| days & (1 << d) != 0)
                        .map(|d| DAYS[d].to_owned())
                        .collect(),
                    from: Some(hm(*from).format("%H:%M").to_string()),
                    to: to.map(|to| hm(to).format("%H:%M").to_string()),
                })
                .collect(),
            ranges: self
                .ranges
                .iter()
                .map(|(f, t)| RangeRule {
                    from: at(*f),
                    to: at(*t),
                })
                .collect(),
        }
    }

    /// The rules read one by one, on the wall clock of `zone`.
    fn blocks(&self, at: DateTime<Utc>, zone: Tz) -> bool {
        let local = at.with_timezone(&zone).naive_local();
        let (date, time) = (local.date(), local.time());
        let dates = self
            .dates
            .iter()
            .any(|(a, b)| day(*a) <= date && date <= day(*b));
        let weekly = self.weekly.iter().any(|(days, from, to)| {
            let on = |d: NaiveDate| days & (1 << d.weekday().num_days_from_monday()) != 0;
            let minute = time.num_seconds_from_midnight() / 60;
            match to {
                None => on(date) && minute >= *from,
                Some(to) if to > from => on(date) && minute >= *from && minute < *to,
                // Past midnight: today's from `from`, or yesterday's until `to`.
                Some(to) => {
                    (on(date) && minute >= *from) || (on(date.pred_opt().unwrap()) && minute < *to)
                }
            }
        });
        let second = at.timestamp() - START;
        let ranges = self.ranges.iter().any(|(f, t)| *f <= second && second < *t);
        dates || weekly || ranges
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn blocked_is_what_the_rules_say_one_by_one(
        rules in rules(),
        zone in 0..ZONES.len(),
        instants in prop::collection::vec(
            prop_oneof![
                0..SPAN_DAYS * 86_400,
                // Near the half hours, where every window, date and zone offset turns.
                (0..SPAN_DAYS * 48, -61i64..61).prop_map(|(h, d)| (h * 1_800 + d).max(0)),
            ],
            1..40,
        ),
    ) {
        let zone = ZONES[zone];
        let ends = rules.ranges.iter().flat_map(|(f, t)| [*f, *t - 1, *t]);
        let instants: Vec<i64> = instants.into_iter().chain(ends).collect();
        // Windows that cover the whole week are refused; nothing to compare then.
        let Ok(calendar) = Calendar::new(rules.written(), OnBlocked::Skip, zone) else {
            return Ok(());
        };
        for s in instants {
            let at = Utc.timestamp_opt(START + s, 0).unwrap();
            prop_assert_eq!(calendar.is_blocked(at), rules.blocks(at, zone), "at {}", at);
            if let Some(next) = calendar.next_allowed(at) {
                prop_assert!(!rules.blocks(next, zone), "next_allowed {} is blocked", next);
            }
        }
    }
}
