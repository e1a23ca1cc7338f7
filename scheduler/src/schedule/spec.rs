//! A cron expression bound to a time zone (and a calendar, if any): its fire instants.

use std::fmt;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;

use super::calendar::{self, Calendar, OnBlocked, TaskCalendar};
use super::error::{ScheduleError, parse_timezone};
use super::next;
use super::normalize::{self, Compiled, JobKind};

/// A validated cron expression bound to a time zone.
///
/// ```
/// use chrono::{DateTime, Utc};
/// use scheduler::ScheduleSpec;
///
/// let spec = ScheduleSpec::parse("0 9 * * MON-FRI", "Europe/London")?;
/// let after: DateTime<Utc> = "2026-01-02T12:00:00Z".parse().unwrap();
/// assert_eq!(spec.next_after(after), "2026-01-05T09:00:00Z".parse().ok());
/// # Ok::<(), scheduler::schedule::ScheduleError>(())
/// ```
#[derive(Clone)]
pub struct ScheduleSpec {
    expression: String,
    pub(super) timezone: Tz,
    // Shared: croner's pattern holds a few kilobytes (its year field), and specs are cloned
    // into engine and reconciler state.
    pub(super) compiled: Arc<Compiled>,
    /// The calendar whose blocked instants the schedule does not fire at, if any.
    pub(super) calendar: Option<Arc<Calendar>>,
}

impl fmt::Debug for ScheduleSpec {
    // croner's pattern is bitfields; the expression says the same thing readably.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut debug = f.debug_struct("ScheduleSpec");
        debug
            .field("expression", &self.expression)
            .field("timezone", &self.timezone)
            .field("fixed_time", &self.is_fixed_time());
        if let Some(calendar) = &self.calendar {
            debug.field("calendar", &calendar.stored());
        }
        debug.finish()
    }
}

impl ScheduleSpec {
    /// Parses `expression` in the IANA zone `timezone`.
    pub fn parse(expression: &str, timezone: &str) -> Result<Self, ScheduleError> {
        let timezone = parse_timezone(timezone)?;
        Self::new(expression, timezone)
    }

    /// A task row's stored schedule: its cron and zone, and its stored calendar if it has one
    /// (see [`TaskCalendar::to_stored`]). A calendar that cannot be read is refused like a cron.
    pub fn stored(
        expression: &str,
        timezone: &str,
        calendar: Option<&str>,
    ) -> Result<Self, ScheduleError> {
        let zone = parse_timezone(timezone)?;
        let spec = Self::new(expression, zone)?;
        match calendar {
            None => Ok(spec),
            Some(stored) => {
                let calendar = TaskCalendar::from_stored(stored)?.compile(zone)?;
                Ok(spec.with_calendar(calendar))
            }
        }
    }

    /// Parses `expression` in `timezone`.
    pub fn new(expression: &str, timezone: Tz) -> Result<Self, ScheduleError> {
        Ok(Self {
            expression: expression.to_owned(),
            timezone,
            compiled: Arc::new(normalize::compile(expression)?),
            calendar: None,
        })
    }

    /// This schedule with `calendar` applied: [`next_after`](Self::next_after) and everything
    /// built on it no longer fire at an instant the calendar blocks (skipped, or moved to the
    /// next allowed instant; see [`calendar`]). The calendar's zone should be the schedule's.
    pub fn with_calendar(mut self, calendar: Calendar) -> Self {
        self.calendar = Some(Arc::new(calendar));
        self
    }

    /// The calendar applied, if any.
    pub fn calendar(&self) -> Option<&Calendar> {
        self.calendar.as_deref()
    }

    /// This schedule without its calendar: every tick of the cron expression.
    pub fn without_calendar(&self) -> Self {
        Self {
            calendar: None,
            ..self.clone()
        }
    }

    /// The expression as written.
    pub fn expression(&self) -> &str {
        &self.expression
    }

    /// The zone the expression is read in.
    pub fn timezone(&self) -> Tz {
        self.timezone
    }

    /// Whether the expression is a fixed-time job (neither the minute nor the hour field
    /// starts with `*`) rather than an interval job; see the module docs on DST.
    ///
    /// ```
    /// use scheduler::ScheduleSpec;
    ///
    /// let fixed = |expression| ScheduleSpec::parse(expression, "UTC").unwrap().is_fixed_time();
    /// assert!(fixed("30 2 * * *") && fixed("0 9,17 * * *") && fixed("@daily"));
    /// assert!(!fixed("*/20 1 * * *") && !fixed("0 */2 * * *") && !fixed("@hourly"));
    /// ```
    pub fn is_fixed_time(&self) -> bool {
        self.compiled.kind == JobKind::FixedTime
    }

    /// The first fire instant strictly after `after`, or `None` if there is none (only past
    /// the year 5000).
    ///
    /// With a [calendar](Self::with_calendar): in `skip` mode the first tick after `after` the
    /// calendar allows; in `next_allowed` mode the first tick after `after`, moved to the first
    /// allowed instant at or after it (so ticks moved to the same instant give it once).
    pub fn next_after(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let Some(calendar) = &self.calendar else {
            return self.cron_next_after(after);
        };
        match calendar.on_blocked() {
            OnBlocked::NextAllowed => calendar.next_allowed(self.cron_next_after(after)?),
            OnBlocked::Skip => {
                let mut cursor = after;
                // Each round leaves one blocked stretch, so this ends unless the calendar
                // chains thousands of them.
                for _ in 0..calendar::MAX_STEPS {
                    let tick = self.cron_next_after(cursor)?;
                    let allowed = calendar.next_allowed(tick)?;
                    if allowed == tick {
                        return Some(tick);
                    }
                    // Ticks are whole seconds: the first one at or after `allowed`.
                    cursor = allowed - chrono::TimeDelta::nanoseconds(1);
                }
                None
            }
        }
    }

    /// The first tick of the cron expression strictly after `after`, whatever the calendar.
    pub fn cron_next_after(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        next::next_after(
            &self.compiled.cron,
            self.compiled.kind,
            self.timezone,
            after,
        )
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

    /// Counts fire instants in `(after, until]`, stopping at `cap`.
    ///
    /// The engine uses this to count the ticks it collapses after downtime without walking an
    /// unbounded number of them.
    ///
    /// ```
    /// use scheduler::ScheduleSpec;
    ///
    /// let spec = ScheduleSpec::parse("*/15 * * * *", "UTC")?;
    /// let after = "2026-01-01T00:00:00Z".parse().unwrap();
    /// let until = "2026-01-01T01:00:00Z".parse().unwrap();
    /// assert_eq!(spec.count_fires(after, until, 100), 4); // :15 :30 :45 1:00
    /// assert_eq!(spec.count_fires(after, until, 2), 2);
    /// # Ok::<(), scheduler::schedule::ScheduleError>(())
    /// ```
    pub fn count_fires(&self, after: DateTime<Utc>, until: DateTime<Utc>, cap: usize) -> usize {
        self.iter_after(after)
            .take(cap)
            .take_while(|fire| *fire <= until)
            .count()
    }
}
