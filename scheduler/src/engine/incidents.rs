//! One incident per problem: the alerts about a task fold into one open incident per (task,
//! alert type) in the store, and only what the incident decides goes on to the alert channels
//! (the webhook's outbox): the first alert (or the Nth in a row with
//! `sla.alert_after_failures`), a reminder every `sla.remind_every` while it stays open, and one
//! `incident.resolved` when the task recovers. A snoozed task's alerts are folded, not sent.
//!
//! [`IncidentDesk`] is the event bus's sink: it never waits; alerts about a task and the events
//! that end incidents wait in its queue for [`IncidentKeeper`], the service that folds and
//! closes them in the store and hands on what is to be sent. Every other event goes straight
//! on. Subscribers of the bus see every event as it is raised, folded or not.
//!
//! What this module must not do: decide where an alert goes (that is the channels'), or send
//! anything itself.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::Utc;
use tokio::sync::Notify;

use super::config_sync::AppliedLevels;
use super::service::Service;
use crate::events::{Event, EventBus, EventSink, IncidentRef, SchedulerEvent};
use crate::store::{
    AlertFold, FoldDecision, FoldInput, IncidentClose, IncidentQuery, IncidentRecord, Store,
    StoreError,
};

/// The alert types that fold into incidents (when they name a task).
pub const INCIDENT_KINDS: &[&str] = &[
    "run.failed",
    "run.timed_out",
    "run.abandoned",
    "run.lost",
    "task.missed",
    "task.late",
    "task.slow",
    "task.deadline_missed",
];

/// The incidents a successful run closes (besides `task.slow`, closed by a run within its
/// warning).
const CLOSED_BY_SUCCESS: &[&str] = &[
    "run.failed",
    "run.timed_out",
    "run.abandoned",
    "run.lost",
    "task.deadline_missed",
];

/// How long the keeper trusts its list of open incidents before reading it again: a run's start
/// or success closes only what the list holds, so the read is not paid per run. An incident
/// another node opened within this window, followed at once by a success here, stays open
/// until the task's next success.
const OPEN_LIST_TTL: Duration = Duration::from_secs(1);
/// Reminders claimed per pass.
const REMINDER_BATCH: u32 = 100;
/// The longest pause between passes (reminders of other nodes' incidents).
const MAX_PAUSE: Duration = Duration::from_secs(60);

/// Whether `event` is folded into an incident.
fn folds(event: &SchedulerEvent) -> bool {
    event.task().is_some() && INCIDENT_KINDS.contains(&event.kind())
}

/// Whether `event` may end incidents.
fn closes(event: &SchedulerEvent) -> bool {
    matches!(
        event,
        SchedulerEvent::RunSucceeded { .. }
            | SchedulerEvent::RunStarted { .. }
            | SchedulerEvent::Recovered { .. }
    )
}

/// The event bus's sink: holds alerts about tasks (and events that end incidents) for the
/// keeper, hands every other event on at once.
#[derive(Debug)]
pub(crate) struct IncidentDesk {
    queue: Mutex<Vec<Event>>,
    pub(crate) wake: Notify,
    /// Where alerts go on (the webhook's queue), if anywhere.
    downstream: Option<Arc<dyn EventSink>>,
}

impl IncidentDesk {
    pub(crate) fn new(downstream: Option<Arc<dyn EventSink>>) -> Self {
        Self {
            queue: Mutex::new(Vec::new()),
            wake: Notify::new(),
            downstream,
        }
    }

    fn take(&self) -> Vec<Event> {
        std::mem::take(&mut *self.queue.lock().unwrap_or_else(|p| p.into_inner()))
    }

    fn put_back(&self, mut events: Vec<Event>) {
        let mut queue = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        events.append(&mut queue);
        *queue = events;
    }

    fn forward(&self, event: &Event) {
        if let Some(downstream) = &self.downstream {
            downstream.offer(event);
        }
    }
}

impl EventSink for IncidentDesk {
    fn offer(&self, event: &Event) {
        let folded = folds(event);
        if folded || closes(event) {
            self.queue
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(event.clone());
            self.wake.notify_one();
        }
        // What only ends incidents still goes on as it is (if the channels send it); a
        // `task.recovered` goes on once the keeper knows whether its incident was sent.
        if !folded && !matches!(event.event, SchedulerEvent::Recovered { .. }) {
            self.forward(event);
        }
    }
}

