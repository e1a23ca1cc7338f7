//! Schema migrations, embedded from the workspace's `migrations/` folder and applied in order
//! under an advisory lock, so nodes starting together apply each migration exactly once.

use sqlx::{Connection, PgPool, Row};

use super::{StoreResult, quote_ident};

/// `(version, description, sql)` of every migration, in order. Never edit one that has landed.
pub(crate) const MIGRATIONS: &[(i64, &str, &str)] = &[(
    1,
    "init",
    include_str!("../../../../migrations/0001_init.sql"),
)];

pub(crate) async fn run(pool: &PgPool, schema: &str) -> StoreResult<()> {
    let mut conn = pool.acquire().await?;
    sqlx::query(include_str!("queries/migrate_lock.sql"))
        .bind(schema)
        .execute(&mut *conn)
        .await?;
    let result = apply_all(&mut conn, schema).await;
    let unlock = sqlx::query(include_str!("queries/migrate_unlock.sql"))
        .bind(schema)
        .execute(&mut *conn)
        .await;
    result?;
    unlock?;
    Ok(())
}

async fn apply_all(conn: &mut sqlx::PgConnection, schema: &str) -> StoreResult<()> {
    // Identifiers cannot be bound; the schema name is quoted instead.
    let create = format!("CREATE SCHEMA IF NOT EXISTS {}", quote_ident(schema));
    sqlx::raw_sql(sqlx::AssertSqlSafe(create))
        .execute(&mut *conn)
        .await?;
    sqlx::query(include_str!("queries/migrate_table.sql"))
        .execute(&mut *conn)
        .await?;
    let applied: Vec<i64> = sqlx::query(include_str!("queries/migrate_applied.sql"))
        .fetch_all(&mut *conn)
        .await?
        .iter()
        .map(|r| r.try_get(0))
        .collect::<Result<_, _>>()?;
    for &(version, description, sql) in MIGRATIONS {
        if applied.contains(&version) {
            continue;
        }
        let mut tx = conn.begin().await?;
        sqlx::raw_sql(sql).execute(&mut *tx).await?;
        sqlx::query(include_str!("queries/migrate_record.sql"))
            .bind(version)
            .bind(description)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        tracing::info!(version, description, schema, "applied migration");
    }
    Ok(())
}
