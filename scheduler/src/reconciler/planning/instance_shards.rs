//! The changes to the shard rows of instances (`task/key[i]`, see `crate::shard`) when their
//! task's shard count changes: an instance's upsert writes its rows for the task's count at the
//! time; a reconcile that finds the task with another count brings every instance made at run
//! time to it, so that each tick of the instance is the task's count of runs, each told its
//! `total` right. Fewer: the rows past the count are disabled (as a task's own are, in `plan`)
//! and the others carry the new count. More: each instance gets the rows it lacks, made as its
//! upsert would have made them (its schedule from its next tick after now, its arguments, tags,
//! limit, jitter and pause copied from its own row), and every row carries the new count (a row
//! disabled by an earlier drop is enabled again by `plan_instances`). A task no longer a
//! broadcast has its instances' own rows unpinned (their node rows are disabled in `plan`); a
//! task made a broadcast has them pinned to no node, and each node's reconcile makes its row.
//!
//! A broadcast task's instance (`task/key`, pinned to no node) has a row per node,
//! `task/key[@node]`: its upsert writes one for each node registering the task then; a node
//! that registers the task later makes its own here, in its reconcile, as it makes its row of
//! the task.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use super::instance_calendars::RuntimeCalendars;
use crate::config::ValidatedConfig;
use crate::store::{InstanceSource, TaskChange, TaskRow};

/// The shard count of `task`'s instances as the document has it: its fixed count (1: none);
/// `None` for a task the document does not accept, and for a broadcast task (its instances'
/// rows are one per node, not per shard).
fn wanted(validated: &ValidatedConfig, task: &str) -> Option<u32> {
    let desired = validated.desired.get(task)?;
    (!desired.broadcast).then_some(desired.shards.max(1))
}

/// Whether `row` is an instance's shard row past its task's shard count (disabled by the
/// reconcile, never enabled again by it).
pub(super) fn past_count(validated: &ValidatedConfig, row: &str) -> bool {
    if crate::instance::split_row(row).is_none() {
        return false;
    }
    let (task, index) = crate::shard::split_row(row);
    index > 0 && wanted(validated, task).is_some_and(|wanted| index >= wanted)
}

/// The count changes: each row of an instance made at run time (not removed) within its task's
/// shard count that carries another count (or, its own row, a broadcast's pin) takes the
/// task's; each such instance's own row gets the shard rows it lacks (created on its schedule,
/// made the instance's). Returns the rows changed and the rows created.
pub(super) fn plan_instance_shards(
    validated: &ValidatedConfig,
    calendars: &RuntimeCalendars<'_>,
    rows: &BTreeMap<&str, &TaskRow>,
    db_now: DateTime<Utc>,
    changes: &mut Vec<TaskChange>,
) -> (Vec<String>, Vec<String>) {
    let (mut updated, mut created) = (Vec::new(), Vec::new());
    for row in rows.values() {
        if row.removed || row.instance_source == InstanceSource::Config {
            continue;
        }
        if crate::instance::split_row(&row.name).is_none()
            || crate::shard::row_node(&row.name).is_some()
        {
            continue;
        }
        let (task, index) = crate::shard::split_row(&row.name);
        let Some(wanted) = wanted(validated, task) else {
            continue;
        };
        if index < wanted && (row.shards != wanted || row.node_pin.is_some()) {
            changes.push(TaskChange::Shards {
                name: row.name.clone(),
                shards: wanted,
                node_pin: None,
            });
            updated.push(row.name.clone());
        }
        if index == 0 {
            created.extend(plan_missing_shards(
                validated, calendars, rows, row, wanted, db_now, changes,
            ));
        }
    }
    (updated, created)
}