/// The rule every fold applies: the same thing seen twice counts once; an incident's alert is
/// sent once, when it has folded `threshold` alerts and its task is not snoozed (a snoozed
/// task's incident is sent by the first alert after the snooze, if still open).
pub(crate) fn decide(input: &FoldInput<'_>) -> FoldDecision {
    if let (Some(open), Some(key)) = (input.open, &input.fold.key)
        && open.last_key.as_deref() == Some(key.as_str())
    {
        return FoldDecision::Duplicate;
    }
    let count = input.open.map_or(1, |o| o.count.saturating_add(1));
    let sent = input.open.is_some_and(|o| o.notified_at.is_some());
    let notify =
        !sent && input.snoozed.is_none() && count >= i64::from(input.fold.threshold.max(1));
    FoldDecision::Record { notify }
}

/// The incident an event names.
fn incident_ref(incident: &IncidentRecord) -> IncidentRef {
    IncidentRef {
        id: incident.id,
        task: incident.task_name.clone(),
        kind: incident.kind.clone(),
        opened_at: incident.opened_at,
        last_seen_at: incident.last_seen_at,
        count: incident.count,
    }
}

/// What the event is about, so the same thing seen twice counts once.
fn key_of(event: &SchedulerEvent) -> Option<String> {
    let at = |t: &chrono::DateTime<Utc>| t.to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
    match event {
        SchedulerEvent::RunFailed { run, .. }
        | SchedulerEvent::RunTimedOut { run, .. }
        | SchedulerEvent::RunAbandoned { run, .. }
        | SchedulerEvent::Slow { run, .. } => Some(format!("run {}", run.run_id)),
        SchedulerEvent::RunLost { run_id, .. } => Some(format!("run {run_id}")),
        SchedulerEvent::Missed { expected_at, .. } => Some(at(expected_at)),
        SchedulerEvent::Late { scheduled_at, .. } => Some(at(scheduled_at)),
        SchedulerEvent::DeadlineMissed { deadline, .. } => Some(at(deadline)),
        _ => None,
    }
}

/// What one pass did.
#[derive(Debug, Default)]
pub(crate) struct KeeperPass {
    pub(crate) sent: usize,
    pub(crate) folded: usize,
    pub(crate) resolved: usize,
    pub(crate) reminded: usize,
}

/// Folds alerts into incidents, closes incidents, sends reminders.
pub(crate) struct IncidentKeeper {
    store: Arc<dyn Store>,
    events: Arc<EventBus>,
    applied: AppliedLevels,
    desk: Arc<IncidentDesk>,
    /// The open incidents as last read (and changed by this keeper since), and when read.
    open: Option<(tokio::time::Instant, Vec<(String, String)>)>,
    /// When reminders are looked for next (on their own cadence, not at every wake-up: a pass
    /// woken by a run's start or end only folds and closes).
    next_reminders: tokio::time::Instant,
    /// The wall clock lateness is judged by.
    clock: crate::clock::Clock,
}

/// One step of a pass, in the order the events were raised.
enum Step {
    Fold(Vec<(Event, AlertFold)>),
    Close(Vec<Event>),
}

impl IncidentKeeper {
    pub(crate) fn new(
        store: Arc<dyn Store>,
        events: Arc<EventBus>,
        applied: AppliedLevels,
        desk: Arc<IncidentDesk>,
        clock: crate::clock::Clock,
    ) -> Self {
        Self {
            store,
            events,
            applied,
            desk,
            clock,
            next_reminders: tokio::time::Instant::now(),
            open: None,
        }
    }

    /// The fold of alert `event` under its task's levels.
    fn fold_of(&self, event: &SchedulerEvent) -> Option<AlertFold> {
        let task = event.task()?;
        let levels = self.applied.levels(task);
        let threshold = match event {
            SchedulerEvent::RunFailed { .. } | SchedulerEvent::RunTimedOut { .. } => {
                levels.map_or(1, |l| l.sla.alert_after_failures)
            }
            _ => 1,
        };
        let mut fold = AlertFold::new(
            task,
            event.kind(),
            serde_json::to_string(event).unwrap_or_default(),
        )
        .policy(threshold, levels.and_then(|l| l.sla.remind_every));
        fold.key = key_of(event);
        Some(fold)
    }

