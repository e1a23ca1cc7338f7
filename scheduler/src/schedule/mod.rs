//! Schedule expressions: the one compiler shared by the config validator and the engine.
//!
//! This module owns cron syntax, its validation and error messages, time zones, and the
//! computation of fire instants. It must not touch the database, the clock or the task
//! registry: every function here is pure, given an expression, a zone and an instant.
//!
//! # Syntax
//!
//! Standard 5-field crontab, `minute hour day-of-month month day-of-week`, or 6 fields with a
//! leading `second` (`0 */5 * * * *` fires every five minutes on second 0). There is no year
//! field.
//!
//! | Field        | Values                         | Also                                  |
//! |--------------|--------------------------------|---------------------------------------|
//! | second       | 0-59                           | `*` `,` `-` `/`                       |
//! | minute       | 0-59                           | `*` `,` `-` `/`                       |
//! | hour         | 0-23                           | `*` `,` `-` `/`                       |
//! | day-of-month | 1-31                           | `L` (last day), `LW`, `15W`           |
//! | month        | 1-12, `JAN`-`DEC`              |                                       |
//! | day-of-week  | 0-7 (0 and 7 are Sunday), `SUN`-`SAT` | `5L` (last Friday), `FRI#3` (third Friday), leading `+` |
//!
//! - Names are three letters, any case, and only in their own field (`JAN` in the
//!   day-of-week field is refused).
//! - `N/S` means `N-max/S` (`5/15` in the minute field is 5, 20, 35, 50). In the day of week
//!   `*` and `N/S` run to 6 (Saturday); 7 is only another way to write Sunday.
//! - A range runs low to high; a reversed one (`22-2`) is refused with the rewrite
//!   (`22-23,0-2`). The crontab idiom `FRI-SUN` (or `5-0`) means Friday, Saturday, Sunday.
//! - Day of month and day of week follow Vixie cron: when both are restricted a day matches if
//!   either does (`0 0 13 * 5` is every Friday *and* every 13th); a field that starts with `*`
//!   counts as unrestricted (`*/2`). A leading `+` on the day of week asks for both instead:
//!   `0 0 13 * +5` is Friday the 13th.
//! - Aliases: `@hourly @daily @midnight @weekly @monthly @yearly @annually`. `@reboot` is
//!   refused: a task runs on its clock, not when a node starts.
//! - An expression that can never fire (`0 0 31 2 *`, `0 0 30 2 *`) is refused when parsed,
//!   not discovered at run time. `0 0 29 2 *` is fine: it fires in leap years.
//! - Also refused: values out of range, step 0 (`*/0`) or a step wider than the field,
//!   empty list items (`1,,2`), a step without a start (`/15`), `?`, and any field count but
//!   5 or 6. Every refusal names the field, the value and what is allowed:
//!
//! ```
//! use scheduler::schedule::{CronField, ScheduleSpec};
//!
//! let error = ScheduleSpec::parse("0 24 * * *", "UTC").unwrap_err();
//! assert_eq!(
//!     error.to_string(),
//!     "invalid cron `0 24 * * *`: hour field value `24` is out of range; allowed 0-23"
//! );
//! assert_eq!(error.field(), Some(CronField::Hour));
//!
//! let error = ScheduleSpec::parse("0 22-2 * * *", "UTC").unwrap_err();
//! assert!(error.to_string().contains("write `22-23,0-2`"));
//! ```
//!
//! # Time zones and daylight saving time
//!
//! An expression is read on the wall clock of its IANA zone ([`parse_timezone`]; an unknown
//! name is refused like a bad expression). Fire instants are returned in UTC and are always
//! strictly after the instant asked about. Where the wall clock jumps, the rule depends on
//! what the expression is about:
//!
//! Which kind a job is follows cronie (its `MIN_STAR` and `HR_STAR` flags): the form of the
//! minute and hour fields decides, not the values they expand to.
//!
//! - A **fixed-time** job (neither the minute nor the hour field starts with `*`:
//!   `30 2 * * *`, `0 9,17 * * MON-FRI`, `0 1-3 * * *`, `0,30 2 * * *`, `@daily`) belongs to
//!   times of day. If such a time falls into a spring-forward gap, the job runs at the first
//!   instant after the gap (once, however many of its times the gap swallowed). In a repeated
//!   fall-back range it runs once, at the first occurrence.
//! - An **interval** job (the minute or the hour field starts with `*`: `*/30 * * * *`,
//!   `0 * * * *`, `0 */2 * * *`, `*/20 1 * * *`, `@hourly`) runs at every real instant whose
//!   wall clock matches: nothing in a gap, in both halves of a repeated range.
//!
//! A step that does not start with `*` keeps a field fixed (`0 1-10/3 * * *` is fixed-time,
//! as in cronie), and the seconds field of the 6-field form plays no part
//! (`*/10 30 2 * * *` is fixed-time, `0 */10 2 * * *` is an interval job). Not every zone
//! shifts by an hour: Australia/Lord_Howe moves between +10:30 and +11:00, so there the gap
//! and the repeated range are half an hour long (02:00-02:29 in October, 01:30-01:59 in
//! April).
//!
//! ```
//! use chrono::{DateTime, Utc};
//! use scheduler::schedule::ScheduleSpec;
//!
//! let at = |s: &str| s.parse::<DateTime<Utc>>().unwrap();
//!
//! // New York springs forward on 2026-03-08: 02:00 EST becomes 03:00 EDT, and 02:30 never
//! // happens. The daily 02:30 job runs at 03:00 EDT (07:00Z), then at 02:30 EDT again.
//! let daily = ScheduleSpec::parse("30 2 * * *", "America/New_York")?;
//! let fires: Vec<_> = daily.iter_after(at("2026-03-07T12:00:00Z")).take(2).collect();
//! assert_eq!(fires, [at("2026-03-08T07:00:00Z"), at("2026-03-09T06:30:00Z")]);
//!
//! // On 2026-11-01 01:00-01:59 happens twice. The daily 01:30 job runs once, in EDT ...
//! let daily = ScheduleSpec::parse("30 1 * * *", "America/New_York")?;
//! assert_eq!(daily.next_after(at("2026-11-01T00:00:00Z")), Some(at("2026-11-01T05:30:00Z")));
//! assert_eq!(daily.next_after(at("2026-11-01T05:30:00Z")), Some(at("2026-11-02T06:30:00Z")));
//!
//! // ... while a half-hourly job runs at 01:30 EDT and again at 01:30 EST.
//! let half_hourly = ScheduleSpec::parse("*/30 * * * *", "America/New_York")?;
//! let fires: Vec<_> = half_hourly.iter_after(at("2026-11-01T05:15:00Z")).take(3).collect();
//! assert_eq!(
//!     fires,
//!     [at("2026-11-01T05:30:00Z"), at("2026-11-01T06:00:00Z"), at("2026-11-01T06:30:00Z")]
//! );
//!
//! // A minute field starting with `*` makes an interval job even with the hour named: every
//! // 20 minutes of 01:00-01:59 EDT, then of 01:00-01:59 EST.
//! let in_hour_one = ScheduleSpec::parse("*/20 1 * * *", "America/New_York")?;
//! assert!(!in_hour_one.is_fixed_time());
//! let fires: Vec<_> = in_hour_one.iter_after(at("2026-11-01T05:30:00Z")).take(3).collect();
//! assert_eq!(
//!     fires,
//!     [at("2026-11-01T05:40:00Z"), at("2026-11-01T06:00:00Z"), at("2026-11-01T06:20:00Z")]
//! );
//! # Ok::<(), scheduler::schedule::ScheduleError>(())
//! ```
//!
//! # Why croner, and what this module adds
//!
//! The search for matching wall-clock times is [`croner`] 4, behind our own parser
//! (`normalize.rs`) and our own zone step (`next.rs`). The `cron` crate (0.17) was the
//! alternative and does not fit: it has no 5-field form, numbers Sunday as 1, joins day of
//! month and day of week with AND, skips jobs in a spring-forward gap and runs fixed-time jobs
//! twice in a repeated hour. croner follows crontab semantics, but on its own it
//!
//! - accepts names in the wrong field (`JAN` in the day of week becomes 1, Monday), because it
//!   replaces names by text substitution over the whole expression;
//! - silently skips empty list items (`1,,2`) and accepts `?` in the day fields;
//! - refuses `N/S` (`5/15`), which crontab reads as `N-max/S`, and reversed ranges without
//!   saying how to write them (its own `sloppy_ranges` option would also let `/15` through, so
//!   we leave it off and expand `N/S` ourselves);
//! - treats only an exact `*` as an unrestricted day field, so `0 0 */2 * 1` would be OR
//!   instead of Vixie's AND;
//! - accepts a 7-field form with a year;
//! - reports errors such as "Number out of bounds." that name neither field nor value;
//! - accepts expressions that never fire (`0 0 31 2 *`), which then fail at search time;
//! - classifies a job as fixed-time only when second, minute and hour are each a single
//!   value, where we follow cronie (neither minute nor hour starts with `*`): croner would run
//!   `30 1,13 * * *` twice in a repeated hour, and `*/20 1 * * *` only once. (For jobs with
//!   a single second, minute and hour its own DST handling on zoned date types agrees with
//!   ours on every golden vector.)
//!
//! So this module validates every field itself, writes a canonical numbers-only pattern for
//! croner (with `+` where Vixie's rule means AND), asks croner only for the next matching
//! *wall-clock* time (a `NaiveDateTime`), and maps wall-clock times to instants with
//! `chrono-tz`, applying the policy above. A typical `next_after` takes well under a
//! microsecond in release builds (see `BENCHMARKS.md`, "Next fire time").

