//! The database server the node is on. At start the node says how it replicates (and warns
//! when a failover may lose claims); from then on every move of its connections to another
//! server (a failover or a switchover, which a URL listing several hosts lets the store follow)
//! is made visible: a log line and a `database.failed_over` event ("database failed over: now
//! h2:5432, timeline 3"), `scheduler_database_failovers_total`, and the server in the node's
//! row, which `/api/nodes` and the dashboard show.
//!
//! The store reports facts ([`Store::database_server`](crate::store::Store::database_server),
//! [`Store::replication`](crate::store::Store::replication)); what they mean is decided here.

use std::sync::Arc;
use std::time::Duration;

use super::service::Service;
use crate::events::{EventBus, SchedulerEvent, failover_summary};
use crate::metrics::Metrics;
use crate::store::{Replication, Store, StoreError};

/// How often the node looks at the store's choice of server (no query: the store keeps it).
const LOOK_INTERVAL: Duration = Duration::from_secs(1);
/// Passes that try to read the replication mode before the node gives up saying it.
const REPLICATION_ATTEMPTS: u32 = 5;

/// What the node says of its database's replication at start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Commits wait for a standby: a failover to it loses no claim.
    Synchronous,
    /// Another server may become the primary, and commits do not wait for it.
    Asynchronous {
        /// Why commits do not wait (`synchronous_standby_names` is empty, ...).
        why: String,
    },
    /// One server, no standby streaming from it and no other host to fail over to.
    Single,
}

/// What `replication` means for the claims.
pub(crate) fn mode(replication: &Replication) -> Mode {
    if replication.commits_wait_for_a_standby() {
        return Mode::Synchronous;
    }
    if !replication.may_fail_over() {
        return Mode::Single;
    }
    let why = if replication.synchronous_standby_names.trim().is_empty() {
        "synchronous_standby_names is empty".to_owned()
    } else {
        format!(
            "synchronous_commit is {}, so commits do not wait for the standbys of synchronous_standby_names",
            replication.synchronous_commit
        )
    };
    Mode::Asynchronous { why }
}

/// Logs which replication mode the node runs on: a warning naming the risk when it is
/// asynchronous and the operator has not accepted it, else an info line.
fn state(replication: &Replication, accepted: bool, node: &str) {
    let standbys = replication.standbys;
    let hosts = replication.hosts;
    match mode(replication) {
        Mode::Synchronous => tracing::info!(
            node,
            synchronous_standby_names = %replication.synchronous_standby_names,
            synchronous_commit = %replication.synchronous_commit,
            standbys,
            synchronous_standbys = ?replication.synchronous_standbys,
            "database replication is synchronous: a failover to a synchronous standby loses no claim"
        ),
        Mode::Single => tracing::info!(
            node,
            "database replication: none (one server, no standby streaming from it, one host in the URL)"
        ),
        Mode::Asynchronous { why } if accepted => tracing::info!(
            node,
            standbys,
            hosts,
            "database replication is asynchronous ({why}); accepted (SCHEDULER_ACCEPT_ASYNC_REPLICATION): on a failover, ticks claimed in the replication lag window may run twice"
        ),
        Mode::Asynchronous { why } => tracing::warn!(
            node,
            standbys,
            hosts,
            "database replication is asynchronous ({why}): on a failover, the claims made in the replication lag window are lost with the old primary, so those ticks may run twice; make a standby synchronous (synchronous_standby_names, synchronous_commit = on), or accept the risk with SCHEDULER_ACCEPT_ASYNC_REPLICATION=true"
        ),
    }
}

/// Says the replication mode once, then watches the store's choice of server.
pub(crate) struct DatabaseWatch {
    store: Arc<dyn Store>,
    events: Arc<EventBus>,
    metrics: Arc<Metrics>,
    node_id: Arc<str>,
    /// The operator accepted asynchronous replication (`SCHEDULER_ACCEPT_ASYNC_REPLICATION`).
    accept_async_replication: bool,
    heartbeat_interval: Duration,
    /// Passes that tried to read the replication mode and failed; `None` once it was said (or
    /// given up).
    replication_attempts: Option<u32>,
    /// Failovers already made visible.
    seen_failovers: u64,
    /// The server seen at the last look.
    seen_server: Option<String>,
    /// The server last written to the node's row.
    written: Option<Option<String>>,
}

