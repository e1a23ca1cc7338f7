//! Incidents (alerts folded per task and type), snoozes and alert marks.

use chrono::{DateTime, Utc};
use sqlx::Row;

use super::exec::insert_audit;
use crate::store::postgres::PgStore;
use crate::store::records::{incident, snooze};
use crate::store::writes::{open_incident, record_fold, snooze_of};
use crate::store::{
    AlertFold, AlertMark, AuditEntry, Folded, IncidentClose, IncidentRecord, IncidentRule, Snooze,
    StoreResult,
};

pub(super) async fn fold_alerts(
    store: &PgStore,
    folds: &[AlertFold],
    rule: &IncidentRule,
) -> StoreResult<Vec<Folded>> {
    write_tx!(store, "fold_alerts", |tx, ()| {
        let now: DateTime<Utc> = sqlx::query_scalar(query!("db_now"))
            .fetch_one(&mut *tx)
            .await?;
        let mut done = Vec::with_capacity(folds.len());
        for fold in folds {
            let snoozed = snooze_of::<PgStore>(&mut tx, (), &fold.task).await?;
            // Twice at most: an incident another node opened between our look and our insert
            // is folded into on the second look (the insert then did nothing).
            let mut folded = None;
            for _ in 0..2 {
                let open = open_incident::<PgStore>(&mut tx, (), &fold.task, &fold.kind).await?;
                let Some(notify) = Folded::decide(rule, fold, open.as_ref(), snoozed.as_ref(), now)
                else {
                    folded = Some(Folded::untouched(open));
                    break;
                };
                if let Some(recorded) =
                    record_fold::<PgStore>(&mut tx, (), fold, open.as_ref(), notify).await?
                {
                    folded = Some(Folded::recorded(recorded, open.is_none(), notify));
                    break;
                }
            }
            done.push(folded.unwrap_or(Folded {
                incident: None,
                opened: false,
                notify: false,
            }));
        }
        done
    })
}

pub(super) async fn close_incidents(
    store: &PgStore,
    closes: &[IncidentClose],
) -> StoreResult<Vec<IncidentRecord>> {
    let mut tasks = Vec::new();
    let mut kinds = Vec::new();
    let mut reasons = Vec::new();
    for close in closes {
        for kind in &close.kinds {
            tasks.push(close.task.as_str());
            kinds.push(kind.as_str());
            reasons.push(close.reason.as_str());
        }
    }
    timed!(store, "close_incidents", |conn| {
        sqlx::query(query!("incident_close"))
            .bind(&tasks)
            .bind(&kinds)
            .bind(&reasons)
            .fetch_all(conn)
            .await?
            .iter()
            .map(incident)
            .collect::<Result<Vec<_>, sqlx::Error>>()
    })
}

pub(super) async fn claim_reminders(
    store: &PgStore,
    limit: u32,
) -> StoreResult<Vec<IncidentRecord>> {
    timed!(store, "claim_reminders", |conn| {
        sqlx::query(query!("incident_remind"))
            .bind(i64::from(limit))
            .fetch_all(conn)
            .await?
            .iter()
            .map(incident)
            .collect::<Result<Vec<_>, sqlx::Error>>()
    })
}

pub(super) async fn mark_alerts(
    store: &PgStore,
    marks: &[AlertMark],
) -> StoreResult<Vec<AlertMark>> {
    let tasks: Vec<&str> = marks.iter().map(|m| m.task.as_str()).collect();
    let kinds: Vec<&str> = marks.iter().map(|m| m.kind.as_str()).collect();
    let keys: Vec<&str> = marks.iter().map(|m| m.mark.as_str()).collect();
    timed!(store, "mark_alerts", |conn| {
        sqlx::query(query!("alert_mark"))
            .bind(&tasks)
            .bind(&kinds)
            .bind(&keys)
            .fetch_all(conn)
            .await?
            .iter()
            .map(|row| {
                Ok(AlertMark::new(
                    row.try_get::<String, _>("task_name")?,
                    row.try_get::<String, _>("kind")?,
                    row.try_get::<String, _>("mark")?,
                ))
            })
            .collect::<Result<Vec<_>, sqlx::Error>>()
    })
}

pub(super) async fn snooze_task(
    store: &PgStore,
    snooze: &Snooze,
    audit: &AuditEntry,
) -> StoreResult<bool> {
    write_tx!(store, "snooze_task", |tx, ()| {
        let found = sqlx::query(query!("snooze_set"))
            .bind(&snooze.task_name)
            .bind(snooze.until)
            .bind(&snooze.reason)
            .bind(&snooze.by)
            .fetch_optional(&mut *tx)
            .await?
            .is_some();
        if found {
            insert_audit(&mut tx, audit).await?;
        }
        found
    })
}

pub(super) async fn unsnooze_task(
    store: &PgStore,
    task: &str,
    audit: &AuditEntry,
) -> StoreResult<Option<Snooze>> {
    write_tx!(store, "unsnooze_task", |tx, ()| {
        let lifted = match sqlx::query(query!("snooze_delete"))
            .bind(task)
            .fetch_optional(&mut *tx)
            .await?
        {
            Some(row) if row.try_get::<bool, _>("in_force")? => Some(snooze(&row)?),
            _ => None,
        };
        if lifted.is_some() {
            insert_audit(&mut tx, audit).await?;
        }
        lifted
    })
}
