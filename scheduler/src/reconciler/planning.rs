//! The plan: the changes that bring the store's rows to the config's desired state, and the
//! report describing them. Pure: no I/O, the database's clock passed in.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};

mod config_instances;
mod instance_calendars;
mod instance_shards;

use super::ReconcileReport;
use crate::TaskRegistry;
use crate::config::{ConfigDocument, ValidatedConfig};
use crate::store::{TaskChange, TaskRow};

/// Computes the changes that bring `rows` to the desired state, and the report describing them,
/// as node `node_id` reconciles (a broadcast task's row for that node is created by it; see
/// [`crate::shard`]).
///
/// Pure: no I/O, `db_now` is the database's clock. Next runs are computed strictly after it.
pub fn plan(
    doc: &ConfigDocument,
    validated: &ValidatedConfig,
    registry: &TaskRegistry,
    rows: &[TaskRow],
    db_now: DateTime<Utc>,
    node_id: &str,
) -> (Vec<TaskChange>, ReconcileReport) {
    let rows: BTreeMap<&str, &TaskRow> = rows.iter().map(|r| (r.name.as_str(), r)).collect();
    let mut changes = Vec::new();
    let mut report = ReconcileReport::default();

    for desired in validated.desired.values() {
        for index in 0..desired.shards.max(1) {
            let name = crate::shard::row_name(&desired.name, index);
            plan_row(
                &name,
                desired,
                rows.get(name.as_str()).copied(),
                db_now,
                &mut changes,
                &mut report,
            );
        }
        if desired.broadcast {
            // This node's row is created by its own reconcile (its claims are the only ones
            // that take it); every node's row follows the task's schedule.
            let mine = crate::shard::node_row(&desired.name, node_id);
            if !rows.contains_key(mine.as_str()) {
                plan_row(&mine, desired, None, db_now, &mut changes, &mut report);
            }
            for row in rows.values() {
                // The task's node rows (an instance's follow its own schedule).
                if crate::shard::row_node(&row.name).is_some()
                    && crate::shard::group_row(&row.name) == desired.name
                {
                    plan_row(
                        &row.name,
                        desired,
                        Some(row),
                        db_now,
                        &mut changes,
                        &mut report,
                    );
                }
            }
        }
    }
    // Node rows of a task that is no longer a broadcast (or is absent from the config):
    // disabled, kept.
    for row in rows.values() {
        if crate::shard::row_node(&row.name).is_none() || !row.enabled {
            continue;
        }
        let task = crate::shard::split_row(&row.name).0;
        if !validated.desired.get(task).is_some_and(|d| d.broadcast) {
            disable_kept(row, &mut changes, &mut report);
        }
    }
    // Shards of a task that has fewer now (or is absent from the config): disabled, kept. An
    // instance's shards (`task/key[i]`) too, while its task is in the document (else
    // `plan_instances` decides for all its rows).
    for row in rows.values() {
        let (task, index) = crate::shard::split_row(&row.name);
        if index == 0 || !row.enabled {
            continue;
        }
        if crate::instance::split_row(&row.name).is_some() && !validated.desired.contains_key(task)
        {
            continue;
        }
        let wanted = validated.desired.get(task).map_or(0, |d| d.shards);
        if index >= wanted {
            disable_kept(row, &mut changes, &mut report);
        }
    }

    plan_task_windows(validated, &rows, &mut changes, &mut report);
    let calendars = instance_calendars::RuntimeCalendars::new(doc, validated);
    plan_instances(
        validated,
        &calendars,
        &rows,
        db_now,
        &mut changes,
        &mut report,
    );
    let (resharded, grown) =
        instance_shards::plan_instance_shards(validated, &calendars, &rows, db_now, &mut changes);
    report.updated.extend(resharded);
    report.created.extend(grown);
    let mine = instance_shards::plan_instance_nodes(
        validated,
        &calendars,
        &rows,
        db_now,
        node_id,
        &mut changes,
    );
    report.created.extend(mine);
    let (rewritten, kept) =
        instance_calendars::plan_instance_calendars(&calendars, &rows, db_now, &mut changes);
    report.updated.extend(rewritten);
    report.kept_calendars = kept;
    config_instances::plan_config_instances(
        validated,
        &rows,
        db_now,
        node_id,
        &mut changes,
        &mut report,
    );

    for name in &validated.absent {
        report.absent.push(name.clone());
        if let Some(row) = rows.get(name.as_str())
            && row.enabled
        {
            disable_kept(row, &mut changes, &mut report);
            report.removed.push(name.clone());
        }
    }

    for refusal in &validated.refused {
        report
            .refused
            .push((refusal.name.clone(), refusal.reason.to_string()));
    }

    let in_config: BTreeSet<&str> = doc.tasks.iter().map(|t| t.name.as_str()).collect();
    for row in rows.values() {
        if crate::instance::split_row(&row.name).is_some() {
            continue; // an instance is never the document's (see plan_instances)
        }
        if !in_config.contains(row.name.as_str()) && !registry.contains(&row.name) {
            report.orphaned.push(row.name.clone());
            if row.orphaned_since.is_none() {
                changes.push(TaskChange::Orphaned {
                    name: row.name.clone(),
                    orphaned: true,
                });
                report.newly_orphaned.push(row.name.clone());
            }
        }
    }
    (changes, report)
}