impl DatabaseWatch {
    pub(crate) fn new(
        store: Arc<dyn Store>,
        events: Arc<EventBus>,
        metrics: Arc<Metrics>,
        node_id: Arc<str>,
        accept_async_replication: bool,
        heartbeat_interval: Duration,
    ) -> Self {
        Self {
            store,
            events,
            metrics,
            node_id,
            accept_async_replication,
            heartbeat_interval,
            replication_attempts: Some(0),
            seen_failovers: 0,
            seen_server: None,
            written: None,
        }
    }

    /// Reads and states the replication mode; never fails the pass: after
    /// [`REPLICATION_ATTEMPTS`] failures it says it could not and stops trying.
    async fn state_replication(&mut self) {
        let Some(attempts) = self.replication_attempts else {
            return;
        };
        match self.store.replication().await {
            Ok(replication) => {
                if let Some(replication) = replication {
                    state(&replication, self.accept_async_replication, &self.node_id);
                }
                self.replication_attempts = None;
            }
            Err(e) if attempts + 1 >= REPLICATION_ATTEMPTS => {
                tracing::warn!(error = %e, "could not read how the database replicates; the node runs on, without saying it");
                self.replication_attempts = None;
            }
            Err(e) => {
                tracing::debug!(error = %e, "could not read how the database replicates yet");
                self.replication_attempts = Some(attempts + 1);
            }
        }
    }
}

impl Service for DatabaseWatch {
    type Pass = ();
    type Error = StoreError;

    fn what(&self) -> &'static str {
        "watching the database server (failovers, replication)"
    }

    async fn run_once(&mut self) -> Result<(), StoreError> {
        self.state_replication().await;
        let server = self.store.database_server();
        if let Some(server) = &server {
            if server.failovers > self.seen_failovers {
                let summary = failover_summary(&server.address, server.timeline);
                tracing::warn!(
                    node = %self.node_id,
                    previous = ?self.seen_server,
                    failovers = server.failovers,
                    "{summary}"
                );
                self.metrics
                    .failed_over(server.failovers - self.seen_failovers);
                self.events.emit(SchedulerEvent::DatabaseFailedOver {
                    server: server.address.clone(),
                    previous: self.seen_server.clone(),
                    timeline: server.timeline,
                });
                self.seen_failovers = server.failovers;
            }
            self.metrics.database_server(&server.address);
            self.seen_server = Some(server.address.clone());
        }
        let address = server.map(|s| s.address);
        if self.written.as_ref() != Some(&address) {
            self.store
                .report_database_server(&self.node_id, address.as_deref())
                .await?;
            self.written = Some(address);
        }
        Ok(())
    }

    fn pause_after(&mut self, (): ()) -> Option<Duration> {
        Some(LOOK_INTERVAL.min(self.heartbeat_interval))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mode_follows_what_commits_wait_for() {
        let r = |names: &str, commit: &str, standbys: i64, hosts: usize| {
            mode(&Replication::new(names, commit, standbys, None, hosts))
        };
        assert_eq!(r("*", "on", 1, 1), Mode::Synchronous);
        assert_eq!(
            r("FIRST 1 (s1, s2)", "remote_apply", 2, 2),
            Mode::Synchronous
        );
        assert_eq!(r("", "on", 0, 1), Mode::Single);
        let Mode::Asynchronous { why } = r("", "on", 1, 1) else {
            panic!("a standby and no synchronous_standby_names")
        };
        assert!(why.contains("synchronous_standby_names is empty"), "{why}");
        assert!(matches!(r("", "on", 0, 2), Mode::Asynchronous { .. }));
        let Mode::Asynchronous { why } = r("*", "local", 1, 1) else {
            panic!("commits that do not wait")
        };
        assert!(why.contains("synchronous_commit is local"), "{why}");
    }
}
