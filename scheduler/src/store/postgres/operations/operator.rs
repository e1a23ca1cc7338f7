//! Operator actions (manual runs, pauses, the audit trail) and missed-run detection.

use chrono::{DateTime, Utc};
use sqlx::Row;

use super::columns::SkipColumns;
use super::exec::{insert_audit, notify_on};
use crate::store::postgres::PgStore;
use crate::store::records::{pause_of, resume_row, run_record};
use crate::store::writes::run_on;
use crate::store::{AuditEntry, CancelRequest, Pause, ResumePlanner, RunRequest, StoreResult};

pub(super) async fn request_run(
    store: &PgStore,
    task: &str,
    by: &str,
    args: Option<&str>,
    audit: &AuditEntry,
) -> StoreResult<RunRequest> {
    write_tx!(store, "request_run", |tx, ()| {
        let Some(row) = sqlx::query(query!("request_run"))
            .bind(task)
            .bind(by)
            .bind(args)
            .fetch_optional(&mut *tx)
            .await?
        else {
            tx.rollback().await?;
            return Ok(RunRequest::NotFound);
        };
        if let Some(pause) = pause_of(&row)? {
            RunRequest::Paused(pause)
        } else if row.try_get::<bool, _>("queued")? {
            insert_audit(&mut tx, audit).await?;
            notify_on(&mut tx, store, "request").await?;
            RunRequest::Queued
        } else {
            RunRequest::AlreadyQueued
        }
    })
}

pub(super) async fn cancel_run(
    store: &PgStore,
    run_id: i64,
    by: &str,
    audit: &AuditEntry,
) -> StoreResult<CancelRequest> {
    write_tx!(store, "cancel_run", |tx, ()| {
        let requested = sqlx::query(runs_select!(query!("cancel_run")))
            .bind(run_id)
            .bind(by)
            .fetch_optional(&mut *tx)
            .await?;
        let Some(row) = requested else {
            let run = run_on::<PgStore>(&mut tx, (), run_id).await?;
            tx.rollback().await?;
            return Ok(CancelRequest::unchanged(run));
        };
        let run = run_record(&row)?;
        insert_audit(&mut tx, audit).await?;
        notify_on(&mut tx, store, crate::store::postgres::CANCEL_PAYLOAD).await?;
        CancelRequest::Requested(run)
    })
}

pub(super) async fn open_missed(
    store: &PgStore,
    incidents: &[(String, DateTime<Utc>)],
) -> StoreResult<Vec<String>> {
    let (names, ticks): (Vec<&str>, Vec<DateTime<Utc>>) =
        incidents.iter().map(|(n, t)| (n.as_str(), *t)).unzip();
    timed!(store, "open_missed", |conn| {
        sqlx::query(query!("open_missed"))
            .bind(&names)
            .bind(&ticks)
            .fetch_all(conn)
            .await?
            .iter()
            .map(|row| row.try_get("name"))
            .collect()
    })
}

pub(super) async fn pause_task(
    store: &PgStore,
    task: &str,
    pause: &Pause,
    audit: &AuditEntry,
) -> StoreResult<bool> {
    write_tx!(store, "pause_task", |tx, ()| {
        // Its instances first, while the task's pause in force is still the one on its row.
        sqlx::query(query!("pause_instances"))
            .bind(task)
            .bind(&pause.by)
            .bind(&pause.reason)
            .bind(pause.until)
            .execute(&mut *tx)
            .await?;
        let found = sqlx::query(query!("pause_task"))
            .bind(task)
            .bind(&pause.by)
            .bind(&pause.reason)
            .bind(pause.until)
            .fetch_optional(&mut *tx)
            .await?
            .is_some();
        if found {
            insert_audit(&mut tx, audit).await?;
        }
        found
    })
}

pub(super) async fn resume_task(
    store: &PgStore,
    task: &str,
    audit: &AuditEntry,
    planner: &ResumePlanner<'_>,
) -> StoreResult<Option<Pause>> {
    write_tx!(store, "resume_task", |tx, ()| {
        let Some(row) = sqlx::query(task_state_select!(query!("resume_select")))
            .bind(task)
            .fetch_optional(&mut *tx)
            .await?
        else {
            tx.rollback().await?;
            return Ok(None);
        };
        let (state, window) = resume_row(&row)?;
        let db_now: DateTime<Utc> = row.try_get("db_now")?;
        // The task's row, then each of its instances that held its pause: each planned on its
        // own schedule.
        let mut rows = vec![(state.clone(), window)];
        if let Some(pause) = &state.pause {
            for row in sqlx::query(task_state_select!(query!("resume_instances")))
                .bind(task)
                .bind(pause.at)
                .bind(&pause.by)
                .fetch_all(&mut *tx)
                .await?
            {
                rows.push(resume_row(&row)?);
            }
        }
        for (row, window) in &rows {
            let plan = planner(row, *window, db_now);
            sqlx::query(query!("resume_apply"))
                .bind(&row.name)
                .bind(plan.next_run_at)
                .bind(plan.next_tick)
                .execute(&mut *tx)
                .await?;
            SkipColumns::collect(plan.skips.iter())
                .insert(&mut tx)
                .await?;
        }
        insert_audit(&mut tx, audit).await?;
        notify_on(&mut tx, store, "resume").await?;
        state.pause
    })
}
