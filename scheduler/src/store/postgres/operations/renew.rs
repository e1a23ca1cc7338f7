//! What the node holding a run's lock asks while the run goes on: lock renewals, and the cancel
//! requests recorded for its runs.

use std::time::Duration;

use sqlx::Row;
use uuid::Uuid;

use super::millis;
use crate::store::postgres::PgStore;
use crate::store::{Cancellation, LockKey, StoreResult};

pub(super) async fn renew_locks(
    store: &PgStore,
    node_id: &str,
    held: &[(LockKey, Duration)],
) -> StoreResult<Vec<LockKey>> {
    if held.is_empty() {
        return Ok(Vec::new());
    }
    // Task rows are updated in name order, as by finish_runs: a renewal and an outcome batch
    // of the same node touch the same rows, and in different orders they deadlocked (one
    // waited out `deadlock_timeout`, then failed).
    let mut held: Vec<&(LockKey, Duration)> = held.iter().collect();
    held.sort_unstable_by(|a, b| a.0.task_name.cmp(&b.0.task_name));
    let names: Vec<&str> = held.iter().map(|(k, _)| k.task_name.as_str()).collect();
    let tokens: Vec<Uuid> = held.iter().map(|(k, _)| k.token).collect();
    let lifetimes: Vec<i64> = held.iter().map(|(_, d)| millis(*d)).collect();
    timed!(store, "renew_locks", |conn| {
        sqlx::query(query!("renew_locks"))
            .bind(node_id)
            .bind(&names)
            .bind(&tokens)
            .bind(&lifetimes)
            .fetch_all(conn)
            .await?
            .iter()
            .map(|row| {
                Ok(LockKey::new(
                    row.try_get::<String, _>("name")?,
                    row.try_get("lock_token")?,
                ))
            })
            .collect()
    })
}

pub(super) async fn cancel_requests(
    store: &PgStore,
    run_ids: &[i64],
) -> StoreResult<Vec<Cancellation>> {
    if run_ids.is_empty() {
        return Ok(Vec::new());
    }
    timed!(store, "cancel_requests", |conn| {
        sqlx::query(query!("cancel_requests"))
            .bind(run_ids)
            .fetch_all(conn)
            .await?
            .iter()
            .map(|row| {
                Ok(Cancellation {
                    run_id: row.try_get("id")?,
                    by: row.try_get("cancel_requested_by")?,
                    at: row.try_get("cancel_requested_at")?,
                })
            })
            .collect()
    })
}