mod cache;
pub(crate) use cache::SpecCache;
pub mod calendar;
pub use calendar::{
    Calendar, CalendarError, CalendarRules, OnBlocked, RangeRule, TaskCalendar, WeeklyRule,
};
mod describe;
pub use describe::describe;
mod next;
mod normalize;
mod span;
pub(crate) use span::FireSpan;

use std::fmt;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;

use normalize::{Compiled, JobKind};

/// A validated cron expression bound to a time zone.
///
/// ```
/// use chrono::{DateTime, Utc};
/// use scheduler::ScheduleSpec;
///
/// let spec = ScheduleSpec::parse("0 9 * * MON-FRI", "Europe/London")?;
/// let after: DateTime<Utc> = "2026-01-02T12:00:00Z".parse().unwrap();
/// assert_eq!(spec.next_after(after), "2026-01-05T09:00:00Z".parse().ok());
/// # Ok::<(), scheduler::schedule::ScheduleError>(())
/// ```
#[derive(Clone)]
pub struct ScheduleSpec {
    expression: String,
    timezone: Tz,
    // Shared: croner's pattern holds a few kilobytes (its year field), and specs are cloned
    // into engine and reconciler state.
    compiled: Arc<Compiled>,
    /// The calendar whose blocked instants the schedule does not fire at, if any.
    calendar: Option<Arc<Calendar>>,
}