    /// The incidents `event` ends, if it ends any, and why.
    fn close_of(&self, event: &SchedulerEvent) -> Option<IncidentClose> {
        match event {
            SchedulerEvent::RunSucceeded { run, duration_ms } => {
                let mut kinds: Vec<&str> = CLOSED_BY_SUCCESS.to_vec();
                let warn_after = self
                    .applied
                    .levels(&run.task)
                    .and_then(|l| l.sla.warn_after);
                if warn_after.is_none_or(|w| u128::from(*duration_ms) < w.as_millis()) {
                    kinds.push("task.slow");
                }
                Some(IncidentClose::new(
                    &run.task,
                    kinds,
                    format!("run {} succeeded", run.run_id),
                ))
            }
            SchedulerEvent::RunStarted { run } if run.trigger == "schedule" => {
                let within = self
                    .applied
                    .levels(&run.task)
                    .and_then(|l| l.sla.start_within);
                let late = self.clock.now() - run.scheduled_at;
                let on_time = within.is_none_or(|w| {
                    late <= chrono::TimeDelta::from_std(w).unwrap_or(chrono::TimeDelta::MAX)
                });
                on_time.then(|| {
                    IncidentClose::new(
                        &run.task,
                        ["task.late"],
                        format!("run {} started on time", run.run_id),
                    )
                })
            }
            SchedulerEvent::Recovered { task, run_id, .. } => Some(IncidentClose::new(
                task,
                ["task.missed"],
                format!("run {run_id} ran"),
            )),
            _ => None,
        }
    }

    /// Folds and closes what was raised, in order; then the reminders due.
    pub(crate) async fn pass(&mut self) -> Result<KeeperPass, StoreError> {
        let raised = self.desk.take();
        let mut steps: Vec<Step> = Vec::new();
        for event in &raised {
            if folds(event) {
                let Some(fold) = self.fold_of(event) else {
                    continue;
                };
                match steps.last_mut() {
                    Some(Step::Fold(batch)) => batch.push((event.clone(), fold)),
                    _ => steps.push(Step::Fold(vec![(event.clone(), fold)])),
                }
            } else {
                match steps.last_mut() {
                    Some(Step::Close(batch)) => batch.push(event.clone()),
                    _ => steps.push(Step::Close(vec![event.clone()])),
                }
            }
        }
        let mut pass = KeeperPass::default();
        // Which (task, type) have an open incident: read at most every OPEN_LIST_TTL, only when
        // something may end one.
        let mut open = self
            .open
            .take()
            .filter(|(at, _)| at.elapsed() < OPEN_LIST_TTL);
        for (i, step) in steps.iter().enumerate() {
            let done = match step {
                Step::Fold(batch) => self.fold(batch, &mut pass, &mut open).await,
                Step::Close(batch) => self.close(batch, &mut pass, &mut open).await,
            };
            if let Err(e) = done {
                // What was not written yet waits for the next pass.
                let rest = steps[i..]
                    .iter()
                    .flat_map(|s| match s {
                        Step::Fold(b) => b.iter().map(|(e, _)| e.clone()).collect::<Vec<_>>(),
                        Step::Close(b) => b.clone(),
                    })
                    .collect();
                self.desk.put_back(rest);
                return Err(e);
            }
        }
        self.open = open;
        if tokio::time::Instant::now() < self.next_reminders {
            return Ok(pass);
        }
        self.next_reminders = tokio::time::Instant::now() + self.reminder_pause();
        for incident in self.store.claim_reminders(REMINDER_BATCH).await? {
            tracing::warn!(task = %incident.task_name, kind = %incident.kind, count = incident.count, "incident still open: reminding");
            self.events.emit(SchedulerEvent::IncidentReminder {
                incident: incident_ref(&incident),
            });
            pass.reminded += 1;
        }
        Ok(pass)
    }

