//! The handle that makes, changes, reads and removes a task's instances at run time
//! ([`Schedules`], from [`Scheduler::schedules`](crate::Scheduler::schedules)), the
//! [`Schedule`] it writes (`schedule.rs`), and what it reads back ([`Instance`]). The decision
//! an upsert makes on the rows it reads: `upsert.rs`. What an instance is, how its row is named
//! and the rules it follows: `instance.rs` and `docs/instances.md`.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::instance::InstanceRefusal;
use crate::store::{AuditEntry, InstanceRecord, InstanceWrite, Store};

mod calendar;
mod schedule;
mod upsert;

pub(crate) use calendar::Documents;
#[cfg(feature = "admin")]
pub(crate) use calendar::shown as shown_calendar;
pub use schedule::{JitterWindow, Schedule};
use upsert::Prepared;

/// The jitter window of a task (its config entry's, else its attribute's), as the process
/// making instances knows it.
pub(crate) type TaskWindow = Arc<dyn Fn(&str) -> Duration + Send + Sync>;

/// An instance as the store holds it, read with [`Schedules::get`] and [`Schedules::list`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Instance {
    /// Its task.
    pub task: String,
    /// Its key.
    pub key: String,
    /// Its cron expression.
    pub cron: String,
    /// The zone its cron is read in.
    pub timezone: String,
    /// Its arguments (JSON `null` when it has none).
    pub args: serde_json::Value,
    /// Whether it runs: its task is enabled in config.
    pub enabled: bool,
    /// When its next scheduled tick starts (the tick itself, or shifted by its jitter).
    pub next_run_at: Option<DateTime<Utc>>,
    /// Its next scheduled tick (what the run will serve as `ctx.scheduled_at()`).
    pub next_tick: Option<DateTime<Utc>>,
    /// Its own jitter window (`None`: its task's).
    pub jitter: Option<Duration>,
    /// Its own owners (empty: its task's), which its events carry and its alerts are routed
    /// by.
    pub owners: Vec<String>,
    /// Its own labels (empty: none), over its task's in its events.
    pub labels: std::collections::BTreeMap<String, String>,
    /// Its own limit shared by tasks (`None`: its task's).
    pub limit: Option<String>,
    /// Its own service levels (`None`: its task's).
    pub sla: Option<crate::config::TaskSla>,
    /// The calendar its row holds, by the names of the document's `calendars` it was made of
    /// (joined by `+`; `inline`: rules written on a task entry): its own, or for an instance the
    /// config declares its own else its task's as the document had it. `None`: its task's, if
    /// any, read at each claim from the task's row.
    pub calendar: Option<String>,
}

impl Instance {
    fn of(record: InstanceRecord) -> Self {
        let args = record
            .args
            .as_deref()
            .and_then(|text| serde_json::from_str(text).ok())
            .unwrap_or(serde_json::Value::Null);
        Self {
            task: record.task,
            key: record.key,
            cron: record.cron,
            timezone: record.timezone,
            args,
            enabled: record.enabled,
            next_tick: record.next_tick.or(record.next_run_at),
            next_run_at: record.next_run_at,
            jitter: record.jitter,
            sla: record
                .tags
                .sla
                .as_deref()
                .and_then(crate::config::TaskSla::from_stored),
            owners: record.tags.owners,
            labels: record.tags.labels,
            limit: record.limit,
            calendar: calendar::shown(record.calendar.as_deref()),
        }
    }
}

/// Makes, changes, reads and removes the instances of a node's tasks: copies of a task made at
/// run time, each named by the task and a key, with its own schedule and arguments, run by the
/// task's handler (see `docs/instances.md` for the rules). Cheap to clone; get one with
/// [`Scheduler::schedules`](crate::Scheduler::schedules) before the node runs.
///
/// ```no_run
/// # async fn demo(scheduler: &scheduler::Scheduler) -> scheduler::Result<()> {
/// use scheduler::Schedule;
/// use serde_json::json;
///
/// let schedules = scheduler.schedules();
/// schedules
///     .upsert(
///         Schedule::new("syncAdvertiserReport", "tenant-42")
///             .cron("0 */5 * * * *")
///             .timezone("Asia/Shanghai")
///             .args(json!({"tenant": 42})),
///     )
///     .await?;
/// assert_eq!(schedules.list("syncAdvertiserReport").await?.len(), 1);
/// schedules.remove("syncAdvertiserReport", "tenant-42").await?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Schedules {
    store: Arc<dyn Store>,
    /// The tasks it makes instances of (`None`: any task the store has, for an operator's
    /// command that registers none).
    tasks: Option<Arc<[String]>>,
    actor: Arc<str>,
    /// Where its audit entries say it acted from.
    source: Arc<str>,
    /// The jitter window of each task, for an instance without its own.
    windows: TaskWindow,
    /// The config document whose `calendars` an instance may name.
    documents: Documents,
}

impl std::fmt::Debug for Schedules {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Schedules")
            .field("store", &self.store.describe())
            .field("tasks", &self.tasks)
            .finish_non_exhaustive()
    }
}

