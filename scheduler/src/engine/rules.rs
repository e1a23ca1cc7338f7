//! The engine's decisions inside a claim ([`ClaimRules`]): when an expired lock may be
//! released (here), and what a due task's run serves and schedules next (the tick rules of
//! [`crate::ticks`], given the task's schedule and settings).
//!
//! **Takeover.** A lock past its expiry is released only after this node, while it could reach
//! the store, has watched it stay expired, with the same token, for a whole takeover wait (the
//! renew interval by default). An owner that is alive renews its locks every renew interval —
//! also the locks of runs whose outcome is still waiting to be written, and also after they
//! expired, since renewal is fenced by token, not expiry — and retries a failed renewal every
//! quarter interval. So a lock still expired after the wait belongs to a node that could not
//! reach the store for a lock lifetime plus the wait while this one could: dead, paused or cut
//! off, and already stopped its handler (it does so before the lock can expire). A database
//! outage that every node saw does not count: the watching starts when this node is back, and
//! the owner is back too. This node never releases a lock it holds itself.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use tokio::time::Instant;

use super::outcome;
use super::watchdog::LockWatchdog;
use crate::TaskRegistry;
use crate::registry::TaskSettings;
use crate::schedule::{ScheduleSpec, SpecCache};
use crate::store::{
    ClaimRules, DueDecision, DueTask, ExpiredLock, LockKey, NextRun, RescueDecision,
};
use crate::ticks::{claim_tick_cap, decide_due, plan_without_schedule};

/// Expired locks being watched before release.
#[derive(Debug, Default)]
pub(crate) struct Takeover {
    /// When each expired lock was first seen expired (local monotonic clock).
    watched: Mutex<HashMap<LockKey, Instant>>,
}

impl Takeover {
    fn watched(&self) -> std::sync::MutexGuard<'_, HashMap<LockKey, Instant>> {
        self.watched.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// After a pass: forget locks no longer expired (renewed or released) and report when the
    /// next watched one is due for a decision.
    pub(crate) fn retain_waiting(
        &self,
        waiting: &[ExpiredLock],
        wait: Duration,
    ) -> Option<Instant> {
        let mut watched = self.watched();
        watched.retain(|k, _| waiting.iter().any(|l| &l.key == k));
        watched.values().map(|seen| *seen + wait).min()
    }

    /// When the next watched lock is due for a decision, if any is watched.
    pub(crate) fn next_decision(&self, wait: Duration) -> Option<Instant> {
        self.watched().values().map(|seen| *seen + wait).min()
    }

    /// Forgets everything seen: after a failure to reach the store, watching starts over.
    pub(crate) fn reset(&self) {
        self.watched().clear();
    }
}

/// A due task whose stored schedule this binary cannot read (a newer node wrote it, or the row
/// was edited by hand).
#[derive(Debug, Clone)]
pub(crate) struct Unreadable {
    pub name: String,
    pub cron: String,
    pub timezone: String,
    pub due: DateTime<Utc>,
    pub error: String,
}

/// A task planned to run: its schedule and the next run scheduled after this one.
pub(crate) type Planned = (ScheduleSpec, Option<DateTime<Utc>>);

/// The claim rules of one node.
pub(crate) struct Rules<'a> {
    pub registry: &'a TaskRegistry,
    pub specs: &'a SpecCache,
    pub watchdog: &'a Arc<LockWatchdog>,
    pub takeover: &'a Takeover,
    pub takeover_wait: Duration,
    pub settings: &'a super::Settings,
    /// How far ahead of its tick the claim runs (see [`Rules::claiming_ahead`]).
    pub ahead: TimeDelta,
    /// The schedules (and next runs) of the tasks planned to run in this claim.
    pub planned: Mutex<HashMap<String, Planned>>,
    /// Tasks left alone because their stored schedule cannot be read.
    pub unreadable: Mutex<Vec<Unreadable>>,
    /// The jitter windows the config this node applied sets, by task.
    pub jitter: Arc<std::collections::BTreeMap<String, Duration>>,
}

impl<'a> Rules<'a> {
    pub(crate) fn new(
        registry: &'a TaskRegistry,
        specs: &'a SpecCache,
        watchdog: &'a Arc<LockWatchdog>,
        takeover: &'a Takeover,
        takeover_wait: Duration,
        settings: &'a super::Settings,
    ) -> Self {
        Self {
            registry,
            specs,
            watchdog,
            takeover,
            takeover_wait,
            settings,
            ahead: TimeDelta::zero(),
            planned: Mutex::new(HashMap::new()),
            unreadable: Mutex::new(Vec::new()),
            jitter: Arc::default(),
        }
    }

