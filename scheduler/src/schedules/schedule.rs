//! [`Schedule`]: an instance to make or change, as a caller builds it, and its check before
//! the store sees it.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::ScheduleSpec;
use crate::instance::{
    ArgsRefusal, InstanceRefusal, MAX_ARGS_BYTES, MAX_KEY_LEN, check_args, check_args_text,
    valid_key,
};
use crate::store::{InstanceTags, InstanceWrite};

/// An instance to make or change with [`Schedules::upsert`](crate::Schedules::upsert): a task,
/// a key, a cron (required), a zone (UTC unless set) and arguments (none unless set); its own
/// owners, labels, shared limit, service levels and calendar (its task's unless set).
///
/// ```
/// use scheduler::Schedule;
/// use serde_json::json;
///
/// let schedule = Schedule::new("syncAdvertiserReport", "tenant-42")
///     .cron("0 */5 * * * *")
///     .timezone("Asia/Shanghai")
///     .args(json!({"tenant": 42}))
///     .owners(["tenant-42-oncall@example.com"])
///     .label("tier", "gold")
///     .limit("warehouse-db");
/// assert_eq!(schedule.task(), "syncAdvertiserReport");
/// assert_eq!(schedule.key(), "tenant-42");
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    task: String,
    key: String,
    cron: Option<String>,
    timezone: String,
    args: Option<ArgsText>,
    jitter: Option<JitterText>,
    owners: Vec<String>,
    labels: BTreeMap<String, String>,
    limit: Option<String>,
    sla: Option<crate::config::TaskSla>,
    calendar: Option<String>,
}

/// A jitter window as given: a duration, or text still to be read as one.
#[derive(Debug, Clone, PartialEq)]
enum JitterText {
    Window(Duration),
    Text(String),
}

impl From<Duration> for JitterText {
    fn from(window: Duration) -> Self {
        JitterText::Window(window)
    }
}

impl From<&str> for JitterText {
    fn from(text: &str) -> Self {
        JitterText::Text(text.to_owned())
    }
}

impl From<String> for JitterText {
    fn from(text: String) -> Self {
        JitterText::Text(text)
    }
}

/// What [`Schedule::jitter`] takes: a [`Duration`], or text (`"30s"`) read as one.
#[derive(Debug, Clone, PartialEq)]
pub struct JitterWindow(JitterText);

impl From<Duration> for JitterWindow {
    fn from(window: Duration) -> Self {
        JitterWindow(window.into())
    }
}

impl From<&str> for JitterWindow {
    fn from(text: &str) -> Self {
        JitterWindow(text.into())
    }
}

impl From<String> for JitterWindow {
    fn from(text: String) -> Self {
        JitterWindow(text.into())
    }
}

/// Arguments as given: a JSON value, or text still to be read as JSON.
#[derive(Debug, Clone, PartialEq)]
enum ArgsText {
    Value(serde_json::Value),
    Text(String),
}

impl Schedule {
    /// The longest key accepted, in bytes (128).
    pub const MAX_KEY_LEN: usize = MAX_KEY_LEN;

    /// The most bytes the arguments may take as JSON text (64 KiB).
    pub const MAX_ARGS_BYTES: usize = MAX_ARGS_BYTES;

    /// Instance `key` of task `task`; set its cron with [`cron`](Self::cron).
    pub fn new(task: impl Into<String>, key: impl Into<String>) -> Self {
        Self {
            task: task.into(),
            key: key.into(),
            cron: None,
            timezone: "UTC".to_owned(),
            args: None,
            jitter: None,
            owners: Vec::new(),
            labels: BTreeMap::new(),
            limit: None,
            sla: None,
            calendar: None,
        }
    }

    /// Its own calendar, in place of its task's: the name of one of the `calendars` of the
    /// config document the node applied, read in the instance's zone, its blocked ticks handled
    /// as its task's entry's `on_blocked` says (skipped without one), as a config instance's
    /// `calendar` is. Its rules are written with the instance, under the calendar's name: a
    /// later change of the document's calendar reaches it at the reconcile applying that
    /// document (a calendar the document no longer has leaves it its last rules, with a
    /// warning). A name the document does not have is refused
    /// ([`InstanceRefusal::BadCalendar`](crate::InstanceRefusal::BadCalendar)), nothing written;
    /// a handle without a document ([`Schedules::new`](crate::Schedules::new) unless given one
    /// with [`Schedules::with_config`](crate::Schedules::with_config)) knows no calendar.
    /// Default: its task's (its config entry's `calendar`), if any.
    ///
    /// ```
    /// use scheduler::Schedule;
    ///
    /// let schedule = Schedule::new("syncAdvertiserReport", "tenant-42")
    ///     .cron("0 0 9 * * *")
    ///     .timezone("Asia/Shanghai")
    ///     .calendar("cn-holidays");
    /// assert_eq!(schedule.calendar_name(), Some("cn-holidays"));
    /// ```
    pub fn calendar(mut self, name: impl Into<String>) -> Self {
        self.calendar = Some(name.into());
        self
    }

