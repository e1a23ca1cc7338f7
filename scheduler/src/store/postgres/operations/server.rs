//! The database server itself: which one the store is on (no query: the choice of server
//! keeps it), and how it replicates (one read, for the node's start-up line).

use sqlx::Row;

use crate::store::postgres::PgStore;
use crate::store::{DatabaseServer, Replication, StoreResult};

pub(super) fn database_server(store: &PgStore) -> Option<DatabaseServer> {
    store.server_now()
}

pub(super) async fn replication(store: &PgStore) -> StoreResult<Option<Replication>> {
    let hosts = store.hosts();
    timed!(store, "replication", |conn| {
        let row = sqlx::query(query!("replication")).fetch_one(conn).await?;
        let hidden: i64 = row.try_get("hidden")?;
        let standbys: i64 = row.try_get("standbys")?;
        let synchronous: i64 = row.try_get("synchronous_standbys")?;
        Ok(Some(Replication::new(
            row.try_get::<String, _>("synchronous_standby_names")?,
            row.try_get::<String, _>("synchronous_commit")?,
            standbys,
            // Without pg_read_all_stats every standby's sync_state reads NULL.
            (hidden == 0 || standbys == 0).then_some(synchronous),
            hosts,
        )))
    })
}
