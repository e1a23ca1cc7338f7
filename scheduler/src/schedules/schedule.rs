//! [`Schedule`]: an instance to make or change, as a caller builds it, and its check before
//! the store sees it.

use std::time::Duration;

use crate::ScheduleSpec;
use crate::instance::{
    ArgsRefusal, InstanceRefusal, MAX_ARGS_BYTES, MAX_KEY_LEN, check_args, check_args_text,
    valid_key,
};
use crate::store::InstanceWrite;

/// An instance to make or change with [`Schedules::upsert`](crate::Schedules::upsert): a task,
/// a key, a cron (required), a zone (UTC unless set) and arguments (none unless set).
///
/// ```
/// use scheduler::Schedule;
/// use serde_json::json;
///
/// let schedule = Schedule::new("syncAdvertiserReport", "tenant-42")
///     .cron("0 */5 * * * *")
///     .timezone("Asia/Shanghai")
///     .args(json!({"tenant": 42}));
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
        }
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
        let write =
            InstanceWrite::new(task, key, cron, spec.timezone().name(), args).jitter(jitter);
        Ok((write, spec))
    }
}