impl fmt::Debug for ScheduleSpec {
    // croner's pattern is bitfields; the expression says the same thing readably.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut debug = f.debug_struct("ScheduleSpec");
        debug
            .field("expression", &self.expression)
            .field("timezone", &self.timezone)
            .field("fixed_time", &self.is_fixed_time());
        if let Some(calendar) = &self.calendar {
            debug.field("calendar", &calendar.stored());
        }
        debug.finish()
    }
}

/// A field of a cron expression, as named in error messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CronField {
    /// The optional leading seconds field (6-field form).
    Second,
    /// Minute, 0-59.
    Minute,
    /// Hour, 0-23.
    Hour,
    /// Day of month, 1-31.
    DayOfMonth,
    /// Month, 1-12 or `JAN`-`DEC`.
    Month,
    /// Day of week, 0-7 or `SUN`-`SAT`.
    DayOfWeek,
}

impl CronField {
    const ALL: [CronField; 6] = [
        CronField::Second,
        CronField::Minute,
        CronField::Hour,
        CronField::DayOfMonth,
        CronField::Month,
        CronField::DayOfWeek,
    ];

    /// The name used in messages: `second`, `minute`, `hour`, `day-of-month`, `month`,
    /// `day-of-week`.
    pub fn name(self) -> &'static str {
        match self {
            CronField::Second => "second",
            CronField::Minute => "minute",
            CronField::Hour => "hour",
            CronField::DayOfMonth => "day-of-month",
            CronField::Month => "month",
            CronField::DayOfWeek => "day-of-week",
        }
    }
}