/// The shard rows `1..wanted` that instance row `own` (`task/key`) lacks: each created on the
/// instance's schedule (its next tick after now and after the tick it last claimed, at its
/// offset in its window, as `plan_instance_nodes` makes a node's row), enabled with its task, of
/// `wanted` shards grouped under it (its pause taken), and made the instance's (its task, key,
/// arguments, tags, limit and window copied). Returns the rows created.
fn plan_missing_shards(
    validated: &ValidatedConfig,
    calendars: &RuntimeCalendars<'_>,
    rows: &BTreeMap<&str, &TaskRow>,
    own: &TaskRow,
    wanted: u32,
    db_now: DateTime<Utc>,
    changes: &mut Vec<TaskChange>,
) -> Vec<String> {
    let missing: Vec<String> = (1..wanted)
        .map(|index| crate::shard::row_name(&own.name, index))
        .filter(|name| !rows.contains_key(name.as_str()))
        .collect();
    if missing.is_empty() {
        return missing;
    }
    let desired = validated.desired.get(crate::shard::split_row(&own.name).0);
    // Its own calendar as the document has it now (`instance_calendars`).
    let own_calendar = calendars.of(own);
    // Enabled with its task, as `plan_instances` leaves the instance's other rows.
    let enabled = desired.is_some_and(|d| d.enabled);
    let (next_run_at, next_tick) = match crate::ScheduleSpec::parse(&own.cron, &own.timezone) {
        Ok(spec) if enabled => {
            let floor = own
                .last_scheduled_at
                .map_or(db_now, |claimed| claimed.max(db_now));
            let window = own
                .jitter
                .or_else(|| desired.map(|d| d.jitter))
                .unwrap_or_default();
            // Its own calendar, else its task's, as the upsert and the claim read them.
            let stored = own_calendar.clone().or_else(|| {
                let calendar = desired.and_then(|d| d.schedule.calendar());
                calendar.map(|c| c.stored().to_owned())
            });
            let calendar = stored
                .and_then(|s| crate::schedule::TaskCalendar::from_stored(&s).ok())
                .and_then(|c| c.compile(spec.timezone()).ok());
            let spec = match calendar {
                Some(calendar) => spec.with_calendar(calendar),
                None => spec,
            };
            crate::ticks::jitter::next_run(&own.name, &spec, spec.next_after(floor), window)
                .columns()
                .unwrap_or_default()
        }
        _ => (None, None),
    };
    for name in &missing {
        changes.push(TaskChange::Create {
            name: name.clone(),
            cron: own.cron.clone(),
            timezone: own.timezone.clone(),
            calendar: own_calendar.clone(),
            enabled,
            next_run_at,
            next_tick,
        });
        changes.push(TaskChange::Shards {
            name: name.clone(),
            shards: wanted,
            node_pin: None,
        });
        changes.push(TaskChange::InstanceNode {
            name: name.clone(),
            of: own.name.clone(),
        });
    }
    missing
}

/// The node rows this node (`node_id`) lacks of the broadcast instances made at run time (not
/// removed) of its broadcast tasks (an instance's own row made before its task was a broadcast
/// pinned to no node first): created on the instance's schedule (its next tick after
/// now, at its offset in its window), pinned to this node, grouped under the instance's row and
/// made the instance's (its task, key, arguments and own tags copied). Returns the rows created.
pub(super) fn plan_instance_nodes(
    validated: &ValidatedConfig,
    calendars: &RuntimeCalendars<'_>,
    rows: &BTreeMap<&str, &TaskRow>,
    db_now: DateTime<Utc>,
    node_id: &str,
    changes: &mut Vec<TaskChange>,
) -> Vec<String> {
    let mut created = Vec::new();
    for row in rows.values() {
        let Some((task, _)) = crate::instance::split_row(&row.name) else {
            continue;
        };
        if row.removed
            || row.instance_source == InstanceSource::Config
            || crate::shard::group_row(&row.name) != row.name
        {
            continue;
        }
        let Some(desired) = validated.desired.get(task).filter(|d| d.broadcast) else {
            continue;
        };
        if row.node_pin.as_deref() != Some("") {
            // Made while its task was not a broadcast: its own row now holds it, never run
            // (its shard rows, if any, are disabled in `plan` as past the count of 1).
            changes.push(TaskChange::Shards {
                name: row.name.clone(),
                shards: 1,
                node_pin: Some(String::new()),
            });
        }
        let mine = crate::shard::node_row(&row.name, node_id);
        if rows.contains_key(mine.as_str()) {
            continue;
        }
        let (next_run_at, next_tick) = match crate::ScheduleSpec::parse(&row.cron, &row.timezone) {
            Ok(spec) if row.enabled => {
                let window = row.jitter.unwrap_or(desired.jitter);
                crate::ticks::jitter::next_run(&row.name, &spec, spec.next_after(db_now), window)
                    .columns()
                    .unwrap_or_default()
            }
            _ => (None, None),
        };
        changes.push(TaskChange::Create {
            name: mine.clone(),
            cron: row.cron.clone(),
            timezone: row.timezone.clone(),
            calendar: calendars.of(row),
            enabled: row.enabled,
            next_run_at,
            next_tick,
        });
        changes.push(TaskChange::Shards {
            name: mine.clone(),
            shards: 1,
            node_pin: Some(node_id.to_owned()),
        });
        changes.push(TaskChange::InstanceNode {
            name: mine.clone(),
            of: row.name.clone(),
        });
        created.push(mine);
    }
    created
}
