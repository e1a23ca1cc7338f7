//! Schema migrations: the steps of the one list both backends follow (`store::migrations`),
//! PostgreSQL's part embedded from `scheduler/migrations/postgres/` (shipped with the crate) and
//! applied in order under an advisory lock, so nodes starting together apply each migration
//! exactly once. A database migrated by a newer binary (a version this one does not know) is
//! refused rather than half-understood. PostgreSQL's numbering is the list's: no database of
//! it has another to carry over.
//!
//! Through a transaction-mode pooler a session-level advisory lock would stay with whichever
//! server connection took it; there, all pending migrations run in one transaction under
//! `pg_advisory_xact_lock`, released by the commit.

use sqlx::{Connection, PgConnection};

use super::{classify, quote_ident};
use crate::store::StoreResult;
use crate::store::migrations::{self, Plan};

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
    let recorded: Vec<(i64, String)> = sqlx::query_as(shared_query!("migrate_applied"))
        .fetch_all(&mut *conn)
        .await
        .map_err(sql)?;
    // PostgreSQL's numbering has always been the list's: no older one to carry over.
    let Plan { pending, .. } = migrations::plan(&recorded, &[])
        .map_err(|refusal| refusal.into_error(&format!("schema `{schema}`")))?;
    for step in pending {
        let (version, description) = (step.version, step.description);
        let apply = async {
            let mut tx = conn.begin().await?;
            if let Some(migration) = step.postgres.sql() {
                // A migration may take longer than the statement timeout of the scheduler's
                // queries.
                sqlx::query("SET LOCAL statement_timeout = 0")
                    .execute(&mut *tx)
                    .await?;
                sqlx::raw_sql(migration).execute(&mut *tx).await?;
            }
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