impl Schedules {
    /// The instances of the tasks of `registry` in `store`, for a process that makes instances
    /// without running a node ([`Scheduler::schedules`](crate::Scheduler::schedules) is the
    /// node's). Written to the audit log as by `actor`.
    pub fn new(store: Arc<dyn Store>, registry: &crate::TaskRegistry, actor: &str) -> Self {
        let attributes: std::collections::BTreeMap<String, Duration> = registry
            .iter()
            .filter_map(|d| Some((d.name.to_owned(), d.options.jitter?)))
            .collect();
        let windows: TaskWindow =
            Arc::new(move |task: &str| attributes.get(task).copied().unwrap_or_default());
        Self::of(
            store,
            registry.names().map(str::to_owned).collect(),
            actor,
            windows,
        )
    }

    /// With the config document `doc`, whose `calendars` its schedules may name
    /// ([`Schedule::calendar`]), in place of the one it reads (a node's handle reads the
    /// document the node applied; one made with [`new`](Self::new) has none).
    pub fn with_config(mut self, doc: impl Into<Arc<crate::config::ConfigDocument>>) -> Self {
        self.documents = calendar::fixed(doc.into());
        self
    }

    /// Reading the config document from `documents` (a node's: the one it applied).
    pub(crate) fn with_documents(mut self, documents: Documents) -> Self {
        self.documents = documents;
        self
    }

    /// The instances of `tasks` (the names a node registers) in `store`, audited as by `actor`,
    /// each task's jitter window read from `windows`.
    pub(crate) fn of(
        store: Arc<dyn Store>,
        tasks: Arc<[String]>,
        actor: &str,
        windows: TaskWindow,
    ) -> Self {
        Self {
            store,
            tasks: Some(tasks),
            actor: Arc::from(actor),
            source: Arc::from("Schedules"),
            windows,
            documents: calendar::no_document(),
        }
    }

    /// For an operator surface (the admin API, the command line): the instances of `tasks`
    /// (`None`: of any task the store has a row of), audited as by `actor` from where it is.
    #[cfg(any(feature = "admin", feature = "cli"))]
    pub(crate) fn for_operator(
        store: Arc<dyn Store>,
        tasks: Option<Arc<[String]>>,
        actor: &crate::operate::Actor,
    ) -> Self {
        Self {
            store,
            tasks,
            actor: Arc::from(actor.name.as_str()),
            source: Arc::from(actor.source.as_str()),
            // No config nor attributes here: an instance without its own window takes its
            // task's as the reconcile stored it on the task's row (`plan_upsert`).
            windows: Arc::new(|_: &str| Duration::ZERO),
            documents: calendar::no_document(),
        }
    }

    /// Makes instance `schedule.key()` of `schedule.task()`, or changes it in place (its history
    /// stays; a changed cron or zone moves its next run to the new schedule's first tick after
    /// now). Returns the instance as written.
    ///
    /// Refused ([`Error::Instance`](crate::Error::Instance), an [`InstanceRefusal`]) for a task
    /// not registered here or not in the store yet, a key the config
    /// document declares ([`InstanceRefusal::ConfigOwned`]), a bad key, no cron, arguments
    /// that are not JSON or larger than [`Schedule::MAX_ARGS_BYTES`], or unusable owners,
    /// labels or limit name ([`InstanceRefusal::BadOwners`], [`InstanceRefusal::BadLabels`],
    /// [`InstanceRefusal::BadLimit`]); a bad cron or zone is
    /// [`Error::Schedule`](crate::Error::Schedule).
    pub async fn upsert(&self, schedule: Schedule) -> crate::Result<Instance> {
        let prepared = self.prepare(schedule, None)?;
        let planner =
            |facts: &crate::store::InstanceFacts, now: DateTime<Utc>| prepared.plan(facts, now);
        let done = self
            .store
            .upsert_instance(&prepared.write, &prepared.audit, &planner)
            .await?;
        prepared.outcome(done)
    }

    /// The most instances one [`upsert_many`](Self::upsert_many) takes (1,000).
    pub const MAX_BATCH: usize = crate::instance::MAX_BATCH;

