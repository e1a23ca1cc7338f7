//! The changes to the instances the document declares (a task entry's `instances`, see
//! `crate::config::InstanceConfig`). The reconciler owns them as it owns tasks:
//!
//! | declared instance | row `task/key` | what happens |
//! |---|---|---|
//! | accepted | none | created, the config's (`instance_source = 'config'`), enabled if it and its task are; paused with its task while the task's pause is in force (the store's mark, as an upsert at run time) |
//! | accepted | the config's | changed in place like a task's row (cron, zone, `enabled`, its own `limit`; the next run recomputed after the tick last claimed), its arguments and own owners, labels and `sla` rewritten when they changed |
//! | accepted | made at run time | refused, with the reason: a reconcile never touches an instance made through `Schedules` or the API |
//! | accepted | made at run time and removed, its run in flight | taken over: the config's from now on |
//! | refused (bad key, cron, zone, arguments) | any | left as it is (its last good state) |
//! | no longer declared, its task's entry accepted | the config's | disabled, never deleted |
//! | its task absent from the document | any | disabled with its task (`plan_instances`) |
//! | its task's entry refused | any | left as it is |
//!
//! Each row above is every row of the instance: of a task with shards, its own and one per
//! shard (`task/key[i]`); of a broadcast task, its own (pinned to no node, never run) and one
//! per node (`task/key[@node]`, each node's made by that node's reconcile), as an instance made
//! at run time has them (`crate::shard`). A shard past its task's count is disabled, kept, as a
//! task's is (`plan`).

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};

use super::super::ReconcileReport;
use super::plan_row;
use crate::config::{DesiredTask, ValidatedConfig};
use crate::store::{InstanceSource, InstanceTags, TaskChange, TaskRow};

/// The changes that bring the config's instances to what `validated` declares.
pub(super) fn plan_config_instances(
    validated: &ValidatedConfig,
    rows: &BTreeMap<&str, &TaskRow>,
    db_now: DateTime<Utc>,
    node_id: &str,
    changes: &mut Vec<TaskChange>,
    report: &mut ReconcileReport,
) {
    for desired in validated.desired.values() {
        for instance in desired.instances.values() {
            let name = crate::instance::row_name(&desired.name, &instance.key);
            let row = rows.get(name.as_str()).copied();
            if let Some(row) = row
                && row.instance_source == InstanceSource::Runtime
                && !row.removed
            {
                report.refused.push((
                    name,
                    format!(
                        "instance `{}` of `{}` was made at run time (Schedules or the admin API), \
                         and a reconcile never changes such an instance: remove it there, or \
                         declare another key",
                        instance.key, desired.name
                    ),
                ));
                continue;
            }
            // The instance as a task of its own, each of its rows planned as a task's row is:
            // with its task's shards, or a row per node for a broadcast task.
            let as_task = DesiredTask {
                name: name.clone(),
                enabled: instance.enabled,
                schedule: instance.schedule.clone(),
                sla: None,
                owners: Vec::new(),
                labels: BTreeMap::new(),
                shards: desired.shards,
                broadcast: desired.broadcast,
                instances: BTreeMap::new(),
                // Its task's window (a config instance names none of its own).
                jitter: desired.jitter,
                // Its own, else (none) its task's: the claim reads the task's.
                limit: instance.limit.clone(),
            };
            let tags = InstanceTags::new(instance.owners.clone(), instance.labels.clone())
                .with_sla(instance.sla.clone());
            for row_name in instance_rows(&as_task, rows, node_id) {
                let row = rows.get(row_name.as_str()).copied();
                plan_row(&row_name, &as_task, row, db_now, changes, report);
                let args_changed = row.is_some_and(|r| r.args != instance.args || r.tags != tags);
                let owned = row.is_some_and(|r| r.instance_source == InstanceSource::Config);
                if row.is_none() || args_changed || !owned || row.is_some_and(|r| r.removed) {
                    if args_changed && !report.updated.contains(&row_name) {
                        report.updated.push(row_name.clone());
                        report.unchanged = report.unchanged.saturating_sub(1);
                    }
                    changes.push(TaskChange::ConfigInstance {
                        name: row_name,
                        task: desired.name.clone(),
                        key: instance.key.clone(),
                        args: instance.args.clone(),
                        tags: tags.clone(),
                    });
                }
            }
        }
    }
    // The config's instances no longer declared by an accepted entry: disabled, kept.
    let refused: BTreeSet<&str> = validated.refused.iter().map(|r| r.name.as_str()).collect();
    for row in rows.values() {
        if row.instance_source != InstanceSource::Config || row.removed || !row.enabled {
            continue;
        }
        let Some((task, key)) = crate::instance::split_row(&row.name) else {
            continue;
        };
        let Some(desired) = validated.desired.get(task) else {
            continue; // absent: disabled with its task; refused: kept
        };
        if desired.instances.contains_key(key) || refused.contains(row.name.as_str()) {
            continue;
        }
        super::disable_kept(row, changes, report);
    }
}

/// The rows of a config instance planned as the task `instance` (named `task/key`, with its
/// task's shards and broadcast): its own row (shard 0; a broadcast's, pinned to no node, never
/// run), each shard's (`task/key[i]`), and for a broadcast task this node's (`task/key[@node]`,
/// made by this node's reconcile, as its row of the task is) and every other node's it has.
/// The rows an instance made at run time has (`crate::shard`), planned as its task's are.
fn instance_rows(
    instance: &DesiredTask,
    rows: &BTreeMap<&str, &TaskRow>,
    node_id: &str,
) -> Vec<String> {
    let mut names: Vec<String> = (0..instance.shards.max(1))
        .map(|index| crate::shard::row_name(&instance.name, index))
        .collect();
    if instance.broadcast {
        names.push(crate::shard::node_row(&instance.name, node_id));
        for row in rows.values() {
            if crate::shard::row_node(&row.name).is_some()
                && crate::shard::group_row(&row.name) == instance.name
                && !names.contains(&row.name)
            {
                names.push(row.name.clone());
            }
        }
    }
    names
}
