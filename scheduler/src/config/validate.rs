//! Validation of a [`ConfigDocument`] against the [`TaskRegistry`], shared by the reconciler and
//! `check-config`.
//!
//! Pure: no I/O, no database, no clock. Every entry is either accepted into
//! [`ValidatedConfig::desired`] with a compiled [`ScheduleSpec`], or refused with a reason.
//!
//! Rules:
//! - a name that is empty or has surrounding whitespace or control characters is refused
//!   ([`RefusalReason::InvalidName`]);
//! - a name listed more than once is refused entirely, every entry of it, with one
//!   [`RefusalReason::DuplicateEntry`] (which entry was meant is a guess we do not make);
//! - a name with no registered task is refused ([`RefusalReason::UnknownTask`]): nothing is created;
//! - an invalid zone, cron expression or `sla` field is refused, **also for a disabled entry**:
//!   enabling it later must not be the moment the mistake surfaces;
//! - so is a `calendar` naming a calendar the document's `calendars` does not have
//!   ([`RefusalReason::UnknownCalendar`]), a calendar whose rules are wrong (a date that is not
//!   one, an unknown day, a window or range that ends before it starts, windows covering the
//!   whole week: [`RefusalReason::InvalidCalendar`], naming the calendar), and `on_blocked`
//!   without a `calendar` ([`RefusalReason::OnBlockedWithoutCalendar`]);
//! - an owner that is blank or holds control characters, an owner listed twice, or a label
//!   whose key is not `[A-Za-z0-9_.-/]` (1 to 63 characters) or whose value holds control
//!   characters is refused the same way ([`RefusalReason::InvalidOwner`],
//!   [`RefusalReason::InvalidLabel`]): alerts are routed by them;
//! - a `limits` entry whose name is not 1 to 64 of `[A-Za-z0-9_.:-]` or whose size is not 1 to
//!   100,000 (or more than 1,000 limits) is refused, listed in
//!   [`limit_problems`](ValidatedConfig::limit_problems), and so is every entry naming it
//!   ([`RefusalReason::InvalidLimit`]); an entry naming (by its `limit`, or its task
//!   attribute's) a limit the document does not declare is refused
//!   ([`RefusalReason::UnknownLimit`]);
//! - registered tasks the document does not mention are listed in
//!   [`absent`](ValidatedConfig::absent). Refused names are not "absent": the reconciler keeps
//!   their last valid state.
//!
//! An entry with several problems (unknown name *and* bad cron) gets one [`Refusal`] per problem,
//! so `check-config` shows them all at once.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use chrono_tz::Tz;

use super::document::{CalendarItem, CalendarRef};
use super::{ConfigDocument, TaskConfig};
use crate::TaskRegistry;
use crate::schedule::{
    Calendar, CalendarError, CalendarRules, ScheduleError, ScheduleSpec, SpecCache, TaskCalendar,
    parse_timezone,
};

/// A config document checked against the registry.
#[derive(Debug, Clone, Default)]
pub struct ValidatedConfig {
    /// Accepted entries, by task name.
    pub desired: BTreeMap<String, DesiredTask>,
    /// Refused entries, in document order (one per problem; a name may appear more than once).
    pub refused: Vec<Refusal>,
    /// Registered tasks the document does not mention at all, by name.
    pub absent: Vec<String>,
    /// The accepted limits shared by tasks, by name, with their sizes.
    pub limits: BTreeMap<String, u32>,
    /// The refused limits, each with why (`limit `x`: ...`); entries naming one are refused.
    pub limit_problems: Vec<String>,
}

impl ValidatedConfig {
    /// Whether every entry was accepted (absent tasks do not count as problems).
    pub fn is_clean(&self) -> bool {
        self.refused.is_empty() && self.limit_problems.is_empty()
    }

    /// Whether an entry named `name` was refused.
    pub fn is_refused(&self, name: &str) -> bool {
        self.refused.iter().any(|r| r.name == name)
    }

    /// The distinct names of refused entries.
    pub fn refused_names(&self) -> BTreeSet<&str> {
        self.refused.iter().map(|r| r.name.as_str()).collect()
    }
}

