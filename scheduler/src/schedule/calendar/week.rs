//! Weekly windows on the week's wall clock: a window compiled, the seconds of the week the
//! windows block, and whether they leave any free.

use chrono::{NaiveTime, Timelike};

/// A weekly window, compiled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Window {
    /// Monday first.
    pub(super) days: [bool; 7],
    pub(super) from: NaiveTime,
    /// `None`: 24:00.
    pub(super) to: Option<NaiveTime>,
    /// Whether it runs past midnight into the next day.
    pub(super) wraps: bool,
}

/// One second-of-week unit: a day.
pub(super) const DAY: i64 = 86_400;

/// A week, in seconds.
pub(super) const WEEK: i64 = 7 * DAY;

/// The wall-clock times the windows block, in seconds from Monday 00:00, `[from, to)`; a
/// window running past Sunday midnight ends after [`WEEK`].
pub(super) fn week_spans(windows: &[Window]) -> Vec<(i64, i64)> {
    let mut spans: Vec<(i64, i64)> = Vec::new();
    for w in windows {
        for day in (0..7).filter(|d| w.days[*d]) {
            let start_of_day = day as i64 * DAY;
            let start = start_of_day + i64::from(w.from.num_seconds_from_midnight());
            let end = match w.to {
                None => start_of_day + DAY,
                Some(to) => {
                    start_of_day
                        + if w.wraps { DAY } else { 0 }
                        + i64::from(to.num_seconds_from_midnight())
                }
            };
            spans.push((start, end));
        }
    }
    spans
}

/// Whether the windows leave no second of the week free: every day of the week must be blocked
/// from 00:00 to 24:00 by one window or by a chain of windows.
pub(super) fn covers_whole_week(windows: &[Window]) -> bool {
    let mut spans: Vec<(i64, i64)> = Vec::new();
    for (start, end) in week_spans(windows) {
        if end > WEEK {
            spans.push((start, WEEK));
            spans.push((0, end - WEEK));
        } else {
            spans.push((start, end));
        }
    }
    spans.sort();
    let mut covered = 0;
    for (start, end) in spans {
        if start > covered {
            return false;
        }
        covered = covered.max(end);
    }
    covered >= WEEK
}
