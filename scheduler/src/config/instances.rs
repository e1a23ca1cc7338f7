//! Instances declared in the config document: a task's entry may list instances of the task
//! (`crate::instance`), each a schedule of its own named by a key, with arguments. The task's
//! entry is its instance without a key, as always.
//!
//! ```json
//! {"name": "syncAdvertiserReport", "enabled": true, "cron": "0 0 3 * * *",
//!  "instances": [{"key": "tenant-42", "cron": "0 */5 * * * *", "timezone": "Asia/Shanghai",
//!                 "args": {"tenant": 42}}]}
//! ```
//!
//! Each one is checked on its own, and a bad one is refused alone (named `task/key` among the
//! refusals, `check-config` lists it) while the task and its other instances apply: a key that
//! is empty, too long or holds a character keys may not ([`MAX_KEY_LEN`], the characters of
//! `Schedule`'s keys), a key listed twice in the entry (every one of them refused), a bad cron
//! or zone, or arguments over [`MAX_ARGS_BYTES`] as JSON text. An instance of a task with
//! shards has a row per shard, one of a broadcast task a row per node, as one made at run time
//! (`crate::shard`). The instances of an entry refused as a whole (an unknown task,
//! a bad cron) are not applied either: the reconciler keeps what they were.
//!
//! What the reconciler does with them (creates, changes in place, disables when they leave the
//! document, never deletes, never touches an instance made at run time): `crate::reconciler`.

use std::collections::BTreeMap;

use chrono_tz::Tz;
use serde::Deserialize;

use crate::instance::{MAX_ARGS_BYTES, MAX_KEY_LEN, valid_key};
use crate::schedule::{
    CalendarRules, OnBlocked, ScheduleSpec, SpecCache, TaskCalendar, parse_timezone,
};

/// One instance of a task as its config entry declares it.
///
/// ```
/// use scheduler::config::ConfigDocument;
/// use serde_json::json;
///
/// let doc = ConfigDocument::from_json(
///     r#"{"tasks": [{"name": "syncTenantLedger", "enabled": true, "cron": "0 0 3 * * *",
///                   "instances": [{"key": "tenant-42", "cron": "0 */5 * * * *",
///                                  "timezone": "Asia/Shanghai", "args": {"tenant": 42}}]}]}"#,
/// )?;
/// let instance = &doc.tasks[0].instances[0];
/// assert_eq!(instance.key, "tenant-42");
/// assert_eq!(instance.args, Some(json!({"tenant": 42})));
/// assert_eq!(instance.enabled, None, "enabled unless it says otherwise");
/// # Ok::<(), scheduler::config::ConfigError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct InstanceConfig {
    /// Its key: 1 to 128 ASCII letters, digits, `_`, `.`, `:` and `-`.
    pub key: String,
    /// Its cron expression (the task's syntax).
    pub cron: String,
    /// IANA zone; the task entry's zone (else the scheduler's default zone) when absent.
    #[serde(default)]
    pub timezone: Option<String>,
    /// Its arguments, read by the handler with `ctx.args()` (none when absent).
    #[serde(default)]
    pub args: Option<serde_json::Value>,
    /// Whether it runs (default `true`); it runs only while its task is enabled too.
    #[serde(default)]
    pub enabled: Option<bool>,
    /// Its own owners, which its events carry and its alerts are routed by in place of its
    /// task's (checked as the entry's `owners`); none: its task's.
    #[serde(default)]
    pub owners: Vec<String>,
    /// Its own labels, over its task's in its events (checked as the entry's `labels`); none:
    /// none of its own.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// The limit shared by tasks its runs hold in place of its task's: one the document's
    /// `limits` declares. None: its task's.
    #[serde(default)]
    pub limit: Option<String>,
    /// Its own service levels in place of the entry's: the shape of the entry's `sla` block,
    /// checked as it is (its `succeed_by` read in the instance's zone). None: the entry's.
    #[serde(default)]
    pub sla: Option<super::TaskSla>,
    /// Its own calendar in place of the entry's: the name of one of the document's
    /// `calendars`, read in the instance's zone, its blocked ticks handled as the entry's
    /// `on_blocked` says. None: the entry's `calendar`, if any.
    #[serde(default)]
    pub calendar: Option<String>,
}

