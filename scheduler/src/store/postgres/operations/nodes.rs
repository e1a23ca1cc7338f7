//! Nodes: a node's registration, its heartbeat (and what it learns of the cluster), its clean stop.

use std::time::Duration;

use sqlx::Row;

use super::columns::millis;
use crate::store::postgres::PgStore;
use crate::store::{Heartbeat, NodeInfo, StoreResult};

/// A task is counted overdue by the heartbeat when its next run is this late.
const OVERDUE_HINT: Duration = Duration::from_secs(2);

pub(super) async fn register_node(store: &PgStore, node: &NodeInfo) -> StoreResult<()> {
    timed!(store, "register_node", |conn| {
        sqlx::query(query!("register_node"))
            .bind(&node.node_id)
            .bind(&node.hostname)
            .bind(i32::try_from(node.pid).unwrap_or(i32::MAX))
            .bind(&node.version)
            .bind(&node.tasks)
            .execute(conn)
            .await
            .map(drop)
    })
}

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
        })
    })
}

pub(super) async fn report_services(
    store: &PgStore,
    node_id: &str,
    down: &[String],
) -> StoreResult<()> {
    let down = down.join(",");
    timed!(store, "report_services", |conn| {
        sqlx::query(shared_query!("report_services"))
            .bind(node_id)
            .bind(&down)
            .execute(conn)
            .await
            .map(drop)
    })
}

pub(super) async fn report_database_server(
    store: &PgStore,
    node_id: &str,
    server: Option<&str>,
) -> StoreResult<()> {
    timed!(store, "report_database_server", |conn| {
        sqlx::query(shared_query!("report_database_server"))
            .bind(node_id)
            .bind(server)
            .execute(conn)
            .await
            .map(drop)
    })
}

pub(super) async fn deregister_node(store: &PgStore, node_id: &str) -> StoreResult<()> {
    timed!(store, "deregister_node", |conn| {
        sqlx::query(query!("deregister_node"))
            .bind(node_id)
            .execute(conn)
            .await
            .map(drop)
    })
}
