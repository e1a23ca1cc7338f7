//! The instances of a task on PostgreSQL: the upsert, the batch's and the removal written once
//! (`store/writes.rs`), each run in one transaction with its audit entries.

use super::exec::{insert_audit, notify_on};
use crate::store::postgres::PgStore;
use crate::store::writes;
use crate::store::{
    AuditEntry, InstanceBatchPlanner, InstancePlanner, InstanceUpsert, InstanceWrite, StoreResult,
};

/// Plans this transaction's statements for their parameters and the table as it is now, not
/// with a plan cached on the connection: instances are made in bulk, often right after the
/// schema, and a plan the connection cached while `scheduler_tasks` held a few rows (a scan of
/// the table) stays until its statistics are next gathered (the autovacuum's analyze, a minute
/// or more later), making each write read the whole table: 3.5 ms per instance at 10,000.
async fn custom_plans(tx: &mut sqlx::PgConnection) -> Result<(), sqlx::Error> {
    sqlx::query("SET LOCAL plan_cache_mode = force_custom_plan")
        .execute(tx)
        .await
        .map(drop)
}

pub(super) async fn upsert_instance(
    store: &PgStore,
    instance: &InstanceWrite,
    audit: &AuditEntry,
    planner: &InstancePlanner<'_>,
) -> StoreResult<InstanceUpsert> {
    write_tx!(store, "upsert_instance", |tx, ()| {
        custom_plans(&mut tx).await?;
        let upsert = writes::upsert_instance_on::<PgStore>(&mut tx, (), instance, planner).await?;
        if matches!(upsert, InstanceUpsert::Written(_)) {
            insert_audit(&mut tx, audit).await?;
        }
        // Its first tick may be sooner than what the nodes wait for.
        let done = std::slice::from_ref(&upsert);
        if writes::instances_wake_on::<PgStore>(&mut tx, (), done).await? {
            notify_on(&mut tx, store, "request").await?;
        }
        upsert
    })
}

pub(super) async fn upsert_instances(
    store: &PgStore,
    batch: &[(InstanceWrite, AuditEntry)],
    planner: &InstanceBatchPlanner<'_>,
) -> StoreResult<Vec<InstanceUpsert>> {
    write_tx!(store, "upsert_instances", |tx, ()| {
        custom_plans(&mut tx).await?;
        let done = writes::upsert_instances_on::<PgStore>(&mut tx, (), batch, planner).await?;
        let audits: Vec<&AuditEntry> = batch
            .iter()
            .zip(&done)
            .filter(|(_, upsert)| matches!(upsert, InstanceUpsert::Written(_)))
            .map(|((_, audit), _)| audit)
            .collect();
        if !audits.is_empty() {
            // One statement for the batch's entries, in order.
            let column = |field: fn(&AuditEntry) -> &str| -> Vec<&str> {
                audits.iter().map(|a| field(a)).collect()
            };
            sqlx::query(query!("audit_insert_many"))
                .bind(column(|a| &a.actor))
                .bind(column(|a| &a.action))
                .bind(column(|a| &a.task))
                .bind(column(|a| &a.detail))
                .bind(column(|a| &a.source))
                .execute(&mut *tx)
                .await?;
        }
        // Their first ticks may be sooner than what the nodes wait for.
        if writes::instances_wake_on::<PgStore>(&mut tx, (), &done).await? {
            notify_on(&mut tx, store, "request").await?;
        }
        done
    })
}

pub(super) async fn remove_instance(
    store: &PgStore,
    task: &str,
    key: &str,
    audit: &AuditEntry,
) -> StoreResult<bool> {
    write_tx!(store, "remove_instance", |tx, ()| {
        let removed = writes::remove_instance_on::<PgStore>(&mut tx, (), task, key).await?;
        if removed {
            insert_audit(&mut tx, audit).await?;
        }
        removed
    })
}