/// An accepted entry: a registered task with a valid schedule.
#[derive(Debug, Clone)]
pub struct DesiredTask {
    /// The registered task's name.
    pub name: String,
    /// Whether the task should be scheduled.
    pub enabled: bool,
    /// The cron expression compiled in the entry's zone (or the default zone), with the
    /// entry's calendar applied if it has one ([`ScheduleSpec::calendar`]).
    pub schedule: ScheduleSpec,
    /// The entry's service levels, checked (`None` without an `sla` block).
    pub sla: Option<super::Sla>,
    /// Who answers for the task, as written (empty: the node's default owners).
    pub owners: Vec<String>,
    /// The task's labels.
    pub labels: BTreeMap<String, String>,
    /// How many shards each tick has: the entry's `shards`, else the attribute's, else 1 (1
    /// for a broadcast: its task row is one, its node rows are its nodes').
    pub shards: u32,
    /// A broadcast (`shards: nodes`): one run on each node alive at the tick (see
    /// [`Shard`](crate::Shard)).
    pub broadcast: bool,
    /// The entry's accepted instances, by key (its refused ones are among the refusals, named
    /// `task/key`).
    pub instances: BTreeMap<String, super::DesiredInstance>,
    /// The window each tick starts within: the entry's `jitter`, else the attribute's, else
    /// none (zero).
    pub jitter: std::time::Duration,
    /// The limit shared with other tasks its runs hold: the entry's `limit`, else the task
    /// attribute's; declared by the document.
    pub limit: Option<String>,
}

/// A refused entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The entry's name, as written.
    pub name: String,
    /// Why it was refused.
    pub reason: RefusalReason,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "task `{}`: {}", self.name, self.reason)
    }
}

/// Why an entry was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RefusalReason {
    /// No task with this name is registered in the binary.
    #[error("no task with this name is registered; check the spelling or the deployed version")]
    UnknownTask,
    /// The name is unusable.
    #[error("invalid task name: {0}")]
    InvalidName(&'static str),
    /// The name is listed more than once.
    #[error("listed {count} times; keep exactly one entry (all are ignored until then)")]
    DuplicateEntry {
        /// How many entries use the name.
        count: usize,
    },
    /// The `timezone` is not an IANA zone. (The schedule module's message names the zone.)
    #[error("{0}")]
    InvalidTimezone(ScheduleError),
    /// The `shards` is neither a count from 1 to 1,000 nor
    /// `nodes`. (The shard module's message names the value.)
    #[error("{0}")]
    InvalidShards(super::InvalidShardCount),
    /// The `cron` expression was refused. (The schedule module's message names the expression
    /// and the field.)
    #[error("{0}")]
    InvalidSchedule(ScheduleError),
    /// A field of the `sla` block was refused (the message names the field).
    #[error("{0}")]
    InvalidSla(String),
    /// The `jitter` is not a duration in its range (the message says which).
    #[error("{0}")]
    InvalidJitter(String),
    /// The `calendar` names a calendar the document's `calendars` does not have.
    #[error(
        "calendar `{name}` is not in the document's `calendars`{}",
        known_names(known)
    )]
    UnknownCalendar {
        /// The name as written.
        name: String,
        /// The names the document has.
        known: Vec<String>,
    },
    /// A calendar's rules were refused.
    #[error("{}: {error}", calendar_label(name.as_deref()))]
    InvalidCalendar {
        /// The named calendar at fault (`None`: rules written on the task, or the calendars
        /// together).
        name: Option<String>,
        /// What is wrong.
        error: CalendarError,
    },
    /// `on_blocked` is set, but the entry has no `calendar` it could apply to.
    #[error("`on_blocked` is set but the task has no `calendar`; add one or remove `on_blocked`")]
    OnBlockedWithoutCalendar,
    /// An entry of `owners` is unusable.
    #[error("invalid owner {0}")]
    InvalidOwner(String),
    /// An entry of `labels` is unusable.
    #[error("invalid label {0}")]
    InvalidLabel(String),
    /// One of the entry's `instances` is unusable (the refusal is named `task/key`; the task
    /// and its other instances apply).
    #[error("instance refused: {0}")]
    InvalidInstance(String),
    /// The limit the task names (its entry's `limit`, or its attribute's) is not in the
    /// document's `limits`.
    #[error(
        "limit `{name}` is not declared in the document's `limits`{}; declare it with its size (`limits: {{{name}: 2}}`)",
        limits::known(known)
    )]
    UnknownLimit {
        /// The name as written.
        name: String,
        /// The limits the document declares.
        known: Vec<String>,
    },
    /// The limit the task names was refused (the message says why).
    #[error("{0}")]
    InvalidLimit(String),
}

/// A config entry's `jitter`, read and checked against its range.
pub(crate) fn jitter_window(text: &str) -> Result<std::time::Duration, String> {
    crate::bounds::JITTER
        .parse("jitter", text)
        .map_err(|e| e.to_string())
}

fn known_names(known: &[String]) -> String {
    if known.is_empty() {
        "; the document has no `calendars`".to_owned()
    } else {
        format!("; it has {}", known.join(", "))
    }
}

