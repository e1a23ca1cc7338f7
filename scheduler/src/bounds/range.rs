//! The two kinds of range a value is checked against (durations, whole numbers), the refusal of
//! a value outside one ([`OutOfRange`]), and how a range reads in errors and in
//! `docs/limits.md`.

use std::borrow::Cow;
use std::fmt;
use std::time::Duration;

/// The longest duration text read (`"1h 30m 15s 500ms"` is 16 characters).
pub(crate) const MAX_DURATION_TEXT: usize = 64;

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
    #[cfg_attr(not(feature = "admin"), allow(dead_code))]
    pub(crate) fn check_millis(
        &self,
        field: impl Into<Cow<'static, str>>,
        millis: u64,
    ) -> Result<Duration, OutOfRange> {
        self.check(field, Duration::from_millis(millis))
    }

    /// `value` capped at the range's maximum, in whole milliseconds, for binding to a store's
    /// `..._ms` column: the store is below the checks (its callers and its contract tests may
    /// hand it less than the minimum), and all it must ensure is that no value overflows.
    #[cfg_attr(not(any(feature = "postgres", feature = "sqlite")), allow(dead_code))]
    pub(crate) fn capped_millis(&self, value: Duration) -> i64 {
        i64::try_from(value.min(self.max).as_millis()).unwrap_or(i64::MAX)
    }

    /// The largest value in whole milliseconds (the cap a store's SQL applies to a stored
    /// `..._ms` column).
    #[cfg(test)]
    pub(crate) const fn max_millis(&self) -> u64 {
        self.max.as_secs() * 1000 + self.max.subsec_millis() as u64
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

/// One of the ranges, for the listing.
#[derive(Debug, Clone, Copy)]
#[cfg_attr(not(test), allow(dead_code))]
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
