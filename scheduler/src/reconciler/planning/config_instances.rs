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
            // The instance as a row of its own, planned as a task's row is.
            let as_row = DesiredTask {
                name: name.clone(),
                enabled: instance.enabled,
                schedule: instance.schedule.clone(),
                sla: None,
                owners: Vec::new(),
                labels: BTreeMap::new(),
                shards: 1,
                broadcast: false,
                instances: BTreeMap::new(),
                // Its task's window (a config instance names none of its own).
                jitter: desired.jitter,
                // Its own, else (none) its task's: the claim reads the task's.
                limit: instance.limit.clone(),
            };
            plan_row(&name, &as_row, row, db_now, changes, report);
            let tags = InstanceTags::new(instance.owners.clone(), instance.labels.clone())
                .with_sla(instance.sla.clone());
            let args_changed = row.is_some_and(|r| r.args != instance.args || r.tags != tags);
            let owned = row.is_some_and(|r| r.instance_source == InstanceSource::Config);
            if row.is_none() || args_changed || !owned || row.is_some_and(|r| r.removed) {
                if args_changed && !report.updated.contains(&name) {
                    report.updated.push(name.clone());
                    report.unchanged = report.unchanged.saturating_sub(1);
                }
                changes.push(TaskChange::ConfigInstance {
                    name,
                    task: desired.name.clone(),
                    key: instance.key.clone(),
                    args: instance.args.clone(),
                    tags,
                });
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
