//! Schedule expressions: the one compiler shared by the config validator and the engine.
//!
//! (Stub: the Schedule issue fills this in; the signatures below are the contract.)

use chrono::{DateTime, Utc};
use chrono_tz::Tz;

/// A validated cron expression bound to a time zone.
#[derive(Debug, Clone)]
pub struct ScheduleSpec {
    expression: String,
    timezone: Tz,
}

/// Why an expression or time zone was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ScheduleError {
    message: String,
}

impl ScheduleSpec {
    /// Parses `expression` in the IANA zone `timezone`.
    pub fn parse(expression: &str, timezone: &str) -> Result<Self, ScheduleError> {
        let timezone = parse_timezone(timezone)?;
        Self::new(expression, timezone)
    }

    /// Parses `expression` in `timezone`.
    pub fn new(expression: &str, timezone: Tz) -> Result<Self, ScheduleError> {
        Ok(Self {
            expression: expression.to_owned(),
            timezone,
        })
    }

    /// The expression as written.
    pub fn expression(&self) -> &str {
        &self.expression
    }

    /// The zone the expression is read in.
    pub fn timezone(&self) -> Tz {
        self.timezone
    }

    /// The first fire instant strictly after `after`, or `None` if there is none.
    pub fn next_after(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let _ = after;
        None
    }

    /// How many fire instants fall in `(after, until]`, counting at most `cap`.
    pub fn count_fires(&self, after: DateTime<Utc>, until: DateTime<Utc>, cap: usize) -> usize {
        self.iter_after(after).take_while(|t| *t <= until).take(cap).count()
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
}

/// Parses an IANA time zone name such as `Asia/Shanghai`.
pub fn parse_timezone(name: &str) -> Result<Tz, ScheduleError> {
    name.parse::<Tz>().map_err(|_| ScheduleError {
        message: format!("unknown time zone `{name}`"),
    })
}
