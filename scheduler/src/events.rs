//! What happened, as one typed stream: every run's start and end, retries, skipped ticks, missed
//! and recovered tasks, refused config entries, orphaned tasks and the scheduler's own errors.
//!
//! Subscribe before running the node; events arrive in the order the node saw them:
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> scheduler::Result<()> {
//! use scheduler::events::SchedulerEvent;
//!
//! let scheduler = scheduler::Scheduler::builder()
//!     .database_url("postgres://app@127.0.0.1/app")
//! #   .registry(scheduler::TaskRegistry::default())
//!     .build()?;
//! let mut events = scheduler.subscribe();
//! tokio::spawn(async move {
//!     while let Some(event) = events.recv().await {
//!         if let SchedulerEvent::RunFailed { run, error, .. } = &event.event {
//!             eprintln!("{} failed: {error}", run.task);
//!         }
//!     }
//! });
//! // scheduler.run_until(scheduler::shutdown_signal()).await?;
//! # Ok(()) }
//! ```
//!
//! **Every event names who answers for it.** An [`Event`] is the [`SchedulerEvent`] (it derefs to
//! it) plus its task's [`TaskTags`]: the `owners` and `labels` of the task's config entry (the
//! node's default owners when the entry names none, or for an event about no task) and its
//! zone, the same values the alert channels and the webhook's `data` carry. They are shared,
//! not copied, per event:
//!
//! ```
//! # async fn watch(mut events: scheduler::events::EventStream) {
//! while let Some(event) = events.recv().await {
//!     if event.kind() == "run.failed" {
//!         eprintln!("page {:?} (team {:?})", event.owners(), event.labels().get("team"));
//!     }
//! }
//! # }
//! ```
//!
//! **A slow subscriber never stalls the engine.** Each subscriber has a buffer of
//! [`EVENT_BUFFER`] events; one that falls further behind loses the oldest it has not read, is
//! told how many when it reads again (see [`EventStream::lost`]), and every loss is counted
//! (`scheduler_events_dropped_total` once metrics are on). Alerts that must not be lost go
//! through the durable outbox and the webhook as well (see [`crate::webhook`]).
//!
//! Events of one node's runs come from that node (`task.slow` too); cluster-wide alerts
//! (`missed`, `recovered`, `lost`, `task.orphaned`, `task.late`, `task.deadline_missed`) come from
//! the one node that detected them. Subscribers see every event; the alert channels see what
//! the incidents let through (one alert per problem, reminders, one `incident.resolved`).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use chrono::{DateTime, Utc};
use serde::Serialize;
use tokio::sync::broadcast;

use crate::store::SkipReason;

/// How many events a subscriber may fall behind before it loses the oldest.
pub const EVENT_BUFFER: usize = 4096;

/// Who answers for the task an event is about, how it is filed, and its zone, as the config
/// document last read says (shared by every event about the task until the next document).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct TaskTags {
    /// The task's config entry's `owners`, or the node's default owners (see
    /// [`SchedulerBuilder::default_owners`](crate::SchedulerBuilder::default_owners)) when it
    /// names none, has no entry, or the event is about no task.
    pub owners: Vec<String>,
    /// Whether [`owners`](Self::owners) are the node's default owners.
    pub default_owners: bool,
    /// The task's config entry's `labels` (empty without an entry).
    pub labels: BTreeMap<String, String>,
    /// The task's zone: its entry's `timezone`, or the node's default zone.
    pub timezone: String,
}

impl TaskTags {
    /// The tags of an event whose task has no entry of its own: the node's defaults.
    fn defaults(owners: &[String], zone: &str) -> Self {
        Self {
            owners: owners.to_vec(),
            default_owners: true,
            labels: BTreeMap::new(),
            timezone: zone.to_owned(),
        }
    }
}

