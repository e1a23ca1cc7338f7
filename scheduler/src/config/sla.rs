//! Service levels per task: the optional `sla` block of a config entry, as written
//! ([`TaskSla`]) and as checked ([`Sla`]).
//!
//! ```yaml
//! tasks:
//!   - name: dailyReport
//!     enabled: true
//!     cron: 0 0 6 * * *
//!     timezone: Asia/Shanghai
//!     sla:
//!       start_within: 30s        # task.late when a tick has not started 30 s after it was due
//!       warn_after: 10m          # task.slow when a run is still going after 10 minutes
//!       succeed_by: "08:00"      # task.deadline_missed when no run succeeded by 08:00 local
//!       alert_after_failures: 3  # run.failed is sent from the 3rd failure in a row on
//!       remind_every: 1h         # re-send an open incident's alert every hour
//! ```
//!
//! This file owns the shape and its checks only (pure: no clock, no store). The engine judges
//! the levels (`engine/sla.rs`) and folds what breaks them into incidents (`engine/incidents.rs`).

use std::time::Duration;

use chrono::{DateTime, NaiveTime, TimeZone, Utc};
use chrono_tz::Tz;
use serde::{Deserialize, Serialize};

use crate::bounds::{self, DurationRange};

/// The shortest reminder interval accepted (a reminder is a message to a person); the range of
/// every field is in `docs/limits.md` (`bounds::SLA_*`).
pub const MIN_REMIND_EVERY: Duration = bounds::SLA_REMIND_EVERY.min;

/// The `sla` block of a config entry, as written (durations in humantime: `30s`, `10m`, `1h`).
/// Serialized as written, its absent fields left out (an instance's own levels are stored and
/// shown so).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, Default)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct TaskSla {
    /// How late a tick may start before `task.late` is raised (once per tick).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_within: Option<String>,
    /// How long a run may go on before `task.slow` is raised (once per run; the run goes on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warn_after: Option<String>,
    /// A wall-clock time (`HH:MM` or `HH:MM:SS`, in the task's zone) by which a run must have
    /// succeeded since the same time the day before; `task.deadline_missed` otherwise (once a
    /// day).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub succeed_by: Option<String>,
    /// Failures in a row (attempts) before `run.failed` or `run.timed_out` is sent (default 1:
    /// the first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alert_after_failures: Option<u32>,
    /// While an incident of the task stays open, its alert is sent again this often (default:
    /// never).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remind_every: Option<String>,
}

/// A checked [`TaskSla`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Sla {
    /// See [`TaskSla::start_within`].
    pub start_within: Option<Duration>,
    /// See [`TaskSla::warn_after`].
    pub warn_after: Option<Duration>,
    /// See [`TaskSla::succeed_by`].
    pub succeed_by: Option<NaiveTime>,
    /// See [`TaskSla::alert_after_failures`]; at least 1.
    pub alert_after_failures: u32,
    /// See [`TaskSla::remind_every`].
    pub remind_every: Option<Duration>,
}

impl TaskSla {
    /// Checks the block; every problem at once, each naming its field.
    ///
    /// ```
    /// use scheduler::config::TaskSla;
    ///
    /// let sla: TaskSla = serde_json::from_str(
    ///     r#"{"start_within": "30s", "succeed_by": "08:00", "alert_after_failures": 3}"#,
    /// )
    /// .unwrap();
    /// let checked = sla.check().unwrap();
    /// assert_eq!(checked.start_within, Some(std::time::Duration::from_secs(30)));
    /// assert_eq!(checked.alert_after_failures, 3);
    ///
    /// let bad: TaskSla = serde_json::from_str(r#"{"succeed_by": "8 am"}"#).unwrap();
    /// assert!(bad.check().unwrap_err()[0].contains("succeed_by"));
    /// ```
    pub fn check(&self) -> Result<Sla, Vec<String>> {
        let mut problems = Vec::new();
        let mut duration =
            |field: &'static str, range: DurationRange, value: &Option<String>| match value {
                None => None,
                Some(text) => match range.parse(field, text) {
                    Ok(d) => Some(d),
                    Err(e) => {
                        problems.push(e.to_string());
                        None
                    }
                },
            };
        let start_within = duration(
            "sla.start_within",
            bounds::SLA_START_WITHIN,
            &self.start_within,
        );
        let warn_after = duration("sla.warn_after", bounds::SLA_WARN_AFTER, &self.warn_after);
        let remind_every = duration(
            "sla.remind_every",
            bounds::SLA_REMIND_EVERY,
            &self.remind_every,
        );
        let succeed_by = match &self.succeed_by {
            None => None,
            Some(text) => {
                let text = text.trim();
                match NaiveTime::parse_from_str(text, "%H:%M:%S")
                    .or_else(|_| NaiveTime::parse_from_str(text, "%H:%M"))
                {
                    Ok(t) => Some(t),
                    Err(_) => {
                        problems.push(format!(
                            "sla.succeed_by: `{}` is not a time of day; write `HH:MM` or `HH:MM:SS` (24-hour, in the task's zone)",
                            bounds::printable(text)
                        ));
                        None
                    }
                }
            }
        };
        let alert_after_failures = match self.alert_after_failures {
            Some(n) => {
                match bounds::SLA_ALERT_AFTER_FAILURES.check("sla.alert_after_failures", n) {
                    Ok(n) => n,
                    Err(e) => {
                        problems.push(e.to_string());
                        1
                    }
                }
            }
            None => 1,
        };
        if problems.is_empty() {
            Ok(Sla {
                start_within,
                warn_after,
                succeed_by,
                alert_after_failures,
                remind_every,
            })
        } else {
            Err(problems)
        }
    }
}