    /// Makes or changes each instance of `schedules`, as [`upsert`](Self::upsert) does one, in
    /// one transaction: one round of the store for the batch instead of one per instance.
    /// Returns one answer per schedule, in the order given: the instance as written, or why it
    /// was refused (the error `upsert` would return for it alone). A refusal refuses that
    /// instance only; the others are written. A key given twice is written twice, in order
    /// (the second sees the first).
    ///
    /// Each written instance is audited on its own (`instance upsert`, as `upsert` audits it,
    /// its detail ending `in a batch of N`): the audit trail answers who changed an instance
    /// and to what, one entry per instance, however it was written.
    ///
    /// Refused as a whole, nothing written: more than [`MAX_BATCH`](Self::MAX_BATCH) schedules
    /// ([`InstanceRefusal::BatchTooLarge`]: split it), or a store that fails (its error; the
    /// transaction is rolled back, none of the batch is written).
    ///
    /// ```no_run
    /// # async fn demo(scheduler: &scheduler::Scheduler) -> scheduler::Result<()> {
    /// use scheduler::Schedule;
    /// use serde_json::json;
    ///
    /// let schedules = scheduler.schedules();
    /// let batch = (0..500).map(|tenant| {
    ///     Schedule::new("syncAdvertiserReport", format!("tenant-{tenant}"))
    ///         .cron("0 */5 * * * *")
    ///         .args(json!({"tenant": tenant}))
    /// });
    /// for (i, answer) in schedules.upsert_many(batch).await?.into_iter().enumerate() {
    ///     match answer {
    ///         Ok(instance) => assert_eq!(instance.key, format!("tenant-{i}")),
    ///         Err(refused) => eprintln!("tenant-{i}: {refused}"),
    ///     }
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn upsert_many(
        &self,
        schedules: impl IntoIterator<Item = Schedule>,
    ) -> crate::Result<Vec<crate::Result<Instance>>> {
        let schedules: Vec<Schedule> = schedules.into_iter().collect();
        let count = schedules.len();
        if count > Self::MAX_BATCH {
            return Err(InstanceRefusal::BatchTooLarge { count }.into());
        }
        // Each checked here; only the ones that pass go to the store, their places remembered.
        let mut answers: Vec<Option<crate::Result<Instance>>> = Vec::with_capacity(count);
        let mut prepared = Vec::new();
        let mut places = Vec::new();
        for (place, schedule) in schedules.into_iter().enumerate() {
            match self.prepare(schedule, Some(count)) {
                Ok(p) => {
                    prepared.push(p);
                    places.push(place);
                    answers.push(None);
                }
                Err(refused) => answers.push(Some(Err(refused))),
            }
        }
        let batch: Vec<(InstanceWrite, AuditEntry)> = prepared
            .iter()
            .map(|p| (p.write.clone(), p.audit.clone()))
            .collect();
        let planner = |index: usize, facts: &crate::store::InstanceFacts, now: DateTime<Utc>| {
            prepared[index].plan(facts, now)
        };
        let done = self.store.upsert_instances(&batch, &planner).await?;
        for ((p, place), upsert) in prepared.iter().zip(places).zip(done) {
            answers[place] = Some(p.outcome(upsert));
        }
        Ok(answers.into_iter().flatten().collect())
    }

    /// `schedule` checked, with its audit entry (naming its batch of `batch`, if any) and what
    /// its upsert decides on.
    fn prepare(&self, schedule: Schedule, batch: Option<usize>) -> crate::Result<Prepared> {
        let registered = self
            .tasks
            .as_ref()
            .is_none_or(|tasks| tasks.iter().any(|t| t == schedule.task()));
        let (mut write, mut spec) = schedule.check(registered)?;
        if let Some(name) = schedule.calendar_name() {
            spec = calendar::with_calendar(&self.documents, name, &mut write, spec)?;
        }
        let detail = upsert::audit_detail(&write, schedule.calendar_name(), batch);
        let audit = self.audit("instance upsert", &write.task, detail);
        let window = write.jitter.unwrap_or_else(|| (self.windows)(&write.task));
        Ok(Prepared {
            write,
            spec,
            window,
            audit,
        })
    }

    /// Instance `key` of `task`, if it exists (a removed one does not). Reads its row alone,
    /// whatever the number of the task's instances.
    pub async fn get(&self, task: &str, key: &str) -> crate::Result<Option<Instance>> {
        Ok(self.store.instance(task, key).await?.map(Instance::of))
    }

    /// Every instance of `task`, by key.
    pub async fn list(&self, task: &str) -> crate::Result<Vec<Instance>> {
        Ok(self
            .store
            .instances(task)
            .await?
            .into_iter()
            .map(Instance::of)
            .collect())
    }

    /// Removes instance `key` of `task`: none of its ticks runs after this returns; a run of it
    /// in flight finishes and is recorded. `false`: there was no such instance.
    ///
    /// Refused ([`InstanceRefusal::ConfigOwned`]) for an instance the config document declares:
    /// it leaves when the document stops declaring it (disabled, kept).
    pub async fn remove(&self, task: &str, key: &str) -> crate::Result<bool> {
        let owned = self
            .store
            .instance(task, key)
            .await?
            .is_some_and(|r| r.source == crate::store::InstanceSource::Config);
        if owned {
            let (task, key) = (task.to_owned(), key.to_owned());
            return Err(InstanceRefusal::ConfigOwned { task, key }.into());
        }
        let audit = self.audit("instance remove", task, key.to_owned());
        Ok(self.store.remove_instance(task, key, &audit).await?)
    }

    fn audit(&self, action: &str, task: &str, detail: String) -> AuditEntry {
        AuditEntry::new(&*self.actor, action, task, detail, &*self.source)
    }
}

#[cfg(test)]
mod tests;
