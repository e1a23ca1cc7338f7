//! The node's service states in the store: the `reporter` service writes the names of the
//! services that are down (see `health`) to the node's row, for `/api/nodes` on every node.

use std::sync::Arc;
use std::time::Duration;

use super::health::Health;
use super::service::Service;
use crate::store::{Store, StoreError};

/// Writes the names of the node's services that are not running to its row in the store when
/// they change (and checks every heartbeat interval), so that `/api/nodes` on any node shows
/// them. A service itself (`reporter`), restarted like the others.
pub(crate) struct Reporter {
    health: Arc<Health>,
    store: Arc<dyn Store>,
    node_id: Arc<str>,
    heartbeat_interval: Duration,
    written: Option<Vec<String>>,
}

impl Reporter {
    pub(crate) fn new(
        health: Arc<Health>,
        store: Arc<dyn Store>,
        node_id: Arc<str>,
        heartbeat_interval: Duration,
    ) -> Self {
        Self {
            health,
            store,
            node_id,
            heartbeat_interval,
            written: None,
        }
    }

    /// What wakes the reporter.
    pub(crate) fn wake(health: &Health) -> &tokio::sync::Notify {
        health.changed()
    }
}

impl Service for Reporter {
    type Pass = ();
    type Error = StoreError;

    fn what(&self) -> &'static str {
        "reporting the states of the node's services"
    }

    async fn run_once(&mut self) -> Result<(), StoreError> {
        let down: Vec<String> = self
            .health
            .down()
            .iter()
            .map(|s| s.name.to_owned())
            .collect();
        if self.written.as_ref() != Some(&down) {
            self.store.report_services(&self.node_id, &down).await?;
            self.written = Some(down);
        }
        Ok(())
    }

    fn pause_after(&mut self, (): ()) -> Option<Duration> {
        Some(self.heartbeat_interval)
    }
}
