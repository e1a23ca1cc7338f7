//! The database server itself, as the node sees it: which server its connections go to (and
//! how often that changed: failovers and switchovers), and how the server replicates, for the
//! node's start-up line. The store reports facts; the engine decides what they mean.

use serde::Serialize;

/// The server a store's connections go to now (see
/// [`Store::database_server`](super::Store::database_server)). Never a credential.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct DatabaseServer {
    /// `host:port` (`[host]:port` for an IPv6 address).
    pub address: String,
    /// How many times the store moved to another server since it first chose one: failovers
    /// and switchovers, as a URL listing several hosts lets it follow them.
    pub failovers: u64,
    /// The server's WAL timeline when the store last moved to it, if its role may read it
    /// (`None` before any move).
    pub timeline: Option<u32>,
}

impl DatabaseServer {
    /// A server at `address`, never moved from.
    pub fn new(address: impl Into<String>) -> Self {
        Self {
            address: address.into(),
            failovers: 0,
            timeline: None,
        }
    }
}

/// How the server a store is on replicates, as it says itself (see
/// [`Store::replication`](super::Store::replication)).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Replication {
    /// The server's `synchronous_standby_names` (empty: no commit waits for a standby).
    pub synchronous_standby_names: String,
    /// The store's sessions' `synchronous_commit` (`off` and `local` do not wait for a
    /// standby, whatever `synchronous_standby_names` says).
    pub synchronous_commit: String,
    /// Standbys streaming from the server now (`pg_stat_replication`).
    pub standbys: i64,
    /// How many of them are synchronous, if the store's role may see it (`pg_read_all_stats`).
    pub synchronous_standbys: Option<i64>,
    /// Hosts the connection string lists (more than one: the store may fail over to another).
    pub hosts: usize,
}

impl Replication {
    /// What the server says, with the number of hosts the connection string lists.
    pub fn new(
        synchronous_standby_names: impl Into<String>,
        synchronous_commit: impl Into<String>,
        standbys: i64,
        synchronous_standbys: Option<i64>,
        hosts: usize,
    ) -> Self {
        Self {
            synchronous_standby_names: synchronous_standby_names.into(),
            synchronous_commit: synchronous_commit.into(),
            standbys,
            synchronous_standbys,
            hosts,
        }
    }

    /// Whether a commit waits for a standby: `synchronous_standby_names` names one and the
    /// sessions' `synchronous_commit` is `on`, `remote_write` or `remote_apply`.
    pub fn commits_wait_for_a_standby(&self) -> bool {
        !self.synchronous_standby_names.trim().is_empty()
            && !matches!(self.synchronous_commit.as_str(), "off" | "local")
    }

    /// Whether another server may become the primary: standbys stream from this one, or the
    /// connection string lists several hosts.
    pub fn may_fail_over(&self) -> bool {
        self.standbys > 0 || self.hosts > 1
    }
}