/// One event as subscribers and the alert channels receive it: what happened
/// ([`SchedulerEvent`], which it derefs to) and its task's [`TaskTags`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Event {
    /// What happened.
    pub event: SchedulerEvent,
    /// Who answers for it (shared by the task's events, not copied).
    pub tags: Arc<TaskTags>,
}

impl Event {
    /// Who answers for the event's task (see [`TaskTags::owners`]).
    pub fn owners(&self) -> &[String] {
        &self.tags.owners
    }

    /// The labels of the event's task (see [`TaskTags::labels`]).
    pub fn labels(&self) -> &BTreeMap<String, String> {
        &self.tags.labels
    }

    /// What happened, taken out of the envelope.
    pub fn into_inner(self) -> SchedulerEvent {
        self.event
    }
}

impl std::ops::Deref for Event {
    type Target = SchedulerEvent;

    fn deref(&self) -> &SchedulerEvent {
        &self.event
    }
}

/// The run an event is about.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct RunRef {
    /// Task name.
    pub task: String,
    /// Run id.
    pub run_id: i64,
    /// The tick the run serves.
    pub scheduled_at: DateTime<Utc>,
    /// 1 for the first attempt at a tick, 2 for its first retry, ...
    pub attempt: i32,
    /// `schedule`, `retry`, `manual` or `backfill`.
    pub trigger: String,
    /// The node running it.
    pub node: String,
}

/// The incident an `incident.*` event is about: one problem of one task (see
/// [`crate::store::IncidentRecord`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct IncidentRef {
    /// The incident's id.
    pub id: i64,
    /// Task name.
    pub task: String,
    /// The alert type it folds (`run.failed`, `task.late`, ...).
    pub kind: String,
    /// When its first alert was raised.
    pub opened_at: DateTime<Utc>,
    /// When its latest alert was raised.
    pub last_seen_at: DateTime<Utc>,
    /// How many alerts it folds.
    pub count: i64,
}

