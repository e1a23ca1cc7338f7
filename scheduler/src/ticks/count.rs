//! How ticks are counted and folded into skip records: the ticks between two instants as one
//! record ([`ticks_between`], [`ticks_while_disabled`]), the ticks a late run stands for
//! without running them, split into an overlap and a misfire ([`skipped_ticks`]), and the ticks
//! a calendar blocked before a scheduled run ([`calendar_skips`]).
//!
//! A skip record counts its ticks exactly when it can: by arithmetic for a schedule that repeats
//! every minute, hour or day in a zone of fixed offset (`ScheduleSpec::span`), else by walking
//! them one by one up to a cap, beyond which the record says "at least" (`exact: false`, its last
//! tick the end of the range). The caps below keep that walk off the paths that must be quick.

use chrono::{DateTime, TimeDelta, Utc};

use crate::schedule::{FireSpan, OnBlocked, ScheduleSpec};
use crate::store::{SkipReason, SkipRecord};

/// Ticks counted one by one for a skip record, at most; beyond, the record says "at least".
/// (A schedule that repeats every minute, hour or day in a zone of fixed offset, UTC say, is
/// counted by arithmetic instead, exactly and at no cost per tick: `ScheduleSpec::span`.)
pub(crate) const MAX_COUNTED_TICKS: usize = 1_000_000;

/// Ticks the end of one late run counts one by one, at most (the ticks it folded in, misfire
/// `once`): its outcome waits for the count, and a burst of runs after a long outage would each
/// walk up to [`MAX_COUNTED_TICKS`] (500 of them put a node's load at 123). 10,000 is nearly
/// three hours of an every-second schedule, a week of an every-minute one; beyond, the record
/// says "at least". (Arithmetic counts, as in UTC, are exact whatever the number.)
pub(crate) const RUN_COUNTED_TICKS: usize = 10_000;

/// Ticks one claim counts one by one, at most, over all the tasks it plans: the planning runs
/// inside the claim transaction, after the node started the lease clock of the runs it claims,
/// so it must not take a noticeable part of a lease. A search takes 0.2 to 3.5 µs
/// (BENCHMARKS.md, "Next fire time"): 200,000 of them, 40 to 700 ms. Each task gets an even
/// share for the most rows a claim can hold (`max_concurrent`), and at least
/// [`MIN_CLAIM_TICKS_PER_TASK`].
pub(crate) const CLAIM_TICK_BUDGET: usize = 200_000;

/// The fewest ticks a claim counts one by one for a task, however many tasks it may hold.
pub(crate) const MIN_CLAIM_TICKS_PER_TASK: usize = 10;

/// How many ticks a claim counts one by one per task, with `max_concurrent` handler slots.
pub(crate) fn claim_tick_cap(max_concurrent: usize) -> usize {
    (CLAIM_TICK_BUDGET / max_concurrent.max(1)).clamp(MIN_CLAIM_TICKS_PER_TASK, MAX_COUNTED_TICKS)
}

/// The ticks from `first` to `last` (both included) as one record of `reason` (none if empty),
/// counting at most `cap` one by one.
pub(crate) fn ticks_between(
    task: &str,
    spec: &ScheduleSpec,
    first: DateTime<Utc>,
    last: DateTime<Utc>,
    reason: SkipReason,
    cap: usize,
) -> Vec<SkipRecord> {
    spec.span(first - TimeDelta::microseconds(1), last, cap)
        .map(|span| record_of(task, reason, span, last, None))
        .into_iter()
        .collect()
}

