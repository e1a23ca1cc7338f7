//! Property test: random valid expressions in random zones (DST ones included) at random
//! instants 2020-2035, checked against an independent brute-force oracle written here.
//!
//! The oracle enumerates every matching wall-clock time of every matching local day in the
//! window, applies the documented DST policy by hand (fixed-time: gap -> first instant after
//! the gap, repeated hour -> first occurrence; interval: every real matching instant), and must
//! produce exactly the fires `ScheduleSpec` returns: none missing, none extra, strictly
//! increasing.

use chrono::{
    DateTime, Datelike, Duration, LocalResult, NaiveDate, NaiveDateTime, Offset, TimeZone, Utc,
};
use chrono_tz::Tz;
use proptest::prelude::*;
use scheduler::ScheduleSpec;

const ZONES: [&str; 5] = [
    "America/New_York",
    "Europe/London",
    "Australia/Lord_Howe",
    "Asia/Shanghai",
    "UTC",
];
const FIRES: usize = 5;
const MONTHS: [&str; 12] = [
    "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
];
const DAYS: [&str; 7] = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Second,
    Minute,
    Hour,
    DayOfMonth,
    Month,
    DayOfWeek,
}

impl Kind {
    fn min(self) -> u32 {
        match self {
            Kind::DayOfMonth | Kind::Month => 1,
            _ => 0,
        }
    }
    /// What `*` runs to.
    fn max(self) -> u32 {
        match self {
            Kind::Second | Kind::Minute => 59,
            Kind::Hour => 23,
            Kind::DayOfMonth => 31,
            Kind::Month => 12,
            Kind::DayOfWeek => 6,
        }
    }
}

/// One list item of a field, as generated.
#[derive(Debug, Clone)]
enum Item {
    Star(Option<u32>),
    Value(u32),
    Range(u32, u32, Option<u32>),
    From(u32, u32),
    LastDay,
    NearestWeekday(u32),
    NthWeekday(u32, u32),
    LastWeekday(u32),
}

#[derive(Debug, Clone)]
struct Field {
    kind: Kind,
    items: Vec<Item>,
    names: bool,
    force_and: bool,
}

impl Field {
    fn text(&self) -> String {
        let show = |v: u32| match self.kind {
            Kind::Month if self.names => MONTHS[v as usize - 1].to_lowercase(),
            Kind::DayOfWeek if self.names => DAYS[(v % 7) as usize].to_owned(),
            _ => v.to_string(),
        };
        let step = |s: Option<u32>| s.map(|s| format!("/{s}")).unwrap_or_default();
        let items: Vec<String> = self
            .items
            .iter()
            .map(|item| match *item {
                Item::Star(s) => format!("*{}", step(s)),
                Item::Value(v) => show(v),
                // `SUN-SUN` is Sunday alone; 0-7 (every day) keeps its number.
                Item::Range(0, 7, s) => format!("{}-7{}", show(0), step(s)),
                Item::Range(a, b, s) => format!("{}-{}{}", show(a), show(b), step(s)),
                Item::From(a, s) => format!("{}/{s}", show(a)),
                Item::LastDay => "L".to_owned(),
                Item::NearestWeekday(d) => format!("{d}W"),
                Item::NthWeekday(d, n) => format!("{}#{n}", show(d)),
                Item::LastWeekday(d) => format!("{d}L"),
            })
            .collect();
        let plus = if self.force_and { "+" } else { "" };
        format!("{plus}{}", items.join(","))
    }

    fn starts_with_star(&self) -> bool {
        matches!(self.items.first(), Some(Item::Star(_)))
    }

    /// Plain values the field matches (day of week: Sunday is 0).
    fn values(&self) -> Vec<u32> {
        let mut out = Vec::new();
        let mut add = |from: u32, to: u32, step: Option<u32>| {
            for v in (from..=to).step_by(step.unwrap_or(1) as usize) {
                let v = if self.kind == Kind::DayOfWeek {
                    v % 7
                } else {
                    v
                };
                if !out.contains(&v) {
                    out.push(v);
                }
            }
        };
        for item in &self.items {
            match *item {
                Item::Star(s) => add(self.kind.min(), self.kind.max(), s),
                Item::Value(v) => add(v, v, None),
                Item::Range(a, b, s) => add(a, b, s),
                Item::From(a, s) => add(a, self.kind.max(), Some(s)),
                _ => {}
            }
        }
        out.sort_unstable();
        out
    }

