//! Nodes: a node's registration, its heartbeat (and what it learns of the cluster), its clean stop.

use std::time::Duration;

use super::bind::{earlier, micros};
use crate::store::nodes::OVERDUE_HINT;
use crate::store::sqlite::SqliteStore;
use crate::store::{Heartbeat, StoreResult};

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
        let instances = sqlx::query_scalar(query!("instance_count"))
            .fetch_one(&mut *tx)
            .await?;
        Heartbeat {
            registered,
            silent,
            overdue,
            live: 1 + others,
            instances,
        }
    })
}
