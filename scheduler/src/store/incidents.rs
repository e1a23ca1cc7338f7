//! Incidents, snoozes and alert marks: one record per problem of a task, the snooze that holds a
//! task's alerts back, and the marks that let one node raise a cluster-wide alert once.
//!
//! The store applies what the engine decides ([`IncidentRule`]) on the locked incident row; it
//! never decides itself whether an alert is sent.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;

/// One problem of one task: the alerts of one type about it, folded, from the first until the
/// task recovers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct IncidentRecord {
    /// Its id.
    pub id: i64,
    /// The task.
    pub task_name: String,
    /// The alert type it folds (`run.failed`, `task.late`, ...).
    pub kind: String,
    /// When its first alert was raised.
    pub opened_at: DateTime<Utc>,
    /// When its latest alert was raised.
    pub last_seen_at: DateTime<Utc>,
    /// How many alerts it folds.
    pub count: i64,
    /// What the latest alert was about (a tick, a run, a deadline), if it says.
    pub last_key: Option<String>,
    /// The latest alert's body (the webhook's JSON).
    pub summary: String,
    /// When its alert was first sent; `None` while held back (too few failures yet, or
    /// snoozed).
    pub notified_at: Option<DateTime<Utc>>,
    /// How often a reminder goes while it stays open, if at all.
    pub remind_every_ms: Option<i64>,
    /// When the latest reminder went.
    pub reminded_at: Option<DateTime<Utc>>,
    /// Reminders sent.
    pub reminders: i64,
    /// When it closed (`None`: open).
    pub closed_at: Option<DateTime<Utc>>,
    /// What closed it.
    pub closed_by: Option<String>,
}

/// An alert to fold into its task's open incident of its type (or to open one with).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AlertFold {
    /// The task.
    pub task: String,
    /// The alert type.
    pub kind: String,
    /// What it is about (the same key twice in a row counts once).
    pub key: Option<String>,
    /// Its body (the webhook's JSON).
    pub summary: String,
    /// Alerts in a row before it is sent (at least 1).
    pub threshold: u32,
    /// How often to remind while the incident stays open.
    pub remind_every: Option<Duration>,
}

impl AlertFold {
    /// An alert of `kind` about `task` with body `summary`, sent at once, no reminders.
    pub fn new(
        task: impl Into<String>,
        kind: impl Into<String>,
        summary: impl Into<String>,
    ) -> Self {
        Self {
            task: task.into(),
            kind: kind.into(),
            key: None,
            summary: summary.into(),
            threshold: 1,
            remind_every: None,
        }
    }

    /// Names what the alert is about.
    pub fn key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(key.into());
        self
    }

    /// Sent from the `threshold`th in a row on, reminding every `remind_every`.
    pub fn policy(mut self, threshold: u32, remind_every: Option<Duration>) -> Self {
        self.threshold = threshold.max(1);
        self.remind_every = remind_every;
        self
    }

    /// The reminder interval as stored: milliseconds, capped.
    #[cfg(any(feature = "postgres", feature = "sqlite"))]
    pub(crate) fn remind_every_ms(&self) -> Option<i64> {
        self.remind_every
            .map(|d| crate::bounds::SLA_REMIND_EVERY.capped_millis(d))
    }
}

/// What an [`IncidentRule`] is shown, inside the fold's transaction.
#[derive(Debug)]
#[non_exhaustive]
pub struct FoldInput<'a> {
    /// The alert.
    pub fold: &'a AlertFold,
    /// The task's open incident of this type, if any (locked).
    pub open: Option<&'a IncidentRecord>,
    /// The task's snooze, if one is in force.
    pub snoozed: Option<&'a Snooze>,
    /// The store's clock.
    pub now: DateTime<Utc>,
}

/// What to do with an alert.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FoldDecision {
    /// The same thing seen again: nothing is written.
    Duplicate,
    /// Counted into the incident (opened if none is); `notify`: its alert is sent now.
    Record {
        /// Send it now.
        notify: bool,
    },
}

/// The rule a fold applies (decided by the engine, applied by the store).
pub type IncidentRule = dyn Fn(&FoldInput<'_>) -> FoldDecision + Send + Sync;

/// What a fold did with one alert.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Folded {
    /// The incident as written (as found, for a duplicate).
    pub incident: Option<IncidentRecord>,
    /// The alert opened the incident.
    pub opened: bool,
    /// The alert is to be sent now.
    pub notify: bool,
}