    /// The name of its own calendar, if it names one ([`calendar`](Self::calendar)).
    pub fn calendar_name(&self) -> Option<&str> {
        self.calendar.as_deref()
    }

    /// Its own service levels, in place of its task's: the shape of a config entry's `sla`
    /// block (`start_within`, `warn_after`, `succeed_by` in its own zone,
    /// `alert_after_failures`, `remind_every`), checked as that block is. Its breaches
    /// (`task.late`, `task.slow`, `task.deadline_missed`) and the folding and reminders of its
    /// alerts are judged by these, on whichever node runs or watches it. Default: its task's
    /// (its config entry's `sla`), if any.
    ///
    /// ```
    /// use scheduler::Schedule;
    /// use scheduler::config::TaskSla;
    ///
    /// let mut sla = TaskSla::default();
    /// sla.start_within = Some("30s".into());
    /// sla.succeed_by = Some("08:00".into());
    /// let schedule = Schedule::new("syncAdvertiserReport", "tenant-42")
    ///     .cron("0 */5 * * * *")
    ///     .sla(sla);
    /// # let _ = schedule;
    /// ```
    pub fn sla(mut self, sla: crate::config::TaskSla) -> Self {
        self.sla = Some(sla);
        self
    }

    /// Who answers for it: its events (`run.failed`, `task.missed`, ... and their alerts)
    /// carry these owners in place of its task's, and the alert channels route them by these
    /// (`routes` naming `owners`). Checked as a config entry's `owners` are (at most 100, none
    /// blank, padded, longer than 256 characters or listed twice). Default: none of its own,
    /// its task's (its config entry's, else the node's default owners).
    ///
    /// ```
    /// use scheduler::Schedule;
    ///
    /// let schedule = Schedule::new("syncAdvertiserReport", "tenant-42")
    ///     .cron("0 */5 * * * *")
    ///     .owners(["alice@example.com", "13800138000"]);
    /// # let _ = schedule;
    /// ```
    pub fn owners<I, S>(mut self, owners: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.owners = owners.into_iter().map(Into::into).collect();
        self
    }

    /// One label of its own, `key` = `value`: its events carry its task's labels with its own
    /// over them (its own win on a key), and the alert channels route by them. Checked as a
    /// config entry's `labels` are (at most 100; a key of 1 to 63 of `A-Z a-z 0-9 _ . - /`, a
    /// value of at most 256 characters). Default: none of its own.
    ///
    /// ```
    /// use scheduler::Schedule;
    ///
    /// let schedule = Schedule::new("syncAdvertiserReport", "tenant-42")
    ///     .cron("0 */5 * * * *")
    ///     .label("tier", "gold")
    ///     .label("region", "cn-east");
    /// # let _ = schedule;
    /// ```
    pub fn label(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.labels.insert(key.into(), value.into());
        self
    }

    /// Its own labels, in place of any set before (see [`label`](Self::label)).
    pub fn labels<I, K, V>(mut self, labels: I) -> Self
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<String>,
        V: Into<String>,
    {
        self.labels = labels
            .into_iter()
            .map(|(k, v)| (k.into(), v.into()))
            .collect();
        self
    }

    /// The limit shared by tasks its runs hold, in place of its task's: at most the limit's
    /// size of the runs naming it run at once, across the nodes (`docs/shared-limits.md`). A
    /// name of 1 to 64 ASCII letters, digits, `_`, `.`, `:` and `-`; a limit no config
    /// document declares holds its ticks waiting (never unlimited) until one does. Default:
    /// its task's (its config entry's `limit`, else its attribute's), if any.
    ///
    /// ```
    /// use scheduler::Schedule;
    ///
    /// let schedule = Schedule::new("syncAdvertiserReport", "tenant-42")
    ///     .cron("0 */5 * * * *")
    ///     .limit("warehouse-db");
    /// # let _ = schedule;
    /// ```
    pub fn limit(mut self, name: impl Into<String>) -> Self {
        self.limit = Some(name.into());
        self
    }

