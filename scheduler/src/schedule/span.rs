//! The fire instants in a range, counted: how many, the first and the last. The engine records
//! the ticks nobody ran (after an outage, a pause) as such spans; walking them one by one costs
//! a search per tick (a task every second, a day overdue: 86,400 searches), so a schedule whose
//! pattern repeats every minute, hour or day in a zone of fixed offset (UTC, say) is counted by
//! arithmetic on one period's fires instead, whatever the length of the range.

use chrono::{DateTime, Offset, TimeZone, Utc};
use chrono_tz::Tz;

use super::spec::ScheduleSpec;

/// Fire instants of a schedule in a range `(after, until]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FireSpan {
    /// The first fire instant in the range.
    pub first: DateTime<Utc>,
    /// The last one counted: the last in the range if `exact`.
    pub last: DateTime<Utc>,
    /// How many were counted.
    pub count: u64,
    /// Whether every fire instant of the range was counted (a walk stops at its cap).
    pub exact: bool,
    /// Whether they were walked one by one (`count` searches), not counted by arithmetic.
    pub walked: bool,
}

/// The UTC offset of a zone that never changes it (`UTC`, the `Etc/` zones), in seconds.
fn fixed_offset(zone: Tz) -> Option<i64> {
    let name = zone.name();
    let fixed = name.starts_with("Etc/")
        || matches!(
            name,
            "UTC" | "UCT" | "GMT" | "GMT0" | "GMT+0" | "GMT-0" | "Greenwich" | "Universal" | "Zulu"
        );
    fixed.then(|| {
        let offset = zone.offset_from_utc_datetime(&DateTime::UNIX_EPOCH.naive_utc());
        i64::from(offset.fix().local_minus_utc())
    })
}

impl ScheduleSpec {
    /// The fire instants in `(after, until]`, `None` if there is none. Exact when the pattern
    /// repeats with a fixed period in a zone of fixed offset (see the module docs); otherwise
    /// walked one by one, at most `cap` of them (then `exact` is false).
    pub(crate) fn span(
        &self,
        after: DateTime<Utc>,
        until: DateTime<Utc>,
        cap: usize,
    ) -> Option<FireSpan> {
        if until <= after {
            return None;
        }
        // A calendar breaks the period: walk.
        if let (Some(period), Some(offset), None) = (
            self.compiled.period,
            fixed_offset(self.timezone),
            &self.calendar,
        ) {
            // Worth it only past a couple of periods: counting one period's pattern costs a
            // search per fire in it.
            if (until - after).num_seconds() > 2 * period {
                return self.span_periodic(after, until, period, offset);
            }
        }
        self.span_walked(after, until, cap)
    }

    fn span_walked(
        &self,
        after: DateTime<Utc>,
        until: DateTime<Utc>,
        cap: usize,
    ) -> Option<FireSpan> {
        let mut span: Option<FireSpan> = None;
        for fire in self.iter_after(after) {
            if fire > until {
                break;
            }
            match &mut span {
                Some(s) if s.count >= cap as u64 => {
                    s.exact = false;
                    break;
                }
                Some(s) => {
                    s.last = fire;
                    s.count += 1;
                }
                None if cap == 0 => return None,
                None => {
                    span = Some(FireSpan {
                        first: fire,
                        last: fire,
                        count: 1,
                        exact: true,
                        walked: true,
                    })
                }
            }
        }
        span
    }