#[cfg_attr(not(any(feature = "postgres", feature = "sqlite")), allow(dead_code))]
impl Folded {
    /// What `rule` decides for `fold`, given the task's `open` incident and the snooze in force
    /// at `now`: `Some(notify)` to record it (into `open`, or into an incident it opens), `None`
    /// to write nothing (the fold answers [`untouched`](Self::untouched)).
    pub(crate) fn decide(
        rule: &IncidentRule,
        fold: &AlertFold,
        open: Option<&IncidentRecord>,
        snoozed: Option<&Snooze>,
        now: DateTime<Utc>,
    ) -> Option<bool> {
        let input = FoldInput {
            fold,
            open,
            snoozed,
            now,
        };
        match rule(&input) {
            FoldDecision::Record { notify } => Some(notify),
            FoldDecision::Duplicate => None,
        }
    }

    /// A fold that wrote nothing: the incident as found.
    pub(crate) fn untouched(open: Option<IncidentRecord>) -> Self {
        Folded {
            incident: open,
            opened: false,
            notify: false,
        }
    }

    /// A fold recorded in `incident` (as written), which `opened` it or not.
    pub(crate) fn recorded(incident: IncidentRecord, opened: bool, notify: bool) -> Self {
        Folded {
            incident: Some(incident),
            opened,
            notify,
        }
    }
}

/// Closes a task's open incidents of some types.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct IncidentClose {
    /// The task.
    pub task: String,
    /// The alert types whose incidents close.
    pub kinds: Vec<String>,
    /// What closed them.
    pub reason: String,
}

impl IncidentClose {
    /// Closes `task`'s open incidents of `kinds` because of `reason`.
    pub fn new<I, S>(task: impl Into<String>, kinds: I, reason: impl Into<String>) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self {
            task: task.into(),
            kinds: kinds.into_iter().map(Into::into).collect(),
            reason: reason.into(),
        }
    }
}

/// A task's alerts held back until a time: still recorded in its incidents, not sent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Snooze {
    /// The task.
    pub task_name: String,
    /// Until when.
    pub until: DateTime<Utc>,
    /// Why.
    pub reason: String,
    /// Who.
    pub by: String,
    /// When it was set (the store's clock; ignored when setting one).
    pub at: DateTime<Utc>,
}

impl Snooze {
    /// A snooze of `task` until `until`, by `by`, because of `reason`.
    pub fn new(
        task: impl Into<String>,
        until: DateTime<Utc>,
        reason: impl Into<String>,
        by: impl Into<String>,
    ) -> Self {
        Self {
            task_name: task.into(),
            until,
            reason: reason.into(),
            by: by.into(),
            at: DateTime::UNIX_EPOCH,
        }
    }
}

/// Which incidents [`IncidentStore::incidents`](super::IncidentStore::incidents) reads.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct IncidentQuery {
    /// `Some(true)`: open only; `Some(false)`: closed only.
    pub open: Option<bool>,
    /// One task's only.
    pub task: Option<String>,
    /// At most this many, newest first.
    pub limit: u32,
}

impl IncidentQuery {
    /// The newest `limit` incidents, open or closed, of every task.
    pub fn new(limit: u32) -> Self {
        Self {
            open: None,
            task: None,
            limit,
        }
    }

    /// Open (`true`) or closed (`false`) ones only.
    pub fn open(mut self, open: bool) -> Self {
        self.open = Some(open);
        self
    }

    /// `task`'s only.
    pub fn task(mut self, task: impl Into<String>) -> Self {
        self.task = Some(task.into());
        self
    }
}

/// A cluster-wide alert raised once: `(task, kind, mark)` (a late tick, a missed deadline).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct AlertMark {
    /// The task.
    pub task: String,
    /// The alert type.
    pub kind: String,
    /// What it is about.
    pub mark: String,
}

impl AlertMark {
    /// The mark of alert `kind` about `task`'s `mark`.
    pub fn new(task: impl Into<String>, kind: impl Into<String>, mark: impl Into<String>) -> Self {
        Self {
            task: task.into(),
            kind: kind.into(),
            mark: mark.into(),
        }
    }
}
