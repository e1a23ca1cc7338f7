//! What an upsert decides: a [`Schedule`](super::Schedule) checked for its write
//! ([`Prepared`]: the row, its audit entry, what its decision needs) and the decision on the
//! rows the store reads for it ([`plan_upsert`]). The store applies the decision; it makes none.

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::Instance;
use crate::ScheduleSpec;
use crate::instance::InstanceRefusal;
use crate::store::{AuditEntry, InstancePlan, InstanceUpsert, InstanceWrite};

/// A schedule checked for its upsert: its write, its audit entry, and what its decision needs.
pub(super) struct Prepared {
    pub(super) write: InstanceWrite,
    pub(super) spec: ScheduleSpec,
    /// Its jitter window: its own, else its task's.
    pub(super) window: Duration,
    pub(super) audit: AuditEntry,
}

impl Prepared {
    /// Its upsert's decision on the rows read (see [`plan_upsert`]).
    pub(super) fn plan(
        &self,
        facts: &crate::store::InstanceFacts,
        now: DateTime<Utc>,
    ) -> InstancePlan {
        plan_upsert(&self.write, &self.spec, self.window, facts, now)
    }

    /// What the store did with it, as `upsert` answers.
    pub(super) fn outcome(&self, done: InstanceUpsert) -> crate::Result<Instance> {
        let task = self.write.task.clone();
        match done {
            InstanceUpsert::Written(record) => Ok(Instance::of(record)),
            InstanceUpsert::NoTask => Err(InstanceRefusal::TaskNotStored { task }.into()),
            InstanceUpsert::Sharded => Err(InstanceRefusal::Sharded { task }.into()),
            InstanceUpsert::ConfigOwned => Err(InstanceRefusal::ConfigOwned {
                task,
                key: self.write.key.clone(),
            }
            .into()),
        }
    }
}

/// The upsert's decision on the rows it read (an instance's own row, or one of its shard or
/// node rows): refused without the task's own row, or for an instance the config document
/// owns; else the instance is enabled with
/// its task, and its next run is kept unless the schedule or its own jitter changed, the
/// instance is new or comes back after its removal, or it had none (then the schedule's first
/// tick after now, and after the last tick claimed, starting at its offset in `window`, see
/// `crate::ticks::jitter`). The task's pause in force, if any, goes with the write: the instance
/// takes it unless it is paused already.
pub(super) fn plan_upsert(
    write: &InstanceWrite,
    spec: &ScheduleSpec,
    window: Duration,
    facts: &crate::store::InstanceFacts,
    now: DateTime<Utc>,
) -> InstancePlan {
    let Some(task) = &facts.task else {
        return InstancePlan::NoTask;
    };
    if facts
        .existing
        .as_ref()
        .is_some_and(|row| row.source == crate::store::InstanceSource::Config && !row.removed)
    {
        return InstancePlan::ConfigOwned;
    }
    let enabled = task.enabled;
    // Its own window, else its task's as the reconcile stored it, else as the caller knows it.
    let window = match write.jitter {
        Some(own) => own,
        None => task.jitter.unwrap_or(window),
    };
    let row = write.row();
    // Its own calendar (already on `spec`), else its task's, read in its zone (the claim reads
    // it so after this first tick).
    let with_calendar = task
        .calendar
        .as_deref()
        .filter(|_| write.calendar.is_none())
        .and_then(|stored| crate::schedule::TaskCalendar::from_stored(stored).ok())
        .and_then(|calendar| calendar.compile(spec.timezone()).ok())
        .map(|calendar| spec.clone().with_calendar(calendar));
    let spec = with_calendar.as_ref().unwrap_or(spec);
    let next = |floor: Option<DateTime<Utc>>| {
        let floor = floor.map_or(now, |claimed| claimed.max(now));
        let tick = if enabled {
            spec.next_after(floor)
        } else {
            None
        };
        crate::ticks::jitter::next_run(&row, spec, tick, window)
            .columns()
            .unwrap_or_default()
    };
    let (next_run_at, next_tick) = match &facts.existing {
        Some(row)
            if !row.removed
                && row.cron == write.cron
                && row.timezone == write.timezone
                && row.jitter == write.jitter
                && row.calendar == write.calendar
                && row.enabled == enabled
                && (row.next_run_at.is_some() || !enabled) =>
        {
            (row.next_run_at, row.next_tick)
        }
        Some(row) => next(row.last_scheduled_at),
        None => next(None),
    };
    // The task's pause in force: an instance made (or found unpaused) while its task is paused
    // is held with it, as pausing the task holds those it finds.
    let pause = task.pause.clone().filter(|pause| pause.in_force(now));
    InstancePlan::Write {
        enabled,
        next_run_at,
        next_tick,
        pause,
    }
}

/// What the audit log says of the upsert of `write` (its calendar named `calendar`, in a batch
/// of `batch`, if any).
pub(super) fn audit_detail(
    write: &InstanceWrite,
    calendar: Option<&str>,
    batch: Option<usize>,
) -> String {
    let mut detail = format!("{} cron `{}` in {}", write.key, write.cron, write.timezone);
    if let Some(args) = &write.args {
        // Audited as every view shows arguments: their secrets hidden.
        detail.push_str(" with args ");
        detail.push_str(&crate::redact::redact_args_text(args));
    }
    if let Some(jitter) = write.jitter {
        detail.push_str(&format!(" jitter {}", humantime::format_duration(jitter)));
    }
    if !write.tags.owners.is_empty() {
        detail.push_str(&format!(" owners {}", write.tags.owners.join(", ")));
    }
    if !write.tags.labels.is_empty() {
        let labels = crate::config::labels_text(&write.tags.labels);
        detail.push_str(&format!(" labels {labels}"));
    }
    if let Some(limit) = &write.limit {
        detail.push_str(&format!(" limit {limit}"));
    }
    if let Some(sla) = &write.tags.sla {
        detail.push_str(&format!(" sla {sla}"));
    }
    if let Some(name) = calendar {
        detail.push_str(&format!(" calendar {name}"));
    }
    if let Some(count) = batch {
        detail.push_str(&format!(" in a batch of {count}"));
    }
    detail
}