    /// Fire instants are whole seconds `s` with `wall(s) mod period` in one period's pattern,
    /// where `wall(s) = s + offset`; `s > after` is `s > floor(after)` for a whole second.
    fn span_periodic(
        &self,
        after: DateTime<Utc>,
        until: DateTime<Utc>,
        period: i64,
        offset: i64,
    ) -> Option<FireSpan> {
        let low = after.timestamp() + offset;
        let high = until.timestamp() + offset;
        // One period's fires, as seconds from a wall-clock period start.
        let base = low.div_euclid(period) * period;
        let base_utc = DateTime::from_timestamp(base - offset, 0)?;
        let end_utc = DateTime::from_timestamp(base - offset + period, 0)?;
        let pattern: Vec<i64> = self
            .iter_after(base_utc - chrono::TimeDelta::seconds(1))
            .take_while(|fire| *fire < end_utc)
            .map(|fire| fire.timestamp() - (base - offset))
            .collect();
        let n = pattern.len() as i64;
        if n == 0 {
            return None;
        }
        // Fires at or before wall second `x`, counted from wall second 0.
        let at_or_before = |x: i64| {
            let (q, r) = (x.div_euclid(period), x.rem_euclid(period));
            q * n + pattern.partition_point(|o| *o <= r) as i64
        };
        let count = at_or_before(high) - at_or_before(low);
        if count <= 0 {
            return None;
        }
        let first = {
            let (q, r) = (low.div_euclid(period), low.rem_euclid(period));
            match pattern.get(pattern.partition_point(|o| *o <= r)) {
                Some(o) => q * period + o,
                None => (q + 1) * period + pattern[0],
            }
        };
        let last = {
            let (q, r) = (high.div_euclid(period), high.rem_euclid(period));
            match pattern.partition_point(|o| *o <= r) {
                0 => (q - 1) * period + pattern[pattern.len() - 1],
                i => q * period + pattern[i - 1],
            }
        };
        Some(FireSpan {
            first: DateTime::from_timestamp(first - offset, 0)?,
            last: DateTime::from_timestamp(last - offset, 0)?,
            count: count as u64,
            exact: true,
            walked: false,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeDelta;

    fn at(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    /// Every schedule and range here is counted both ways; the walk is the reference.
    #[test]
    fn counting_a_periodic_schedule_agrees_with_walking_it() {
        let expressions = [
            "* * * * * *",
            "*/7 * * * * *",
            "15,45 * * * * *",
            "* * * * *",
            "*/5 * * * *",
            "0 * * * *",
            "30 */2 * * * *",
            "0 0 9-17 * * *",
            "* * 9 * * *",
            "0 0 * * *",
            "@hourly",
            "@daily",
            "0 0 1-31 * 0-6",
        ];
        let zones = ["UTC", "Etc/GMT-14", "Etc/GMT+11", "Etc/GMT-5"];
        let starts = [
            "2026-03-29T00:59:59.400Z",
            "2026-01-01T00:00:00Z",
            "2025-12-31T23:59:58.999Z",
        ];
        let lengths = [
            TimeDelta::milliseconds(100),
            TimeDelta::seconds(1),
            TimeDelta::seconds(59),
            TimeDelta::seconds(121),
            TimeDelta::seconds(3_601),
            TimeDelta::hours(7) + TimeDelta::milliseconds(1),
            TimeDelta::days(3) + TimeDelta::seconds(17),
        ];
        for expression in expressions {
            for zone in zones {
                let spec = ScheduleSpec::parse(expression, zone).unwrap();
                for start in starts {
                    for length in lengths {
                        let (after, until) = (at(start), at(start) + length);
                        let strip = |s: Option<FireSpan>| s.map(|s| (s.first, s.last, s.count));
                        let walked = spec.span_walked(after, until, usize::MAX);
                        let counted = spec.span(after, until, usize::MAX);
                        assert_eq!(
                            strip(counted),
                            strip(walked),
                            "{expression} in {zone}, {after} + {length}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn only_schedules_that_repeat_every_day_have_a_period() {
        let period = |e| ScheduleSpec::parse(e, "UTC").unwrap().compiled.period;
        assert_eq!(period("* * * * * *"), Some(60));
        assert_eq!(period("*/10 * * * * *"), Some(60));
        assert_eq!(period("0 * * * * *"), Some(60));
        assert_eq!(period("*/5 * * * *"), Some(3_600));
        assert_eq!(period("0 9 * * *"), Some(86_400));
        assert_eq!(period("* 9 * * *"), Some(86_400));
        assert_eq!(period("0 9 * * 1-5"), None);
        assert_eq!(period("0 9 */2 * *"), None);
        assert_eq!(period("0 9 * 1-6 *"), None);
        assert_eq!(period("0 9 L * *"), None);
    }

    #[test]
    fn a_zone_with_daylight_saving_is_walked_up_to_the_cap() {
        let spec = ScheduleSpec::parse("* * * * * *", "Europe/London").unwrap();
        let after = at("2026-01-01T00:00:00Z");
        let span = spec.span(after, after + TimeDelta::days(1), 1_000).unwrap();
        assert_eq!(span.count, 1_000);
        assert!(!span.exact);
        assert_eq!(span.first, after + TimeDelta::seconds(1));
        assert_eq!(span.last, after + TimeDelta::seconds(1_000));
    }

    #[test]
    fn a_long_range_in_utc_is_counted_exactly() {
        let spec = ScheduleSpec::parse("* * * * * *", "UTC").unwrap();
        let after = at("2026-01-01T00:00:00Z");
        let span = spec
            .span(after, after + TimeDelta::days(20), 1_000)
            .unwrap();
        assert_eq!(span.count, 20 * 86_400);
        assert!(span.exact && !span.walked);
        assert_eq!(span.last, after + TimeDelta::days(20));
    }
}
