//! Calendars: the instants a task must not fire at (holidays, weekly windows, ranges of time),
//! and what happens to a tick that falls on one.
//!
//! This module owns the rules of a calendar, their validation and messages, and the two
//! questions the rest of the scheduler asks: *is this instant blocked?* and *what is the first
//! allowed instant from here?* Both are answered in the task's IANA zone, on its wall clock, so
//! a daylight-saving change moves a blocked window with the clock. Like the rest of
//! [`schedule`](super), it is pure: no database, no clock, no config file.
//!
//! # Rules
//!
//! A calendar blocks an instant when any of its rules does:
//!
//! | rule | written | blocks |
//! |---|---|---|
//! | a date | `"2026-10-01"`, or a span `"2026-10-01..2026-10-07"` (both ends included) | the whole local day(s), 00:00 to 24:00 on the zone's wall clock (23 or 25 hours on a DST day) |
//! | a weekly window | `{"days": ["sat", "sun"]}`, `{"days": ["mon-fri"], "from": "12:00", "to": "13:00"}` | on those days, wall-clock times from `from` (included, default `00:00`) to `to` (excluded, default `24:00`); a `to` at or before `from` runs past midnight into the next day (`{"days": ["fri"], "from": "22:00", "to": "06:00"}` is Friday 22:00 to Saturday 06:00) |
//! | a range | `{"from": "2026-12-24T18:00", "to": "2026-12-27"}` | real time from `from` (included) to `to` (excluded); without an offset each end is a wall-clock time in the task's zone, with one (`Z`, `+08:00`) it is that instant |
//!
//! Days are `mon` ... `sun` (or full names, any case), alone or as ranges (`mon-fri`,
//! `fri-mon` wraps over the weekend). Times are `HH:MM` or `HH:MM:SS`; `24:00` only as a `to`.
//!
//! # Daylight saving time
//!
//! Dates and weekly windows are wall-clock rules: an instant is blocked when its wall-clock
//! time in the zone falls in them. So a window that falls into a spring-forward gap
//! (`02:00`-`02:30` in New York on 2026-03-08) blocks nothing that day, one that spans the gap
//! (`01:00`-`03:00`) blocks the hour that really happens, and in a repeated fall-back hour both
//! of its occurrences are blocked. A wall-clock end that does not exist (in a gap) ends at the
//! first instant after the gap; a range's wall-clock start in a repeated hour is its first
//! occurrence.
//!
//! # What happens to a blocked tick
//!
//! [`OnBlocked::Skip`] (the default): the tick does not run and is recorded as skipped with the
//! reason `calendar`. [`OnBlocked::NextAllowed`]: the tick moves to the first allowed instant;
//! ticks that move to the same instant fold into one run there (a task never overlaps itself),
//! and that run's `scheduled_at` is the instant it moved to.
//!
//! ```
//! use chrono::{DateTime, Utc};
//! use scheduler::schedule::{Calendar, CalendarRules, OnBlocked, ScheduleSpec};
//!
//! let at = |s: &str| s.parse::<DateTime<Utc>>().unwrap();
//! let rules: CalendarRules = serde_json::from_str(
//!     r#"{"dates": ["2026-10-01"], "weekly": [{"days": ["sat", "sun"]}]}"#,
//! )?;
//! let zone = chrono_tz::Asia::Shanghai;
//! let calendar = Calendar::new(rules, OnBlocked::Skip, zone)?;
//! // 09:00 in Shanghai on a holiday (a Thursday) is blocked; the next allowed instant is
//! // midnight after it.
//! assert!(calendar.is_blocked(at("2026-10-01T01:00:00Z")));
//! assert_eq!(calendar.next_allowed(at("2026-10-01T01:00:00Z")), Some(at("2026-10-01T16:00:00Z")));
//!
//! // A daily 09:00 job skips the holiday and the weekend after it.
//! let spec = ScheduleSpec::new("0 9 * * *", zone)?.with_calendar(calendar);
//! let fires: Vec<_> = spec.iter_after(at("2026-09-30T12:00:00Z")).take(2).collect();
//! assert_eq!(fires, [at("2026-10-02T01:00:00Z"), at("2026-10-05T01:00:00Z")]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod parse;
mod week;

use std::fmt;

use chrono::{
    DateTime, Datelike, LocalResult, NaiveDate, NaiveDateTime, NaiveTime, TimeDelta, TimeZone,
    Timelike, Utc,
};
use chrono_tz::{GapInfo, Tz};
use serde::{Deserialize, Serialize};

use parse::{parse_date_span, parse_range, parse_window};
use week::{DAY, WEEK, Window, covers_whole_week, week_spans};