/// Something that happened. The JSON form (`type` plus the fields) is what the webhook sends as
/// `data`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "type")]
#[non_exhaustive]
pub enum SchedulerEvent {
    /// A handler started.
    #[serde(rename = "run.started")]
    RunStarted {
        /// The run.
        run: RunRef,
    },
    /// A handler returned `Ok`.
    #[serde(rename = "run.succeeded")]
    RunSucceeded {
        /// The run.
        run: RunRef,
        /// How long it took.
        duration_ms: u64,
    },
    /// A handler returned an error or panicked.
    #[serde(rename = "run.failed")]
    RunFailed {
        /// The run.
        run: RunRef,
        /// The error (cleaned, bounded, secrets redacted).
        error: String,
        /// How long it took.
        duration_ms: u64,
    },
    /// A handler ran past its timeout and was stopped.
    #[serde(rename = "run.timed_out")]
    RunTimedOut {
        /// The run.
        run: RunRef,
        /// What happened (names the timeout).
        error: String,
        /// How long it ran.
        duration_ms: u64,
    },
    /// A handler was asked to stop (shutdown, lost lock) and did not finish; its tick was
    /// handed over.
    #[serde(rename = "run.interrupted")]
    RunInterrupted {
        /// The run.
        run: RunRef,
        /// Why.
        reason: String,
    },
    /// An at-most-once run (`recovery = "never"`) was asked to stop or stopped by force before
    /// it finished (shutdown, lost lock): what it did is unknown, and its tick is not run again.
    #[serde(rename = "run.abandoned")]
    RunAbandoned {
        /// The run.
        run: RunRef,
        /// Why it stopped.
        reason: String,
    },
    /// An operator cancelled a run and it did not finish (it returned an error after the
    /// request, was stopped by force after the grace, or never started); its tick is not run
    /// again.
    #[serde(rename = "run.cancelled")]
    RunCancelled {
        /// The run.
        run: RunRef,
        /// Who cancelled it and how it ended.
        reason: String,
    },
    /// A run whose node stopped renewing its lock was released by this node.
    #[serde(rename = "run.lost")]
    RunLost {
        /// Task name.
        task: String,
        /// The run.
        run_id: i64,
        /// Its tick.
        scheduled_at: DateTime<Utc>,
        /// The node that held it.
        previous_owner: String,
        /// Whether the tick runs again (`recovery = "rerun"`).
        rerun: bool,
    },
    /// A failed or timed-out run will be tried again.
    #[serde(rename = "run.retry_scheduled")]
    RetryScheduled {
        /// The run that failed.
        run: RunRef,
        /// The attempt that will run.
        next_attempt: i32,
        /// When.
        retry_at: DateTime<Utc>,
    },
    /// Due ticks that did not get a run of their own.
    #[serde(rename = "tick.skipped")]
    TickSkipped {
        /// Task name.
        task: String,
        /// Why.
        reason: SkipReason,
        /// The first skipped tick.
        first_tick: DateTime<Utc>,
        /// The last skipped tick.
        last_tick: DateTime<Utc>,
        /// How many.
        ticks: i64,
    },
    /// A task has not started since a tick it should have run (all nodes down, its node gone, a
    /// handler hung): raised once per incident.
    #[serde(rename = "task.missed")]
    Missed {
        /// Task name.
        task: String,
        /// The tick that did not run.
        expected_at: DateTime<Utc>,
        /// How late it was allowed to be.
        grace_ms: u64,
    },
    /// A task that was missed runs again.
    #[serde(rename = "task.recovered")]
    Recovered {
        /// Task name.
        task: String,
        /// Since when it was missed.
        missed_since: DateTime<Utc>,
        /// The run that ended the incident.
        run_id: i64,
    },
    /// A tick has not started within its task's `sla.start_within` (raised once per tick, by
    /// the one node that saw it first, while the tick still waits, not when it starts).
    #[serde(rename = "task.late")]
    Late {
        /// Task name.
        task: String,
        /// The tick that has not started.
        scheduled_at: DateTime<Utc>,
        /// How late it was allowed to start.
        start_within_ms: u64,
    },
    /// A run goes on past its task's `sla.warn_after` (once per run; the run is not stopped).
    #[serde(rename = "task.slow")]
    Slow {
        /// The run.
        run: RunRef,
        /// How long it was expected to take at most.
        warn_after_ms: u64,
    },
    /// No run of the task succeeded by its `sla.succeed_by` time (once per deadline, by one
    /// node).
    #[serde(rename = "task.deadline_missed")]
    DeadlineMissed {
        /// Task name.
        task: String,
        /// The deadline that passed.
        deadline: DateTime<Utc>,
        /// The deadline as configured (`08:00`), in `timezone`.
        succeed_by: String,
        /// The task's zone.
        timezone: String,
        /// Since when a success would have counted (the previous deadline).
        since: DateTime<Utc>,
    },
    /// An incident is still open after the task's `sla.remind_every`: its alert again.
    #[serde(rename = "incident.reminder")]
    IncidentReminder {
        /// The incident.
        incident: IncidentRef,
    },
    /// An incident whose alert was sent is over: the task succeeded (or, for `task.late`,
    /// started on time; for `task.slow`, finished within its warning).
    #[serde(rename = "incident.resolved")]
    IncidentResolved {
        /// The incident.
        incident: IncidentRef,
        /// What ended it.
        reason: String,
    },
    /// A config entry was refused; the task keeps its last valid state.
    #[serde(rename = "config.refused")]
    ConfigRefused {
        /// The entry's task name.
        task: String,
        /// Why.
        reason: String,
    },
    /// A task row is known to neither the config nor any node's code.
    #[serde(rename = "task.orphaned")]
    TaskOrphaned {
        /// Task name.
        task: String,
    },
    /// A task's entry left the config while its code is still deployed: its row is disabled
    /// (never deleted) until an entry names it again. Raised once per removal, by the node that
    /// applied the document.
    #[serde(rename = "task.removed")]
    TaskRemoved {
        /// Task name.
        task: String,
    },
    /// The node's database connections moved to another server after it had chosen one: a
    /// failover or a switchover that a connection string listing several hosts let it follow
    /// (raised by each node that moved, once per move).
    #[serde(rename = "database.failed_over")]
    DatabaseFailedOver {
        /// `host:port` of the server the node uses now.
        server: String,
        /// `host:port` of the server it used before (`None` if it moved before its first
        /// look).
        previous: Option<String>,
        /// The new server's WAL timeline, if the node's database role may read it.
        timeline: Option<u32>,
    },
    /// The scheduler itself failed at something (the store unreachable, a write refused).
    #[serde(rename = "scheduler.error")]
    InternalError {
        /// What it was doing.
        what: String,
        /// The error.
        error: String,
    },
}