    /// The window its ticks start within: each tick starts at a fixed offset after it, given by
    /// the task, the key and the tick (the same on every node), so that many instances on one
    /// schedule do not all start in the same second. A [`Duration`] or text (`"30s"`), from `0s`
    /// (none) to `1day`; a window longer than the gap between two ticks is cut to it. Default:
    /// its task's (the config entry's `jitter`, else the attribute's), else none.
    ///
    /// ```
    /// use scheduler::Schedule;
    ///
    /// let schedule = Schedule::new("jitteredTenantSync", "tenant-7")
    ///     .cron("0 0 * * * *")
    ///     .jitter("30s");
    /// # let _ = schedule;
    /// ```
    pub fn jitter(mut self, window: impl Into<JitterWindow>) -> Self {
        self.jitter = Some(window.into().0);
        self
    }

    /// Its cron expression, in the task attribute's syntax (5 or 6 fields). Required.
    pub fn cron(mut self, expression: impl Into<String>) -> Self {
        self.cron = Some(expression.into());
        self
    }

    /// The IANA zone its cron is read in. Default: `UTC`.
    pub fn timezone(mut self, zone: impl Into<String>) -> Self {
        self.timezone = zone.into();
        self
    }

    /// Its arguments, read by the handler with [`TaskContext::args`](crate::TaskContext::args).
    /// Default: none (`args` then decodes JSON `null`).
    pub fn args(mut self, args: serde_json::Value) -> Self {
        self.args = Some(ArgsText::Value(args));
        self
    }

    /// Its arguments as JSON text (checked by [`Schedules::upsert`](crate::Schedules::upsert)).
    pub fn args_json(mut self, text: impl Into<String>) -> Self {
        self.args = Some(ArgsText::Text(text.into()));
        self
    }

    /// The task.
    pub fn task(&self) -> &str {
        &self.task
    }

    /// The key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The checked write of this schedule for a task registered here (`registered`), or why it
    /// is refused.
    pub(super) fn check(&self, registered: bool) -> crate::Result<(InstanceWrite, ScheduleSpec)> {
        let (task, key) = (self.task.clone(), self.key.clone());
        if !registered {
            return Err(InstanceRefusal::UnknownTask { task }.into());
        }
        if !valid_key(&key) {
            return Err(InstanceRefusal::BadKey { key }.into());
        }
        let Some(cron) = self.cron.clone() else {
            return Err(InstanceRefusal::NoCron { task, key }.into());
        };
        let spec = ScheduleSpec::parse(&cron, &self.timezone)?;
        // Stored compact, as a value's is.
        let checked = match &self.args {
            None => Ok(None),
            Some(ArgsText::Value(value)) => check_args(value).map(Some),
            Some(ArgsText::Text(text)) => check_args_text(text).map(Some),
        };
        let args = match checked {
            Ok(args) => args,
            Err(ArgsRefusal::NotJson(reason)) => {
                return Err(InstanceRefusal::ArgsNotJson { task, key, reason }.into());
            }
            Err(ArgsRefusal::TooLarge(size)) => {
                return Err(InstanceRefusal::ArgsTooLarge { task, key, size }.into());
            }
        };
        let jitter = match &self.jitter {
            None => None,
            Some(JitterText::Window(window)) => Some(
                crate::bounds::JITTER
                    .check("jitter", *window)
                    .map_err(|e| InstanceRefusal::BadJitter {
                        task: task.clone(),
                        key: key.clone(),
                        reason: e.to_string(),
                    })?,
            ),
            Some(JitterText::Text(text)) => {
                Some(crate::config::jitter_window(text).map_err(|reason| {
                    InstanceRefusal::BadJitter {
                        task: task.clone(),
                        key: key.clone(),
                        reason,
                    }
                })?)
            }
        };
        if let Some(reason) = crate::config::owners_problem(&self.owners) {
            return Err(InstanceRefusal::BadOwners { task, key, reason }.into());
        }
        if let Some(reason) = crate::config::labels_problem(&self.labels) {
            return Err(InstanceRefusal::BadLabels { task, key, reason }.into());
        }
        if let Some(reason) = self.limit.as_deref().and_then(crate::limits::name_problem) {
            return Err(InstanceRefusal::BadLimit { task, key, reason }.into());
        }
        if let Some(reason) = self.sla.as_ref().and_then(crate::config::TaskSla::problem) {
            return Err(InstanceRefusal::BadSla { task, key, reason }.into());
        }
        let tags = InstanceTags::new(self.owners.clone(), self.labels.clone())
            .with_sla(self.sla.as_ref().map(crate::config::TaskSla::stored));
        let write = InstanceWrite::new(task, key, cron, spec.timezone().name(), args)
            .jitter(jitter)
            .tags(tags)
            .limit(self.limit.clone());
        Ok((write, spec))
    }
}
