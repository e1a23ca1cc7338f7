//! What the node holding a run's lock asks while the run goes on: lock renewals, and the cancel
//! requests recorded for its runs.

use std::collections::HashSet;
use std::time::Duration;

use super::bind::{later, token};
use crate::store::records::lock_key;
use crate::store::sqlite::SqliteStore;
use crate::store::{LockKey, Renewal, StoreResult};

pub(super) async fn renew_locks(
    store: &SqliteStore,
    node_id: &str,
    held: &[(LockKey, Duration)],
) -> StoreResult<Renewal> {
    // No row is ever busy: SQLite has no row locks (the write holds the whole file).
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
                renewed.push(lock_key(&row)?);
            }
        }
        Renewal::renewed(renewed)
    })
}
