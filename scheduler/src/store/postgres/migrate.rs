//! Schema migrations, embedded from `scheduler/migrations/postgres/` (shipped with the crate) and
//! applied in order under an advisory lock, so nodes starting together apply each migration
//! exactly once. A database migrated by a newer binary (a version this one does not know) is
//! refused rather than half-understood.
//!
//! Through a transaction-mode pooler a session-level advisory lock would stay with whichever
//! server connection took it; there, all pending migrations run in one transaction under
//! `pg_advisory_xact_lock`, released by the commit.

use sqlx::{Connection, PgConnection, Row};

use super::{classify, quote_ident};
use crate::store::{StoreError, StoreResult};

macro_rules! migration {
    ($version:literal, $description:literal, $file:literal) => {
        (
            $version,
            $description,
            include_str!(concat!("../../../migrations/postgres/", $file)),
        )
    };
}

/// `(version, description, sql)` of every migration, in order. Never edit one that has landed.
pub(crate) const MIGRATIONS: &[(i64, &str, &str)] = &[
    migration!(1, "init", "0001_init.sql"),
    migration!(2, "guarantees", "0002_guarantees.sql"),
    migration!(3, "policies", "0003_policies.sql"),
    migration!(4, "operations", "0004_operations.sql"),
    migration!(5, "run query indexes", "0005_run_query_indexes.sql"),
    migration!(6, "hot renewals", "0006_hot_renewals.sql"),
    migration!(
        7,
        "drop an unread run index",
        "0007_drop_unread_run_index.sql"
    ),
    migration!(8, "cancel requests", "0008_cancel_requests.sql"),
    migration!(9, "run start unknown", "0009_run_start_unknown.sql"),
    migration!(10, "fencing tokens", "0010_fencing_tokens.sql"),
    migration!(11, "incidents", "0011_incidents.sql"),
    migration!(12, "backfills", "0012_backfills.sql"),
    migration!(13, "calendars", "0013_calendars.sql"),
    migration!(14, "outbox channels", "0014_outbox_channels.sql"),
    migration!(15, "shards", "0015_shards.sql"),
    migration!(16, "broadcast", "0016_broadcast.sql"),
    migration!(17, "node services", "0017_node_services.sql"),
    migration!(18, "node database server", "0018_node_database_server.sql"),
];

pub(crate) async fn run(
    conn: &mut PgConnection,
    schema: &str,
    transaction_begin: Option<impl sqlx::SqlSafeStr>,
) -> StoreResult<()> {
    let sql = |e| classify("migrate", e);
    if let Some(begin) = transaction_begin {
        let mut tx = conn.begin_with(begin).await.map_err(sql)?;
        sqlx::query(include_str!("queries/migrate_xact_lock.sql"))
            .bind(schema)
            .execute(&mut *tx)
            .await
            .map_err(sql)?;
        apply_all(&mut tx, schema).await?;
        return tx.commit().await.map_err(sql);
    }
    sqlx::query(include_str!("queries/migrate_lock.sql"))
        .bind(schema)
        .execute(&mut *conn)
        .await
        .map_err(sql)?;
    let result = apply_all(conn, schema).await;
    let unlock = sqlx::query(include_str!("queries/migrate_unlock.sql"))
        .bind(schema)
        .execute(&mut *conn)
        .await;
    result?;
    unlock.map_err(sql)?;
    Ok(())
}

async fn apply_all(conn: &mut PgConnection, schema: &str) -> StoreResult<()> {
    let sql = |e| classify("migrate", e);
    // Identifiers cannot be bound; the schema name is quoted instead.
    let create = format!("CREATE SCHEMA IF NOT EXISTS {}", quote_ident(schema));
    sqlx::raw_sql(sqlx::AssertSqlSafe(create))
        .execute(&mut *conn)
        .await
        .map_err(sql)?;
    sqlx::query(include_str!("queries/migrate_table.sql"))
        .execute(&mut *conn)
        .await
        .map_err(sql)?;
    let applied: Vec<i64> = sqlx::query(shared_query!("migrate_applied"))
        .fetch_all(&mut *conn)
        .await
        .map_err(sql)?
        .iter()
        .map(|r| r.try_get(0))
        .collect::<Result<_, _>>()
        .map_err(sql)?;
    let known = MIGRATIONS.last().map_or(0, |m| m.0);
    if let Some(newer) = applied.iter().find(|v| **v > known) {
        // Not transient: retrying cannot make this binary understand the schema.
        return Err(StoreError::setup(format!(
            "schema `{schema}` has migration {newer}, newer than this binary knows (up to {known}); upgrade this node"
        )));
    }
    for &(version, description, migration) in MIGRATIONS {
        if applied.contains(&version) {
            continue;
        }
        let apply = async {
            let mut tx = conn.begin().await?;
            // A migration may take longer than the statement timeout of the scheduler's queries.
            sqlx::query("SET LOCAL statement_timeout = 0")
                .execute(&mut *tx)
                .await?;
            sqlx::raw_sql(migration).execute(&mut *tx).await?;
            sqlx::query(include_str!("queries/migrate_record.sql"))
                .bind(version)
                .bind(description)
                .execute(&mut *tx)
                .await?;
            tx.commit().await
        };
        apply.await.map_err(sql)?;
        tracing::info!(version, description, schema, "applied migration");
    }
    Ok(())
}