/// The jitter window stored on each accepted task's own row: the task's window (its config
/// entry's, else its attribute's, else zero), written when it differs from the row's. Writers
/// without the config read it there: an instance upsert through the admin API or the command
/// line starts its first tick at its offset in the task's window, and the upkeep's repair.
fn plan_task_windows(
    validated: &ValidatedConfig,
    rows: &BTreeMap<&str, &TaskRow>,
    changes: &mut Vec<TaskChange>,
    report: &mut ReconcileReport,
) {
    for desired in validated.desired.values() {
        let window = Some(desired.jitter);
        let row = rows.get(desired.name.as_str());
        if row.is_some_and(|r| r.jitter == window) {
            continue;
        }
        changes.push(TaskChange::Jitter {
            name: desired.name.clone(),
            window,
        });
        // A row the rest of the plan left unchanged is updated now.
        let listed = [
            &report.updated,
            &report.enabled,
            &report.disabled,
            &report.repaired,
        ]
        .iter()
        .any(|names| names.contains(&desired.name));
        if row.is_some() && !listed {
            report.updated.push(desired.name.clone());
            report.unchanged = report.unchanged.saturating_sub(1);
        }
    }
}

/// The changes to the instances of the tasks (rows `task/key`, see `crate::instance`): a
/// document never disables nor deletes an instance, but an instance runs only while its task is
/// enabled. An instance of a task the document disables (or removes as absent) is disabled
/// with it; one of a task the document enables is enabled with it, from its schedule's first
/// tick after now (and after the tick last claimed), the ticks in between not run, as for a
/// task enabled again. Instances of a task the document says nothing of, and removed ones, are
/// left as they are. A row enabled or disabled takes the rules the document now gives the
/// calendar it names, if it names one (`instance_calendars`).
fn plan_instances(
    validated: &ValidatedConfig,
    calendars: &instance_calendars::RuntimeCalendars<'_>,
    rows: &BTreeMap<&str, &TaskRow>,
    db_now: DateTime<Utc>,
    changes: &mut Vec<TaskChange>,
    report: &mut ReconcileReport,
) {
    for row in rows.values() {
        let Some((task, _)) = crate::instance::split_row(&row.name) else {
            continue;
        };
        if row.removed {
            continue;
        }
        if row.instance_source == crate::store::InstanceSource::Config
            && validated.desired.contains_key(task)
        {
            continue; // the document's own (see `config_instances`)
        }
        let enabled = match validated.desired.get(task) {
            Some(desired) => desired.enabled,
            None if validated.absent.iter().any(|a| a == task) => false,
            None => continue,
        };
        if enabled == row.enabled || instance_shards::past_count(validated, &row.name) {
            continue;
        }
        let calendar = calendars.of(row);
        let (next_run_at, next_tick) = match crate::ScheduleSpec::parse(&row.cron, &row.timezone) {
            Ok(spec) if enabled => {
                let floor = row
                    .last_scheduled_at
                    .map_or(db_now, |claimed| claimed.max(db_now));
                // Its own window, else its task's (the config entry's, else the attribute's).
                let window = row
                    .jitter
                    .or_else(|| validated.desired.get(task).map(|d| d.jitter))
                    .unwrap_or_default();
                crate::ticks::jitter::next_run(&row.name, &spec, spec.next_after(floor), window)
                    .columns()
                    .unwrap_or_default()
            }
            _ => (None, None),
        };
        changes.push(TaskChange::Update {
            name: row.name.clone(),
            cron: row.cron.clone(),
            timezone: row.timezone.clone(),
            calendar,
            enabled,
            next_run_at,
            next_tick,
        });
        if enabled {
            report.enabled.push(row.name.clone());
        } else {
            report.disabled.push(row.name.clone());
        }
    }
}

/// The changes that bring one row (a task's, one of its shards', or an instance's, named
/// `name`) to `desired`.
/// Disables `row`, keeping it (its schedule as stored, no next run): what the config does to a
/// row it no longer wants run.
pub(super) fn disable_kept(
    row: &TaskRow,
    changes: &mut Vec<TaskChange>,
    report: &mut ReconcileReport,
) {
    changes.push(TaskChange::Update {
        name: row.name.clone(),
        cron: row.cron.clone(),
        timezone: row.timezone.clone(),
        calendar: row.calendar.clone(),
        enabled: false,
        next_run_at: None,
        next_tick: None,
    });
    report.disabled.push(row.name.clone());
}

