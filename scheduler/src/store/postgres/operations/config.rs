//! Task rows and the config: what the reconciler reads and writes.

use chrono::{DateTime, Utc};
use sqlx::{Postgres, Row};

use super::columns::SkipColumns;
use super::exec::notify_on;
use crate::store::config::{ChangesByKind, RECONCILE_BATCH, TaskWrite};
use crate::store::postgres::PgStore;
use crate::store::records::{config_state_of, task_row};
use crate::store::writes::{copy_instance_nodes_on, mark_config_instances_on, save_config_state};
use crate::store::{ConfigPlan, ConfigPlanner, ConfigSnapshot, StoreResult, TaskRow};

pub(super) async fn load_tasks(store: &PgStore) -> StoreResult<(DateTime<Utc>, Vec<TaskRow>)> {
    timed!(store, "load_tasks", |conn| {
        let rows = sqlx::query(query!("load_tasks"))
            .fetch_all(&mut *conn)
            .await?;
        let db_now = match rows.first() {
            Some(row) => row.try_get("db_now")?,
            None => sqlx::query(query!("db_now"))
                .fetch_one(&mut *conn)
                .await?
                .try_get("db_now")?,
        };
        let tasks = rows.iter().map(task_row).collect::<Result<Vec<_>, _>>()?;
        Ok((db_now, tasks))
    })
}

pub(super) async fn apply_config(
    store: &PgStore,
    planner: &ConfigPlanner<'_>,
) -> StoreResult<ConfigPlan> {
    write_tx!(store, "apply_config", |tx, ()| {
        let state = sqlx::query(query!("config_state_lock"))
            .fetch_one(&mut *tx)
            .await?;
        let state = config_state_of(&state)?;
        let rows = sqlx::query(query!("load_tasks_locked"))
            .fetch_all(&mut *tx)
            .await?;
        let db_now = match rows.first() {
            Some(row) => row.try_get("db_now")?,
            None => sqlx::query("SELECT clock_timestamp() AS db_now")
                .fetch_one(&mut *tx)
                .await?
                .try_get("db_now")?,
        };
        let rows = rows.iter().map(task_row).collect::<Result<Vec<_>, _>>()?;
        let plan = planner(&ConfigSnapshot::of(db_now, Some(state), rows));
        let Some((changes, state, skips)) = plan.writes() else {
            tx.rollback().await?;
            return Ok(plan);
        };
        let by_kind = ChangesByKind::of(changes);
        // Each kind in statements of at most RECONCILE_BATCH rows.
        for (tasks, sql) in [
            (&by_kind.creates, query!("tasks_create")),
            (&by_kind.updates, query!("tasks_update")),
        ] {
            for batch in tasks.chunks(RECONCILE_BATCH) {
                TaskColumns::of(batch)
                    .bind(sqlx::query(sql))
                    .execute(&mut *tx)
                    .await?;
            }
        }
        for shards in by_kind.shards.chunks(RECONCILE_BATCH) {
            let rows: Vec<&str> = shards.iter().map(|s| s.row).collect();
            let counts: Vec<i32> = shards
                .iter()
                .map(|s| i32::try_from(s.shards).unwrap_or(i32::MAX))
                .collect();
            let shard_of: Vec<Option<&str>> = shards.iter().map(|s| s.shard_of).collect();
            let node_pins: Vec<Option<&str>> = shards.iter().map(|s| s.node_pin).collect();
            sqlx::query(query!("tasks_shards"))
                .bind(&rows)
                .bind(&counts)
                .bind(&shard_of)
                .bind(&node_pins)
                .execute(&mut *tx)
                .await?;
        }
        for limits in by_kind.limits.chunks(RECONCILE_BATCH) {
            let (names, limits): (Vec<&str>, Vec<Option<&str>>) = limits.iter().copied().unzip();
            sqlx::query(query!("tasks_limit"))
                .bind(&names)
                .bind(&limits)
                .execute(&mut *tx)
                .await?;
        }
        for jitters in by_kind.jitters.chunks(RECONCILE_BATCH) {
            let (names, windows): (Vec<&str>, Vec<Option<i64>>) = jitters.iter().copied().unzip();
            sqlx::query(query!("tasks_jitter"))
                .bind(&names)
                .bind(&windows)
                .execute(&mut *tx)
                .await?;
        }
        for orphans in by_kind.orphans.chunks(RECONCILE_BATCH) {
            let (names, flags): (Vec<&str>, Vec<bool>) = orphans.iter().copied().unzip();
            sqlx::query(query!("tasks_orphaned"))
                .bind(&names)
                .bind(&flags)
                .execute(&mut *tx)
                .await?;
        }
        mark_config_instances_on::<PgStore>(&mut tx, (), &by_kind.instances).await?;
        copy_instance_nodes_on::<PgStore>(&mut tx, (), &by_kind.instance_nodes).await?;
        SkipColumns::collect(skips.iter()).insert(&mut tx).await?;
        save_config_state::<PgStore>(&mut tx, (), state).await?;
        notify_on(&mut tx, store, "config").await?;
        plan
    })
}

/// Parallel arrays for the `unnest` of tasks_create / tasks_update.
#[derive(Default)]
struct TaskColumns {
    names: Vec<String>,
    crons: Vec<String>,
    zones: Vec<String>,
    calendars: Vec<Option<String>>,
    enabled: Vec<bool>,
    next: Vec<Option<DateTime<Utc>>>,
    ticks: Vec<Option<DateTime<Utc>>>,
}

impl TaskColumns {
    fn of(tasks: &[TaskWrite<'_>]) -> Self {
        let mut c = Self::default();
        for t in tasks {
            c.names.push(t.name.to_owned());
            c.crons.push(t.cron.to_owned());
            c.zones.push(t.timezone.to_owned());
            c.calendars.push(t.calendar.map(str::to_owned));
            c.enabled.push(t.enabled);
            c.next.push(t.next_run_at);
            c.ticks.push(t.next_tick);
        }
        c
    }

    fn bind<'q>(
        &'q self,
        q: sqlx::query::Query<'q, Postgres, sqlx::postgres::PgArguments>,
    ) -> sqlx::query::Query<'q, Postgres, sqlx::postgres::PgArguments> {
        q.bind(&self.names)
            .bind(&self.crons)
            .bind(&self.zones)
            .bind(&self.enabled)
            .bind(&self.next)
            .bind(&self.calendars)
            .bind(&self.ticks)
    }
}
