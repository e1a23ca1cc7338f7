//! The instances of a task on SQLite: the upsert, the batch's and the removal written once
//! (`store/writes.rs`), each run in one `BEGIN IMMEDIATE` transaction with its audit entries.

use super::writes::insert_audit;
use crate::store::sqlite::SqliteStore;
use crate::store::writes;
use crate::store::{
    AuditEntry, InstanceBatchPlanner, InstancePlanner, InstanceUpsert, InstanceWrite, StoreResult,
};

pub(super) async fn upsert_instance(
    store: &SqliteStore,
    instance: &InstanceWrite,
    audit: &AuditEntry,
    planner: &InstancePlanner<'_>,
) -> StoreResult<InstanceUpsert> {
    let (upsert, wake) = write_tx!(store, "upsert_instance", |tx, now| {
        let upsert =
            writes::upsert_instance_on::<SqliteStore>(&mut tx, now, instance, planner).await?;
        if matches!(upsert, InstanceUpsert::Written(_)) {
            insert_audit(&mut tx, audit, now, &store.inner.own_audits).await?;
        }
        let done = std::slice::from_ref(&upsert);
        let wake = writes::instances_wake_on::<SqliteStore>(&mut tx, now, done).await?;
        (upsert, wake)
    })?;
    if wake {
        // Its first tick may be sooner than what the nodes wait for.
        store.inner.wake();
    }
    Ok(upsert)
}

pub(super) async fn upsert_instances(
    store: &SqliteStore,
    batch: &[(InstanceWrite, AuditEntry)],
    planner: &InstanceBatchPlanner<'_>,
) -> StoreResult<Vec<InstanceUpsert>> {
    let (done, wake) = write_tx!(store, "upsert_instances", |tx, now| {
        let done = writes::upsert_instances_on::<SqliteStore>(&mut tx, now, batch, planner).await?;
        for ((_, audit), upsert) in batch.iter().zip(&done) {
            if matches!(upsert, InstanceUpsert::Written(_)) {
                insert_audit(&mut tx, audit, now, &store.inner.own_audits).await?;
            }
        }
        let wake = writes::instances_wake_on::<SqliteStore>(&mut tx, now, &done).await?;
        (done, wake)
    })?;
    if wake {
        // Their first ticks may be sooner than what the nodes wait for.
        store.inner.wake();
    }
    Ok(done)
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