/// The ticks of `task` due while it was disabled (after `since`, up to `now`), as a skip record.
pub(crate) fn ticks_while_disabled(
    task: &str,
    spec: &ScheduleSpec,
    since: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Vec<SkipRecord> {
    ticks_between(
        task,
        spec,
        since + TimeDelta::microseconds(1),
        now,
        SkipReason::Disabled,
        MAX_COUNTED_TICKS,
    )
}

/// The ticks of the cron expression in `(after, tick)` that `spec`'s calendar blocked, as one
/// `calendar` record (none without a calendar, or if none was blocked). `after` is the tick the
/// task's previous scheduled run served and `tick` the one its next serves: the claim of `tick`
/// records them, once, after the fact. Ticks in between that the calendar allowed are not
/// counted (they ran, or other records account for them: a pause, a misfire).
///
/// With `on_blocked: next_allowed` the run at `tick` stands for the ticks moved to it: if
/// `tick` is itself a tick of the cron expression, that tick is the one it serves and every
/// moved tick is recorded; if not (it is the end of a blocked stretch), it serves the first
/// tick moved to it and the others are recorded.
///
/// Each blocked stretch is counted as one span (by arithmetic where the schedule allows it), at
/// most `cap` ticks walked one by one over all of them; beyond, the record says "at least".
pub(crate) fn calendar_skips(
    task: &str,
    spec: &ScheduleSpec,
    after: DateTime<Utc>,
    tick: DateTime<Utc>,
    cap: usize,
) -> Vec<SkipRecord> {
    let Some(calendar) = spec.calendar() else {
        return Vec::new();
    };
    let cron = spec.without_calendar();
    let before = tick - TimeDelta::microseconds(1);
    let mut spans: Vec<FireSpan> = Vec::new();
    let mut left = cap;
    let mut cursor = after;
    while left > 0 {
        let Some(first) = cron.cron_next_after(cursor).filter(|t| *t < tick) else {
            break;
        };
        let end = calendar.next_allowed(first).unwrap_or(tick).min(tick);
        if end == first {
            // Allowed: not the calendar's to record.
            left -= 1;
            cursor = first;
            continue;
        }
        // Every tick in [first, end) is blocked.
        let until = (end - TimeDelta::microseconds(1)).min(before);
        let Some(span) = cron.span(first - TimeDelta::microseconds(1), until, left) else {
            cursor = until;
            continue;
        };
        if span.walked {
            left = left.saturating_sub(usize::try_from(span.count).unwrap_or(left));
        } else {
            left -= 1;
        }
        let exact = span.exact;
        spans.push(span);
        if !exact {
            break;
        }
        cursor = until;
    }
    let moved_onto_tick = calendar.on_blocked() == OnBlocked::NextAllowed
        && cron.cron_next_after(tick - TimeDelta::nanoseconds(1)) != Some(tick);
    if moved_onto_tick && let Some(first) = spans.first_mut() {
        // The run stands for the first tick moved to it.
        if first.count <= 1 {
            spans.remove(0);
        } else {
            first.count -= 1;
            first.first = cron.cron_next_after(first.first).unwrap_or(first.last);
        }
    }
    let (Some(first), Some(last)) = (spans.first(), spans.last()) else {
        return Vec::new();
    };
    let count: u64 = spans.iter().map(|s| s.count).sum();
    let mut record = SkipRecord::new(
        task,
        SkipReason::Calendar,
        first.first,
        last.last,
        i64::try_from(count).unwrap_or(i64::MAX),
    );
    if !last.exact {
        record.exact = false;
        record.last_tick = before;
    }
    vec![record]
}

/// One skip record for `span`; one that is not exact ends at `until` and says "at least".
fn record_of(
    task: &str,
    reason: SkipReason,
    span: FireSpan,
    until: DateTime<Utc>,
    run_id: Option<i64>,
) -> SkipRecord {
    let ticks = i64::try_from(span.count).unwrap_or(i64::MAX);
    let mut record = SkipRecord::new(task, reason, span.first, span.last, ticks);
    record.run_id = run_id;
    if !span.exact {
        record.exact = false;
        record.last_tick = until;
    }
    record
}

/// The ticks in `(after, until]` that did not get a run of their own (a run serving `after`,
/// claimed at `until`, stands for them). Ticks due while the previous run was still running (up
/// to `previous_finished_at`) are an overlap; later ones a misfire (no node ran the task in
/// time). At most two records, one per reason, tied to `run_id` if given; at most `cap` ticks
/// counted one by one over both (beyond, the last record says "at least").
pub(crate) fn skipped_ticks(
    task: &str,
    spec: &ScheduleSpec,
    after: DateTime<Utc>,
    until: DateTime<Utc>,
    previous_finished_at: Option<DateTime<Utc>>,
    run_id: Option<i64>,
    cap: usize,
) -> Vec<SkipRecord> {
    let split = previous_finished_at
        .filter(|f| *f > after)
        .map(|f| f.min(until));
    let segments = match split {
        Some(f) => [
            Some((after, f, SkipReason::Overlap)),
            Some((f, until, SkipReason::Misfire)),
        ],
        None => [Some((after, until, SkipReason::Misfire)), None],
    };
    let mut records: Vec<SkipRecord> = Vec::new();
    let mut left = cap;
    for (low, high, reason) in segments.into_iter().flatten() {
        if left == 0 {
            // Out of ticks to walk: say so if this part has any.
            if let Some(last) = records.last_mut()
                && spec.next_after(low).is_some_and(|t| t <= high)
            {
                last.exact = false;
                last.last_tick = until;
            }
            break;
        }
        let Some(span) = spec.span(low, high, left) else {
            continue;
        };
        if span.walked {
            left -= usize::try_from(span.count).unwrap_or(left).min(left);
        }
        let exact = span.exact;
        records.push(record_of(task, reason, span, until, run_id));
        if !exact {
            break;
        }
    }
    records
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    #[test]
    fn ticks_between_two_instants_are_one_record_with_both_ends() {
        let spec = ScheduleSpec::parse("* * * * * *", "UTC").unwrap();
        let skips = ticks_between(
            "t",
            &spec,
            at("2026-01-01T00:00:01Z"),
            at("2026-01-01T00:00:03Z"),
            SkipReason::Paused,
            MAX_COUNTED_TICKS,
        );
        assert_eq!(skips.len(), 1, "{skips:?}");
        assert_eq!(
            (
                skips[0].reason,
                skips[0].first_tick,
                skips[0].last_tick,
                skips[0].ticks
            ),
            (
                SkipReason::Paused,
                at("2026-01-01T00:00:01Z"),
                at("2026-01-01T00:00:03Z"),
                3
            )
        );
        assert!(skips[0].exact && skips[0].run_id.is_none());
        let none = ticks_between(
            "t",
            &spec,
            at("2026-01-01T00:00:01.500Z"),
            at("2026-01-01T00:00:01.900Z"),
            SkipReason::Paused,
            MAX_COUNTED_TICKS,
        );
        assert!(none.is_empty(), "{none:?}");
    }

    #[test]
    fn the_ticks_while_disabled_start_after_the_instant_it_was_disabled() {
        let spec = ScheduleSpec::parse("* * * * * *", "UTC").unwrap();
        let skips = ticks_while_disabled(
            "t",
            &spec,
            at("2026-01-01T00:00:01Z"),
            at("2026-01-01T00:00:03.500Z"),
        );
        assert_eq!(skips.len(), 1, "{skips:?}");
        assert_eq!(
            (
                skips[0].reason,
                skips[0].first_tick,
                skips[0].last_tick,
                skips[0].ticks
            ),
            (
                SkipReason::Disabled,
                at("2026-01-01T00:00:02Z"),
                at("2026-01-01T00:00:03Z"),
                2
            )
        );
    }

    #[test]
    fn an_on_time_run_stands_for_no_other_tick() {
        let spec = ScheduleSpec::parse("* * * * * *", "UTC").unwrap();
        let skips = skipped_ticks(
            "t",
            &spec,
            at("2026-01-01T00:00:00Z"),
            at("2026-01-01T00:00:00.400Z"),
            None,
            Some(1),
            MAX_COUNTED_TICKS,
        );
        assert!(skips.is_empty());
    }

    #[test]
    fn ticks_during_the_previous_run_are_an_overlap_and_later_ones_a_misfire() {
        let spec = ScheduleSpec::parse("* * * * * *", "UTC").unwrap();
        let skips = skipped_ticks(
            "t",
            &spec,
            at("2026-01-01T00:00:00Z"),
            at("2026-01-01T00:00:05.500Z"),
            Some(at("2026-01-01T00:00:02.500Z")),
            Some(9),
            MAX_COUNTED_TICKS,
        );
        assert_eq!(skips.len(), 2, "{skips:?}");
        assert_eq!(skips[0].reason, SkipReason::Overlap);
        assert_eq!(
            (skips[0].first_tick, skips[0].last_tick, skips[0].ticks),
            (at("2026-01-01T00:00:01Z"), at("2026-01-01T00:00:02Z"), 2)
        );
        assert_eq!(skips[1].reason, SkipReason::Misfire);
        assert_eq!(
            (skips[1].first_tick, skips[1].last_tick, skips[1].ticks),
            (at("2026-01-01T00:00:03Z"), at("2026-01-01T00:00:05Z"), 3)
        );
        assert!(skips.iter().all(|s| s.exact && s.run_id == Some(9)));
    }

    #[test]
    fn a_very_long_outage_is_counted_up_to_a_bound_and_says_so() {
        // A zone with daylight saving: its ticks are walked one by one.
        let spec = ScheduleSpec::parse("* * * * * *", "Europe/London").unwrap();
        let skips = skipped_ticks(
            "t",
            &spec,
            at("2026-01-01T00:00:00Z"),
            at("2026-01-20T00:00:00Z"),
            None,
            Some(1),
            1_000,
        );
        assert_eq!(skips.len(), 1);
        assert_eq!(skips[0].ticks, 1_000);
        assert!(!skips[0].exact);
        assert_eq!(skips[0].last_tick, at("2026-01-20T00:00:00Z"));
    }

    #[test]
    fn a_very_long_outage_in_utc_is_counted_exactly_on_both_sides_of_the_previous_end() {
        let spec = ScheduleSpec::parse("* * * * * *", "UTC").unwrap();
        let skips = skipped_ticks(
            "t",
            &spec,
            at("2026-01-01T00:00:00Z"),
            at("2026-01-20T00:00:00.500Z"),
            Some(at("2026-01-02T00:00:00Z")),
            Some(1),
            1_000,
        );
        assert_eq!(skips.len(), 2, "{skips:?}");
        assert_eq!(skips[0].reason, SkipReason::Overlap);
        assert_eq!(skips[0].ticks, 86_400);
        assert_eq!(skips[0].last_tick, at("2026-01-02T00:00:00Z"));
        assert_eq!(skips[1].reason, SkipReason::Misfire);
        assert_eq!(skips[1].ticks, 18 * 86_400);
        assert_eq!(skips[1].first_tick, at("2026-01-02T00:00:01Z"));
        assert_eq!(skips[1].last_tick, at("2026-01-20T00:00:00Z"));
        assert!(skips.iter().all(|s| s.exact));
    }

    #[test]
    fn the_bound_is_shared_by_the_overlap_and_the_misfire() {
        let spec = ScheduleSpec::parse("* * * * * *", "Europe/Paris").unwrap();
        let skips = skipped_ticks(
            "t",
            &spec,
            at("2026-01-01T00:00:00Z"),
            at("2026-01-01T01:00:00Z"),
            Some(at("2026-01-01T00:00:10Z")),
            None,
            10,
        );
        assert_eq!(skips.len(), 1, "{skips:?}");
        assert_eq!((skips[0].reason, skips[0].ticks), (SkipReason::Overlap, 10));
        assert!(!skips[0].exact);
        assert_eq!(skips[0].last_tick, at("2026-01-01T01:00:00Z"));

        let skips = skipped_ticks(
            "t",
            &spec,
            at("2026-01-01T00:00:00Z"),
            at("2026-01-01T01:00:00Z"),
            Some(at("2026-01-01T00:00:04Z")),
            None,
            10,
        );
        assert_eq!(skips.len(), 2, "{skips:?}");
        assert_eq!((skips[0].ticks, skips[0].exact), (4, true));
        assert_eq!((skips[1].ticks, skips[1].exact), (6, false));
    }

    #[test]
    fn a_claim_counts_ticks_within_its_budget() {
        assert_eq!(claim_tick_cap(1_000), 200);
        assert_eq!(claim_tick_cap(1), MAX_COUNTED_TICKS.min(CLAIM_TICK_BUDGET));
        assert_eq!(claim_tick_cap(1_000_000), MIN_CLAIM_TICKS_PER_TASK);
    }

    /// The walk `skipped_ticks` did before it counted spans: the reference.
    fn walked_skips(
        spec: &ScheduleSpec,
        after: DateTime<Utc>,
        until: DateTime<Utc>,
        previous_finished_at: Option<DateTime<Utc>>,
    ) -> Vec<(SkipReason, DateTime<Utc>, DateTime<Utc>, i64)> {
        let mut records: Vec<(SkipReason, DateTime<Utc>, DateTime<Utc>, i64)> = Vec::new();
        for tick in spec.iter_after(after).take_while(|t| *t <= until) {
            let reason = if previous_finished_at.is_some_and(|f| tick <= f) {
                SkipReason::Overlap
            } else {
                SkipReason::Misfire
            };
            match records.last_mut() {
                Some(r) if r.0 == reason => {
                    r.2 = tick;
                    r.3 += 1;
                }
                _ => records.push((reason, tick, tick, 1)),
            }
        }
        records
    }

    #[test]
    fn skipped_ticks_agree_with_walking_them() {
        let after = at("2026-01-01T00:00:00.250Z");
        for zone in ["UTC", "Europe/Berlin"] {
            for expression in ["* * * * * *", "*/7 * * * * *", "*/5 * * * *"] {
                let spec = ScheduleSpec::parse(expression, zone).unwrap();
                for until_s in [0, 1, 3, 600, 3_601] {
                    let until = after + TimeDelta::seconds(until_s) + TimeDelta::milliseconds(7);
                    for finished_ms in [
                        None,
                        Some(-5_000),
                        Some(0),
                        Some(999),
                        Some(1_000),
                        Some(300_500),
                        Some(4_000_000),
                    ] {
                        let finished = finished_ms.map(|ms| after + TimeDelta::milliseconds(ms));
                        let got: Vec<_> = skipped_ticks(
                            "t",
                            &spec,
                            after,
                            until,
                            finished,
                            None,
                            MAX_COUNTED_TICKS,
                        )
                        .into_iter()
                        .map(|r| (r.reason, r.first_tick, r.last_tick, r.ticks))
                        .collect();
                        assert_eq!(
                            got,
                            walked_skips(&spec, after, until, finished),
                            "{expression} in {zone}, until +{until_s}s, finished {finished_ms:?}"
                        );
                    }
                }
            }
        }
    }
}
