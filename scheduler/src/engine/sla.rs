//! Service levels judged by the engine: a tick not started within `sla.start_within`
//! (`task.late`) and no success by `sla.succeed_by` (`task.deadline_missed`), each raised once
//! cluster-wide (the node whose mark the store records first raises it). The run-time warning
//! (`task.slow`) is judged by the node running the run (`runner`).
//!
//! The levels come from the config document this node applied (`ConfigView::levels`): a node
//! without a config judges none of its tasks'. An instance with levels of its own (read from
//! its row: `ConfigView::rows`, and the overdue row itself) is judged by them, its deadline in
//! its own zone; any other instance by its task's.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};

use super::config_sync::AppliedLevels;
use super::levels::{RowLevels, TaskLevels};
use super::service::Service;
use crate::events::{EventBus, SchedulerEvent};
use crate::store::{AlertMark, RunQuery, RunStatus, Store, StoreError};

/// How often the levels are judged while some task has a start deadline or a wall-clock one.
pub(crate) const SLA_CHECK_INTERVAL: Duration = Duration::from_secs(1);
/// How often otherwise (the document may gain levels).
const IDLE_CHECK_INTERVAL: Duration = Duration::from_secs(10);
/// Overdue tasks looked at per pass.
const LATE_CHECK_LIMIT: u32 = 1_000;
/// How long before this node first saw a task's `succeed_by` a deadline may have passed and
/// still be judged (a node restarting just after a deadline judges it; a deadline of yesterday
/// is not raised the moment a task gains its `sla` block).
pub(crate) const DEADLINE_LOOKBACK: Duration = Duration::from_secs(300);

/// What one pass raised.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct SlaPass {
    pub(crate) late: usize,
    pub(crate) deadlines: usize,
    /// Some task has a start deadline or a wall-clock one.
    pub(crate) watching: bool,
}

/// Judges start deadlines and wall-clock deadlines.
pub(crate) struct SlaWatch {
    store: Arc<dyn Store>,
    events: Arc<EventBus>,
    applied: AppliedLevels,
    /// The latest deadline judged per task (each is judged once).
    judged: HashMap<String, DateTime<Utc>>,
    /// When this node first saw each task's `succeed_by` (earlier deadlines, beyond the
    /// lookback, are not judged).
    watched_since: HashMap<String, DateTime<Utc>>,
    /// The wall clock deadlines are judged by.
    clock: crate::clock::Clock,
}

impl SlaWatch {
    pub(crate) fn new(
        store: Arc<dyn Store>,
        events: Arc<EventBus>,
        applied: AppliedLevels,
        clock: crate::clock::Clock,
    ) -> Self {
        Self {
            store,
            events,
            applied,
            judged: HashMap::new(),
            watched_since: HashMap::new(),
            clock,
        }
    }

    /// Ticks not started within their task's `start_within` (an instance's own, else its
    /// task's), by the store's clock: each raised once, by the node that marks it first.
    async fn check_late(
        &self,
        levels: &BTreeMap<String, TaskLevels>,
        rows: &RowLevels,
    ) -> Result<usize, StoreError> {
        let Some(least) = levels
            .values()
            .chain(rows.iter().map(|(_, l)| l))
            .filter(|l| l.enabled)
            .filter_map(|l| l.sla.start_within)
            .min()
        else {
            return Ok(0);
        };
        let overdue = self.store.overdue_tasks(least, LATE_CHECK_LIMIT).await?;
        let mut marks = Vec::new();
        let mut late = Vec::new();
        for task in overdue {
            // The row's own levels as read now, else its task's.
            let own = task
                .tags
                .sla
                .as_deref()
                .filter(|_| crate::instance::split_row(&task.name).is_some())
                .and_then(crate::config::TaskSla::from_stored)
                .and_then(|sla| sla.check().ok());
            let of_task = || {
                let name =
                    crate::instance::split_row(&task.name).map_or(task.name.as_str(), |(t, _)| t);
                levels.get(name).map(|l| l.sla)
            };
            let Some(within) = own.or_else(of_task).and_then(|sla| sla.start_within) else {
                continue;
            };
            let allowed = chrono::TimeDelta::from_std(within).unwrap_or(chrono::TimeDelta::MAX);
            if task
                .checked_at
                .signed_duration_since(task.next_run_at)
                .gt(&allowed)
            {
                marks.push(AlertMark::new(
                    &task.name,
                    "task.late",
                    task.next_run_at
                        .to_rfc3339_opts(SecondsFormat::Micros, true),
                ));
                late.push((task.name, task.next_run_at, within));
            }
        }
        let won = self.store.mark_alerts(&marks).await?;
        let mut raised = 0;
        for (task, tick, within) in late {
            if !won.iter().any(|m| m.task == task) {
                continue;
            }
            tracing::warn!(task = %task, scheduled_at = %tick, start_within = ?within, "a tick has not started within its start deadline");
            self.events.emit(SchedulerEvent::Late {
                task,
                scheduled_at: tick,
                start_within_ms: u64::try_from(within.as_millis()).unwrap_or(u64::MAX),
            });
            raised += 1;
        }
        Ok(raised)
    }

