//! The instances of a task on SQLite: the upsert and the removal written once
//! (`store/writes.rs`), each run in one `BEGIN IMMEDIATE` transaction with its audit entry.

use super::writes::insert_audit;
use crate::store::sqlite::SqliteStore;
use crate::store::writes;
use crate::store::{AuditEntry, InstancePlanner, InstanceUpsert, InstanceWrite, StoreResult};

pub(super) async fn upsert_instance(
    store: &SqliteStore,
    instance: &InstanceWrite,
    audit: &AuditEntry,
    planner: &InstancePlanner<'_>,
) -> StoreResult<InstanceUpsert> {
    let upsert = write_tx!(store, "upsert_instance", |tx, now| {
        let upsert =
            writes::upsert_instance_on::<SqliteStore>(&mut tx, now, instance, planner).await?;
        if matches!(upsert, InstanceUpsert::Written(_)) {
            insert_audit(&mut tx, audit, now, &store.inner.own_audits).await?;
        }
        upsert
    })?;
    if matches!(upsert, InstanceUpsert::Written(_)) {
        // Its first tick may be sooner than what the nodes wait for.
        store.inner.wake();
    }
    Ok(upsert)
}

pub(super) async fn remove_instance(
    store: &SqliteStore,
    task: &str,
    key: &str,
    audit: &AuditEntry,
) -> StoreResult<bool> {
    write_tx!(store, "remove_instance", |tx, now| {
        let removed = writes::remove_instance_on::<SqliteStore>(&mut tx, now, task, key).await?;
        if removed {
            insert_audit(&mut tx, audit, now, &store.inner.own_audits).await?;
        }
        removed
    })
}
