//! Task rows and the config: what the reconciler reads and writes.

use chrono::{DateTime, Utc};

use super::bind::micros;
use super::writes::insert_skips;
use crate::store::records::{config_state_of, task_row};
use crate::store::sqlite::SqliteStore;
use crate::store::{ConfigPlan, ConfigPlanner, ConfigSnapshot, StoreResult, TaskChange, TaskRow};

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
        let applied = sqlx::query(shared_query!("config_state"))
            .fetch_optional(&mut *tx)
            .await?
            .as_ref()
            .map(config_state_of)
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