    /// Reads the jitter windows of tasks from `windows` (the config this node applied).
    pub(crate) fn jitter_windows(
        mut self,
        windows: Arc<std::collections::BTreeMap<String, Duration>>,
    ) -> Self {
        self.jitter = windows;
        self
    }

    /// Plans the ticks a claim takes ahead (due within `ahead`) as of their own time.
    pub(crate) fn claiming_ahead(mut self, ahead: Duration) -> Self {
        self.ahead = TimeDelta::from_std(ahead).unwrap_or(TimeDelta::zero());
        self
    }

    fn settings_of(&self, task: &str) -> TaskSettings {
        match self.registry.get(task) {
            Some(d) => self.settings.task_settings(&d.options),
            None => self
                .settings
                .task_settings(&crate::registry::TaskOptions::DEFAULT),
        }
    }

    /// The jitter window of a due row: its own, else its task's in the config this node
    /// applied, else the task attribute's (see [`crate::ticks::jitter::window`]).
    fn jitter_of(&self, task: &DueTask) -> Duration {
        let of = crate::ticks::jitter::identity(&task.name).0;
        let attribute = self.registry.get(of).and_then(|d| d.options.jitter);
        crate::ticks::jitter::window(task.jitter, self.jitter.get(of).copied(), attribute)
    }

    fn unreadable(&self, task: &DueTask, error: String) -> DueDecision {
        self.unreadable
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(Unreadable {
                name: task.name.clone(),
                cron: task.cron.clone(),
                timezone: task.timezone.clone(),
                due: task.next_run_at.unwrap_or_default(),
                error,
            });
        DueDecision::Leave
    }

    fn remember(&self, task: &str, spec: ScheduleSpec, next: Option<DateTime<Utc>>) {
        self.planned
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(task.to_owned(), (spec, next));
    }
}

impl ClaimRules for Rules<'_> {
    fn rescue(&self, lock: &ExpiredLock, db_now: DateTime<Utc>) -> RescueDecision {
        if self.watchdog.holds(&lock.key) {
            // Ours: the run is going, or its outcome is on its way. Look again later.
            self.takeover
                .watched()
                .insert(lock.key.clone(), Instant::now());
            return RescueDecision::Wait;
        }
        let mut watched = self.takeover.watched();
        let seen = *watched.entry(lock.key.clone()).or_insert_with(Instant::now);
        if seen.elapsed() < self.takeover_wait {
            return RescueDecision::Wait;
        }
        watched.remove(&lock.key);
        outcome::unknown(lock, db_now)
    }

    fn plan(&self, task: &DueTask, db_now: DateTime<Utc>) -> DueDecision {
        let settings = self.settings_of(&task.name);
        let spec = match self
            .specs
            .get_named(&task.cron, &task.timezone, task.calendar.as_deref())
        {
            Ok(spec) => spec,
            Err(e) if task.pause.is_none() && task.manual.is_none() => {
                return self.unreadable(task, e.to_string());
            }
            Err(e) => {
                // A manual run or the end of a pause needs no schedule to be read; the schedule
                // itself waits for a node that can read it.
                return match plan_without_schedule(task, &settings) {
                    Some(decision) => decision,
                    None => self.unreadable(task, e.to_string()),
                };
            }
        };
        // A tick claimed ahead is planned as if claimed on it (nothing about it is late, the
        // next run is the one after it); the run starts on it.
        let as_of = match task.next_run_at {
            Some(tick)
                if task.enabled
                    && task.pause.is_none()
                    && tick > db_now
                    && tick <= db_now + self.ahead =>
            {
                tick
            }
            _ => db_now,
        };
        let cap = claim_tick_cap(self.settings.max_concurrent);
        let jitter = self.jitter_of(task);
        let decision = decide_due(task, &spec, &settings, jitter, as_of, cap);
        if let DueDecision::Run(plan) = &decision {
            let next = match plan.next_run_at {
                NextRun::Keep => task.next_run_at,
                set => set.start(),
            };
            self.remember(&task.name, spec, next);
        }
        decision
    }
}
