//! Operator actions (manual runs, pauses, the audit trail) and missed-run detection.

use chrono::{DateTime, Utc};
use sqlx::{Acquire, Row};

use super::columns::SkipColumns;
use super::exec::insert_audit;
use crate::store::postgres::PgStore;
use crate::store::records::{pause_of, run_record, task_state};
use crate::store::{
    AuditEntry, CancelRequest, Pause, ResumePlanner, RunRequest, RunStatus, StoreResult,
};

pub(super) async fn request_run(
    store: &PgStore,
    task: &str,
    by: &str,
    audit: &AuditEntry,
) -> StoreResult<RunRequest> {
    timed!(store, "request_run", |conn| {
        let mut tx = conn.begin().await?;
        let Some(row) = sqlx::query(query!("request_run"))
            .bind(task)
            .bind(by)
            .fetch_optional(&mut *tx)
            .await?
        else {
            tx.rollback().await?;
            return Ok(RunRequest::NotFound);
        };
        let answer = if let Some(pause) = pause_of(&row)? {
            RunRequest::Paused(pause)
        } else if row.try_get::<bool, _>("queued")? {
            insert_audit(&mut tx, audit).await?;
            sqlx::query(query!("notify"))
                .bind(&store.channel)
                .bind("request")
                .execute(&mut *tx)
                .await?;
            RunRequest::Queued
        } else {
            RunRequest::AlreadyQueued
        };
        tx.commit().await?;
        Ok(answer)
    })
}

pub(super) async fn cancel_run(
    store: &PgStore,
    run_id: i64,
    by: &str,
    audit: &AuditEntry,
) -> StoreResult<CancelRequest> {
    timed!(store, "cancel_run", |conn| {
        let mut tx = conn.begin().await?;
        if let Some(row) = sqlx::query(query!("cancel_run"))
            .bind(run_id)
            .bind(by)
            .fetch_optional(&mut *tx)
            .await?
        {
            let run = run_record(&row)?;
            insert_audit(&mut tx, audit).await?;
            sqlx::query(query!("notify"))
                .bind(&store.channel)
                .bind(crate::store::postgres::CANCEL_PAYLOAD)
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
            return Ok(CancelRequest::Requested(run));
        }
        let run = sqlx::query(runs_select!(query!("run_one")))
            .bind(run_id)
            .fetch_optional(&mut *tx)
            .await?
            .as_ref()
            .map(run_record)
            .transpose()?;
        tx.rollback().await?;
        Ok(match run {
            None => CancelRequest::NotFound,
            Some(run) if run.status != RunStatus::Running => CancelRequest::Ended(run),
            Some(run) => CancelRequest::AlreadyRequested(run),
        })
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
    timed!(store, "pause_task", |conn| {
        let mut tx = conn.begin().await?;
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
        tx.commit().await?;
        Ok(found)
    })
}

pub(super) async fn resume_task(
    store: &PgStore,
    task: &str,
    audit: &AuditEntry,
    planner: &ResumePlanner<'_>,
) -> StoreResult<Option<Pause>> {
    timed!(store, "resume_task", |conn| {
        let mut tx = conn.begin().await?;
        let Some(row) = sqlx::query(query!("resume_select"))
            .bind(task)
            .fetch_optional(&mut *tx)
            .await?
        else {
            tx.rollback().await?;
            return Ok(None);
        };
        let state = task_state(&row)?;
        let db_now: DateTime<Utc> = row.try_get("db_now")?;
        let plan = planner(&state, db_now);
        sqlx::query(query!("resume_apply"))
            .bind(task)
            .bind(plan.next_run_at)
            .execute(&mut *tx)
            .await?;
        SkipColumns::collect(plan.skips.iter())
            .insert(&mut tx)
            .await?;
        insert_audit(&mut tx, audit).await?;
        sqlx::query(query!("notify"))
            .bind(&store.channel)
            .bind("resume")
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(state.pause)
    })
}