impl TaskSla {
    /// The block as an instance's row stores it: JSON text, its absent fields left out.
    pub(crate) fn stored(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// The block an instance's row stores (`None`: none, or text that is not one).
    pub(crate) fn from_stored(text: &str) -> Option<Self> {
        serde_json::from_str(text).ok()
    }

    /// The problems of the block, joined into one reason (`None`: usable).
    pub(crate) fn problem(&self) -> Option<String> {
        self.check().err().map(|problems| problems.join("; "))
    }
}

impl Sla {
    /// The latest `succeed_by` deadline at or before `now` in `zone`, and the one before it
    /// (the period a success must fall in: after the previous deadline, by this one). `None`
    /// without `succeed_by`. A time a zone skips that day (a DST gap) is read one hour later.
    pub fn deadline_period(
        &self,
        zone: Tz,
        now: DateTime<Utc>,
    ) -> Option<(DateTime<Utc>, DateTime<Utc>)> {
        let at = self.succeed_by?;
        let local_today = now.with_timezone(&zone).date_naive();
        let on = |day: chrono::NaiveDate| -> Option<DateTime<Utc>> {
            let naive = day.and_time(at);
            zone.from_local_datetime(&naive)
                .earliest()
                .or_else(|| {
                    zone.from_local_datetime(&(naive + chrono::TimeDelta::hours(1)))
                        .earliest()
                })
                .map(|t| t.with_timezone(&Utc))
        };
        let mut day = local_today;
        for _ in 0..3 {
            if let Some(deadline) = on(day)
                && deadline <= now
            {
                let previous = on(day.pred_opt()?)?;
                return Some((previous, deadline));
            }
            day = day.pred_opt()?;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sla(json: &str) -> Result<Sla, Vec<String>> {
        serde_json::from_str::<TaskSla>(json).unwrap().check()
    }

    #[test]
    fn every_problem_is_named() {
        let err = sla(
            r#"{"start_within":"soon","warn_after":"0s","succeed_by":"25:00","alert_after_failures":0,"remind_every":"10ms"}"#,
        )
        .unwrap_err();
        assert_eq!(err.len(), 5, "{err:?}");
        for field in [
            "start_within",
            "warn_after",
            "succeed_by",
            "alert_after_failures",
            "remind_every",
        ] {
            assert!(err.iter().any(|e| e.contains(field)), "{field}: {err:?}");
        }
        assert_eq!(sla("{}").unwrap().alert_after_failures, 1);
    }

    #[test]
    fn durations_beyond_their_range_are_refused_naming_field_and_range() {
        let err = sla(
            r#"{"start_within":"300000years","warn_after":"500000000000years","remind_every":"300000years","alert_after_failures":4000000000}"#,
        )
        .unwrap_err();
        assert_eq!(err.len(), 4, "{err:?}");
        for (field, range) in [
            ("sla.start_within", "from 1ms to 1year"),
            ("sla.warn_after", "from 1ms to 1year"),
            ("sla.remind_every", "from 1s to 1year"),
            ("sla.alert_after_failures", "from 1 to 10000"),
        ] {
            assert!(
                err.iter()
                    .any(|e| e.contains(&format!("`{field}`")) && e.contains(range)),
                "{field}: {err:?}"
            );
        }
        let edge = sla(r#"{"warn_after":"1year","remind_every":"1s"}"#).unwrap();
        assert_eq!(edge.warn_after, Some(Duration::from_secs(31_557_600)));
    }

    #[test]
    fn the_deadline_period_is_the_day_before_the_last_deadline() {
        let sla = sla(r#"{"succeed_by":"08:00"}"#).unwrap();
        let zone: Tz = "Asia/Shanghai".parse().unwrap();
        // 09:00 in Shanghai: today's 08:00 passed.
        let now: DateTime<Utc> = "2026-03-10T01:00:00Z".parse().unwrap();
        let (from, by) = sla.deadline_period(zone, now).unwrap();
        assert_eq!(by, "2026-03-10T00:00:00Z".parse::<DateTime<Utc>>().unwrap());
        assert_eq!(
            from,
            "2026-03-09T00:00:00Z".parse::<DateTime<Utc>>().unwrap()
        );
        // 07:00 in Shanghai: yesterday's.
        let now: DateTime<Utc> = "2026-03-09T23:00:00Z".parse().unwrap();
        let (_, by) = sla.deadline_period(zone, now).unwrap();
        assert_eq!(by, "2026-03-09T00:00:00Z".parse::<DateTime<Utc>>().unwrap());
    }
}
