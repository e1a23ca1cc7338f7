//! What crosses the store's boundary for the instances of a task (`crate::instance`): the
//! write of one, the rows an upsert decides on, its decision, and an instance as read.
//!
//! The operations are [`OperatorStore`](super::OperatorStore)'s `upsert_instance`,
//! `upsert_instances` (a batch in one transaction), `instance` (one, by key), `instances` and
//! `remove_instance`, written once for both backends (`writes.rs`, `reads.rs`); each backend
//! only opens their transaction.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

/// An instance's own owners, labels and service levels: who answers for it, how its alerts are
/// filed and by which levels its breaches are judged, over its task's (its own owners, when it
/// has some, in place of the task's; its labels merged over the task's, its own winning on a
/// key; its own levels, when it has them, in place of its task's). Stored on its row (`owners`,
/// `labels`, `sla`: JSON text, NULL when none), read with the row by the claim.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct InstanceTags {
    /// Its own owners (empty: its task's).
    pub owners: Vec<String>,
    /// Its own labels (empty: none over its task's).
    pub labels: BTreeMap<String, String>,
    /// Its own service levels: the `sla` block of a config entry as JSON text, checked by the
    /// caller (`None`: its task's).
    pub sla: Option<String>,
}

impl InstanceTags {
    /// `owners` and `labels` of an instance, as checked by the caller.
    pub fn new(owners: Vec<String>, labels: BTreeMap<String, String>) -> Self {
        Self {
            owners,
            labels,
            sla: None,
        }
    }

    /// With its own service levels `sla` (the `sla` block of a config entry as JSON text,
    /// checked by the caller; `None`: its task's).
    pub fn with_sla(mut self, sla: Option<String>) -> Self {
        self.sla = sla;
        self
    }

    /// Whether it names neither owners nor labels (the instance's are its task's; its own
    /// service levels are not tags).
    pub fn is_empty(&self) -> bool {
        self.owners.is_empty() && self.labels.is_empty()
    }

    /// Its columns as stored: `owners` and `labels` as JSON text, NULL when empty.
    #[cfg_attr(not(any(feature = "postgres", feature = "sqlite")), allow(dead_code))]
    pub(crate) fn columns(&self) -> (Option<String>, Option<String>) {
        let owners = (!self.owners.is_empty())
            .then(|| serde_json::to_string(&self.owners).unwrap_or_default());
        let labels = (!self.labels.is_empty())
            .then(|| serde_json::to_string(&self.labels).unwrap_or_default());
        (owners, labels)
    }

    /// The tags the columns `owners`, `labels` and `sla` hold (NULL: none).
    pub(crate) fn from_columns(
        owners: Option<&str>,
        labels: Option<&str>,
        sla: Option<String>,
    ) -> Result<Self, serde_json::Error> {
        Ok(Self {
            owners: owners
                .map(serde_json::from_str)
                .transpose()?
                .unwrap_or_default(),
            labels: labels
                .map(serde_json::from_str)
                .transpose()?
                .unwrap_or_default(),
            sla,
        })
    }
}

/// An instance to write: its task, key, schedule and arguments, checked by the caller.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct InstanceWrite {
    /// Its task.
    pub task: String,
    /// Its key.
    pub key: String,
    /// Its cron expression.
    pub cron: String,
    /// Its zone.
    pub timezone: String,
    /// Its arguments as JSON text, if any.
    pub args: Option<String>,
    /// Its own jitter window (`None`: its task's).
    pub jitter: Option<std::time::Duration>,
    /// Its own owners and labels (empty: its task's).
    pub tags: InstanceTags,
    /// The limit shared by tasks its runs hold (`None`: its task's).
    pub limit: Option<String>,
    /// Its own calendar, stored form (`TaskCalendar`'s; `None`: its task's, read by the claim
    /// from the task's row).
    pub calendar: Option<String>,
}

impl InstanceWrite {
    /// Instance `key` of `task` on `cron` in `timezone`, with `args` (JSON text), as checked by
    /// the caller.
    pub fn new(
        task: impl Into<String>,
        key: impl Into<String>,
        cron: impl Into<String>,
        timezone: impl Into<String>,
        args: Option<String>,
    ) -> Self {
        Self {
            task: task.into(),
            key: key.into(),
            cron: cron.into(),
            timezone: timezone.into(),
            args,
            jitter: None,
            tags: InstanceTags::default(),
            limit: None,
            calendar: None,
        }
    }

    /// With its own calendar `calendar` (stored form; `None`: its task's), as resolved by the
    /// caller.
    pub fn calendar(mut self, calendar: Option<String>) -> Self {
        self.calendar = calendar;
        self
    }

    /// With its own owners and labels `tags` (empty: its task's).
    pub fn tags(mut self, tags: InstanceTags) -> Self {
        self.tags = tags;
        self
    }

    /// With its own limit `limit` (`None`: its task's), as checked by the caller.
    pub fn limit(mut self, limit: Option<String>) -> Self {
        self.limit = limit;
        self
    }

