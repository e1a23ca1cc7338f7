//! Why an expression or a time zone was refused: the field at fault and the message.

use std::fmt;

use chrono_tz::Tz;

use super::calendar::CalendarError;

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
    pub(super) const ALL: [CronField; 6] = [
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
    pub(super) fn expression(expression: &str, field: Option<CronField>, detail: String) -> Self {
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
