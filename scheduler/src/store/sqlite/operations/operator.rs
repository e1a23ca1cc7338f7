//! Operator actions (manual runs, pauses, the audit trail) and missed-run detection.

use chrono::{DateTime, Utc};
use sqlx::Row;

use super::bind::micros;
use super::writes::{insert_audit, insert_skips};
use crate::store::records::{pause_of, resume_row, run_record};
use crate::store::sqlite::SqliteStore;
use crate::store::writes::run_on;
use crate::store::{AuditEntry, CancelRequest, Pause, ResumePlanner, RunRequest, StoreResult};

pub(super) async fn request_run(
    store: &SqliteStore,
    task: &str,
    by: &str,
    args: Option<&str>,
    audit: &AuditEntry,
) -> StoreResult<RunRequest> {
    let answer = write_tx!(store, "request_run", |tx, now| {
        let Some(row) = sqlx::query(query!("request_run_select"))
            .bind(task)
            .fetch_optional(&mut *tx)
            .await?
        else {
            return Ok(RunRequest::NotFound);
        };
        if let Some(pause) = pause_of(&row)? {
            RunRequest::Paused(pause)
        } else if row.try_get::<Option<i64>, _>("manual_at")?.is_some() {
            RunRequest::AlreadyQueued
        } else {
            sqlx::query(query!("request_run"))
                .bind(task)
                .bind(by)
                .bind(micros(now))
                .bind(args)
                .execute(&mut *tx)
                .await?;
            insert_audit(&mut tx, audit, now, &store.inner.own_audits).await?;
            RunRequest::Queued
        }
    })?;
    if answer == RunRequest::Queued {
        store.inner.wake();
    }
    Ok(answer)
}

pub(super) async fn cancel_run(
    store: &SqliteStore,
    run_id: i64,
    by: &str,
    audit: &AuditEntry,
) -> StoreResult<CancelRequest> {
    let answer = write_tx!(store, "cancel_run", |tx, now| {
        if let Some(row) = sqlx::query(runs_select!(query!("cancel_run")))
            .bind(run_id)
            .bind(by)
            .bind(micros(now))
            .fetch_optional(&mut *tx)
            .await?
        {
            let run = run_record(&row)?;
            insert_audit(&mut tx, audit, now, &store.inner.own_audits).await?;
            CancelRequest::Requested(run)
        } else {
            CancelRequest::unchanged(run_on::<SqliteStore>(&mut tx, now, run_id).await?)
        }
    })?;
    if matches!(answer, CancelRequest::Requested(_)) {
        store.inner.cancel_requested();
    }
    Ok(answer)
}

pub(super) async fn open_missed(
    store: &SqliteStore,
    incidents: &[(String, DateTime<Utc>)],
) -> StoreResult<Vec<String>> {
    write_tx!(store, "open_missed", |tx, now| {
        let mut opened = Vec::new();
        for (name, tick) in incidents {
            let row: Option<String> = sqlx::query_scalar(query!("open_missed"))
                .bind(name)
                .bind(micros(*tick))
                .bind(micros(now))
                .fetch_optional(&mut *tx)
                .await?;
            opened.extend(row);
        }
        opened
    })
}

pub(super) async fn pause_task(
    store: &SqliteStore,
    task: &str,
    pause: &Pause,
    audit: &AuditEntry,
) -> StoreResult<bool> {
    write_tx!(store, "pause_task", |tx, now| {
        // Its instances first, while the task's pause in force is still the one on its row.
        sqlx::query(query!("pause_instances"))
            .bind(task)
            .bind(&pause.by)
            .bind(&pause.reason)
            .bind(pause.until.map(micros))
            .bind(micros(now))
            .execute(&mut *tx)
            .await?;
        let found = sqlx::query(query!("pause_task"))
            .bind(task)
            .bind(&pause.by)
            .bind(&pause.reason)
            .bind(pause.until.map(micros))
            .bind(micros(now))
            .fetch_optional(&mut *tx)
            .await?
            .is_some();
        if found {
            insert_audit(&mut tx, audit, now, &store.inner.own_audits).await?;
        }
        found
    })
}

pub(super) async fn resume_task(
    store: &SqliteStore,
    task: &str,
    audit: &AuditEntry,
    planner: &ResumePlanner<'_>,
) -> StoreResult<Option<Pause>> {
    let ended = write_tx!(store, "resume_task", |tx, now| {
        // The write transaction holds the row (and every other) for the planner, as
        // PostgreSQL's FOR UPDATE does.
        let Some(row) = sqlx::query(task_state_select!(query!("resume_select")))
            .bind(task)
            .fetch_optional(&mut *tx)
            .await?
        else {
            return Ok(None);
        };
        let (state, window) = resume_row(&row)?;
        // The task's row, then each of its instances that held its pause: each planned on its
        // own schedule.
        let mut rows = vec![(state.clone(), window)];
        if let Some(pause) = &state.pause {
            for row in sqlx::query(task_state_select!(query!("resume_instances")))
                .bind(task)
                .bind(micros(pause.at))
                .bind(&pause.by)
                .fetch_all(&mut *tx)
                .await?
            {
                rows.push(resume_row(&row)?);
            }
        }
        for (row, window) in &rows {
            let plan = planner(row, *window, now);
            sqlx::query(query!("resume_apply"))
                .bind(&row.name)
                .bind(plan.next_run_at.map(micros))
                .bind(micros(now))
                .bind(plan.next_tick.map(micros))
                .execute(&mut *tx)
                .await?;
            insert_skips(&mut tx, &plan.skips, now).await?;
        }
        insert_audit(&mut tx, audit, now, &store.inner.own_audits).await?;
        state.pause
    })?;
    if ended.is_some() {
        store.inner.wake();
    }
    Ok(ended)
}