fn calendar_label(name: Option<&str>) -> String {
    match name {
        Some(name) => format!("calendar `{name}`"),
        None => "calendar".to_owned(),
    }
}

/// Checks `doc` against `registry`; entries without a `timezone` use `default_tz`.
///
/// ```
/// use scheduler::config::{ConfigDocument, RefusalReason, validate};
/// use scheduler::TaskRegistry;
///
/// let doc = ConfigDocument::from_json(
///     r#"{"tasks":[{"name":"notRegistered","enabled":true,"cron":"0 * * * * *"}]}"#,
/// )?;
/// let validated = validate(&doc, &TaskRegistry::default(), chrono_tz::UTC);
/// assert!(validated.desired.is_empty());
/// assert_eq!(validated.refused[0].reason, RefusalReason::UnknownTask);
/// # Ok::<(), scheduler::config::ConfigError>(())
/// ```
pub fn validate(doc: &ConfigDocument, registry: &TaskRegistry, default_tz: Tz) -> ValidatedConfig {
    validate_with(doc, registry, default_tz, &SpecCache::default())
}

/// [`validate`] with compiled schedules memoized in `specs` across calls (the reconciler keeps
/// one, so re-validating an unchanged config of thousands of tasks compiles nothing).
pub(crate) fn validate_with(
    doc: &ConfigDocument,
    registry: &TaskRegistry,
    default_tz: Tz,
    specs: &SpecCache,
) -> ValidatedConfig {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for entry in &doc.tasks {
        *counts.entry(entry.name.as_str()).or_default() += 1;
    }

    let mut validated = ValidatedConfig::default();
    limits::check(doc, &mut validated);
    let mut reported_duplicates = BTreeSet::new();
    for entry in &doc.tasks {
        let name = entry.name.as_str();
        let refuse = |reason| Refusal {
            name: name.to_owned(),
            reason,
        };
        if let Some(problem) = name_problem(name) {
            validated
                .refused
                .push(refuse(RefusalReason::InvalidName(problem)));
            continue;
        }
        let count = counts[name];
        if count > 1 {
            if reported_duplicates.insert(name) {
                validated
                    .refused
                    .push(refuse(RefusalReason::DuplicateEntry { count }));
            }
            continue;
        }

        let mut refusals = Vec::new();
        if !registry.contains(name) {
            refusals.push(RefusalReason::UnknownTask);
        }
        let shards = match entry.shards.as_ref().map(super::ShardsEntry::count) {
            Some(Ok(count)) => count,
            Some(Err(e)) => {
                refusals.push(RefusalReason::InvalidShards(e));
                crate::shard::ShardCount::Fixed(1)
            }
            None => registry
                .get(name)
                .and_then(|d| d.options.shards)
                .unwrap_or(crate::shard::ShardCount::Fixed(1)),
        };
        let (shards, broadcast) = match shards {
            crate::shard::ShardCount::Fixed(n) => (n, false),
            crate::shard::ShardCount::Nodes => (1, true),
        };
        let zone = match &entry.timezone {
            None => Some(default_tz),
            Some(zone) => match parse_timezone(zone) {
                Ok(zone) => Some(zone),
                Err(e) => {
                    refusals.push(RefusalReason::InvalidTimezone(e));
                    None
                }
            },
        };
        // With a bad zone, still compile the cron (in the default zone) so both problems show.
        let schedule = specs.get(&entry.cron, zone.unwrap_or(default_tz));
        let schedule = match schedule {
            Ok(schedule) => Some(schedule),
            Err(e) => {
                refusals.push(RefusalReason::InvalidSchedule(e));
                None
            }
        };
        let sla = match entry.sla.as_ref().map(super::TaskSla::check).transpose() {
            Ok(sla) => sla,
            Err(problems) => {
                refusals.extend(problems.into_iter().map(RefusalReason::InvalidSla));
                None
            }
        };
        let jitter = match entry.jitter.as_deref().map(jitter_window).transpose() {
            Ok(jitter) => jitter
                .or_else(|| registry.get(name).and_then(|d| d.options.jitter))
                .unwrap_or_default(),
            Err(e) => {
                refusals.push(RefusalReason::InvalidJitter(e));
                std::time::Duration::ZERO
            }
        };
        let calendar = match task_calendar(doc, entry, zone.unwrap_or(default_tz)) {
            Ok(calendar) => calendar,
            Err(problems) => {
                refusals.extend(problems);
                None
            }
        };
        let calendar_stored = calendar.as_ref().map(|c| c.stored().to_owned());
        let schedule = schedule.map(|s| match calendar {
            Some(calendar) => s.with_calendar(calendar),
            None => s,
        });
        if let Err(e) = crate::bounds::TAGS_PER_TASK.check("owners", entry.owners.len()) {
            refusals.push(RefusalReason::InvalidOwner(e.to_string()));
        }
        if let Err(e) = crate::bounds::TAGS_PER_TASK.check("labels", entry.labels.len()) {
            refusals.push(RefusalReason::InvalidLabel(e.to_string()));
        }
        let limit = entry.limit.clone().or_else(|| {
            registry
                .get(name)
                .and_then(|d| d.options.limit.map(str::to_owned))
        });
        if let Some(limit) = &limit
            && !validated.limits.contains_key(limit)
        {
            refusals.push(limits::refusal(doc, &validated, limit));
        }
        refusals
            .extend(super::tags::owner_problems(&entry.owners).map(RefusalReason::InvalidOwner));
        refusals
            .extend(super::tags::label_problems(&entry.labels).map(RefusalReason::InvalidLabel));
        let (instances, instance_refusals) = super::instances::check_instances(
            &entry.instances,
            zone.unwrap_or(default_tz),
            entry.enabled,
            specs,
            &super::instances::InstanceCalendars {
                named: Some(&doc.calendars),
                task: calendar_stored.as_deref(),
                on_blocked: entry.on_blocked.unwrap_or_default(),
            },
            &|limit: &str| {
                (!validated.limits.contains_key(limit))
                    .then(|| limits::refusal(doc, &validated, limit).to_string())
            },
        );
        validated
            .refused
            .extend(instance_refusals.into_iter().map(|(key, why)| Refusal {
                name: crate::instance::row_name(name, &key),
                reason: RefusalReason::InvalidInstance(why),
            }));
        match (refusals.is_empty(), zone, schedule) {
            (true, Some(_), Some(schedule)) => {
                validated.desired.insert(
                    name.to_owned(),
                    DesiredTask {
                        name: name.to_owned(),
                        enabled: entry.enabled,
                        schedule,
                        sla,
                        owners: entry.owners.clone(),
                        labels: entry.labels.clone(),
                        shards,
                        broadcast,
                        instances,
                        jitter,
                        limit,
                    },
                );
            }
            _ => validated.refused.extend(refusals.into_iter().map(refuse)),
        }
    }

    validated.absent = registry
        .names()
        .filter(|name| !counts.contains_key(name))
        .map(str::to_owned)
        .collect();
    validated
}

