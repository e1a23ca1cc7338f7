//! Task rows and the config: what the reconciler reads and writes.

use chrono::{DateTime, Utc};
use sqlx::{Postgres, Row};

use super::columns::SkipColumns;
use crate::store::postgres::PgStore;
use crate::store::records::{config_state_of, task_row};
use crate::store::{ConfigPlan, ConfigPlanner, ConfigSnapshot, StoreResult, TaskChange, TaskRow};

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
        // A row with an empty digest records no document.
        let applied = Some(config_state_of(&state)?).filter(|state| !state.digest.is_empty());
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
        let snapshot = ConfigSnapshot {
            db_now,
            applied,
            rows: rows.iter().map(task_row).collect::<Result<Vec<_>, _>>()?,
        };
        let plan = planner(&snapshot);
        let ConfigPlan::Apply {
            changes,
            state,
            skips,
        } = &plan
        else {
            tx.rollback().await?;
            return Ok(plan);
        };
        let mut create = TaskColumns::default();
        let mut update = TaskColumns::default();
        let (mut orphan_names, mut orphan_flags) = (Vec::new(), Vec::new());
        let (mut shard_rows, mut shard_counts, mut shard_of) = (Vec::new(), Vec::new(), Vec::new());
        let mut node_pins = Vec::new();
        for change in changes {
            match change {
                TaskChange::Create {
                    name,
                    cron,
                    timezone,
                    calendar,
                    enabled,
                    next_run_at,
                } => create.push(name, cron, timezone, calendar, *enabled, *next_run_at),
                TaskChange::Update {
                    name,
                    cron,
                    timezone,
                    calendar,
                    enabled,
                    next_run_at,
                } => update.push(name, cron, timezone, calendar, *enabled, *next_run_at),
                TaskChange::Orphaned { name, orphaned } => {
                    orphan_names.push(name.clone());
                    orphan_flags.push(*orphaned);
                }
                TaskChange::Shards {
                    name,
                    shards,
                    node_pin,
                } => {
                    let task = crate::shard::split_row(name).0;
                    shard_rows.push(name.clone());
                    shard_counts.push(i32::try_from(*shards).unwrap_or(i32::MAX));
                    shard_of.push((task != name).then(|| task.to_owned()));
                    node_pins.push(node_pin.clone());
                }
            }
        }
        if !create.names.is_empty() {
            create
                .bind(sqlx::query(query!("tasks_create")))
                .execute(&mut *tx)
                .await?;
        }
        if !update.names.is_empty() {
            update
                .bind(sqlx::query(query!("tasks_update")))
                .execute(&mut *tx)
                .await?;
        }
        if !shard_rows.is_empty() {
            sqlx::query(query!("tasks_shards"))
                .bind(&shard_rows)
                .bind(&shard_counts)
                .bind(&shard_of)
                .bind(&node_pins)
                .execute(&mut *tx)
                .await?;
        }
        if !orphan_names.is_empty() {
            sqlx::query(query!("tasks_orphaned"))
                .bind(&orphan_names)
                .bind(&orphan_flags)
                .execute(&mut *tx)
                .await?;
        }
        SkipColumns::collect(skips.iter()).insert(&mut tx).await?;
        sqlx::query(query!("config_state_save"))
            .bind(state.version)
            .bind(&state.digest)
            .bind(&state.applied_by)
            .execute(&mut *tx)
            .await?;
        sqlx::query(query!("notify"))
            .bind(&store.channel)
            .bind("config")
            .execute(&mut *tx)
            .await?;
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
}

impl TaskColumns {
    fn push(
        &mut self,
        name: &str,
        cron: &str,
        zone: &str,
        calendar: &Option<String>,
        enabled: bool,
        next: Option<DateTime<Utc>>,
    ) {
        self.calendars.push(calendar.clone());
        self.names.push(name.to_owned());
        self.crons.push(cron.to_owned());
        self.zones.push(zone.to_owned());
        self.enabled.push(enabled);
        self.next.push(next);
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
    }
}
