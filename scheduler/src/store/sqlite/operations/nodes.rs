//! Nodes: a node's registration, its heartbeat (and what it learns of the cluster), its clean stop.

use std::time::Duration;

use super::bind::{earlier, micros, names_json};
use crate::store::sqlite::SqliteStore;
use crate::store::{Heartbeat, NodeInfo, StoreResult};

/// A task is counted overdue by the heartbeat when its next run is this late (as on PostgreSQL).
const OVERDUE_HINT: Duration = Duration::from_secs(2);

pub(super) async fn register_node(store: &SqliteStore, node: &NodeInfo) -> StoreResult<()> {
    store.refuse_operator("register a node")?;
    let tasks = names_json(&node.tasks);
    write_tx!(store, "register_node", |tx, now| {
        sqlx::query(query!("register_node"))
            .bind(&node.node_id)
            .bind(&node.hostname)
            .bind(i32::try_from(node.pid).unwrap_or(i32::MAX))
            .bind(&node.version)
            .bind(&tasks)
            .bind(micros(now))
            .execute(&mut *tx)
            .await?;
    })
}

pub(super) async fn heartbeat(
    store: &SqliteStore,
    node_id: &str,
    silent_after: Duration,
) -> StoreResult<Heartbeat> {
    write_tx!(store, "heartbeat", |tx, now| {
        let registered = sqlx::query(query!("heartbeat"))
            .bind(node_id)
            .bind(micros(now))
            .execute(&mut *tx)
            .await?
            .rows_affected()
            > 0;
        let silent = sqlx::query_scalar(query!("silent_nodes"))
            .bind(node_id)
            .bind(earlier(now, silent_after))
            .fetch_all(&mut *tx)
            .await?;
        let overdue = sqlx::query_scalar(query!("overdue_count"))
            .bind(earlier(now, OVERDUE_HINT))
            .fetch_one(&mut *tx)
            .await?;
        let others: i64 = sqlx::query_scalar(query!("live_nodes"))
            .bind(node_id)
            .bind(earlier(now, silent_after))
            .fetch_one(&mut *tx)
            .await?;
        Heartbeat {
            registered,
            silent,
            overdue,
            live: 1 + others,
        }
    })
}

pub(super) async fn report_services(
    store: &SqliteStore,
    node_id: &str,
    down: &[String],
) -> StoreResult<()> {
    let down = down.join(",");
    write_tx!(store, "report_services", |tx, _now| {
        sqlx::query(shared_query!("report_services"))
            .bind(node_id)
            .bind(&down)
            .execute(&mut *tx)
            .await?;
    })
}

pub(super) async fn report_database_server(
    store: &SqliteStore,
    node_id: &str,
    server: Option<&str>,
) -> StoreResult<()> {
    write_tx!(store, "report_database_server", |tx, _now| {
        sqlx::query(shared_query!("report_database_server"))
            .bind(node_id)
            .bind(server)
            .execute(&mut *tx)
            .await?;
    })
}

pub(super) async fn deregister_node(store: &SqliteStore, node_id: &str) -> StoreResult<()> {
    write_tx!(store, "deregister_node", |tx, now| {
        sqlx::query(query!("deregister_node"))
            .bind(node_id)
            .bind(micros(now))
            .execute(&mut *tx)
            .await?;
    })
}
