//! The calendars of instances made at run time, kept up with the document: an instance that
//! names one of the document's `calendars` (`Schedule::calendar`, the admin API's and the
//! command line's `calendar`) has that calendar's rules written on its rows, resolved against the
//! document its node applied at the upsert. The rows keep the calendar's name with its rules
//! (`TaskCalendar::names`), so a reconcile of a document that changes the rules of calendar `C`
//! (or the `on_blocked` of the task's entry) rewrites the rules of every row naming `C`, each
//! row's next run recomputed under them, as a config instance's and a task's are. The writes are
//! ordinary updates of the reconcile, written 1,000 rows to a statement.
//!
//! A calendar the document no longer has (or whose rules cannot be read in an instance's zone)
//! is not taken from the instances naming it: they keep its last rules, and the reconcile says
//! so ([`ReconcileReport::kept_calendars`](super::super::ReconcileReport::kept_calendars)), as a
//! refused entry keeps its last valid state. Instances of a task whose entry the document
//! refuses or leaves out are left as they are (the latter are disabled with their task).
//!
//! Owns nothing else: the enabling and disabling of instances is `plan_instances`', their shard
//! and node rows `instance_shards`', the config's own instances `config_instances`'.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::rc::Rc;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;

use crate::config::{ConfigDocument, InstanceCalendars, ValidatedConfig};
use crate::schedule::{OnBlocked, TaskCalendar};
use crate::store::{InstanceSource, TaskChange, TaskRow};

/// The key of a memo: three texts of a row.
type Triple = (String, String, String);

/// What the document makes of the calendars that rows of instances made at run time name.
/// Each distinct calendar (by task, zone and stored rules) is resolved once, and each distinct
/// schedule under new rules read once: 10,000 instances naming one calendar cost one
/// resolution, not 10,000.
pub(super) struct RuntimeCalendars<'a> {
    doc: &'a ConfigDocument,
    validated: &'a ValidatedConfig,
    /// The entries' `on_blocked`, by task.
    on_blocked: HashMap<&'a str, OnBlocked>,
    /// Resolutions made, by `(task, zone, stored calendar)`.
    resolved: RefCell<HashMap<Triple, Resolved>>,
    /// Schedules read under new rules, by `(cron, zone, stored calendar)` (`None`: unreadable).
    specs: RefCell<HashMap<Triple, Option<Rc<crate::ScheduleSpec>>>>,
}

/// What becomes of one row's calendar.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Resolved {
    /// Not a calendar of the document named at run time, or one whose rules did not change.
    Same,
    /// The calendar's rules as the document has them now, stored form.
    Rewritten(String),
    /// The calendar named `name` cannot be resolved (`why`): the row keeps its last rules.
    Kept { name: String, why: String },
}

impl<'a> RuntimeCalendars<'a> {
    pub(super) fn new(doc: &'a ConfigDocument, validated: &'a ValidatedConfig) -> Self {
        let on_blocked = doc
            .tasks
            .iter()
            .map(|entry| (entry.name.as_str(), entry.on_blocked.unwrap_or_default()))
            .collect();
        Self {
            doc,
            validated,
            on_blocked,
            resolved: RefCell::default(),
            specs: RefCell::default(),
        }
    }

    /// What the document makes of `row`'s calendar.
    fn resolve(&self, row: &TaskRow) -> Resolved {
        let Some(stored) = row.calendar.as_deref() else {
            return Resolved::Same; // its task's, read by the claim from the task's row
        };
        let Some((task, _)) = crate::instance::split_row(&row.name) else {
            return Resolved::Same;
        };
        if row.removed
            || row.instance_source != InstanceSource::Runtime
            || !self.validated.desired.contains_key(task)
        {
            return Resolved::Same;
        }
        let key = (task.to_owned(), row.timezone.clone(), stored.to_owned());
        if let Some(resolved) = self.resolved.borrow().get(&key) {
            return resolved.clone();
        }
        let resolved = self.resolve_anew(task, &row.timezone, stored);
        self.resolved.borrow_mut().insert(key, resolved.clone());
        resolved
    }

    /// What the document makes of the calendar `stored` of an instance of `task` in `zone`.
    fn resolve_anew(&self, task: &str, zone: &str, stored: &str) -> Resolved {
        // An instance made at run time names one calendar of the document; a stored calendar
        // naming none or several (rules written inline on a task entry) is not one of these.
        let Ok(calendar) = TaskCalendar::from_stored(stored) else {
            return Resolved::Same;
        };
        let [name] = calendar.names.as_slice() else {
            return Resolved::Same;
        };
        let Ok(zone) = zone.parse::<Tz>() else {
            return Resolved::Same;
        };
        let on_blocked = self.on_blocked.get(task).copied().unwrap_or_default();
        match InstanceCalendars::of_named(&self.doc.calendars, on_blocked).named(name, zone) {
            Ok(now) if now.stored() == stored => Resolved::Same,
            Ok(now) => Resolved::Rewritten(now.stored().to_owned()),
            Err(why) => Resolved::Kept {
                name: name.clone(),
                why,
            },
        }
    }