impl fmt::Display for CronField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why an expression or time zone was refused.
///
/// The message says what was wrong and what to write instead, e.g. "invalid cron
/// `0 24 * * *`: hour field value `24` is out of range; allowed 0-23".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ScheduleError {
    message: String,
    field: Option<CronField>,
}

impl From<CalendarError> for ScheduleError {
    fn from(error: CalendarError) -> Self {
        Self {
            message: error.to_string(),
            field: None,
        }
    }
}

impl ScheduleError {
    fn expression(expression: &str, field: Option<CronField>, detail: String) -> Self {
        Self {
            message: format!("invalid cron `{expression}`: {detail}"),
            field,
        }
    }

    /// The field at fault, or `None` for the expression as a whole (field count, aliases) and
    /// for time zones.
    pub fn field(&self) -> Option<CronField> {
        self.field
    }
}

impl ScheduleSpec {
    /// Parses `expression` in the IANA zone `timezone`.
    pub fn parse(expression: &str, timezone: &str) -> Result<Self, ScheduleError> {
        let timezone = parse_timezone(timezone)?;
        Self::new(expression, timezone)
    }

    /// A task row's stored schedule: its cron and zone, and its stored calendar if it has one
    /// (see [`TaskCalendar::to_stored`]). A calendar that cannot be read is refused like a cron.
    pub fn stored(
        expression: &str,
        timezone: &str,
        calendar: Option<&str>,
    ) -> Result<Self, ScheduleError> {
        let zone = parse_timezone(timezone)?;
        let spec = Self::new(expression, zone)?;
        match calendar {
            None => Ok(spec),
            Some(stored) => {
                let calendar = TaskCalendar::from_stored(stored)?.compile(zone)?;
                Ok(spec.with_calendar(calendar))
            }
        }
    }

    /// Parses `expression` in `timezone`.
    pub fn new(expression: &str, timezone: Tz) -> Result<Self, ScheduleError> {
        Ok(Self {
            expression: expression.to_owned(),
            timezone,
            compiled: Arc::new(normalize::compile(expression)?),
            calendar: None,
        })
    }

    /// This schedule with `calendar` applied: [`next_after`](Self::next_after) and everything
    /// built on it no longer fire at an instant the calendar blocks (skipped, or moved to the
    /// next allowed instant; see [`calendar`]). The calendar's zone should be the schedule's.
    pub fn with_calendar(mut self, calendar: Calendar) -> Self {
        self.calendar = Some(Arc::new(calendar));
        self
    }

    /// The calendar applied, if any.
    pub fn calendar(&self) -> Option<&Calendar> {
        self.calendar.as_deref()
    }

    /// This schedule without its calendar: every tick of the cron expression.
    pub fn without_calendar(&self) -> Self {
        Self {
            calendar: None,
            ..self.clone()
        }
    }

    /// The expression as written.
    pub fn expression(&self) -> &str {
        &self.expression
    }

    /// The zone the expression is read in.
    pub fn timezone(&self) -> Tz {
        self.timezone
    }

