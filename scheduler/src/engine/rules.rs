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
//!
//! A lock whose row another transaction holds (the store says `busy`) is not evidence: the
//! holder may be the owner's own write, stuck or frozen mid-statement, with the owner alive and
//! its renewals queued behind it. So a watch is looked at every quarter wait and counts only
//! while every look finds the row free: it starts again when the row is seen held and at the
//! first look that finds it free again. A release therefore comes a whole wait after the row
//! was last seen held, and a hold of the row that lasts longer than a quarter wait is seen
//! while the claim loop keeps its looks (a loop held up longer, e.g. backing off from rows
//! other claims hold, can miss a hold between two looks); the owner, retrying every quarter
//! interval, renews once it is let go.
//! The release itself never waits for a row either: the store skips a row held at that moment.

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
    watched: Mutex<HashMap<LockKey, Watch>>,
}

/// One expired lock's watch.
#[derive(Debug, Clone, Copy)]
struct Watch {
    /// Since when the lock has been seen expired with its row free at every look (local
    /// monotonic clock).
    since: Instant,
    /// When it was last looked at.
    looked: Instant,
    /// Its row was held at the last look.
    busy: bool,
}

impl Watch {
    fn new(now: Instant, busy: bool) -> Self {
        Self {
            since: now,
            looked: now,
            busy,
        }
    }

    /// When this watch is next looked at: every quarter wait, so that a hold of its row that
    /// lasts longer is seen.
    fn next_look(&self, wait: Duration) -> Instant {
        let look = self.looked + wait / 4;
        if self.busy {
            look
        } else {
            look.min(self.since + wait)
        }
    }
}

impl Takeover {
    fn watched(&self) -> std::sync::MutexGuard<'_, HashMap<LockKey, Watch>> {
        self.watched.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// After a pass: forget locks no longer expired (renewed or released) and report when the
    /// next watched one is due for a look.
    pub(crate) fn retain_waiting(
        &self,
        waiting: &[ExpiredLock],
        wait: Duration,
    ) -> Option<Instant> {
        self.watched()
            .retain(|k, _| waiting.iter().any(|l| &l.key == k));
        self.next_decision(wait)
    }

    /// When the next watched lock is due for a look, if any is watched.
    pub(crate) fn next_decision(&self, wait: Duration) -> Option<Instant> {
        self.watched().values().map(|w| w.next_look(wait)).min()
    }

    /// Whether `lock` has been seen expired, its row free at every look, for `wait`; starts or
    /// restarts its watch as what is seen now says. A watch restarts when its row is seen held
    /// and at the first look that finds it free again.
    fn watched_for(&self, lock: &ExpiredLock, wait: Duration) -> bool {
        let now = Instant::now();
        let mut watched = self.watched();
        let watch = watched
            .entry(lock.key.clone())
            .or_insert(Watch::new(now, lock.busy));
        if lock.busy || watch.busy {
            *watch = Watch::new(now, lock.busy);
            return false;
        }
        watch.looked = now;
        if now.saturating_duration_since(watch.since) < wait {
            return false;
        }
        watched.remove(&lock.key);
        true
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
                .insert(lock.key.clone(), Watch::new(Instant::now(), false));
            return RescueDecision::Wait;
        }
        if !self.takeover.watched_for(lock, self.takeover_wait) {
            return RescueDecision::Wait;
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    const WAIT: Duration = Duration::from_secs(1);

    fn lock(busy: bool) -> ExpiredLock {
        ExpiredLock {
            key: LockKey::new("t", uuid::Uuid::nil()),
            owner: "other".into(),
            expired_at: "2026-01-01T00:00:00Z".parse().unwrap(),
            run: None,
            busy,
        }
    }

    async fn after(ms: u64) {
        tokio::time::advance(Duration::from_millis(ms)).await;
    }

    /// Looks at a free row every quarter wait, `n` times; none of them may release.
    async fn free_looks(takeover: &Takeover, n: usize) {
        for _ in 0..n {
            after(250).await;
            assert!(!takeover.watched_for(&lock(false), WAIT));
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_lock_seen_expired_and_free_at_every_look_for_the_wait_may_be_released() {
        let takeover = Takeover::default();
        assert!(!takeover.watched_for(&lock(false), WAIT), "watch starts");
        assert_eq!(
            takeover.next_decision(WAIT),
            Some(Instant::now() + WAIT / 4)
        );
        free_looks(&takeover, 3).await;
        assert_eq!(
            takeover.next_decision(WAIT),
            Some(Instant::now() + WAIT / 4)
        );
        after(250).await;
        assert!(takeover.watched_for(&lock(false), WAIT));
        assert_eq!(
            takeover.next_decision(WAIT),
            None,
            "a decided lock is forgotten"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_held_row_restarts_the_watch_until_a_wait_after_it_is_seen_free() {
        let takeover = Takeover::default();
        assert!(!takeover.watched_for(&lock(false), WAIT));
        free_looks(&takeover, 3).await;
        after(150).await;
        // The row is held: what was watched so far counts for nothing.
        assert!(!takeover.watched_for(&lock(true), WAIT));
        assert_eq!(
            takeover.next_decision(WAIT),
            Some(Instant::now() + WAIT / 4)
        );
        after(250).await;
        // Free again: the watch starts from here.
        assert!(!takeover.watched_for(&lock(false), WAIT));
        free_looks(&takeover, 3).await;
        after(250).await;
        assert!(takeover.watched_for(&lock(false), WAIT));
    }

    #[tokio::test(start_paused = true)]
    async fn a_free_look_a_wait_after_a_held_one_does_not_release() {
        let takeover = Takeover::default();
        assert!(!takeover.watched_for(&lock(true), WAIT));
        after(1000).await;
        assert!(!takeover.watched_for(&lock(false), WAIT));
    }

    #[tokio::test(start_paused = true)]
    async fn locks_no_longer_expired_are_forgotten() {
        let takeover = Takeover::default();
        assert!(!takeover.watched_for(&lock(true), WAIT));
        assert_eq!(
            takeover.retain_waiting(&[lock(false)], WAIT),
            Some(Instant::now() + WAIT / 4)
        );
        assert_eq!(takeover.retain_waiting(&[], WAIT), None);
    }
}