impl SchedulerEvent {
    /// The event's type as sent to webhooks (`run.failed`, `task.missed`, ...).
    pub fn kind(&self) -> &'static str {
        match self {
            Self::RunStarted { .. } => "run.started",
            Self::RunSucceeded { .. } => "run.succeeded",
            Self::RunFailed { .. } => "run.failed",
            Self::RunTimedOut { .. } => "run.timed_out",
            Self::RunInterrupted { .. } => "run.interrupted",
            Self::RunAbandoned { .. } => "run.abandoned",
            Self::RunCancelled { .. } => "run.cancelled",
            Self::RunLost { .. } => "run.lost",
            Self::RetryScheduled { .. } => "run.retry_scheduled",
            Self::TickSkipped { .. } => "tick.skipped",
            Self::Missed { .. } => "task.missed",
            Self::Recovered { .. } => "task.recovered",
            Self::Late { .. } => "task.late",
            Self::Slow { .. } => "task.slow",
            Self::DeadlineMissed { .. } => "task.deadline_missed",
            Self::IncidentReminder { .. } => "incident.reminder",
            Self::IncidentResolved { .. } => "incident.resolved",
            Self::ConfigRefused { .. } => "config.refused",
            Self::TaskOrphaned { .. } => "task.orphaned",
            Self::TaskRemoved { .. } => "task.removed",
            Self::DatabaseFailedOver { .. } => "database.failed_over",
            Self::InternalError { .. } => "scheduler.error",
        }
    }

    /// Every event type, for configuration checks.
    pub const KINDS: &'static [&'static str] = &[
        "run.started",
        "run.succeeded",
        "run.failed",
        "run.timed_out",
        "run.interrupted",
        "run.abandoned",
        "run.cancelled",
        "run.lost",
        "run.retry_scheduled",
        "tick.skipped",
        "task.missed",
        "task.recovered",
        "task.late",
        "task.slow",
        "task.deadline_missed",
        "incident.reminder",
        "incident.resolved",
        "config.refused",
        "task.orphaned",
        "task.removed",
        "database.failed_over",
        "scheduler.error",
    ];

    /// The types that are alerts by default: the five things the original batch design alerts
    /// on (a timeout, a failure, a run that did not happen, a task that disappeared, the
    /// scheduler's own errors), plus `lost`, `abandoned` and `recovered`, the service levels
    /// (`late`, `slow`, `deadline_missed`), the incidents' reminders and resolutions, and a
    /// database failover.
    ///
    /// Alerts about a task fold into one incident per (task, type) (see
    /// [`crate::store::IncidentRecord`]): only the first is sent (or the Nth with
    /// `sla.alert_after_failures`), repeats are counted, and `incident.resolved` closes it.
    pub const ALERTS: &'static [&'static str] = &[
        "run.failed",
        "run.timed_out",
        "run.abandoned",
        "run.lost",
        "task.missed",
        "task.recovered",
        "task.late",
        "task.slow",
        "task.deadline_missed",
        "incident.reminder",
        "incident.resolved",
        "task.orphaned",
        "task.removed",
        "config.refused",
        "database.failed_over",
        "scheduler.error",
    ];

    /// The task the event is about, if any.
    pub fn task(&self) -> Option<&str> {
        match self {
            Self::RunStarted { run }
            | Self::RunSucceeded { run, .. }
            | Self::RunFailed { run, .. }
            | Self::RunTimedOut { run, .. }
            | Self::RunInterrupted { run, .. }
            | Self::RunAbandoned { run, .. }
            | Self::RunCancelled { run, .. }
            | Self::RetryScheduled { run, .. }
            | Self::Slow { run, .. } => Some(&run.task),
            Self::IncidentReminder { incident } | Self::IncidentResolved { incident, .. } => {
                Some(&incident.task)
            }
            Self::RunLost { task, .. }
            | Self::TickSkipped { task, .. }
            | Self::Missed { task, .. }
            | Self::Recovered { task, .. }
            | Self::Late { task, .. }
            | Self::DeadlineMissed { task, .. }
            | Self::ConfigRefused { task, .. }
            | Self::TaskOrphaned { task }
            | Self::TaskRemoved { task } => Some(task),
            Self::DatabaseFailedOver { .. } | Self::InternalError { .. } => None,
        }
    }
}

