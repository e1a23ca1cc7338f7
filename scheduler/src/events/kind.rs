//! What an event is called and what it is about: its type as webhooks name it, the lists of
//! those types, the task it concerns.

use super::SchedulerEvent;

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