    /// Whether the expression is a fixed-time job (neither the minute nor the hour field
    /// starts with `*`) rather than an interval job; see the module docs on DST.
    ///
    /// ```
    /// use scheduler::ScheduleSpec;
    ///
    /// let fixed = |expression| ScheduleSpec::parse(expression, "UTC").unwrap().is_fixed_time();
    /// assert!(fixed("30 2 * * *") && fixed("0 9,17 * * *") && fixed("@daily"));
    /// assert!(!fixed("*/20 1 * * *") && !fixed("0 */2 * * *") && !fixed("@hourly"));
    /// ```
    pub fn is_fixed_time(&self) -> bool {
        self.compiled.kind == JobKind::FixedTime
    }

    /// The first fire instant strictly after `after`, or `None` if there is none (only past
    /// the year 5000).
    ///
    /// With a [calendar](Self::with_calendar): in `skip` mode the first tick after `after` the
    /// calendar allows; in `next_allowed` mode the first tick after `after`, moved to the first
    /// allowed instant at or after it (so ticks moved to the same instant give it once).
    pub fn next_after(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let Some(calendar) = &self.calendar else {
            return self.cron_next_after(after);
        };
        match calendar.on_blocked() {
            OnBlocked::NextAllowed => calendar.next_allowed(self.cron_next_after(after)?),
            OnBlocked::Skip => {
                let mut cursor = after;
                // Each round leaves one blocked stretch, so this ends unless the calendar
                // chains thousands of them.
                for _ in 0..calendar::MAX_STEPS {
                    let tick = self.cron_next_after(cursor)?;
                    let allowed = calendar.next_allowed(tick)?;
                    if allowed == tick {
                        return Some(tick);
                    }
                    // Ticks are whole seconds: the first one at or after `allowed`.
                    cursor = allowed - chrono::TimeDelta::nanoseconds(1);
                }
                None
            }
        }
    }

    /// The first tick of the cron expression strictly after `after`, whatever the calendar.
    pub fn cron_next_after(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        next::next_after(
            &self.compiled.cron,
            self.compiled.kind,
            self.timezone,
            after,
        )
    }

    /// Fire instants strictly after `after`, in order.
    pub fn iter_after(&self, after: DateTime<Utc>) -> impl Iterator<Item = DateTime<Utc>> + '_ {
        let mut cursor = after;
        std::iter::from_fn(move || {
            let next = self.next_after(cursor)?;
            cursor = next;
            Some(next)
        })
    }

    /// Counts fire instants in `(after, until]`, stopping at `cap`.
    ///
    /// The engine uses this to count the ticks it collapses after downtime without walking an
    /// unbounded number of them.
    ///
    /// ```
    /// use scheduler::ScheduleSpec;
    ///
    /// let spec = ScheduleSpec::parse("*/15 * * * *", "UTC")?;
    /// let after = "2026-01-01T00:00:00Z".parse().unwrap();
    /// let until = "2026-01-01T01:00:00Z".parse().unwrap();
    /// assert_eq!(spec.count_fires(after, until, 100), 4); // :15 :30 :45 1:00
    /// assert_eq!(spec.count_fires(after, until, 2), 2);
    /// # Ok::<(), scheduler::schedule::ScheduleError>(())
    /// ```
    pub fn count_fires(&self, after: DateTime<Utc>, until: DateTime<Utc>, cap: usize) -> usize {
        self.iter_after(after)
            .take(cap)
            .take_while(|fire| *fire <= until)
            .count()
    }
}

/// Parses an IANA time zone name such as `Asia/Shanghai`.
///
/// ```
/// assert!(scheduler::schedule::parse_timezone("Europe/London").is_ok());
/// let error = scheduler::schedule::parse_timezone("Mars/Olympus").unwrap_err();
/// assert!(error.to_string().starts_with("unknown time zone `Mars/Olympus`"));
/// ```
pub fn parse_timezone(name: &str) -> Result<Tz, ScheduleError> {
    name.parse::<Tz>().map_err(|_| ScheduleError {
        message: format!(
            "unknown time zone `{name}`; allowed an IANA zone name such as `UTC`, \
             `Europe/London` or `America/New_York`"
        ),
        field: None,
    })
}

#[cfg(test)]
mod tests;