    fn matches_dom(&self, date: NaiveDate) -> bool {
        let length = days_in_month(date.year(), date.month());
        let day = date.day();
        self.values().contains(&day)
            || self.items.iter().any(|item| match *item {
                Item::LastDay => day == length,
                Item::NearestWeekday(target) => nearest_weekday(date, target) == Some(day),
                _ => false,
            })
    }

    fn matches_dow(&self, date: NaiveDate) -> bool {
        let weekday = date.weekday().num_days_from_sunday();
        let length = days_in_month(date.year(), date.month());
        self.values().contains(&weekday)
            || self.items.iter().any(|item| match *item {
                Item::NthWeekday(d, n) => d % 7 == weekday && (date.day() - 1) / 7 + 1 == n,
                Item::LastWeekday(d) => d % 7 == weekday && date.day() + 7 > length,
                _ => false,
            })
    }
}

fn days_in_month(year: i32, month: u32) -> u32 {
    let (next_year, next_month) = if month == 12 {
        (year + 1, 1)
    } else {
        (year, month + 1)
    };
    NaiveDate::from_ymd_opt(next_year, next_month, 1)
        .unwrap()
        .pred_opt()
        .unwrap()
        .day()
}

/// `<target>W`: the weekday nearest to `target` within its month, if the month has `target`.
fn nearest_weekday(date: NaiveDate, target: u32) -> Option<u32> {
    let length = days_in_month(date.year(), date.month());
    if target > length {
        return None;
    }
    let day = NaiveDate::from_ymd_opt(date.year(), date.month(), target)?;
    Some(match day.weekday().num_days_from_sunday() {
        6 if target == 1 => 3,
        6 => target - 1,
        0 if target == length => target - 2,
        0 => target + 1,
        _ => target,
    })
}

#[derive(Debug, Clone)]
struct Expression {
    fields: Vec<Field>, // second, minute, hour, day of month, month, day of week
    six: bool,
}

impl Expression {
    fn text(&self) -> String {
        let skip = usize::from(!self.six);
        let texts: Vec<String> = self.fields[skip..].iter().map(Field::text).collect();
        texts.join(" ")
    }

    /// cronie's rule: fixed-time unless the minute or the hour field starts with `*`; the
    /// seconds field plays no part.
    fn fixed_time(&self) -> bool {
        !self.fields[1].starts_with_star() && !self.fields[2].starts_with_star()
    }

    /// Vixie cron's day rule, with `+` forcing AND.
    fn matches_date(&self, date: NaiveDate) -> bool {
        let (dom, month, dow) = (&self.fields[3], &self.fields[4], &self.fields[5]);
        if !month.values().contains(&date.month()) {
            return false;
        }
        let (dom_match, dow_match) = (dom.matches_dom(date), dow.matches_dow(date));
        if dom.starts_with_star() || dow.starts_with_star() || dow.force_and {
            dom_match && dow_match
        } else {
            dom_match || dow_match
        }
    }