    /// With its own jitter window `window` (`None`: its task's).
    pub fn jitter(mut self, window: Option<std::time::Duration>) -> Self {
        self.jitter = window;
        self
    }

    /// Its row's name (`task/key`).
    pub fn row(&self) -> String {
        crate::instance::row_name(&self.task, &self.key)
    }
}

/// An instance as the store holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct InstanceRecord {
    /// Its task.
    pub task: String,
    /// Its key.
    pub key: String,
    /// Its cron expression.
    pub cron: String,
    /// Its zone.
    pub timezone: String,
    /// Its arguments as JSON text, if any.
    pub args: Option<String>,
    /// Whether it runs (its task is enabled).
    pub enabled: bool,
    /// When its next scheduled tick starts (the tick shifted by its jitter, if any).
    pub next_run_at: Option<DateTime<Utc>>,
    /// Its next scheduled tick, when jitter shifted its start off it (`None`: `next_run_at`).
    pub next_tick: Option<DateTime<Utc>>,
    /// Its own jitter window (`None`: its task's).
    pub jitter: Option<std::time::Duration>,
    /// The tick most recently claimed.
    pub last_scheduled_at: Option<DateTime<Utc>>,
    /// Removed, its row kept until the run in flight releases its lock.
    pub removed: bool,
    /// Who owns it: the config document, or the run time.
    pub source: super::InstanceSource,
    /// Its own owners and labels (empty: its task's).
    pub tags: InstanceTags,
    /// Its own limit shared by tasks (`None`: its task's).
    pub limit: Option<String>,
    /// The calendar its row holds, stored form: its own (a config instance's: its own, else its
    /// task's as the document had it); `None`: its task's, read by the claim.
    pub calendar: Option<String>,
}

/// The task's own row, as an upsert of one of its instances reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct InstanceTask {
    /// Whether the task is enabled.
    pub enabled: bool,
    /// Its shard count.
    pub shards: u32,
    /// Its node pin (a broadcast task's row has one).
    pub node_pin: Option<String>,
    /// The task's jitter window as last reconciled (its config entry's, else its attribute's;
    /// `None`: none stored), for an instance without a window of its own.
    pub jitter: Option<std::time::Duration>,
    /// The task's calendar as stored (`TaskCalendar`'s form), which its instances keep (the
    /// claim reads it with an instance's row); `None`: none.
    pub calendar: Option<String>,
    /// The task's pause, if it is paused: an instance not paused takes it when written.
    pub pause: Option<super::Pause>,
}

/// What an upsert decides on, read in its transaction: the task's row and the instance's, if
/// they exist.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct InstanceFacts {
    /// The task's own row.
    pub task: Option<InstanceTask>,
    /// The instance's row (a removed one too).
    pub existing: Option<InstanceRecord>,
}

/// An upsert's decision.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum InstancePlan {
    /// Write the instance: enabled or not, with this next run.
    Write {
        /// Whether it runs.
        enabled: bool,
        /// When its next scheduled tick starts.
        next_run_at: Option<DateTime<Utc>>,
        /// That tick, when jitter shifted its start off it.
        next_tick: Option<DateTime<Utc>>,
        /// The task's pause in force, which the instance takes unless it is paused already
        /// (its own pause, or the task's, kept): as pausing the task gives it to its
        /// instances, and as its resume ends it.
        pause: Option<super::Pause>,
    },
    /// Refused: the task has no row.
    NoTask,
    /// Refused: not decided any more (tasks with shards and broadcast tasks have instances).
    Sharded,
    /// Refused: the config document owns the instance.
    ConfigOwned,
}

/// What [`OperatorStore::upsert_instance`](super::OperatorStore::upsert_instance) did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
// One per instance written, moved once to its answer: boxing the record would cost an
// allocation each, for nothing.
#[allow(clippy::large_enum_variant)]
pub enum InstanceUpsert {
    /// Written, as it now is.
    Written(InstanceRecord),
    /// Refused: the task has no row.
    NoTask,
    /// Refused: not decided any more (tasks with shards and broadcast tasks have instances).
    Sharded,
    /// Refused: the config document owns the instance.
    ConfigOwned,
}

/// Decides an upsert inside
/// [`OperatorStore::upsert_instance`](super::OperatorStore::upsert_instance), from the rows it
/// read and the store's clock.
pub type InstancePlanner<'a> =
    dyn Fn(&InstanceFacts, DateTime<Utc>) -> InstancePlan + Send + Sync + 'a;

/// Decides each upsert of a batch inside
/// [`OperatorStore::upsert_instances`](super::OperatorStore::upsert_instances): the index of the
/// instance in the batch, the rows it read for it (the batch's earlier writes of its key seen)
/// and the store's clock (one instant for the whole batch). Called in the order of the rows'
/// names, not the batch's (a key given twice: in the batch's order).
pub type InstanceBatchPlanner<'a> =
    dyn Fn(usize, &InstanceFacts, DateTime<Utc>) -> InstancePlan + Send + Sync + 'a;