/// What the calendars of a task entry's instances are made of: the document's named calendars,
/// the entry's own calendar (stored form), and what its blocked ticks become.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct InstanceCalendars<'a> {
    /// The document's `calendars` (`None`: none).
    pub(crate) named: Option<&'a BTreeMap<String, CalendarRules>>,
    /// The entry's calendar as stored (`TaskCalendar`'s form), if it has one.
    pub(crate) task: Option<&'a str>,
    /// The entry's `on_blocked`.
    pub(crate) on_blocked: OnBlocked,
}

impl<'a> InstanceCalendars<'a> {
    /// What an instance made at run time may name: a document's calendars `named`, their
    /// blocked ticks handled as `on_blocked` says (its task's entry's). Its task's own calendar
    /// is not needed: an instance naming none keeps its task's, read by the claim from the
    /// task's row.
    pub(crate) fn of_named(
        named: &'a BTreeMap<String, CalendarRules>,
        on_blocked: OnBlocked,
    ) -> Self {
        Self {
            named: Some(named),
            task: None,
            on_blocked,
        }
    }

    /// The calendar named `name`, read in `zone`, as a config instance naming it has it; why
    /// not (the name unknown, listing those the document has), if it cannot be.
    pub(crate) fn named(&self, name: &str, zone: Tz) -> Result<crate::schedule::Calendar, String> {
        self.of(Some(name), zone)?
            .ok_or_else(|| format!("calendar `{}` is not known", crate::bounds::printable(name)))
    }

    /// The calendar of an instance naming `own` (`None`: its task's), read in `zone`; why not,
    /// if it cannot be.
    fn of(&self, own: Option<&str>, zone: Tz) -> Result<Option<crate::schedule::Calendar>, String> {
        let calendar = match own {
            Some(name) => {
                let Some(rules) = self.named.and_then(|named| named.get(name)) else {
                    let known: Vec<&str> = self
                        .named
                        .map(|named| named.keys().map(String::as_str).collect())
                        .unwrap_or_default();
                    return Err(format!(
                        "calendar `{}` is not in the document's `calendars`{}",
                        crate::bounds::printable(name),
                        if known.is_empty() {
                            "; the document has no `calendars`".to_owned()
                        } else {
                            format!(" (it has: {})", known.join(", "))
                        }
                    ));
                };
                TaskCalendar::new(vec![name.to_owned()], self.on_blocked, rules.clone())
            }
            None => match self.task {
                Some(stored) => TaskCalendar::from_stored(stored).map_err(|e| e.to_string())?,
                None => return Ok(None),
            },
        };
        calendar
            .compile(zone)
            .map(Some)
            .map_err(|e| format!("calendar: {e}"))
    }
}

/// An accepted instance of an accepted task.
#[derive(Debug, Clone)]
pub struct DesiredInstance {
    /// Its key.
    pub key: String,
    /// Whether it runs: its entry's `enabled` and its task's.
    pub enabled: bool,
    /// Its cron compiled in its zone.
    pub schedule: ScheduleSpec,
    /// Its arguments as compact JSON text, if any.
    pub args: Option<String>,
    /// Its own owners (empty: its task's).
    pub owners: Vec<String>,
    /// Its own labels (empty: none over its task's).
    pub labels: BTreeMap<String, String>,
    /// Its own limit shared by tasks (`None`: its task's).
    pub limit: Option<String>,
    /// Its own service levels, the `sla` block as JSON text (`None`: its task's).
    pub sla: Option<String>,
}