    /// Every fire instant in `(after, until]`, by enumeration.
    fn brute_force(
        &self,
        zone: Tz,
        after: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> Vec<DateTime<Utc>> {
        let (seconds, minutes, hours) = (
            self.fields[0].values(),
            self.fields[1].values(),
            self.fields[2].values(),
        );
        let fixed = self.fixed_time();
        let mut fires = Vec::new();
        let mut date = after.with_timezone(&zone).date_naive() - Duration::days(1);
        let last = until.with_timezone(&zone).date_naive() + Duration::days(1);
        while date <= last {
            if self.matches_date(date) {
                for &h in &hours {
                    for &m in &minutes {
                        for &s in &seconds {
                            let wall = date.and_hms_opt(h, m, s).unwrap();
                            match zone.from_local_datetime(&wall) {
                                LocalResult::Single(t) => fires.push(t.to_utc()),
                                LocalResult::Ambiguous(first, second) => {
                                    fires.push(first.to_utc());
                                    if !fixed {
                                        fires.push(second.to_utc());
                                    }
                                }
                                LocalResult::None if fixed => fires.push(after_gap(zone, wall)),
                                LocalResult::None => {}
                            }
                        }
                    }
                }
            }
            date = date.succ_opt().unwrap();
        }
        fires.retain(|t| *t > after && *t <= until);
        fires.sort_unstable();
        fires.dedup();
        fires
    }
}

/// The first instant whose wall clock is past `wall`, which lies in a gap: found by scanning,
/// independently of chrono-tz's gap helpers.
fn after_gap(zone: Tz, wall: NaiveDateTime) -> DateTime<Utc> {
    let mut t = (wall - Duration::hours(15)).and_utc();
    while t.with_timezone(&zone).naive_local() < wall {
        t += Duration::minutes(1);
    }
    while (t - Duration::seconds(1))
        .with_timezone(&zone)
        .naive_local()
        > wall
    {
        t -= Duration::seconds(1);
    }
    t
}

// ---- generators ----

fn value(kind: Kind) -> BoxedStrategy<u32> {
    match kind {
        // The hours where the test zones change their clocks, often.
        Kind::Hour => prop_oneof![0u32..=3, 0u32..=23].boxed(),
        Kind::DayOfWeek => (0u32..=7).boxed(),
        _ => (kind.min()..=kind.max()).boxed(),
    }
}

fn step(kind: Kind) -> BoxedStrategy<u32> {
    let span = kind.max() - kind.min();
    match kind {
        // Keep the seconds field sparse so the oracle stays quick.
        Kind::Second => (15..=span).boxed(),
        _ => (1..=span).boxed(),
    }
}

fn plain_item(kind: Kind) -> BoxedStrategy<Item> {
    let range =
        (value(kind), value(kind), proptest::option::of(step(kind))).prop_map(move |(a, b, s)| {
            let (a, b) = if a <= b { (a, b) } else { (b, a) };
            Item::Range(a, b, s)
        });
    prop_oneof![
        3 => value(kind).prop_map(Item::Value),
        2 => range,
        1 => step(kind).prop_map(|s| Item::Star(Some(s))),
        1 => (value(kind), step(kind)).prop_map(move |(a, s)| Item::From(a.min(kind.max()), s)),
    ]
    .boxed()
}

fn field(kind: Kind) -> BoxedStrategy<Field> {
    let star = Just(vec![Item::Star(None)]).boxed();
    let list = prop::collection::vec(plain_item(kind), 1..=3).boxed();
    let items = match kind {
        Kind::Second => prop_oneof![
            4 => Just(vec![Item::Value(0)]),
            2 => prop::collection::vec((0u32..=59).prop_map(Item::Value), 1..=3),
            1 => step(kind).prop_map(|s| vec![Item::Star(Some(s))]),
        ]
        .boxed(),
        Kind::DayOfMonth => prop_oneof![
            4 => star,
            3 => list,
            1 => Just(vec![Item::LastDay]),
            1 => (1u32..=31).prop_map(|d| vec![Item::NearestWeekday(d)]),
        ]
        .boxed(),
        Kind::DayOfWeek => prop_oneof![
            4 => star,
            3 => list,
            1 => (0u32..=7, 1u32..=5).prop_map(|(d, n)| vec![Item::NthWeekday(d, n)]),
            1 => (0u32..=7).prop_map(|d| vec![Item::LastWeekday(d)]),
        ]
        .boxed(),
        _ => prop_oneof![3 => star, 3 => list].boxed(),
    };
    let names = matches!(kind, Kind::Month | Kind::DayOfWeek);
    let force_and = kind == Kind::DayOfWeek;
    (items, any::<bool>(), any::<bool>())
        .prop_map(move |(items, use_names, plus)| {
            let starred = matches!(items.first(), Some(Item::Star(None)));
            Field {
                kind,
                items,
                names: names && use_names,
                force_and: force_and && plus && !starred,
            }
        })
        .boxed()
}

fn expression() -> impl Strategy<Value = Expression> {
    (
        field(Kind::Second),
        field(Kind::Minute),
        field(Kind::Hour),
        field(Kind::DayOfMonth),
        field(Kind::Month),
        field(Kind::DayOfWeek),
        any::<bool>(),
    )
        .prop_map(|(s, mi, h, dom, mo, dow, six)| {
            let s = if six {
                s
            } else {
                Field {
                    items: vec![Item::Value(0)],
                    ..s
                }
            };
            Expression {
                fields: vec![s, mi, h, dom, mo, dow],
                six,
            }
        })
}

/// Clock changes of `zone` in `year`, found by scanning offsets hour by hour.
fn transitions(zone: Tz, year: i32) -> Vec<DateTime<Utc>> {
    let offset = |t: DateTime<Utc>| t.with_timezone(&zone).offset().fix();
    let mut t = Utc.with_ymd_and_hms(year, 1, 1, 0, 0, 0).unwrap();
    let end = Utc.with_ymd_and_hms(year + 1, 1, 1, 0, 0, 0).unwrap();
    let mut out = Vec::new();
    while t < end {
        let next = t + Duration::hours(1);
        if offset(t) != offset(next) {
            out.push(next);
        }
        t = next;
    }
    out
}

/// A third uniform over 2020-2035, a third within two days before a clock change, a third
/// within two hours after one (so `after` can sit in the second half of a repeated range).
fn after(zone: Tz) -> impl Strategy<Value = DateTime<Utc>> {
    let start = Utc
        .with_ymd_and_hms(2020, 1, 1, 0, 0, 0)
        .unwrap()
        .timestamp();
    let end = Utc
        .with_ymd_and_hms(2036, 1, 1, 0, 0, 0)
        .unwrap()
        .timestamp();
    (
        0u8..3,
        start..end,
        2020i32..=2035,
        any::<usize>(),
        0i64..172_800,
        0i64..7_200,
    )
        .prop_map(move |(choice, uniform, year, pick, before, since)| {
            let changes = transitions(zone, year);
            match choice {
                1 if !changes.is_empty() => {
                    changes[pick % changes.len()] - Duration::seconds(before)
                }
                2 if !changes.is_empty() => {
                    changes[pick % changes.len()] + Duration::seconds(since)
                }
                _ => DateTime::from_timestamp(uniform, 0).unwrap(),
            }
        })
}

fn case() -> impl Strategy<Value = (Expression, Tz, DateTime<Utc>)> {
    (expression(), 0..ZONES.len()).prop_flat_map(|(expression, zone)| {
        let zone: Tz = ZONES[zone].parse().unwrap();
        (Just(expression), Just(zone), after(zone))
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn fires_match_the_brute_force_oracle((expression, zone, after) in case()) {
        let text = expression.text();
        let spec = match ScheduleSpec::parse(&text, zone.name()) {
            Ok(spec) => spec,
            Err(error) => {
                // Only an expression that never fires may be refused.
                let mut date = NaiveDate::from_ymd_opt(2000, 1, 1).unwrap();
                while date.year() < 2028 {
                    prop_assert!(!expression.matches_date(date), "`{text}` refused ({error}) but matches {date}");
                    date = date.succ_opt().unwrap();
                }
                return Ok(());
            }
        };
        prop_assert_eq!(spec.is_fixed_time(), expression.fixed_time(), "`{}`", text);

        let fires: Vec<DateTime<Utc>> = spec.iter_after(after).take(FIRES).collect();
        prop_assert_eq!(fires.len(), FIRES, "`{}` ran out of fires after {}", text, after);
        prop_assert!(fires[0] > after, "`{}`: first fire {} not after {}", text, fires[0], after);
        for pair in fires.windows(2) {
            prop_assert!(pair[0] < pair[1], "`{}`: fires not increasing: {:?}", text, fires);
        }
        for fire in &fires {
            let local = fire.with_timezone(&zone).naive_local();
            let on_wall_clock = expression.matches_date(local.date())
                && expression.fields[0].values().contains(&local.second_of_minute())
                && expression.fields[1].values().contains(&local.minute_of_hour())
                && expression.fields[2].values().contains(&local.hour_of_day());
            // Only a fixed-time job moved out of a gap may fire at a non-matching wall time.
            let moved_out_of_gap = expression.fixed_time()
                && (*fire - Duration::seconds(1)).with_timezone(&zone).offset().fix()
                    != fire.with_timezone(&zone).offset().fix();
            prop_assert!(on_wall_clock || moved_out_of_gap, "`{}` in {}: {} ({}) does not match", text, zone, fire, local);
        }

        let oracle = expression.brute_force(zone, after, fires[FIRES - 1]);
        let shown = &oracle[..oracle.len().min(FIRES + 3)];
        prop_assert!(
            fires == oracle,
            "`{}` in {} after {}: next_after gave {:?}, the oracle {:?} ({} in all)",
            text, zone, after, fires, shown, oracle.len()
        );
    }
}

trait WallClock {
    fn second_of_minute(&self) -> u32;
    fn minute_of_hour(&self) -> u32;
    fn hour_of_day(&self) -> u32;
}

impl WallClock for NaiveDateTime {
    fn second_of_minute(&self) -> u32 {
        chrono::Timelike::second(self)
    }
    fn minute_of_hour(&self) -> u32 {
        chrono::Timelike::minute(self)
    }
    fn hour_of_day(&self) -> u32 {
        chrono::Timelike::hour(self)
    }
}
