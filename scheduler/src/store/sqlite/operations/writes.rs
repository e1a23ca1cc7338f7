//! Rows more than one operation writes: skip records and audit entries.

use chrono::{DateTime, Utc};
use sqlx::SqliteConnection;

use super::bind::micros;
use crate::store::sqlite::SqliteStore;
use crate::store::{AuditEntry, SkipRecord};

/// Records ranges of skipped ticks on `conn`, recorded at `now`.
pub(super) async fn insert_skips<'a>(
    conn: &mut SqliteConnection,
    skips: impl IntoIterator<Item = &'a SkipRecord>,
    now: DateTime<Utc>,
) -> Result<(), sqlx::Error> {
    for skip in skips {
        sqlx::query(query!("skips_insert"))
            .bind(&skip.task_name)
            .bind(skip.reason.as_str())
            .bind(micros(skip.first_tick))
            .bind(micros(skip.last_tick))
            .bind(skip.ticks)
            .bind(skip.exact)
            .bind(skip.run_id)
            .bind(micros(now))
            .execute(&mut *conn)
            .await?;
    }
    Ok(())
}

/// Records an audit entry on `conn`, at the store's clock `now` (as PostgreSQL records it at
/// `now()`, whatever the entry's own `at` says), and counts it in `own` (the store's
/// `own_audits`, which tells the change listener this process's entries from another's).
pub(super) async fn insert_audit(
    conn: &mut SqliteConnection,
    a: &AuditEntry,
    now: DateTime<Utc>,
    own: &std::sync::atomic::AtomicU64,
) -> Result<(), sqlx::Error> {
    crate::store::writes::insert_audit::<SqliteStore>(conn, now, a).await?;
    // Counted before the commit, while this writer holds the writer turn: the listener reads
    // the count and the table under the same turn, so it sees both or neither.
    own.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    Ok(())
}