/// The instances of a task's entry checked: the accepted ones by key, and the refused ones as
/// `(key, why)`. `limit_problem` says what is wrong with a limit an instance names (one the
/// document does not declare), if anything.
pub(crate) fn check_instances(
    instances: &[InstanceConfig],
    task_zone: Tz,
    task_enabled: bool,
    specs: &SpecCache,
    calendars: &InstanceCalendars<'_>,
    limit_problem: &dyn Fn(&str) -> Option<String>,
) -> (BTreeMap<String, DesiredInstance>, Vec<(String, String)>) {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for i in instances {
        *counts.entry(i.key.as_str()).or_default() += 1;
    }
    let mut accepted = BTreeMap::new();
    let mut refused = Vec::new();
    for (n, i) in instances.iter().enumerate() {
        let key = i.key.clone();
        if !valid_key(&key) {
            refused.push((
                key,
                format!(
                    "invalid instance key: use 1 to {MAX_KEY_LEN} ASCII letters, digits, `_`, `.`, `:` and `-`"
                ),
            ));
            continue;
        }
        if counts[i.key.as_str()] > 1 {
            if !instances[..n].iter().any(|o| o.key == i.key) {
                let count = counts[i.key.as_str()];
                refused.push((
                    key,
                    format!("listed {count} times in the entry; keep exactly one (all are ignored until then)"),
                ));
            }
            continue;
        }
        let mut problems = Vec::new();
        let zone = match &i.timezone {
            None => task_zone,
            Some(zone) => parse_timezone(zone).unwrap_or_else(|e| {
                problems.push(e.to_string());
                task_zone
            }),
        };
        let calendar = calendars
            .of(i.calendar.as_deref(), zone)
            .map_err(|e| problems.push(e));
        let schedule = specs
            .get(&i.cron, zone)
            .map_err(|e| problems.push(e.to_string()))
            .map(|spec| match calendar {
                Ok(Some(calendar)) => spec.with_calendar(calendar),
                _ => spec,
            });
        let args = i.args.as_ref().map(serde_json::Value::to_string);
        if let Some(size) = args
            .as_ref()
            .map(String::len)
            .filter(|n| *n > MAX_ARGS_BYTES)
        {
            problems.push(format!(
                "the arguments take {size} bytes as JSON; the most is {MAX_ARGS_BYTES}"
            ));
        }
        problems.extend(super::tags::owners_problem(&i.owners));
        problems.extend(super::tags::labels_problem(&i.labels));
        problems.extend(i.limit.as_deref().and_then(limit_problem));
        if let Some(Err(sla)) = i.sla.as_ref().map(super::TaskSla::check) {
            problems.extend(sla);
        }
        match (problems.is_empty(), schedule) {
            (true, Ok(schedule)) => {
                accepted.insert(
                    key.clone(),
                    DesiredInstance {
                        key,
                        enabled: task_enabled && i.enabled.unwrap_or(true),
                        schedule,
                        args,
                        owners: i.owners.clone(),
                        labels: i.labels.clone(),
                        limit: i.limit.clone(),
                        sla: i.sla.as_ref().map(super::TaskSla::stored),
                    },
                );
            }
            _ => refused.extend(problems.into_iter().map(|p| (key.clone(), p))),
        }
    }
    (accepted, refused)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn instance(key: &str, cron: &str) -> InstanceConfig {
        InstanceConfig {
            key: key.into(),
            cron: cron.into(),
            ..Default::default()
        }
    }

    #[test]
    fn each_bad_instance_is_refused_alone_with_the_reason() {
        let big = "x".repeat(MAX_ARGS_BYTES);
        let instances = [
            instance("tenant-1", "0 */5 * * * *"),
            instance("bad/key", "* * * * * *"),
            instance("twice", "* * * * * *"),
            instance("twice", "* * * * * *"),
            instance("bad-cron", "61 * * * * *"),
            InstanceConfig {
                timezone: Some("Mars/Olympus".into()),
                ..instance("bad-zone", "* * * * * *")
            },
            InstanceConfig {
                args: Some(json!({ "blob": big })),
                ..instance("too-large", "* * * * * *")
            },
            InstanceConfig {
                enabled: Some(false),
                args: Some(json!({"tenant": 2})),
                timezone: Some("Asia/Shanghai".into()),
                ..instance("off", "0 0 * * * *")
            },
        ];
        let (accepted, refused) = check_instances(
            &instances,
            chrono_tz::UTC,
            true,
            &SpecCache::default(),
            &InstanceCalendars::default(),
            &|_| None,
        );
        assert_eq!(
            accepted.keys().collect::<Vec<_>>(),
            ["off", "tenant-1"],
            "{refused:?}"
        );
        let off = &accepted["off"];
        assert!(!off.enabled);
        assert_eq!(off.args.as_deref(), Some(r#"{"tenant":2}"#));
        assert_eq!(off.schedule.timezone(), chrono_tz::Asia::Shanghai);
        let keys: Vec<&str> = refused.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            keys,
            ["bad/key", "twice", "bad-cron", "bad-zone", "too-large"]
        );
        assert!(refused[0].1.contains("invalid instance key"), "{refused:?}");
        assert!(refused[1].1.contains("listed 2 times"), "{refused:?}");
        assert!(refused[4].1.contains("the most is 65536"), "{refused:?}");
    }

    #[test]
    fn a_disabled_task_has_no_instance_enabled() {
        let instances = [instance("a", "* * * * * *")];
        let (accepted, _) = check_instances(
            &instances,
            chrono_tz::UTC,
            false,
            &SpecCache::default(),
            &InstanceCalendars::default(),
            &|_| None,
        );
        assert!(!accepted["a"].enabled);
    }

    #[test]
    fn an_instance_s_own_owners_labels_and_limit_are_checked_as_an_entry_s() {
        let instances = [
            InstanceConfig {
                owners: vec!["alice@example.com".into()],
                labels: [("tier".to_owned(), "1".to_owned())].into(),
                limit: Some("declared".into()),
                ..instance("good", "* * * * * *")
            },
            InstanceConfig {
                owners: vec![String::new()],
                ..instance("blank-owner", "* * * * * *")
            },
            InstanceConfig {
                labels: [("bad key".to_owned(), "v".to_owned())].into(),
                ..instance("bad-label", "* * * * * *")
            },
            InstanceConfig {
                limit: Some("nope".into()),
                ..instance("undeclared", "* * * * * *")
            },
        ];
        let (accepted, refused) = check_instances(
            &instances,
            chrono_tz::UTC,
            true,
            &SpecCache::default(),
            &InstanceCalendars::default(),
            &|limit| (limit != "declared").then(|| format!("limit `{limit}` is not declared")),
        );
        let good = &accepted["good"];
        assert_eq!(good.owners, ["alice@example.com"]);
        assert_eq!(good.labels["tier"], "1");
        assert_eq!(good.limit.as_deref(), Some("declared"));
        assert_eq!(accepted.len(), 1, "{refused:?}");
        let why = |key: &str| -> String {
            refused
                .iter()
                .filter(|(k, _)| k == key)
                .map(|(_, why)| why.clone())
                .collect()
        };
        assert!(
            why("blank-owner").contains("invalid owner ``: is blank"),
            "{refused:?}"
        );
        assert!(
            why("bad-label").contains("invalid label `bad key`"),
            "{refused:?}"
        );
        assert!(
            why("undeclared").contains("limit `nope` is not declared"),
            "{refused:?}"
        );
    }

    #[test]
    fn an_instance_s_calendar_is_its_own_named_one_else_its_task_s_and_an_unknown_name_is_refused()
    {
        let named: BTreeMap<String, CalendarRules> = [(
            "holidays".to_owned(),
            CalendarRules {
                dates: vec!["2026-10-01".into()],
                ..Default::default()
            },
        )]
        .into();
        let task = TaskCalendar::new(
            vec!["weekends".into()],
            OnBlocked::Skip,
            CalendarRules {
                dates: vec!["2026-12-25".into()],
                ..Default::default()
            },
        );
        let stored = task.to_stored();
        let calendars = InstanceCalendars {
            named: Some(&named),
            task: Some(&stored),
            on_blocked: OnBlocked::Skip,
        };
        let instances = vec![
            InstanceConfig {
                calendar: Some("holidays".into()),
                timezone: Some("Asia/Shanghai".into()),
                ..instance("own", "0 0 * * * *")
            },
            instance("plain", "0 0 * * * *"),
            InstanceConfig {
                calendar: Some("nope".into()),
                ..instance("lost", "0 0 * * * *")
            },
        ];
        let (accepted, refused) = check_instances(
            &instances,
            chrono_tz::UTC,
            true,
            &SpecCache::default(),
            &calendars,
            &|_| None,
        );
        let own = accepted["own"].schedule.calendar().expect("its own");
        assert_eq!(own.names(), ["holidays"]);
        assert_eq!(
            own.zone(),
            chrono_tz::Asia::Shanghai,
            "read in its own zone"
        );
        let plain = accepted["plain"].schedule.calendar().expect("its task's");
        assert_eq!(plain.names(), ["weekends"]);
        assert!(!accepted.contains_key("lost"));
        assert_eq!(refused.len(), 1, "{refused:?}");
        assert!(
            refused[0]
                .1
                .contains("calendar `nope` is not in the document's `calendars`")
                && refused[0].1.contains("holidays"),
            "{refused:?}"
        );
    }
}
