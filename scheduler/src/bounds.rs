//! The range of every value a user sets, defined once.
//!
//! A duration, a count or a size that reaches the scheduler from outside (the config document,
//! an `sla` block, the channels file, the environment, an admin API body or query, a command-line
//! flag) is checked where it is read against one of the ranges below, and refused with an error
//! that names the field and the range. A value inside its range cannot overflow the arithmetic
//! done on it later (an instant plus a duration, a duration in SQL, a timer): the ranges are
//! chosen so that it fits with room to spare, and that arithmetic is checked or saturating
//! besides.
//!
//! `docs/limits.md` lists every range; a unit test keeps that page and [`ALL`] alike.

use std::borrow::Cow;
use std::fmt;
use std::time::Duration;

/// The longest duration text read (`"1h 30m 15s 500ms"` is 16 characters).
pub(crate) const MAX_DURATION_TEXT: usize = 64;

const fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}
const fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}
const MINUTE: u64 = 60;
const HOUR: u64 = 60 * MINUTE;
const DAY: u64 = 24 * HOUR;
/// humantime's year (365.25 days), so that the range prints as `1year`.
const YEAR: u64 = 31_557_600;

/// A closed range of durations, with the name it goes by in errors and in `docs/limits.md`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DurationRange {
    /// The smallest value accepted.
    pub(crate) min: Duration,
    /// The largest value accepted.
    pub(crate) max: Duration,
}

/// A closed range of whole numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CountRange {
    /// The smallest value accepted.
    pub(crate) min: u64,
    /// The largest value accepted.
    pub(crate) max: u64,
}

/// A value refused: which field, what was written and what is accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{field}`: {problem}")]
pub(crate) struct OutOfRange {
    /// The field or setting, as the user wrote it (`sla.warn_after`, `SCHEDULER_WEBHOOK_TIMEOUT`).
    pub(crate) field: Cow<'static, str>,
    /// What is wrong, with the range.
    pub(crate) problem: String,
}

impl OutOfRange {
    fn new(field: impl Into<Cow<'static, str>>, problem: String) -> Self {
        Self {
            field: field.into(),
            problem,
        }
    }
}

impl DurationRange {
    /// A range from `min` to `max`, both included.
    pub(crate) const fn new(min: Duration, max: Duration) -> Self {
        assert!(min.as_nanos() <= max.as_nanos());
        Self { min, max }
    }

    /// Reads `text` (humantime: `30s`, `500ms`, `10m`, `1h 30m`) and checks it is in range.
    ///
    /// Text longer than [`MAX_DURATION_TEXT`] is refused before it is parsed.
    pub(crate) fn parse(
        &self,
        field: impl Into<Cow<'static, str>>,
        text: &str,
    ) -> Result<Duration, OutOfRange> {
        let field = field.into();
        let trimmed = text.trim();
        if trimmed.len() > MAX_DURATION_TEXT {
            return Err(OutOfRange::new(
                field,
                format!(
                    "a duration of {} characters is not read (at most {MAX_DURATION_TEXT}); {}",
                    trimmed.len(),
                    self.accepts()
                ),
            ));
        }
        match humantime::parse_duration(trimmed) {
            Ok(d) => self.check(field, d),
            Err(e) => Err(OutOfRange::new(
                field,
                format!(
                    "`{}` is not a duration ({e}); write it like `30s`, `500ms`, `10m` or `1h`; {}",
                    crate::bounds::printable(trimmed),
                    self.accepts()
                ),
            )),
        }
    }

    /// Checks a duration given as a value.
    pub(crate) fn check(
        &self,
        field: impl Into<Cow<'static, str>>,
        value: Duration,
    ) -> Result<Duration, OutOfRange> {
        if value < self.min || value > self.max {
            return Err(OutOfRange::new(
                field,
                format!("{} is out of range; {}", human(value), self.accepts()),
            ));
        }
        Ok(value)
    }

    /// Checks a duration given in milliseconds (an API body's `pace_ms`).
    pub(crate) fn check_millis(
        &self,
        field: impl Into<Cow<'static, str>>,
        millis: u64,
    ) -> Result<Duration, OutOfRange> {
        self.check(field, Duration::from_millis(millis))
    }

    /// "accepted: from 1s to 366days".
    fn accepts(&self) -> String {
        format!("accepted: {self}")
    }
}

impl fmt::Display for DurationRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "from {} to {}", human(self.min), human(self.max))
    }
}

impl CountRange {
    /// A range from `min` to `max`, both included.
    pub(crate) const fn new(min: u64, max: u64) -> Self {
        assert!(min <= max);
        Self { min, max }
    }