    /// The calendar `row` holds once the document is applied (stored form): its rules as the
    /// document has them now, else as they are. What the rows made from `row` by this reconcile
    /// (an instance's new shard or node rows) copy.
    pub(super) fn of(&self, row: &TaskRow) -> Option<String> {
        match self.resolve(row) {
            Resolved::Rewritten(stored) => Some(stored),
            Resolved::Same | Resolved::Kept { .. } => row.calendar.clone(),
        }
    }

    /// `row`'s schedule under `calendar` (stored form); `None` when it cannot be read.
    fn spec(&self, row: &TaskRow, calendar: &str) -> Option<Rc<crate::ScheduleSpec>> {
        let key = (row.cron.clone(), row.timezone.clone(), calendar.to_owned());
        if let Some(spec) = self.specs.borrow().get(&key) {
            return spec.clone();
        }
        let spec = crate::ScheduleSpec::parse(&row.cron, &row.timezone)
            .ok()
            .and_then(|spec| {
                let calendar = TaskCalendar::from_stored(calendar)
                    .and_then(|c| c.compile(spec.timezone()))
                    .ok()?;
                Some(Rc::new(spec.with_calendar(calendar)))
            });
        self.specs.borrow_mut().insert(key, spec.clone());
        spec
    }
}

/// The updates rewriting the calendars of the rows of instances made at run time whose
/// calendar the document changed, each enabled row's next run recomputed under its new rules
/// (its next tick after now and after the tick it last claimed, at its offset in its window; a
/// broadcast instance's own row, never run, keeps none). Rows another change of this plan
/// updates already (`plan_instances`: they take the new rules there) are left to it. Returns
/// the rows rewritten and, once each, the calendars kept with why.
pub(super) fn plan_instance_calendars(
    calendars: &RuntimeCalendars<'_>,
    rows: &BTreeMap<&str, &TaskRow>,
    db_now: DateTime<Utc>,
    changes: &mut Vec<TaskChange>,
) -> (Vec<String>, Vec<(String, String)>) {
    let updated_already: HashSet<String> = changes
        .iter()
        .filter_map(|change| match change {
            TaskChange::Update { name, .. } => Some(name.clone()),
            _ => None,
        })
        .collect();
    let (mut rewritten, mut kept) = (Vec::new(), BTreeMap::new());
    for row in rows.values() {
        let calendar = match calendars.resolve(row) {
            Resolved::Same => continue,
            Resolved::Kept { name, why } => {
                kept.entry(name).or_insert(why);
                continue;
            }
            Resolved::Rewritten(stored) => stored,
        };
        if updated_already.contains(&row.name) {
            continue;
        }
        let never_run = row.node_pin.as_deref() == Some("");
        let (next_run_at, next_tick) = if row.enabled && !never_run {
            next_run(calendars, row, &calendar, db_now)
        } else {
            (None, None)
        };
        changes.push(TaskChange::Update {
            name: row.name.clone(),
            cron: row.cron.clone(),
            timezone: row.timezone.clone(),
            calendar: Some(calendar),
            enabled: row.enabled,
            next_run_at,
            next_tick,
        });
        rewritten.push(row.name.clone());
    }
    (rewritten, kept.into_iter().collect())
}

/// `row`'s next run under `calendar` (stored form): its next tick after now and after the tick
/// it last claimed, at its offset in its window (its own, else its task's). `(None, None)`
/// (keep the stored one) when its schedule cannot be read.
fn next_run(
    calendars: &RuntimeCalendars<'_>,
    row: &TaskRow,
    calendar: &str,
    db_now: DateTime<Utc>,
) -> (Option<DateTime<Utc>>, Option<DateTime<Utc>>) {
    let Some(spec) = calendars.spec(row, calendar) else {
        return (None, None);
    };
    let validated = calendars.validated;
    let floor = row
        .last_scheduled_at
        .map_or(db_now, |claimed| claimed.max(db_now));
    let task = crate::instance::split_row(&row.name).map(|(task, _)| task);
    let window = row
        .jitter
        .or_else(|| {
            task.and_then(|t| validated.desired.get(t))
                .map(|d| d.jitter)
        })
        .unwrap_or_default();
    crate::ticks::jitter::next_run(&row.name, &spec, spec.next_after(floor), window)
        .columns()
        .unwrap_or_default()
}

#[cfg(test)]
mod tests;