/// What a `database.failed_over` says, as the node logs it and the alert channels title it:
/// `database failed over: now h2:5432, timeline 3` (without the timeline when unknown).
pub(crate) fn failover_summary(server: &str, timeline: Option<u32>) -> String {
    match timeline {
        Some(t) => format!("database failed over: now {server}, timeline {t}"),
        None => format!("database failed over: now {server}"),
    }
}

impl From<&crate::store::SkipRecord> for SchedulerEvent {
    fn from(skip: &crate::store::SkipRecord) -> Self {
        SchedulerEvent::TickSkipped {
            task: skip.task_name.clone(),
            reason: skip.reason,
            first_tick: skip.first_tick,
            last_tick: skip.last_tick,
            ticks: skip.ticks,
        }
    }
}

/// Where [`EventBus::emit`] hands each event besides this node's subscribers, as it is raised:
/// a durable forwarder (the webhook's alert queue). Handed every event, it picks those it
/// forwards; it must not wait, and must not lose what it picked (unlike a subscriber, it never
/// falls behind).
pub(crate) trait EventSink: Send + Sync + std::fmt::Debug {
    /// Takes `event` if it is one this sink forwards; never waits.
    fn offer(&self, event: &Event);
}

/// Every task's tags by name, as the config document last read gives them, and the defaults
/// for the rest; replaced whole when a document is read (readers clone an `Arc`, never the
/// tags).
#[derive(Debug)]
struct TagBook {
    by_task: HashMap<String, Arc<TaskTags>>,
    fallback: Arc<TaskTags>,
    default_owners: Vec<String>,
    default_zone: String,
}

impl TagBook {
    fn new(default_owners: Vec<String>, default_zone: String) -> Self {
        Self {
            by_task: HashMap::new(),
            fallback: Arc::new(TaskTags::defaults(&default_owners, &default_zone)),
            default_owners,
            default_zone,
        }
    }

    fn of(&self, task: Option<&str>) -> Arc<TaskTags> {
        task.and_then(|t| self.by_task.get(t))
            .unwrap_or(&self.fallback)
            .clone()
    }
}

/// The node's event fan-out.
#[derive(Debug)]
pub(crate) struct EventBus {
    sender: broadcast::Sender<Arc<Event>>,
    dropped: Arc<AtomicU64>,
    counter: prometheus_client::metrics::counter::Counter,
    /// Where events go on, besides subscribers, if anywhere.
    sink: Option<Arc<dyn EventSink>>,
    /// A second sink attached once the node starts (the `otel` feature's run spans).
    attached: std::sync::OnceLock<Arc<dyn EventSink>>,
    /// The tags every event is sent with.
    tags: RwLock<TagBook>,
}

