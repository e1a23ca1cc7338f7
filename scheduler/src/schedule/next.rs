//! The next fire instant: croner finds matching wall-clock times, this module maps them to
//! real instants in the task's zone under our DST policy (see the `schedule` module docs).
//!
//! croner is only ever given `NaiveDateTime`s here, so its own DST handling never runs: its
//! fixed-time test (a single second, minute and hour) differs from ours (cronie's: neither the
//! minute nor the hour field starts with `*`), and the engine needs one policy for every
//! expression.

use chrono::{DateTime, LocalResult, NaiveDateTime, Offset, TimeDelta, TimeZone, Timelike, Utc};
use chrono_tz::{GapInfo, Tz};
use croner::Cron;

use super::normalize::JobKind;

/// Safety net for the walk: each step is one croner search, and only wall-clock times that
/// fall into a gap or behind `after` make the walk take another one.
const MAX_WALK_STEPS: usize = 10_000;

/// The first fire instant strictly after `after`.
pub(crate) fn next_after(
    cron: &Cron,
    kind: JobKind,
    zone: Tz,
    after: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    let zoned = after.with_timezone(&zone);
    let after_offset = offset_seconds(&zoned);
    // Whole seconds: every candidate is a whole second, so `c > local` is `c > floor(local)`.
    let local = zoned.naive_local().with_nanosecond(0)?;

    let mut cursor = local;
    // Interval jobs run in both halves of a repeated hour. When `after` is in the first half,
    // the second half's wall-clock times lie *behind* `local`, so the walk below cannot see
    // them: look there separately.
    let mut second_half = None;
    if let LocalResult::Ambiguous(earlier, later) = zone.offset_from_local_datetime(&local) {
        let earlier = earlier.fix().local_minus_utc();
        let later = later.fix().local_minus_utc();
        let repeat = TimeDelta::seconds(i64::from(earlier - later));
        let in_first_half = after_offset == earlier;
        match kind {
            // A fixed-time job already ran on the first half; from inside the second half,
            // skip to the end of the repeated range, the first wall-clock time that happens
            // only once. (Not `local + repeat`: that is `after` on the earlier offset's wall
            // clock, past the end, and the walk would skip the times in between.)
            JobKind::FixedTime if !in_first_half => {
                // One repeat earlier the clock had not gone back yet.
                let change = clock_goes_back(zone, after - repeat, after, later)?;
                let end = change.naive_utc() + TimeDelta::seconds(i64::from(earlier));
                cursor = end - TimeDelta::seconds(1);
            }
            JobKind::Interval if in_first_half => {
                second_half = first_in_second_half(cron, zone, after, repeat, earlier, later);
            }
            _ => {}
        }
    }

    let walked = walk(cron, kind, zone, after, cursor);
    match (walked, second_half) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Walks matching wall-clock times after `cursor` and returns the first that gives a fire
/// instant after `after`.
fn walk(
    cron: &Cron,
    kind: JobKind,
    zone: Tz,
    after: DateTime<Utc>,
    mut cursor: NaiveDateTime,
) -> Option<DateTime<Utc>> {
    for _ in 0..MAX_WALK_STEPS {
        let wall = cron.find_next_occurrence(&cursor, false).ok()?;
        let fire = match zone.from_local_datetime(&wall) {
            LocalResult::Single(instant) => Some(instant.to_utc()),
            LocalResult::Ambiguous(first, second) => {
                let (first, second) = (first.to_utc(), second.to_utc());
                match kind {
                    JobKind::FixedTime => Some(first),
                    JobKind::Interval if first > after => Some(first),
                    JobKind::Interval => Some(second),
                }
            }
            LocalResult::None => {
                let gap_end = GapInfo::new(&wall, &zone)?.end?;
                match kind {
                    // The wall time never happens: run at the first instant after the gap.
                    JobKind::FixedTime => Some(gap_end.to_utc()),
                    // An interval job has nothing to run in the gap; jump over it.
                    JobKind::Interval => {
                        cursor = gap_end.naive_local() - TimeDelta::seconds(1);
                        continue;
                    }
                }
            }
        };
        match fire {
            Some(instant) if instant > after => return Some(instant),
            _ => cursor = wall,
        }
    }
    None
}

/// The first fire instant in the second half of the repeated range that `after` (in its
/// first half) belongs to, if any.
fn first_in_second_half(
    cron: &Cron,
    zone: Tz,
    after: DateTime<Utc>,
    repeat: TimeDelta,
    earlier_offset: i32,
    later_offset: i32,
) -> Option<DateTime<Utc>> {
    // The offset is `earlier_offset` at `after` and `later_offset` one repeat later.
    let change = clock_goes_back(zone, after, after + repeat, later_offset)?;
    let start = change.naive_utc() + TimeDelta::seconds(i64::from(later_offset));
    let end = change.naive_utc() + TimeDelta::seconds(i64::from(earlier_offset));
    let wall = cron.find_next_occurrence(&start, true).ok()?;
    (wall < end).then(|| (wall - TimeDelta::seconds(i64::from(later_offset))).and_utc())
}

/// The instant the clock goes back to `later_offset`, to the second: `before` must still be on
/// the earlier offset and `at_or_after` already on `later_offset`.
fn clock_goes_back(
    zone: Tz,
    before: DateTime<Utc>,
    at_or_after: DateTime<Utc>,
    later_offset: i32,
) -> Option<DateTime<Utc>> {
    // Whole seconds (zones change their clocks on whole seconds), so the result can be
    // handed to croner as a wall-clock time without a fraction.
    let (mut before, mut at_or_after) = (before.timestamp(), at_or_after.timestamp());
    while at_or_after - before > 1 {
        let middle = before + (at_or_after - before) / 2;
        let zoned = DateTime::from_timestamp(middle, 0)?.with_timezone(&zone);
        if offset_seconds(&zoned) == later_offset {
            at_or_after = middle;
        } else {
            before = middle;
        }
    }
    DateTime::from_timestamp(at_or_after, 0)
}

fn offset_seconds(zoned: &DateTime<Tz>) -> i32 {
    zoned.offset().fix().local_minus_utc()
}
