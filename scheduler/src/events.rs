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
//! node's default owners when the entry names none, or for an event about no task; an
//! instance's own owners in place of its task's, its own labels over its task's) and its
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

mod bus;
mod kind;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use chrono::{DateTime, Utc};
use serde::Serialize;
use tokio::sync::broadcast;

use crate::store::SkipReason;

pub(crate) use bus::{EventBus, EventSink};
pub(crate) use kind::failover_summary;

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
mod tests;
