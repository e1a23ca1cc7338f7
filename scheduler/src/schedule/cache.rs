//! Compiled schedules by expression and zone. Compiling costs ~20 µs (see `BENCHMARKS.md`), a
//! lookup well under one: the engine plans every due task while holding its row locks, and a
//! reconcile re-validates every entry of a config that may hold thousands.

use std::collections::HashMap;
use std::sync::Mutex;

use chrono_tz::Tz;

use super::{ScheduleError, ScheduleSpec};

/// A bounded memo of [`ScheduleSpec::new`]. Refusals are not cached.
#[derive(Debug, Default)]
pub(crate) struct SpecCache {
    specs: Mutex<HashMap<(String, Tz), ScheduleSpec>>,
}

impl SpecCache {
    /// Bound on cached schedules; the memo starts over when full (config churn).
    const CAPACITY: usize = 100_000;

    /// [`ScheduleSpec::new`], memoized.
    pub(crate) fn get(&self, expression: &str, tz: Tz) -> Result<ScheduleSpec, ScheduleError> {
        let mut specs = self
            .specs
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(spec) = specs.get(&(expression.to_owned(), tz)) {
            return Ok(spec.clone());
        }
        let spec = ScheduleSpec::new(expression, tz)?;
        if specs.len() >= Self::CAPACITY {
            specs.clear();
        }
        specs.insert((expression.to_owned(), tz), spec.clone());
        Ok(spec)
    }

    /// [`ScheduleSpec::parse`], memoized.
    pub(crate) fn get_named(
        &self,
        expression: &str,
        zone: &str,
    ) -> Result<ScheduleSpec, ScheduleError> {
        self.get(expression, super::parse_timezone(zone)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memoizes_valid_and_refuses_invalid() {
        let cache = SpecCache::default();
        let a = cache.get("*/5 * * * *", Tz::UTC).unwrap();
        let b = cache.get_named("*/5 * * * *", "UTC").unwrap();
        assert_eq!(a.expression(), b.expression());
        assert_eq!(cache.specs.lock().unwrap().len(), 1);
        assert!(cache.get("61 * * * *", Tz::UTC).is_err());
        assert!(cache.get_named("* * * * *", "Mars/Olympus").is_err());
        assert_eq!(cache.specs.lock().unwrap().len(), 1);
    }
}