/// The calendar of `entry`: its named calendars and inline rules merged, checked in `zone`.
/// Every problem is reported, each naming its calendar.
fn task_calendar(
    doc: &ConfigDocument,
    entry: &TaskConfig,
    zone: Tz,
) -> Result<Option<Calendar>, Vec<RefusalReason>> {
    let Some(CalendarRef(items)) = &entry.calendar else {
        return match entry.on_blocked {
            Some(_) => Err(vec![RefusalReason::OnBlockedWithoutCalendar]),
            None => Ok(None),
        };
    };
    let on_blocked = entry.on_blocked.unwrap_or_default();
    let mut problems = Vec::new();
    let mut names = Vec::new();
    let mut rules = CalendarRules::default();
    for item in items {
        let (name, item_rules) = match item {
            CalendarItem::Named(name) => match doc.calendars.get(name) {
                Some(named) => (Some(name.clone()), named),
                None => {
                    problems.push(RefusalReason::UnknownCalendar {
                        name: name.clone(),
                        known: doc.calendars.keys().cloned().collect(),
                    });
                    continue;
                }
            },
            CalendarItem::Inline(inline) => (None, inline),
        };
        // Each calendar on its own first, so a mistake names the calendar it is in.
        if let Err(error) = Calendar::new(item_rules.clone(), on_blocked, zone) {
            problems.push(RefusalReason::InvalidCalendar {
                name: name.clone(),
                error,
            });
            continue;
        }
        if let Some(name) = name
            && !names.contains(&name)
        {
            names.push(name);
        }
        rules.extend(item_rules);
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    TaskCalendar::new(names, on_blocked, rules)
        .compile(zone)
        .map(Some)
        .map_err(|error| vec![RefusalReason::InvalidCalendar { name: None, error }])
}

fn name_problem(name: &str) -> Option<&'static str> {
    if name.trim().is_empty() {
        Some("the name is empty")
    } else if name.trim() != name {
        Some("the name has leading or trailing whitespace")
    } else if name.chars().any(char::is_control) {
        Some("the name contains control characters")
    } else {
        None
    }
}

mod limits;
#[cfg(test)]
mod tests;