    /// Wall-clock deadlines passed since they were last judged: a task (or an instance with
    /// levels of its own) with no run that succeeded after the previous deadline and by this
    /// one raises `task.deadline_missed`, once per deadline, by the node that marks it first.
    async fn check_deadlines(
        &mut self,
        levels: &BTreeMap<String, TaskLevels>,
        rows: &RowLevels,
    ) -> Result<usize, StoreError> {
        let now = self.clock.now();
        let mut raised = 0;
        let watched = levels
            .iter()
            .chain(rows.iter())
            .filter(|(_, l)| l.enabled && l.sla.succeed_by.is_some());
        for (task, level) in watched {
            let Some((since, by)) = level.sla.deadline_period(level.zone, now) else {
                continue;
            };
            if self.judged.get(task) == Some(&by) {
                continue;
            }
            let since_watched = *self.watched_since.entry(task.clone()).or_insert(now);
            let lookback = chrono::TimeDelta::from_std(DEADLINE_LOOKBACK).unwrap_or_default();
            if since_watched
                .checked_sub_signed(lookback)
                .is_some_and(|earliest| by < earliest)
            {
                continue; // passed before this node watched it
            }
            let mut query = match crate::instance::split_row(task) {
                // An instance's own deadline: its own runs.
                Some((of, key)) => RunQuery::latest(100).task(of).key(key),
                None => RunQuery::latest(100).task(task.clone()),
            }
            .status(RunStatus::Succeeded);
            query.since = Some(since);
            query.until = Some(by);
            let kept = self
                .store
                .runs(&query)
                .await?
                .iter()
                .any(|r| r.finished_at.is_some_and(|f| f > since && f <= by));
            if !kept {
                let mark = AlertMark::new(
                    task,
                    "task.deadline_missed",
                    by.to_rfc3339_opts(SecondsFormat::Secs, true),
                );
                if !self.store.mark_alerts(&[mark]).await?.is_empty() {
                    let succeed_by = level
                        .sla
                        .succeed_by
                        .map(|t| t.to_string())
                        .unwrap_or_default();
                    tracing::error!(task = %task, deadline = %by, "no run succeeded by the task's deadline");
                    self.events.emit(SchedulerEvent::DeadlineMissed {
                        task: task.clone(),
                        deadline: by,
                        succeed_by,
                        timezone: level.zone.name().to_owned(),
                        since,
                    });
                    raised += 1;
                }
            }
            self.judged.insert(task.clone(), by);
        }
        Ok(raised)
    }

    /// One pass: start deadlines, then wall-clock deadlines.
    pub(crate) async fn check(&mut self) -> Result<SlaPass, StoreError> {
        let levels = self.applied.all_levels();
        let rows = self.applied.row_levels();
        let watching = levels
            .values()
            .chain(rows.iter().map(|(_, l)| l))
            .any(|l| l.enabled && (l.sla.start_within.is_some() || l.sla.succeed_by.is_some()));
        if !watching {
            return Ok(SlaPass::default());
        }
        let late = self.check_late(&levels, &rows).await?;
        let deadlines = self.check_deadlines(&levels, &rows).await?;
        Ok(SlaPass {
            late,
            deadlines,
            watching,
        })
    }
}

impl Service for SlaWatch {
    type Pass = SlaPass;
    type Error = StoreError;

    fn what(&self) -> &'static str {
        "judging service levels"
    }

    fn events(&self) -> Option<&crate::events::EventBus> {
        Some(&self.events)
    }

    async fn run_once(&mut self) -> Result<SlaPass, StoreError> {
        self.check().await
    }

    fn pause_after(&mut self, pass: SlaPass) -> Option<Duration> {
        Some(if pass.watching {
            SLA_CHECK_INTERVAL
        } else {
            IDLE_CHECK_INTERVAL
        })
    }
}
