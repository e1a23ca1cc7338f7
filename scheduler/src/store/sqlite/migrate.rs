//! Schema migrations, embedded from `scheduler/migrations/sqlite/` (shipped with the crate) and
//! applied in order in one `BEGIN IMMEDIATE` transaction, so a migration is applied exactly once
//! and a failed one leaves nothing behind. A database migrated by a newer binary (a version this
//! one does not know) is refused rather than half-understood.

use sqlx::{Row, SqliteConnection};

use super::ops::micros;
use crate::store::StoreError;

macro_rules! migration {
    ($version:literal, $description:literal, $file:literal) => {
        (
            $version,
            $description,
            include_str!(concat!("../../../migrations/sqlite/", $file)),
        )
    };
}

/// `(version, description, sql)` of every migration, in order. Never edit one that has landed.
pub(crate) const MIGRATIONS: &[(i64, &str, &str)] = &[migration!(1, "init", "0001_init.sql")];

/// Applies the migrations `conn` (inside a write transaction) lacks. `Ok(Err(_))`: the database
/// is newer than this binary; the caller rolls back.
pub(super) async fn apply_all(
    conn: &mut SqliteConnection,
    now: chrono::DateTime<chrono::Utc>,
    path: &std::path::Path,
) -> Result<Result<Vec<i64>, StoreError>, sqlx::Error> {
    sqlx::query(include_str!("queries/migrate_table.sql"))
        .execute(&mut *conn)
        .await?;
    let applied: Vec<i64> = sqlx::query(include_str!("queries/migrate_applied.sql"))
        .fetch_all(&mut *conn)
        .await?
        .iter()
        .map(|r| r.try_get(0))
        .collect::<Result<_, _>>()?;
    let known = MIGRATIONS.last().map_or(0, |m| m.0);
    if let Some(newer) = applied.iter().find(|v| **v > known) {
        return Ok(Err(StoreError::setup(format!(
            "the SQLite database `{}` has migration {newer}, newer than this binary knows (up to {known}); upgrade this binary",
            path.display()
        ))));
    }
    let mut done = Vec::new();
    for &(version, description, sql) in MIGRATIONS {
        if applied.contains(&version) {
            continue;
        }
        sqlx::raw_sql(sql).execute(&mut *conn).await?;
        sqlx::query(include_str!("queries/migrate_record.sql"))
            .bind(version)
            .bind(description)
            .bind(micros(now))
            .execute(&mut *conn)
            .await?;
        done.push(version);
    }
    Ok(Ok(done))
}