    /// Checks a number.
    pub(crate) fn check<T>(
        &self,
        field: impl Into<Cow<'static, str>>,
        value: T,
    ) -> Result<T, OutOfRange>
    where
        T: Copy + TryInto<u64> + fmt::Display,
    {
        match value.try_into() {
            Ok(n) if (self.min..=self.max).contains(&n) => Ok(value),
            _ => Err(OutOfRange::new(
                field,
                format!("{value} is out of range; accepted: {self}"),
            )),
        }
    }
}

impl fmt::Display for CountRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "from {} to {}", self.min, self.max)
    }
}

/// A duration as people write it (`1s`, `366days`, `0s`).
fn human(d: Duration) -> String {
    if d.is_zero() {
        "0s".to_owned()
    } else {
        humantime::format_duration(d).to_string()
    }
}

/// `64 MiB`, `1024 TiB`, `1000 bytes`: a size in the largest binary unit that divides it.
pub(crate) fn size(bytes: u64) -> String {
    for (unit, shift) in [("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)] {
        if bytes >= 1 << shift && bytes.is_multiple_of(1 << shift) {
            return format!("{} {unit}", bytes >> shift);
        }
    }
    format!("{bytes} bytes")
}

/// `text` with control characters shown as escapes and cut to 80 characters, for an error
/// message that quotes what a user wrote (a terminal never receives a raw escape sequence).
pub(crate) fn printable(text: &str) -> String {
    const MAX: usize = 80;
    let mut out = String::new();
    for (i, c) in text.chars().enumerate() {
        if i == MAX {
            out.push('…');
            break;
        }
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

// The ranges. Each is read where its value is read; `docs/limits.md` lists them all.

/// `sla.start_within`: how late a tick may start before `task.late`.
pub(crate) const SLA_START_WITHIN: DurationRange = DurationRange::new(ms(1), secs(YEAR));
/// `sla.warn_after`: how long a run may go on before `task.slow`.
pub(crate) const SLA_WARN_AFTER: DurationRange = DurationRange::new(ms(1), secs(YEAR));
/// `sla.remind_every`: how often an open incident's alert is sent again.
pub(crate) const SLA_REMIND_EVERY: DurationRange = DurationRange::new(secs(1), secs(YEAR));
/// `sla.alert_after_failures`: failures in a row before `run.failed` is sent.
pub(crate) const SLA_ALERT_AFTER_FAILURES: CountRange = CountRange::new(1, 10_000);
/// A channel's `timeout` in the channels file, and `SCHEDULER_WEBHOOK_TIMEOUT`.
pub(crate) const DELIVERY_TIMEOUT: DurationRange = DurationRange::new(ms(100), secs(10 * MINUTE));
/// A backfill's pace between runs (`pace_ms` in the API, `--pace` on the command line).
pub(crate) const BACKFILL_PACE: DurationRange = DurationRange::new(ms(0), secs(DAY));

// Isolation area: the limits of an isolated task's process (`#[task(isolation = "process", ...)]`),
// checked by the macro at compile time with the same numbers (a test below keeps them alike) and
// again when the process is started.

/// `memory_limit`, in bytes (`RLIMIT_DATA`).
pub(crate) const MEMORY_LIMIT: CountRange = CountRange::new(64 << 20, 1 << 50);
/// `max_processes` (`RLIMIT_NPROC`, counted over the node's user).
pub(crate) const MAX_PROCESSES: CountRange = CountRange::new(16, 4_194_304);
/// `cpu_limit`, whole seconds (`RLIMIT_CPU`).
pub(crate) const CPU_LIMIT: DurationRange = DurationRange::new(secs(1), secs(YEAR));
/// `max_file_size`, in bytes (`RLIMIT_FSIZE`).
pub(crate) const MAX_FILE_SIZE: CountRange = CountRange::new(1 << 10, 1 << 50);

/// Every range, by the name it has in `docs/limits.md`.
pub(crate) const ALL: &[(&str, Range)] = &[
    ("sla.start_within", Range::Duration(SLA_START_WITHIN)),
    ("sla.warn_after", Range::Duration(SLA_WARN_AFTER)),
    ("sla.remind_every", Range::Duration(SLA_REMIND_EVERY)),
    (
        "sla.alert_after_failures",
        Range::Count(SLA_ALERT_AFTER_FAILURES),
    ),
    (
        "channel `timeout`, SCHEDULER_WEBHOOK_TIMEOUT",
        Range::Duration(DELIVERY_TIMEOUT),
    ),
    (
        "backfill pace (`pace_ms`, `--pace`)",
        Range::Duration(BACKFILL_PACE),
    ),
    // Isolation area.
    ("task `memory_limit`", Range::Size(MEMORY_LIMIT)),
    ("task `max_processes`", Range::Count(MAX_PROCESSES)),
    ("task `cpu_limit`", Range::Duration(CPU_LIMIT)),
    ("task `max_file_size`", Range::Size(MAX_FILE_SIZE)),
];

/// One of the ranges, for the listing.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Range {
    /// A duration range.
    Duration(DurationRange),
    /// A count range.
    Count(CountRange),
    /// A count of bytes, shown in binary units.
    Size(CountRange),
}

impl fmt::Display for Range {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Range::Duration(r) => r.fmt(f),
            Range::Count(r) => r.fmt(f),
            Range::Size(r) => write!(f, "from {} to {}", size(r.min), size(r.max)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_outside_their_range_are_refused_naming_field_and_range() {
        let e = SLA_WARN_AFTER
            .parse("sla.warn_after", "500000000000years")
            .unwrap_err();
        let text = e.to_string();
        assert!(text.starts_with("`sla.warn_after`: "), "{text}");
        assert!(text.contains("out of range"), "{text}");
        assert!(text.contains("from 1ms to 1year"), "{text}");
        assert_eq!(
            SLA_WARN_AFTER.parse("sla.warn_after", " 10m ").unwrap(),
            secs(600)
        );
        let e = DELIVERY_TIMEOUT.parse("timeout", "0s").unwrap_err();
        assert!(e.to_string().contains("0s is out of range"), "{e}");
    }

    #[test]
    fn long_or_hostile_text_is_refused_before_parsing_and_quoted_printably() {
        let long = "1s ".repeat(1000);
        let e = SLA_WARN_AFTER.parse("sla.warn_after", &long).unwrap_err();
        assert!(e.to_string().contains("is not read"), "{e}");
        let e = SLA_WARN_AFTER
            .parse("sla.warn_after", "\u{1b}[2Jsoon")
            .unwrap_err();
        assert!(!e.to_string().contains('\u{1b}'), "{e}");
        assert!(e.to_string().contains("\\u{1b}[2Jsoon"), "{e}");
    }

    #[test]
    fn counts_and_millis() {
        assert_eq!(SLA_ALERT_AFTER_FAILURES.check("n", 3u32).unwrap(), 3);
        assert!(SLA_ALERT_AFTER_FAILURES.check("n", 0u32).is_err());
        assert!(SLA_ALERT_AFTER_FAILURES.check("n", -1i64).is_err());
        let e = BACKFILL_PACE
            .check_millis("pace_ms", 10_000_000_000_000_000)
            .unwrap_err();
        assert!(e.to_string().starts_with("`pace_ms`: "), "{e}");
        assert_eq!(BACKFILL_PACE.check_millis("pace_ms", 0).unwrap(), ms(0));
    }

    #[test]
    fn every_range_is_far_from_overflowing_time_arithmetic() {
        let now = chrono::Utc::now();
        for (name, range) in ALL {
            if let Range::Duration(r) = range {
                let max = chrono::TimeDelta::from_std(r.max).expect(name);
                assert!(now.checked_add_signed(max * 100).is_some(), "{name}");
                assert!(
                    std::time::Instant::now().checked_add(r.max * 100).is_some(),
                    "{name}"
                );
            }
        }
    }

    #[test]
    fn the_task_macro_checks_process_limits_with_these_numbers() {
        let macro_source = include_str!("../../scheduler-macros/src/valid.rs");
        for (name, value) in [
            ("MIN_MEMORY_LIMIT", MEMORY_LIMIT.min),
            ("MAX_MEMORY_LIMIT", MEMORY_LIMIT.max),
            ("MIN_PROCESSES", MAX_PROCESSES.min),
            ("MAX_PROCESSES", MAX_PROCESSES.max),
            ("MIN_CPU_LIMIT", CPU_LIMIT.min.as_secs()),
            ("MAX_CPU_LIMIT", CPU_LIMIT.max.as_secs()),
            ("MIN_FILE_SIZE", MAX_FILE_SIZE.min),
            ("MAX_FILE_SIZE", MAX_FILE_SIZE.max),
        ] {
            let line = format!("const {name}: u64 = {value};");
            assert!(
                macro_source.contains(&line),
                "scheduler-macros/src/valid.rs lacks `{line}`"
            );
        }
        assert_eq!(size(64 << 20), "64 MiB");
        assert_eq!(size(1000), "1000 bytes");
    }

    #[test]
    fn docs_limits_lists_every_range() {
        let page = include_str!("../../docs/limits.md");
        for (name, range) in ALL {
            let row = format!("| {name} | {range} |");
            assert!(
                page.contains(&row),
                "docs/limits.md lacks the row `{row}` (write it as shown)"
            );
        }
    }
}
