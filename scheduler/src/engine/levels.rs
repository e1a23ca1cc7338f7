//! A task's service levels as the engine judges them: its config entry's `sla` block, checked,
//! and the zone its wall-clock deadline is read in. Read from the document this node applied
//! (`config_sync`), judged by `sla`, `incidents` and `runner`.

use std::collections::BTreeMap;

use chrono_tz::Tz;

use crate::config::{ConfigDocument, Sla};

/// One task's service levels and the zone its wall-clock deadline is read in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TaskLevels {
    pub(crate) sla: Sla,
    pub(crate) zone: Tz,
    pub(crate) enabled: bool,
}

/// Every entry of `doc` with a valid `sla` block (and a valid zone), by task.
pub(crate) fn levels_of(doc: &ConfigDocument, default_zone: Tz) -> BTreeMap<String, TaskLevels> {
    doc.tasks
        .iter()
        .filter_map(|entry| {
            let sla = entry.sla.as_ref()?.check().ok()?;
            let zone = match &entry.timezone {
                None => default_zone,
                Some(zone) => crate::schedule::parse_timezone(zone).ok()?,
            };
            Some((
                entry.name.clone(),
                TaskLevels {
                    sla,
                    zone,
                    enabled: entry.enabled,
                },
            ))
        })
        .collect()
}