/// Safety net for [`Calendar::next_allowed`]: each step leaves one blocking rule, so only a
/// calendar that chains thousands of windows end to end takes this many.
pub(crate) const MAX_STEPS: usize = 10_000;

/// What happens to a tick a calendar blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum OnBlocked {
    /// The tick does not run; it is recorded as skipped with the reason `calendar`.
    #[default]
    Skip,
    /// The tick moves to the first allowed instant; ticks moved to the same instant fold into
    /// one run there.
    NextAllowed,
}

impl OnBlocked {
    /// `skip` or `next_allowed`, as written in the config.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Skip => "skip",
            Self::NextAllowed => "next_allowed",
        }
    }
}

impl fmt::Display for OnBlocked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A calendar's rules as written (in the config's `calendars` map, or inline on a task), before
/// they are checked and bound to a zone by [`Calendar::new`].
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CalendarRules {
    /// Whole local days, `YYYY-MM-DD`, or spans `YYYY-MM-DD..YYYY-MM-DD` (both ends included).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dates: Vec<String>,
    /// Weekly windows.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub weekly: Vec<WeeklyRule>,
    /// Ranges of time.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ranges: Vec<RangeRule>,
}

impl CalendarRules {
    /// Whether the rules block nothing.
    pub fn is_empty(&self) -> bool {
        self.dates.is_empty() && self.weekly.is_empty() && self.ranges.is_empty()
    }

    /// Adds `other`'s rules to these (a task naming several calendars is blocked by any).
    pub fn extend(&mut self, other: &CalendarRules) {
        self.dates.extend(other.dates.iter().cloned());
        self.weekly.extend(other.weekly.iter().cloned());
        self.ranges.extend(other.ranges.iter().cloned());
    }
}

/// A weekly window: on `days`, from `from` to `to` on the wall clock.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WeeklyRule {
    /// Days of the week: `mon` ... `sun`, full names, or ranges such as `mon-fri`.
    pub days: Vec<String>,
    /// Start, `HH:MM` or `HH:MM:SS` (included); the start of the day when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// End, `HH:MM`, `HH:MM:SS` or `24:00` (excluded); the end of the day when absent. At or
    /// before `from`: the window runs past midnight into the next day.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
}

/// A range of time, `from` (included) to `to` (excluded).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RangeRule {
    /// `YYYY-MM-DD`, `YYYY-MM-DDTHH:MM[:SS]` (wall clock in the task's zone) or an RFC 3339
    /// instant with an offset.
    pub from: String,
    /// Same forms as `from`.
    pub to: String,
}

/// Why a calendar's rules were refused. The message names the rule and says what to write.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct CalendarError {
    message: String,
}

impl CalendarError {
    pub(crate) fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
        }
    }
}

/// A task's calendar as the config resolves it (its named calendars and inline rules merged)
/// and as the store keeps it on the task's row, so every node applies the same one.
///
/// ```
/// use scheduler::schedule::{OnBlocked, TaskCalendar};
///
/// let stored = r#"{"names":["weekends"],"on_blocked":"next_allowed","rules":{"weekly":[{"days":["sat","sun"]}]}}"#;
/// let calendar = TaskCalendar::from_stored(stored)?;
/// assert_eq!(calendar.on_blocked, OnBlocked::NextAllowed);
/// assert_eq!(calendar.to_stored(), stored);
/// assert!(calendar.compile(chrono_tz::UTC).is_ok());
/// # Ok::<(), scheduler::schedule::CalendarError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct TaskCalendar {
    /// The named calendars it was built from, in the order the task lists them (for display).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub names: Vec<String>,
    /// What becomes of a blocked tick.
    #[serde(default)]
    pub on_blocked: OnBlocked,
    /// Every rule, of the named calendars and the inline ones.
    #[serde(default)]
    pub rules: CalendarRules,
}

impl TaskCalendar {
    /// A calendar of `rules`, from the named calendars `names`.
    pub fn new(names: Vec<String>, on_blocked: OnBlocked, rules: CalendarRules) -> Self {
        Self {
            names,
            on_blocked,
            rules,
        }
    }

