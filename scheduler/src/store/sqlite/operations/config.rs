//! Task rows and the config: what the reconciler reads and writes.

use chrono::{DateTime, Utc};
use sqlx::Row;
use sqlx::sqlite::SqliteRow;

use super::{insert_skips, micros, time_opt};
use crate::store::sqlite::SqliteStore;
use crate::store::{
    ConfigPlan, ConfigPlanner, ConfigSnapshot, ConfigState, StoreResult, TaskChange, TaskRow,
};

fn task_row(row: &SqliteRow) -> Result<TaskRow, sqlx::Error> {
    let mut task = TaskRow::new(
        row.try_get("name")?,
        row.try_get("cron")?,
        row.try_get("timezone")?,
        row.try_get("enabled")?,
    );
    task.calendar = row.try_get("calendar")?;
    task.next_run_at = time_opt(row, "next_run_at")?;
    task.last_scheduled_at = time_opt(row, "last_scheduled_at")?;
    task.orphaned_since = time_opt(row, "orphaned_since")?;
    task.disabled_at = time_opt(row, "disabled_at")?;
    task.paused = row.try_get("paused")?;
    task.shards = u32::try_from(row.try_get::<i64, _>("shards")?).unwrap_or(1);
    task.node_pin = row.try_get("node_pin")?;
    Ok(task)
}

fn config_state_of(row: &SqliteRow) -> Result<ConfigState, sqlx::Error> {
    Ok(ConfigState::new(
        row.try_get("version")?,
        row.try_get::<String, _>("digest")?,
        row.try_get::<String, _>("applied_by")?,
    ))
}

pub(super) async fn load_tasks(store: &SqliteStore) -> StoreResult<(DateTime<Utc>, Vec<TaskRow>)> {
    read!(store, "load_tasks", |conn, now| {
        let rows = sqlx::query(query!("load_tasks")).fetch_all(conn).await?;
        let tasks = rows.iter().map(task_row).collect::<Result<Vec<_>, _>>()?;
        (now, tasks)
    })
}

pub(super) async fn config_state(store: &SqliteStore) -> StoreResult<Option<ConfigState>> {
    read!(store, "config_state", |conn, _now| {
        let row = sqlx::query(query!("config_state"))
            .fetch_optional(conn)
            .await?;
        row.map(|row| config_state_of(&row)).transpose()?
    })
}

pub(super) async fn apply_config(
    store: &SqliteStore,
    planner: &ConfigPlanner<'_>,
) -> StoreResult<ConfigPlan> {
    let plan = write_tx!(store, "apply_config", |tx, now| {
        // The write lock is held from here on: no claim or other reconcile can interleave,
        // which is what PostgreSQL's config-state row lock and FOR UPDATE achieve.
        let applied = sqlx::query(query!("config_state"))
            .fetch_optional(&mut *tx)
            .await?
            .map(|row| config_state_of(&row))
            .transpose()?
            // A row with an empty digest records no document.
            .filter(|state| !state.digest.is_empty());
        let rows = sqlx::query(query!("load_tasks"))
            .fetch_all(&mut *tx)
            .await?
            .iter()
            .map(task_row)
            .collect::<Result<Vec<_>, _>>()?;
        let snapshot = ConfigSnapshot {
            db_now: now,
            applied,
            rows,
        };
        let plan = planner(&snapshot);
        let ConfigPlan::Apply {
            changes,
            state,
            skips,
        } = &plan
        else {
            // Nothing to write; the transaction rolls back.
            return Ok(plan);
        };
        // Creates, then updates, then orphan flags, as PostgreSQL's one statement per kind.
        for change in changes {
            if let TaskChange::Create {
                name,
                cron,
                timezone,
                calendar,
                enabled,
                next_run_at,
            } = change
            {
                sqlx::query(query!("tasks_create"))
                    .bind(name)
                    .bind(cron)
                    .bind(timezone)
                    .bind(enabled)
                    .bind(next_run_at.map(micros))
                    .bind(micros(now))
                    .bind(calendar)
                    .execute(&mut *tx)
                    .await?;
            }
        }
        for change in changes {
            if let TaskChange::Update {
                name,
                cron,
                timezone,
                calendar,
                enabled,
                next_run_at,
            } = change
            {
                sqlx::query(query!("tasks_update"))
                    .bind(name)
                    .bind(cron)
                    .bind(timezone)
                    .bind(enabled)
                    .bind(next_run_at.map(micros))
                    .bind(micros(now))
                    .bind(calendar)
                    .execute(&mut *tx)
                    .await?;
            }
        }
        for change in changes {
            if let TaskChange::Shards {
                name,
                shards,
                node_pin,
            } = change
            {
                let task = crate::shard::split_row(name).0;
                sqlx::query(query!("tasks_shards"))
                    .bind(name)
                    .bind(i64::from(*shards))
                    .bind((task != name).then_some(task))
                    .bind(micros(now))
                    .bind(node_pin)
                    .execute(&mut *tx)
                    .await?;
            }
        }
        for change in changes {
            if let TaskChange::Orphaned { name, orphaned } = change {
                sqlx::query(query!("tasks_orphaned"))
                    .bind(name)
                    .bind(orphaned)
                    .bind(micros(now))
                    .execute(&mut *tx)
                    .await?;
            }
        }
        insert_skips(&mut tx, skips, now).await?;
        sqlx::query(query!("config_state_save"))
            .bind(state.version)
            .bind(&state.digest)
            .bind(&state.applied_by)
            .bind(micros(now))
            .execute(&mut *tx)
            .await?;
        plan
    })?;
    if matches!(plan, ConfigPlan::Apply { .. }) {
        store.inner.wake();
    }
    Ok(plan)
}
