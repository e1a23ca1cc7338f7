//! The changes to the shard rows of instances (`task/key[i]`, see `crate::shard`) when their
//! task's shard count drops: an instance's upsert writes its rows for the task's count at the
//! time; a reconcile that finds the task with fewer shards disables the rows past the count (as
//! it does a task's own, in `plan`) and brings the count the others carry down to it, so that
//! each tick of the instance is the task's count of runs, each told its `total` right. A count
//! that grows reaches an instance at its next upsert (which writes the rows it lacks).
//!
//! A broadcast task's instance (`task/key`, pinned to no node) has a row per node,
//! `task/key[@node]`: its upsert writes one for each node registering the task then; a node
//! that registers the task later makes its own here, in its reconcile, as it makes its row of
//! the task.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

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
/// shard count that carries a larger count takes the task's. Returns the rows changed.
pub(super) fn plan_instance_shards(
    validated: &ValidatedConfig,
    rows: &BTreeMap<&str, &TaskRow>,
    changes: &mut Vec<TaskChange>,
) -> Vec<String> {
    let mut updated = Vec::new();
    for row in rows.values() {
        if row.removed || row.instance_source == InstanceSource::Config {
            continue;
        }
        if crate::instance::split_row(&row.name).is_none() {
            continue;
        }
        let (task, index) = crate::shard::split_row(&row.name);
        let Some(wanted) = wanted(validated, task) else {
            continue;
        };
        if index < wanted && row.shards > wanted {
            changes.push(TaskChange::Shards {
                name: row.name.clone(),
                shards: wanted,
                node_pin: None,
            });
            updated.push(row.name.clone());
        }
    }
    updated
}

/// The node rows this node (`node_id`) lacks of the broadcast instances made at run time (not
/// removed) of its broadcast tasks: created on the instance's schedule (its next tick after
/// now, at its offset in its window), pinned to this node, grouped under the instance's row and
/// made the instance's (its task, key, arguments and own tags copied). Returns the rows created.
pub(super) fn plan_instance_nodes(
    validated: &ValidatedConfig,
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
            || row.node_pin.as_deref() != Some("")
            || crate::shard::group_row(&row.name) != row.name
        {
            continue;
        }
        let Some(desired) = validated.desired.get(task).filter(|d| d.broadcast) else {
            continue;
        };
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
            calendar: row.calendar.clone(),
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