impl Default for EventBus {
    fn default() -> Self {
        Self::counted(prometheus_client::metrics::counter::Counter::default())
    }
}

impl EventBus {
    /// A bus whose losses are also counted in `counter` (the node's metric).
    pub(crate) fn counted(counter: prometheus_client::metrics::counter::Counter) -> Self {
        Self {
            sender: broadcast::channel(EVENT_BUFFER).0,
            dropped: Arc::new(AtomicU64::new(0)),
            counter,
            sink: None,
            attached: std::sync::OnceLock::new(),
            tags: RwLock::new(TagBook::new(Vec::new(), "UTC".to_owned())),
        }
    }

    /// Also offers every emitted event to `sink`.
    pub(crate) fn with_sink(mut self, sink: Option<Arc<dyn EventSink>>) -> Self {
        self.sink = sink;
        self
    }

    /// Tags events of tasks without owners with `owners`, and those without a zone with `zone`.
    pub(crate) fn with_defaults(self, owners: Vec<String>, zone: chrono_tz::Tz) -> Self {
        *self.tags.write().unwrap_or_else(|p| p.into_inner()) =
            TagBook::new(owners, zone.name().to_owned());
        self
    }

    /// Takes the tasks' owners, labels and zones from `doc` (the config document just read).
    pub(crate) fn set_document(&self, doc: &crate::config::ConfigDocument) {
        let mut book = self.tags.write().unwrap_or_else(|p| p.into_inner());
        let by_task = doc
            .tasks
            .iter()
            .map(|t| {
                let default_owners = t.owners.is_empty();
                let tags = TaskTags {
                    owners: if default_owners {
                        book.default_owners.clone()
                    } else {
                        t.owners.clone()
                    },
                    default_owners,
                    labels: t.labels.clone(),
                    timezone: t
                        .timezone
                        .clone()
                        .unwrap_or_else(|| book.default_zone.clone()),
                };
                (t.name.clone(), Arc::new(tags))
            })
            .collect();
        book.by_task = by_task;
    }

    /// The tags events about `task` carry now.
    pub(crate) fn tags_of(&self, task: Option<&str>) -> Arc<TaskTags> {
        self.tags.read().unwrap_or_else(|p| p.into_inner()).of(task)
    }

    /// `event` with its task's tags.
    fn tag(&self, event: SchedulerEvent) -> Event {
        let tags = self.tags_of(event.task());
        Event { event, tags }
    }

    /// Sends `event` to every subscriber and offers it to the sink, if any; never waits.
    pub(crate) fn emit(&self, event: SchedulerEvent) {
        let event = self.tag(event);
        if let Some(sink) = &self.sink {
            sink.offer(&event);
        }
        if let Some(sink) = self.attached.get() {
            sink.offer(&event);
        }
        self.send(event);
    }

    /// Hands every event emitted from now on to `sink` too; `false` if one is attached already.
    #[cfg_attr(not(feature = "otel"), allow(dead_code))]
    pub(crate) fn attach(&self, sink: Arc<dyn EventSink>) -> bool {
        self.attached.set(sink).is_ok()
    }

    /// Sends `event` to this node's subscribers only, not to the sink (another node forwards
    /// it).
    pub(crate) fn emit_local(&self, event: SchedulerEvent) {
        let event = self.tag(event);
        self.send(event);
    }

    fn send(&self, event: Event) {
        // No subscriber is not an error.
        let _ = self.sender.send(Arc::new(event));
    }

    /// A new subscriber, from now on.
    pub(crate) fn subscribe(&self) -> EventStream {
        EventStream {
            receiver: self.sender.subscribe(),
            dropped: Arc::clone(&self.dropped),
            counter: self.counter.clone(),
            lost: 0,
        }
    }

