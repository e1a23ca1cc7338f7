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
mod error;
pub use error::{CronField, ScheduleError, parse_timezone};
mod next;
mod normalize;
mod span;
pub(crate) use span::FireSpan;
mod spec;
pub use spec::ScheduleSpec;

#[cfg(test)]
mod tests;
