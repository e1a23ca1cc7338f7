//! Task rows and the config: what the reconciler reads and writes.

use chrono::{DateTime, Utc};

use super::bind::micros;
use super::writes::insert_skips;
use crate::store::config::{ChangesByKind, RECONCILE_BATCH, TaskWrite};
use crate::store::records::{config_state_of, task_row};
use crate::store::sqlite::SqliteStore;
use crate::store::writes::{copy_instance_nodes_on, mark_config_instances_on, save_config_state};
use crate::store::{ConfigPlan, ConfigPlanner, ConfigSnapshot, StoreResult, TaskRow};

pub(super) async fn load_tasks(store: &SqliteStore) -> StoreResult<(DateTime<Utc>, Vec<TaskRow>)> {
    read!(store, "load_tasks", |conn, now| {
        let rows = sqlx::query(query!("load_tasks")).fetch_all(conn).await?;
        let tasks = rows.iter().map(task_row).collect::<Result<Vec<_>, _>>()?;
        (now, tasks)
    })
}

pub(super) async fn apply_config(
    store: &SqliteStore,
    planner: &ConfigPlanner<'_>,
) -> StoreResult<ConfigPlan> {
    let plan = write_tx!(store, "apply_config", |tx, now| {
        // The write lock is held from here on: no claim or other reconcile can interleave,
        // which is what PostgreSQL's config-state row lock and FOR UPDATE achieve.
        let state = sqlx::query(shared_query!("config_state"))
            .fetch_optional(&mut *tx)
            .await?
            .as_ref()
            .map(config_state_of)
            .transpose()?;
        let rows = sqlx::query(query!("load_tasks"))
            .fetch_all(&mut *tx)
            .await?
            .iter()
            .map(task_row)
            .collect::<Result<Vec<_>, _>>()?;
        let plan = planner(&ConfigSnapshot::of(now, state, rows));
        let Some((changes, state, skips)) = plan.writes() else {
            // Nothing to write; the transaction rolls back.
            return Ok(plan);
        };
        let by_kind = ChangesByKind::of(changes);
        for task in &by_kind.creates {
            sqlx::query(query!("tasks_create"))
                .bind(task.name)
                .bind(task.cron)
                .bind(task.timezone)
                .bind(task.enabled)
                .bind(task.next_run_at.map(micros))
                .bind(micros(now))
                .bind(task.calendar)
                .bind(task.next_tick.map(micros))
                .execute(&mut *tx)
                .await?;
        }
        // The updates in statements of at most RECONCILE_BATCH rows: a change reaching every
        // instance of a task (a calendar its instances name) is a few statements.
        for batch in by_kind.updates.chunks(RECONCILE_BATCH) {
            sqlx::query(query!("tasks_update"))
                .bind(updates_json(batch))
                .bind(micros(now))
                .execute(&mut *tx)
                .await?;
        }
        for shard in &by_kind.shards {
            sqlx::query(query!("tasks_shards"))
                .bind(shard.row)
                .bind(i64::from(shard.shards))
                .bind(shard.shard_of)
                .bind(micros(now))
                .bind(shard.node_pin)
                .execute(&mut *tx)
                .await?;
        }
        for (name, limit) in &by_kind.limits {
            sqlx::query(query!("tasks_limit"))
                .bind(name)
                .bind(limit)
                .bind(micros(now))
                .execute(&mut *tx)
                .await?;
        }
        for (name, window) in &by_kind.jitters {
            sqlx::query(query!("tasks_jitter"))
                .bind(name)
                .bind(window)
                .bind(micros(now))
                .execute(&mut *tx)
                .await?;
        }
        for (name, orphaned) in &by_kind.orphans {
            sqlx::query(query!("tasks_orphaned"))
                .bind(name)
                .bind(orphaned)
                .bind(micros(now))
                .execute(&mut *tx)
                .await?;
        }
        mark_config_instances_on::<SqliteStore>(&mut tx, now, &by_kind.instances).await?;
        copy_instance_nodes_on::<SqliteStore>(&mut tx, now, &by_kind.instance_nodes).await?;
        insert_skips(&mut tx, skips, now).await?;
        save_config_state::<SqliteStore>(&mut tx, now, state).await?;
        plan
    })?;
    if plan.writes().is_some() {
        store.inner.wake();
    }
    Ok(plan)
}

/// `tasks`, the list `tasks_update` reads: `{name, cron, timezone, enabled, next_run_at,
/// calendar, next_tick}` each, times in microseconds.
fn updates_json(tasks: &[TaskWrite<'_>]) -> String {
    let list: Vec<serde_json::Value> = tasks
        .iter()
        .map(|task| {
            serde_json::json!({
                "name": task.name,
                "cron": task.cron,
                "timezone": task.timezone,
                "enabled": task.enabled,
                "next_run_at": task.next_run_at.map(micros),
                "calendar": task.calendar,
                "next_tick": task.next_tick.map(micros),
            })
        })
        .collect();
    serde_json::Value::Array(list).to_string()
}