    /// The form kept on the task's row: compact JSON, the same for the same calendar.
    pub fn to_stored(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Reads the form kept on a task's row.
    pub fn from_stored(text: &str) -> Result<Self, CalendarError> {
        serde_json::from_str(text).map_err(|e| {
            CalendarError::new(format!("stored calendar cannot be read by this node: {e}"))
        })
    }

    /// Checks the rules and binds them to `zone` (see [`Calendar::new`]).
    pub fn compile(&self, zone: Tz) -> Result<Calendar, CalendarError> {
        let mut calendar = Calendar::new(self.rules.clone(), self.on_blocked, zone)?;
        calendar.names = self.names.clone();
        calendar.stored = self.to_stored();
        Ok(calendar)
    }
}

/// A calendar checked and bound to a zone: which instants are blocked, and what becomes of a
/// tick on one (see the [module docs](self)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Calendar {
    zone: Tz,
    on_blocked: OnBlocked,
    names: Vec<String>,
    /// The [`TaskCalendar`] it was built from, in its stored form.
    stored: String,
    /// How many rules it was written with (for [`describe`](Self::describe)).
    rule_count: usize,
    /// Blocked local days, as inclusive spans, sorted, merged: no two overlap or touch.
    dates: Vec<(NaiveDate, NaiveDate)>,
    /// Blocked wall-clock times of the week, in seconds from a Monday 00:00, `[from, to)`,
    /// sorted and merged, over three weeks: an instant is looked up in the second, so windows
    /// that run into it from the week before and on into the week after are merged with it.
    week: Vec<(i64, i64)>,
    /// Blocked ranges of real time, `[from, to)`, sorted and merged.
    ranges: Vec<(DateTime<Utc>, DateTime<Utc>)>,
}

/// Sorts `spans` and merges those that overlap or touch (`touch(end, next_start)`).
fn merge<K: Ord + Copy>(mut spans: Vec<(K, K)>, touch: impl Fn(K, K) -> bool) -> Vec<(K, K)> {
    spans.sort();
    let mut merged: Vec<(K, K)> = Vec::with_capacity(spans.len());
    for (from, to) in spans {
        match merged.last_mut() {
            Some(last) if touch(last.1, from) => last.1 = last.1.max(to),
            _ => merged.push((from, to)),
        }
    }
    merged
}

/// Of sorted, disjoint `spans`, the one whose start is the last at or before `key`: the only
/// one that can hold it. A binary search: O(log n) comparisons.
pub(crate) fn span_at_or_before<'a, K: Ord>(spans: &'a [(K, K)], key: &K) -> Option<&'a (K, K)> {
    let after = spans.partition_point(|(from, _)| from <= key);
    after.checked_sub(1).map(|i| &spans[i])
}

impl Calendar {
    /// Checks `rules` and binds them to `zone`; ticks they block are handled per `on_blocked`.
    ///
    /// Refused: a date that is not one, a span that ends before it starts, a weekly window
    /// without days or with an unknown day or time, a window from a time to the same time, a
    /// range that ends at or before its start, and weekly windows that together cover the
    /// whole week (the task would never run).
    pub fn new(
        rules: CalendarRules,
        on_blocked: OnBlocked,
        zone: Tz,
    ) -> Result<Self, CalendarError> {
        let stored = TaskCalendar::new(Vec::new(), on_blocked, rules.clone()).to_stored();
        let rule_count = rules.dates.len() + rules.weekly.len() + rules.ranges.len();
        let dates = rules
            .dates
            .iter()
            .map(|d| parse_date_span(d))
            .collect::<Result<Vec<_>, _>>()?;
        let dates = merge(dates, |last, next| {
            last.succ_opt().is_none_or(|after| next <= after)
        });
        let weekly = rules
            .weekly
            .iter()
            .map(parse_window)
            .collect::<Result<Vec<_>, _>>()?;
        if covers_whole_week(&weekly) {
            return Err(CalendarError::new(
                "the weekly windows cover the whole week: the task would never run",
            ));
        }
        let ranges = rules
            .ranges
            .iter()
            .map(|r| parse_range(r, zone))
            .collect::<Result<Vec<_>, _>>()?;
        let ranges = merge(ranges, |last, next| next <= last);
        let week = week_spans(&weekly)
            .into_iter()
            .flat_map(|(from, to)| [0, WEEK, 2 * WEEK].map(|week| (from + week, to + week)))
            .collect();
        let week = merge(week, |last, next| next <= last);
        Ok(Self {
            zone,
            on_blocked,
            names: Vec::new(),
            stored,
            rule_count,
            dates,
            week,
            ranges,
        })
    }

    /// The zone the rules are read in.
    pub fn zone(&self) -> Tz {
        self.zone
    }

    /// What becomes of a blocked tick.
    pub fn on_blocked(&self) -> OnBlocked {
        self.on_blocked
    }

    /// The named calendars it was built from.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// Its stored form (see [`TaskCalendar::to_stored`]).
    pub fn stored(&self) -> &str {
        &self.stored
    }

