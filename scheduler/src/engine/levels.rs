//! A task's service levels as the engine judges them: its config entry's `sla` block, checked,
//! and the zone its wall-clock deadline is read in. Read from the document this node applied
//! (`config_sync`), judged by `sla`, `incidents` and `runner`. An instance with levels of its
//! own has them instead, in its own zone ([`RowLevels`], read from its row in the store); any
//! other instance has its task's.

use std::collections::{BTreeMap, HashMap};

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

/// The instances with service levels of their own (`Schedule::sla`, a config instance's `sla`),
/// by row, as their rows in the store last said: read with each claim of one, with its overdue
/// tick, and with every row at the node's start and hourly upkeep. An instance not here has its
/// task's levels.
#[derive(Debug, Clone, Default)]
pub(crate) struct RowLevels {
    by_row: HashMap<String, (String, TaskLevels)>,
}

impl RowLevels {
    /// The own levels of instance row `row`, if it has some.
    pub(crate) fn get(&self, row: &str) -> Option<TaskLevels> {
        self.by_row.get(row).map(|(_, levels)| *levels)
    }

    /// Every instance row's own levels.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&String, &TaskLevels)> {
        self.by_row.iter().map(|(row, (_, levels))| (row, levels))
    }

    /// Whether noting `stored` (the row's `sla` column) in `zone` for `row` changes nothing.
    pub(crate) fn knows(&self, row: &str, stored: Option<&str>, zone: &str, enabled: bool) -> bool {
        match (self.by_row.get(row), stored) {
            (None, None) => true,
            (Some((known, levels)), Some(stored)) => {
                known == stored && levels.zone.name() == zone && levels.enabled == enabled
            }
            _ => false,
        }
    }

    /// Notes instance row `row`'s own levels as stored (`None`: its task's); any other row, or
    /// levels that do not read (written by a newer node), are left out.
    pub(crate) fn note(&mut self, row: &str, stored: Option<&str>, zone: &str, enabled: bool) {
        let own = stored
            .filter(|_| crate::instance::split_row(row).is_some())
            .and_then(|text| {
                let sla = crate::config::TaskSla::from_stored(text)?.check().ok()?;
                let zone = crate::schedule::parse_timezone(zone).ok()?;
                Some((text.to_owned(), TaskLevels { sla, zone, enabled }))
            });
        match own {
            Some(own) => {
                self.by_row.insert(row.to_owned(), own);
            }
            None => {
                self.by_row.remove(row);
            }
        }
    }

    /// Takes every instance's own levels from `rows` (every row of the store, read at once), in
    /// place of those noted before.
    pub(crate) fn set_rows<'a>(
        &mut self,
        rows: impl IntoIterator<Item = (&'a str, Option<&'a str>, &'a str, bool)>,
    ) {
        self.by_row.clear();
        for (row, stored, zone, enabled) in rows {
            if stored.is_some() {
                self.note(row, stored, zone, enabled);
            }
        }
    }
}