pub(super) fn plan_row(
    name: &str,
    desired: &crate::config::DesiredTask,
    row: Option<&TaskRow>,
    db_now: DateTime<Utc>,
    changes: &mut Vec<TaskChange>,
    report: &mut ReconcileReport,
) {
    let cron = desired.schedule.expression().to_owned();
    let timezone = desired.schedule.timezone().name().to_owned();
    // Stored beside the cron so every node applies the same calendar.
    let calendar = desired.schedule.calendar().map(|c| c.stored().to_owned());
    // Never at or before a tick already claimed: a claim may have advanced the row since. The
    // tick starts at its offset in the task's window (see `crate::ticks::jitter`): the start,
    // and the tick when jitter shifted the start off it.
    let next = |row: Option<&TaskRow>| {
        let floor = row
            .and_then(|r| r.last_scheduled_at)
            .map_or(db_now, |claimed| claimed.max(db_now));
        let tick = if desired.enabled {
            desired.schedule.next_after(floor)
        } else {
            None
        };
        crate::ticks::jitter::next_run(name, &desired.schedule, tick, desired.jitter)
            .columns()
            .unwrap_or_default()
    };
    let Some(row) = row else {
        let (next_run_at, next_tick) = next(None);
        changes.push(TaskChange::Create {
            name: name.to_owned(),
            cron,
            timezone,
            calendar,
            enabled: desired.enabled,
            next_run_at,
            next_tick,
        });
        report.created.push(name.to_owned());
        if desired.limit.is_some() {
            changes.push(TaskChange::Limit {
                name: name.to_owned(),
                limit: desired.limit.clone(),
            });
        }
        let node_pin = node_pin(name, desired);
        if desired.shards > 1 || node_pin.is_some() {
            changes.push(TaskChange::Shards {
                name: name.to_owned(),
                shards: desired.shards.max(1),
                node_pin,
            });
        }
        return;
    };
    let schedule_changed = row.cron != cron || row.timezone != timezone || row.calendar != calendar;
    let enabling = desired.enabled && !row.enabled;
    let disabling = !desired.enabled && row.enabled;
    if row.paused {
        report.paused.push(name.to_owned());
    }
    if enabling && let Some(since) = row.disabled_at {
        report
            .disabled_ticks
            .extend(crate::ticks::ticks_while_disabled(
                name,
                &desired.schedule,
                since,
                db_now,
            ));
    }
    let unscheduled = desired.enabled && row.next_run_at.is_none();
    let node_pin = node_pin(name, desired);
    let reshard = row.shards != desired.shards.max(1) || row.node_pin != node_pin;
    if reshard {
        changes.push(TaskChange::Shards {
            name: name.to_owned(),
            shards: desired.shards.max(1),
            node_pin,
        });
        report.updated.push(name.to_owned());
    }
    let relimit = row.limit != desired.limit;
    if relimit {
        changes.push(TaskChange::Limit {
            name: name.to_owned(),
            limit: desired.limit.clone(),
        });
        if !reshard {
            report.updated.push(name.to_owned());
        }
    }
    if !schedule_changed && !enabling && !disabling && !unscheduled && row.orphaned_since.is_none()
    {
        if !reshard && !relimit {
            report.unchanged += 1;
        }
        return;
    }
    let recompute = desired.enabled && (schedule_changed || enabling || unscheduled);
    let (next_run_at, next_tick) = if recompute {
        next(Some(row))
    } else {
        (None, None)
    };
    changes.push(TaskChange::Update {
        name: name.to_owned(),
        cron,
        timezone,
        calendar,
        enabled: desired.enabled,
        next_run_at,
        next_tick,
    });
    if schedule_changed && !reshard && !relimit {
        report.updated.push(name.to_owned());
    }
    if enabling {
        report.enabled.push(name.to_owned());
    }
    if disabling {
        report.disabled.push(name.to_owned());
    }
    if unscheduled && !(schedule_changed || enabling) {
        report.repaired.push(name.to_owned());
    }
    if !(schedule_changed || enabling || disabling || unscheduled) {
        report.unchanged += 1;
    }
}

/// The node row `name` of `desired` is pinned to: a broadcast task's node row to its node, its
/// own row to none (`""`, never claimed); `None` (any node) otherwise.
fn node_pin(name: &str, desired: &crate::config::DesiredTask) -> Option<String> {
    if !desired.broadcast {
        return None;
    }
    Some(crate::shard::row_node(name).unwrap_or_default().to_owned())
}