    /// Events subscribers lost by falling behind, in all.
    pub(crate) fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

/// One subscriber's events (see the [module docs](self)).
#[derive(Debug)]
pub struct EventStream {
    receiver: broadcast::Receiver<Arc<Event>>,
    dropped: Arc<AtomicU64>,
    counter: prometheus_client::metrics::counter::Counter,
    lost: u64,
}

impl EventStream {
    /// The next event; `None` once the node is gone. Events missed by falling behind are
    /// skipped (and counted in [`lost`](Self::lost)).
    pub async fn recv(&mut self) -> Option<Event> {
        loop {
            match self.receiver.recv().await {
                Ok(event) => return Some((*event).clone()),
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    self.lost += n;
                    self.dropped.fetch_add(n, Ordering::Relaxed);
                    self.counter.inc_by(n);
                }
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    }

    /// How many events this subscriber lost by falling behind.
    pub fn lost(&self) -> u64 {
        self.lost
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn started(n: i64) -> SchedulerEvent {
        SchedulerEvent::RunStarted {
            run: RunRef {
                task: "t".into(),
                run_id: n,
                scheduled_at: DateTime::UNIX_EPOCH,
                attempt: 1,
                trigger: "schedule".into(),
                node: "n1".into(),
            },
        }
    }

    #[tokio::test]
    async fn a_slow_subscriber_loses_the_oldest_and_is_told() {
        let bus = EventBus::default();
        let mut slow = bus.subscribe();
        for n in 0..(EVENT_BUFFER as i64 + 10) {
            bus.emit(started(n));
        }
        let first = slow.recv().await.unwrap();
        let SchedulerEvent::RunStarted { run } = first.event else {
            panic!()
        };
        assert_eq!(run.run_id, 10, "the ten oldest were lost");
        assert_eq!(slow.lost(), 10);
        assert_eq!(bus.dropped(), 10);
    }

    #[tokio::test]
    async fn every_event_carries_its_task_s_tags_or_the_defaults_shared_not_copied() {
        let bus =
            EventBus::default().with_defaults(vec!["oncall".into()], chrono_tz::Europe::Paris);
        let doc = crate::config::ConfigDocument::parse(
            r#"{"tasks": [
                {"name": "t", "enabled": true, "cron": "* * * * *", "owners": ["ann"], "labels": {"team": "ads"},
                 "timezone": "Asia/Shanghai"},
                {"name": "plain", "enabled": true, "cron": "* * * * *"}
            ]}"#,
            crate::config::ConfigFormat::Json,
            "test",
        )
        .unwrap();
        bus.set_document(&doc);
        let mut events = bus.subscribe();
        bus.emit(started(1));
        bus.emit(started(2));
        bus.emit(SchedulerEvent::TaskOrphaned {
            task: "plain".into(),
        });
        bus.emit(SchedulerEvent::InternalError {
            what: "w".into(),
            error: "e".into(),
        });
        let (one, two) = (events.recv().await.unwrap(), events.recv().await.unwrap());
        assert_eq!(one.owners(), ["ann"]);
        assert_eq!(one.labels()["team"], "ads");
        assert_eq!(one.tags.timezone, "Asia/Shanghai");
        assert!(!one.tags.default_owners);
        assert!(
            Arc::ptr_eq(&one.tags, &two.tags),
            "one task's events share its tags"
        );
        for other in [events.recv().await.unwrap(), events.recv().await.unwrap()] {
            assert_eq!(other.owners(), ["oncall"], "{:?}", other.event);
            assert!(other.tags.default_owners);
            assert!(other.labels().is_empty());
            assert_eq!(other.tags.timezone, "Europe/Paris");
        }
    }

    #[test]
    fn the_json_form_carries_the_type() {
        let json = serde_json::to_value(started(7)).unwrap();
        assert_eq!(json["type"], "run.started");
        assert_eq!(json["run"]["run_id"], 7);
        assert!(SchedulerEvent::KINDS.contains(&started(7).kind()));
        for alert in SchedulerEvent::ALERTS {
            assert!(SchedulerEvent::KINDS.contains(alert));
        }
    }
}