    async fn fold(
        &self,
        batch: &[(Event, AlertFold)],
        pass: &mut KeeperPass,
        open: &mut Option<(tokio::time::Instant, Vec<(String, String)>)>,
    ) -> Result<(), StoreError> {
        let folds: Vec<AlertFold> = batch.iter().map(|(_, f)| f.clone()).collect();
        let folded = self.store.fold_alerts(&folds, &decide).await?;
        for ((event, fold), result) in batch.iter().zip(folded) {
            if let Some((_, open)) = open.as_mut() {
                open.push((fold.task.clone(), fold.kind.clone()));
            }
            if result.notify {
                self.desk.forward(event);
                pass.sent += 1;
            } else {
                if let Some(incident) = &result.incident {
                    tracing::debug!(task = %incident.task_name, kind = %incident.kind, count = incident.count, "alert folded into its open incident");
                }
                pass.folded += 1;
            }
        }
        Ok(())
    }

    async fn close(
        &self,
        batch: &[Event],
        pass: &mut KeeperPass,
        open: &mut Option<(tokio::time::Instant, Vec<(String, String)>)>,
    ) -> Result<(), StoreError> {
        let (_, open) = match open {
            Some(open) => open,
            None => {
                let read_at = tokio::time::Instant::now();
                let list = self
                    .store
                    .incidents(&IncidentQuery::new(10_000).open(true))
                    .await?
                    .into_iter()
                    .map(|i| (i.task_name, i.kind))
                    .collect();
                open.insert((read_at, list))
            }
        };
        let mut closes = Vec::new();
        for event in batch {
            if let Some(mut close) = self.close_of(event) {
                close
                    .kinds
                    .retain(|k| open.iter().any(|(t, o)| *t == close.task && o == k));
                if !close.kinds.is_empty() {
                    open.retain(|(t, k)| !(*t == close.task && close.kinds.contains(k)));
                    closes.push(close);
                }
            }
        }
        let closed = if closes.is_empty() {
            Vec::new()
        } else {
            self.store.close_incidents(&closes).await?
        };
        for incident in &closed {
            if incident.kind == "task.missed" {
                continue; // its `task.recovered` is the message
            }
            if incident.notified_at.is_some() {
                tracing::info!(task = %incident.task_name, kind = %incident.kind, count = incident.count, "incident resolved");
                self.events.emit(SchedulerEvent::IncidentResolved {
                    incident: incident_ref(incident),
                    reason: incident.closed_by.clone().unwrap_or_default(),
                });
                pass.resolved += 1;
            }
        }
        // A `task.recovered` goes on unless it ends a missed-run incident whose alert was
        // never sent (held back by a snooze).
        for event in batch {
            if let SchedulerEvent::Recovered { task, .. } = &event.event {
                let held_back = closed.iter().any(|i| {
                    i.task_name == *task && i.kind == "task.missed" && i.notified_at.is_none()
                });
                if !held_back {
                    self.desk.forward(event);
                }
            }
        }
        Ok(())
    }

    /// How long until reminders may be due: half the shortest reminder interval in this
    /// node's config (at least 1 s), else a minute.
    fn reminder_pause(&self) -> Duration {
        let rows = self.applied.row_levels();
        self.applied
            .all_levels()
            .values()
            .chain(rows.iter().map(|(_, l)| l))
            .filter_map(|l| l.sla.remind_every)
            .min()
            .map_or(MAX_PAUSE, |d| {
                (d / 2).clamp(Duration::from_secs(1), MAX_PAUSE)
            })
    }
}

impl Service for IncidentKeeper {
    type Pass = KeeperPass;
    type Error = StoreError;

    fn what(&self) -> &'static str {
        "keeping incidents"
    }

    async fn run_once(&mut self) -> Result<KeeperPass, StoreError> {
        self.pass().await
    }

    fn pause_after(&mut self, _pass: KeeperPass) -> Option<Duration> {
        Some(
            self.next_reminders
                .saturating_duration_since(tokio::time::Instant::now())
                .max(Duration::from_millis(10)),
        )
    }
}

#[cfg(test)]
mod tests;