    /// A short description for people: `calendar cn-holidays, weekends (skip)`, or
    /// `calendar of 3 rules (next_allowed)` for inline rules.
    pub fn describe(&self) -> String {
        let rules = self.rule_count;
        if self.names.is_empty() {
            format!("calendar of {rules} rule(s) ({})", self.on_blocked)
        } else {
            format!("calendar {} ({})", self.names.join(", "), self.on_blocked)
        }
    }

    /// Whether `at` is blocked.
    pub fn is_blocked(&self, at: DateTime<Utc>) -> bool {
        self.block_end(at).is_some()
    }

    /// The first allowed instant at or after `at` (`at` itself when it is allowed), or `None`
    /// when none can be found (past the year 9999, or a chain of more than 10,000 windows).
    pub fn next_allowed(&self, at: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let mut cursor = at;
        for _ in 0..MAX_STEPS {
            match self.block_end(cursor) {
                None => return Some(cursor),
                Some(end) => cursor = end,
            }
        }
        None
    }

    /// When `at` is blocked, the latest end of the rules that block it (strictly after `at`).
    ///
    /// Three binary searches (dates, the week, ranges): O(log n) in the number of rules.
    pub(crate) fn block_end(&self, at: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let local = at.with_timezone(&self.zone).naive_local();
        let mut end: Option<DateTime<Utc>> = None;
        let mut later = |candidate: DateTime<Utc>| {
            if end.is_none_or(|e| candidate > e) {
                end = Some(candidate);
            }
        };
        let day = local.date();
        if let Some((_, last)) = span_at_or_before(&self.dates, &day).filter(|(_, l)| day <= *l) {
            let after = last.succ_opt().map(|d| d.and_time(NaiveTime::MIN));
            later(after.map_or(DateTime::<Utc>::MAX_UTC, |a| {
                wall_to_instant_after(a, self.zone, at)
            }));
        }
        if let Some(wall_end) = self.week_end_if_within(local) {
            later(wall_to_instant_after(wall_end, self.zone, at));
        }
        if let Some((_, to)) = span_at_or_before(&self.ranges, &at).filter(|(_, to)| at < *to) {
            later(*to);
        }
        end
    }

    /// If the wall-clock time `local` is in a weekly window, the wall-clock time the windows
    /// around it end.
    fn week_end_if_within(&self, local: NaiveDateTime) -> Option<NaiveDateTime> {
        let weekday = i64::from(local.weekday().num_days_from_monday());
        // Seconds from the Monday 00:00 of the week before: the second copy of the week, so
        // that a window begun last week (Sunday night) is found too.
        let second = WEEK + weekday * DAY + i64::from(local.time().num_seconds_from_midnight());
        let (_, to) = span_at_or_before(&self.week, &second).filter(|(_, to)| second < *to)?;
        let monday_before = local
            .date()
            .checked_sub_days(chrono::Days::new(7 + weekday as u64))?;
        monday_before
            .and_time(NaiveTime::MIN)
            .checked_add_signed(TimeDelta::seconds(*to))
    }
}

/// The first real instant after `after` whose wall-clock time in `zone` is `wall`, or, when
/// `wall` falls in a gap, the end of the gap. Used for the ends of windows, so the result is
/// always after `after` (a window's end in a repeated hour is the occurrence after the instant
/// that is inside the window).
fn wall_to_instant_after(wall: NaiveDateTime, zone: Tz, after: DateTime<Utc>) -> DateTime<Utc> {
    let candidates: Vec<DateTime<Utc>> = match zone.from_local_datetime(&wall) {
        LocalResult::Single(t) => vec![t.to_utc()],
        LocalResult::Ambiguous(a, b) => vec![a.to_utc(), b.to_utc()],
        LocalResult::None => GapInfo::new(&wall, &zone)
            .and_then(|gap| gap.end)
            .map(|end| vec![end.to_utc()])
            .unwrap_or_default(),
    };
    candidates
        .into_iter()
        .find(|t| *t > after)
        // Only if the zone's data is inconsistent: move on by a second rather than loop.
        .unwrap_or(after + TimeDelta::seconds(1))
}

/// A wall-clock time in `zone` as the instant it first happens (a gap: the end of the gap).
fn wall_to_instant(wall: NaiveDateTime, zone: Tz) -> Option<DateTime<Utc>> {
    match zone.from_local_datetime(&wall) {
        LocalResult::Single(t) => Some(t.to_utc()),
        LocalResult::Ambiguous(first, _) => Some(first.to_utc()),
        LocalResult::None => Some(GapInfo::new(&wall, &zone)?.end?.to_utc()),
    }
}

#[cfg(test)]
#[path = "calendar_tests.rs"]
mod tests;
