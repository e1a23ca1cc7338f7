//! Compiled schedules by expression and zone. Compiling costs ~20 µs (see `BENCHMARKS.md`), a
//! lookup well under one: the engine plans every due task while holding its row locks, and a
//! reconcile re-validates every entry of a config that may hold thousands.

use std::collections::HashMap;
use std::sync::Mutex;

use chrono_tz::Tz;

use super::calendar::TaskCalendar;
use super::error::{ScheduleError, parse_timezone};
use super::spec::ScheduleSpec;

/// A cached schedule's key: expression, zone, stored calendar.
type SpecKey = (String, Tz, Option<String>);

/// A bounded memo of [`ScheduleSpec::new`] (with a stored calendar applied, if any). Refusals
/// are not cached.
#[derive(Debug, Default)]
pub(crate) struct SpecCache {
    specs: Mutex<HashMap<SpecKey, ScheduleSpec>>,
}

impl SpecCache {
    /// Bound on cached schedules; the memo starts over when full (config churn).
    const CAPACITY: usize = 100_000;

    /// [`ScheduleSpec::new`], memoized.
    pub(crate) fn get(&self, expression: &str, tz: Tz) -> Result<ScheduleSpec, ScheduleError> {
        self.get_with(expression, tz, None)
    }

    /// [`ScheduleSpec::new`] with the stored calendar `calendar` (a task row's `calendar`
    /// column) applied, memoized. A calendar this node cannot read is refused like a cron.
    pub(crate) fn get_with(
        &self,
        expression: &str,
        tz: Tz,
        calendar: Option<&str>,
    ) -> Result<ScheduleSpec, ScheduleError> {
        let key = (expression.to_owned(), tz, calendar.map(str::to_owned));
        let mut specs = self
            .specs
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(spec) = specs.get(&key) {
            return Ok(spec.clone());
        }
        let mut spec = ScheduleSpec::new(expression, tz)?;
        if let Some(stored) = calendar {
            let calendar = TaskCalendar::from_stored(stored).and_then(|c| c.compile(tz))?;
            spec = spec.with_calendar(calendar);
        }
        if specs.len() >= Self::CAPACITY {
            specs.clear();
        }
        specs.insert(key, spec.clone());
        Ok(spec)
    }

    /// [`ScheduleSpec::parse`] with the stored calendar `calendar` applied, memoized.
    pub(crate) fn get_named(
        &self,
        expression: &str,
        zone: &str,
        calendar: Option<&str>,
    ) -> Result<ScheduleSpec, ScheduleError> {
        self.get_with(expression, parse_timezone(zone)?, calendar)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memoizes_valid_and_refuses_invalid() {
        let cache = SpecCache::default();
        let a = cache.get("*/5 * * * *", Tz::UTC).unwrap();
        let b = cache.get_named("*/5 * * * *", "UTC", None).unwrap();
        assert_eq!(a.expression(), b.expression());
        assert_eq!(cache.specs.lock().unwrap().len(), 1);
        assert!(cache.get("61 * * * *", Tz::UTC).is_err());
        assert!(cache.get_named("* * * * *", "Mars/Olympus", None).is_err());
        assert!(
            cache
                .get_named("* * * * *", "UTC", Some("{\"moon\": 1}"))
                .is_err()
        );
        assert_eq!(cache.specs.lock().unwrap().len(), 1);
    }
}
