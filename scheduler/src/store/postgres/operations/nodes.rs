//! Nodes: a node's registration, its heartbeat (and what it learns of the cluster), its clean stop.

use std::time::Duration;

use sqlx::Row;

use super::columns::millis;
use crate::store::nodes::OVERDUE_HINT;
use crate::store::postgres::PgStore;
use crate::store::{Heartbeat, StoreResult};

pub(super) async fn heartbeat(
    store: &PgStore,
    node_id: &str,
    silent_after: Duration,
) -> StoreResult<Heartbeat> {
    timed!(store, "heartbeat", |conn| {
        let row = sqlx::query(query!("heartbeat"))
            .bind(node_id)
            .bind(millis(silent_after))
            .bind(millis(OVERDUE_HINT))
            .fetch_one(conn)
            .await?;
        Ok(Heartbeat {
            registered: row.try_get("registered")?,
            silent: row.try_get("silent")?,
            overdue: row.try_get("overdue")?,
            live: row.try_get("live")?,
            instances: row.try_get("instances")?,
        })
    })
}
