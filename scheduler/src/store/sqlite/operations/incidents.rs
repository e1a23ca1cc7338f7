//! Incidents (alerts folded per task and type), snoozes and alert marks.

use super::bind::{limit_of, micros};
use super::writes::insert_audit;
use crate::store::records::{incident, snooze};
use crate::store::sqlite::SqliteStore;
use crate::store::writes::{open_incident, record_fold, snooze_of};
use crate::store::{
    AlertFold, AlertMark, AuditEntry, Folded, IncidentClose, IncidentRecord, IncidentRule, Snooze,
    StoreResult,
};

pub(super) async fn fold_alerts(
    store: &SqliteStore,
    folds: &[AlertFold],
    rule: &IncidentRule,
) -> StoreResult<Vec<Folded>> {
    write_tx!(store, "fold_alerts", |tx, now| {
        let mut done = Vec::with_capacity(folds.len());
        for fold in folds {
            let open = open_incident::<SqliteStore>(&mut tx, now, &fold.task, &fold.kind).await?;
            let snoozed = snooze_of::<SqliteStore>(&mut tx, now, &fold.task).await?;
            let Some(notify) = Folded::decide(rule, fold, open.as_ref(), snoozed.as_ref(), now)
            else {
                done.push(Folded::untouched(open));
                continue;
            };
            // SQLite's write transaction excludes every other writer: the row is always written.
            let recorded = record_fold::<SqliteStore>(&mut tx, now, fold, open.as_ref(), notify)
                .await?
                .ok_or(sqlx::Error::RowNotFound)?;
            done.push(Folded::recorded(recorded, open.is_none(), notify));
        }
        done
    })
}

pub(super) async fn close_incidents(
    store: &SqliteStore,
    closes: &[IncidentClose],
) -> StoreResult<Vec<IncidentRecord>> {
    write_tx!(store, "close_incidents", |tx, now| {
        let mut closed = Vec::new();
        for close in closes {
            for kind in &close.kinds {
                if let Some(row) = sqlx::query(query!("incident_close"))
                    .bind(&close.task)
                    .bind(kind)
                    .bind(micros(now))
                    .bind(&close.reason)
                    .fetch_optional(&mut *tx)
                    .await?
                {
                    closed.push(incident(&row)?);
                }
            }
        }
        closed
    })
}

pub(super) async fn claim_reminders(
    store: &SqliteStore,
    limit: u32,
) -> StoreResult<Vec<IncidentRecord>> {
    write_tx!(store, "claim_reminders", |tx, now| {
        sqlx::query(query!("incident_remind"))
            .bind(micros(now))
            .bind(limit_of(limit))
            .fetch_all(&mut *tx)
            .await?
            .iter()
            .map(incident)
            .collect::<Result<Vec<_>, sqlx::Error>>()?
    })
}

pub(super) async fn mark_alerts(
    store: &SqliteStore,
    marks: &[AlertMark],
) -> StoreResult<Vec<AlertMark>> {
    write_tx!(store, "mark_alerts", |tx, now| {
        let mut won = Vec::new();
        for mark in marks {
            let row: Option<String> = sqlx::query_scalar(query!("alert_mark"))
                .bind(&mark.task)
                .bind(&mark.kind)
                .bind(&mark.mark)
                .bind(micros(now))
                .fetch_optional(&mut *tx)
                .await?;
            if row.is_some() {
                won.push(mark.clone());
            }
        }
        won
    })
}

pub(super) async fn snooze_task(
    store: &SqliteStore,
    snooze: &Snooze,
    audit: &AuditEntry,
) -> StoreResult<bool> {
    write_tx!(store, "snooze_task", |tx, now| {
        let found = sqlx::query(query!("task_exists"))
            .bind(&snooze.task_name)
            .fetch_optional(&mut *tx)
            .await?
            .is_some();
        if found {
            sqlx::query(query!("snooze_set"))
                .bind(&snooze.task_name)
                .bind(micros(snooze.until))
                .bind(&snooze.reason)
                .bind(&snooze.by)
                .bind(micros(now))
                .execute(&mut *tx)
                .await?;
            insert_audit(&mut tx, audit, now, &store.inner.own_audits).await?;
        }
        found
    })
}

pub(super) async fn unsnooze_task(
    store: &SqliteStore,
    task: &str,
    audit: &AuditEntry,
) -> StoreResult<Option<Snooze>> {
    write_tx!(store, "unsnooze_task", |tx, now| {
        let lifted = sqlx::query(query!("snooze_delete"))
            .bind(task)
            .fetch_optional(&mut *tx)
            .await?
            .as_ref()
            .map(snooze)
            .transpose()?
            .filter(|s| s.until > now);
        if lifted.is_some() {
            insert_audit(&mut tx, audit, now, &store.inner.own_audits).await?;
        }
        lifted
    })
}
