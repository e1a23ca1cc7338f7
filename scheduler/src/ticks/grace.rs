//! The two graces: how late a tick may be before a `misfire = "skip"` task drops it
//! ([`misfire_grace`]), and how late a tick that has not started may be before its task counts
//! as missed ([`missed_grace`], [`missed_by`]). The module docs of [`crate::ticks`] say why they
//! are two.

use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};

use crate::schedule::ScheduleSpec;

/// The least missed grace when the interval decides it.
const MIN_MISSED_GRACE: TimeDelta = TimeDelta::seconds(5);
/// The most missed grace when the interval decides it.
const MAX_MISSED_GRACE: TimeDelta = TimeDelta::minutes(15);
/// The interval assumed for a schedule that never fires again, for the missed grace.
const LAST_TICK_INTERVAL: TimeDelta = TimeDelta::minutes(30);

/// The least misfire grace.
const MIN_MISFIRE_GRACE: TimeDelta = TimeDelta::seconds(1);
/// The most misfire grace (Quartz's default misfire threshold).
const MAX_MISFIRE_GRACE: TimeDelta = TimeDelta::seconds(60);
/// The interval assumed for a schedule that never fires again, for the misfire grace.
const LAST_TICK_MISFIRE_INTERVAL: TimeDelta = TimeDelta::seconds(120);

/// How late `tick` may start before its task counts as missed: `fixed` if set (the node's
/// `missed_grace` setting), else half the interval to the next tick, at least 5 s, at most 15
/// minutes.
pub(crate) fn missed_grace(
    spec: &ScheduleSpec,
    tick: DateTime<Utc>,
    fixed: Option<Duration>,
) -> TimeDelta {
    if let Some(fixed) = fixed {
        return TimeDelta::from_std(fixed).unwrap_or(TimeDelta::MAX);
    }
    let interval = spec
        .next_after(tick)
        .map_or(LAST_TICK_INTERVAL, |next| next - tick);
    (interval / 2).clamp(MIN_MISSED_GRACE, MAX_MISSED_GRACE)
}

/// Whether `tick`, not started by `now`, is missed: `Some(grace)` (its [`missed_grace`]) when it
/// is later than that.
pub(crate) fn missed_by(
    spec: &ScheduleSpec,
    tick: DateTime<Utc>,
    now: DateTime<Utc>,
    fixed: Option<Duration>,
) -> Option<TimeDelta> {
    let grace = missed_grace(spec, tick, fixed);
    (now - tick > grace).then_some(grace)
}

/// How late a tick may be claimed before `misfire = "skip"` skips it: half the interval to the
/// next tick, at least 1 s, at most 60 s (Quartz's default threshold).
pub(crate) fn misfire_grace(spec: &ScheduleSpec, tick: DateTime<Utc>) -> TimeDelta {
    let interval = spec
        .next_after(tick)
        .map_or(LAST_TICK_MISFIRE_INTERVAL, |n| n - tick);
    (interval / 2).clamp(MIN_MISFIRE_GRACE, MAX_MISFIRE_GRACE)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    fn spec(cron: &str) -> ScheduleSpec {
        ScheduleSpec::parse(cron, "UTC").unwrap()
    }

    #[test]
    fn the_missed_grace_is_half_the_interval_within_5_s_and_15_min() {
        let tick = at("2026-03-02T12:00:00Z");
        assert_eq!(
            missed_grace(&spec("* * * * * *"), tick, None),
            TimeDelta::seconds(5)
        );
        assert_eq!(
            missed_grace(&spec("*/20 * * * * *"), tick, None),
            TimeDelta::seconds(10)
        );
        assert_eq!(
            missed_grace(&spec("*/10 * * * *"), tick, None),
            TimeDelta::minutes(5)
        );
        assert_eq!(
            missed_grace(&spec("0 * * * *"), tick, None),
            TimeDelta::minutes(15)
        );
        assert_eq!(
            missed_grace(&spec("0 0 * * *"), tick, None),
            TimeDelta::minutes(15)
        );
    }

    #[test]
    fn a_fixed_missed_grace_wins_whatever_the_interval() {
        let tick = at("2026-03-02T12:00:00Z");
        let fixed = Some(Duration::from_secs(2));
        assert_eq!(
            missed_grace(&spec("0 0 * * *"), tick, fixed),
            TimeDelta::seconds(2)
        );
        let forever = Some(Duration::MAX);
        assert_eq!(
            missed_grace(&spec("* * * * * *"), tick, forever),
            TimeDelta::MAX
        );
    }

    #[test]
    fn a_tick_is_missed_only_once_later_than_its_grace() {
        let every_minute = spec("* * * * *");
        let tick = at("2026-03-02T12:00:00Z");
        let grace = TimeDelta::seconds(30);
        assert_eq!(missed_by(&every_minute, tick, tick + grace, None), None);
        assert_eq!(
            missed_by(
                &every_minute,
                tick,
                tick + grace + TimeDelta::milliseconds(1),
                None
            ),
            Some(grace)
        );
        assert_eq!(
            missed_by(
                &every_minute,
                tick,
                tick + TimeDelta::seconds(3),
                Some(Duration::from_secs(2))
            ),
            Some(TimeDelta::seconds(2))
        );
    }

    #[test]
    fn the_misfire_grace_is_half_the_interval_within_1_s_and_60_s() {
        let tick = at("2026-03-02T12:00:00Z");
        assert_eq!(
            misfire_grace(&spec("* * * * * *"), tick),
            TimeDelta::seconds(1)
        );
        assert_eq!(
            misfire_grace(&spec("*/10 * * * * *"), tick),
            TimeDelta::seconds(5)
        );
        assert_eq!(
            misfire_grace(&spec("* * * * *"), tick),
            TimeDelta::seconds(30)
        );
        assert_eq!(
            misfire_grace(&spec("0 * * * *"), tick),
            TimeDelta::seconds(60)
        );
    }

    #[test]
    fn the_misfire_grace_is_never_longer_than_the_missed_grace() {
        // A `misfire = "skip"` task never runs a tick late enough to be reported missed.
        let tick = at("2026-03-02T12:00:00Z");
        for cron in [
            "* * * * * *",
            "*/7 * * * * *",
            "* * * * *",
            "0 * * * *",
            "0 0 1 * *",
        ] {
            let spec = spec(cron);
            assert!(
                misfire_grace(&spec, tick) <= missed_grace(&spec, tick, None),
                "{cron}"
            );
        }
    }
}
