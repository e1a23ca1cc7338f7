//! (Stub until the config branch lands.) Validation shared by the reconciler and check-config.

use std::collections::BTreeMap;

use chrono_tz::Tz;

use super::ConfigDocument;
use crate::TaskRegistry;
use crate::schedule::{ScheduleError, ScheduleSpec};

/// A valid entry.
#[derive(Debug, Clone)]
pub struct DesiredTask {
    /// Name.
    pub name: String,
    /// Enabled.
    pub enabled: bool,
    /// Parsed schedule.
    pub schedule: ScheduleSpec,
}

/// Why an entry was refused.
#[derive(Debug, Clone, thiserror::Error)]
pub enum RefusalReason {
    /// Not registered.
    #[error("no task named so is registered in this binary")]
    UnknownTask,
    /// Bad cron or zone.
    #[error("{0}")]
    InvalidSchedule(ScheduleError),
    /// Several entries.
    #[error("the task appears {count} times in the config")]
    DuplicateEntry {
        /// How many.
        count: usize,
    },
}

/// A refused entry.
#[derive(Debug, Clone)]
pub struct Refusal {
    /// Name.
    pub name: String,
    /// Why.
    pub reason: RefusalReason,
}

/// The validated config.
#[derive(Debug, Clone, Default)]
pub struct ValidatedConfig {
    /// Valid entries by name.
    pub desired: BTreeMap<String, DesiredTask>,
    /// Refused entries.
    pub refused: Vec<Refusal>,
    /// Registered tasks absent from the document.
    pub absent: Vec<String>,
}

/// Validates a document against the registry.
pub fn validate(doc: &ConfigDocument, registry: &TaskRegistry, default_tz: Tz) -> ValidatedConfig {
    let mut out = ValidatedConfig::default();
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for t in &doc.tasks {
        *counts.entry(&t.name).or_default() += 1;
    }
    for t in &doc.tasks {
        let count = counts[t.name.as_str()];
        let reason = if count > 1 {
            Some(RefusalReason::DuplicateEntry { count })
        } else if !registry.contains(&t.name) {
            Some(RefusalReason::UnknownTask)
        } else {
            let spec = match &t.timezone {
                Some(tz) => ScheduleSpec::parse(&t.cron, tz),
                None => ScheduleSpec::new(&t.cron, default_tz),
            };
            match spec {
                Ok(schedule) => {
                    out.desired.insert(
                        t.name.clone(),
                        DesiredTask { name: t.name.clone(), enabled: t.enabled, schedule },
                    );
                    None
                }
                Err(e) => Some(RefusalReason::InvalidSchedule(e)),
            }
        };
        if let Some(reason) = reason {
            out.refused.push(Refusal { name: t.name.clone(), reason });
        }
    }
    out.absent = registry.names().filter(|n| !counts.contains_key(n)).map(str::to_owned).collect();
    out
}
