//! What the node holding a run's lock asks while the run goes on: lock renewals, and the cancel
//! requests recorded for its runs.

use std::collections::HashSet;
use std::time::Duration;

use sqlx::Row;

use super::{later, time_at, token, token_at};
use crate::store::sqlite::SqliteStore;
use crate::store::{Cancellation, LockKey, StoreResult};

pub(super) async fn cancel_requests(
    store: &SqliteStore,
    run_ids: &[i64],
) -> StoreResult<Vec<Cancellation>> {
    if run_ids.is_empty() {
        return Ok(Vec::new());
    }
    let ids = serde_json::to_string(run_ids).expect("integers serialize");
    read!(store, "cancel_requests", |conn, _now| {
        sqlx::query(query!("cancel_requests"))
            .bind(ids)
            .fetch_all(conn)
            .await?
            .iter()
            .map(|row| {
                Ok(Cancellation {
                    run_id: row.try_get("id")?,
                    by: row.try_get("cancel_requested_by")?,
                    at: time_at(row, "cancel_requested_at")?,
                })
            })
            .collect::<Result<Vec<_>, sqlx::Error>>()?
    })
}

pub(super) async fn renew_locks(
    store: &SqliteStore,
    node_id: &str,
    held: &[(LockKey, Duration)],
) -> StoreResult<Vec<LockKey>> {
    if held.is_empty() {
        return Ok(Vec::new());
    }
    write_tx!(store, "renew_locks", |tx, now| {
        let mut seen = HashSet::new();
        let mut renewed = Vec::new();
        for (key, lifetime) in held {
            // A lock named twice is extended once (PostgreSQL updates a row once per
            // statement).
            if !seen.insert(key) {
                continue;
            }
            if let Some(row) = sqlx::query(query!("renew_lock"))
                .bind(&key.task_name)
                .bind(node_id)
                .bind(token(key.token))
                .bind(later(now, *lifetime))
                .fetch_optional(&mut *tx)
                .await?
            {
                renewed.push(LockKey::new(
                    row.try_get::<String, _>("name")?,
                    token_at(&row, "lock_token")?,
                ));
            }
        }
        renewed
    })
}
