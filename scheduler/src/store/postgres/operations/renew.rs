//! What the node holding a run's lock asks while the run goes on: lock renewals, and the cancel
//! requests recorded for its runs.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};

use sqlx::Row;
use uuid::Uuid;

use super::columns::millis;
use super::commit::sending;
use crate::store::postgres::PgStore;
use crate::store::records::lock_key;
use crate::store::{LockKey, Renewal, StoreResult};

pub(super) async fn renew_locks(
    store: &PgStore,
    node_id: &str,
    held: &[(LockKey, Duration)],
) -> StoreResult<Renewal> {
    // Task rows are locked in name order, as by finish_runs (a renewal and an outcome batch of
    // the same node touch the same rows; in different orders they deadlocked), and a row
    // another transaction holds is skipped rather than waited for (renew_locks.sql).
    let mut held: Vec<&(LockKey, Duration)> = held.iter().collect();
    held.sort_unstable_by(|a, b| a.0.task_name.cmp(&b.0.task_name));
    let names: Vec<&str> = held.iter().map(|(k, _)| k.task_name.as_str()).collect();
    let tokens: Vec<Uuid> = held.iter().map(|(k, _)| k.token).collect();
    let lifetimes: Vec<i64> = held.iter().map(|(_, d)| millis(*d)).collect();
    let mut sent = None;
    let mut began = Instant::now();
    let result = timed!(store, "renew_locks", |conn| {
        began = Instant::now();
        let renewed = sqlx::query(query!("renew_locks"))
            .bind(node_id)
            .bind(&names)
            .bind(&tokens)
            .bind(&lifetimes)
            .fetch_all(&mut *conn);
        let rows = sending(&mut sent, (), renewed).await?;
        let mut renewal = Renewal::default();
        for row in &rows {
            let key = lock_key(row)?;
            if row.try_get::<bool, _>("busy")? {
                renewal.busy.push(key);
            } else {
                renewal.renewed.push(key);
            }
        }
        Ok::<_, sqlx::Error>(renewal)
    });
    match (result, sent) {
        (Ok(renewed), _) => Ok(renewed),
        (Err(error), Some(())) => store
            .read_back("renew_locks", error, store.op_timeout, || {
                read_back_renewal(store, node_id, &held, began)
            })
            .await
            .map(Renewal::renewed),
        (Err(error), None) => Err(error),
    }
}

/// Reads back a renewal whose answer was lost (sent at `began`): a lock was extended by it if
/// it expires no earlier than its lifetime after `began` by the store's clock (its clock now,
/// less the time since `began`). Before this renewal each lock was set to expire its lifetime
/// after an earlier write, at least a renew interval before `began`, so a lock that passes was
/// extended by this renewal. None extended: `None` (the renewal was not committed, or every
/// lock is lost, which the next renewal says).
async fn read_back_renewal(
    store: &PgStore,
    node_id: &str,
    held: &[&(LockKey, Duration)],
    began: Instant,
) -> StoreResult<Option<Vec<LockKey>>> {
    let names: Vec<&str> = held.iter().map(|(k, _)| k.task_name.as_str()).collect();
    let tokens: Vec<Uuid> = held.iter().map(|(k, _)| k.token).collect();
    let found: Vec<(String, Uuid, DateTime<Utc>, DateTime<Utc>)> =
        timed!(store, "renew_read_back", |conn| {
            sqlx::query_as(query!("renew_read_back"))
                .bind(node_id)
                .bind(&names)
                .bind(&tokens)
                .fetch_all(conn)
                .await
        })?;
    let since = chrono::TimeDelta::from_std(began.elapsed()).unwrap_or(chrono::TimeDelta::MAX);
    let lifetimes: HashMap<(&str, Uuid), Duration> = held
        .iter()
        .map(|(k, lifetime)| ((k.task_name.as_str(), k.token), *lifetime))
        .collect();
    let extended: Vec<LockKey> = found
        .into_iter()
        .filter(|(name, token, expires_at, db_now)| {
            lifetimes
                .get(&(name.as_str(), *token))
                .and_then(|lifetime| chrono::TimeDelta::from_std(*lifetime).ok())
                .is_some_and(|lifetime| *expires_at >= *db_now - since + lifetime)
        })
        .map(|(name, token, _, _)| LockKey::new(name, token))
        .collect();
    Ok((!extended.is_empty()).then_some(extended))
}
