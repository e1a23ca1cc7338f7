//! The formation's failover timings: pg_auto_failover's defaults or shortened for the test.

/// The monitor's failover timings (`pgautofailover.*` settings, in ms) and the keepers'
/// `timeout.network_partition_timeout` (s). `None`: pg_auto_failover's default.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Timings {
    /// `pgautofailover.health_check_period` (default 5000).
    pub health_check_period: Option<u32>,
    /// `pgautofailover.health_check_timeout` (default 5000).
    pub health_check_timeout: Option<u32>,
    /// `pgautofailover.health_check_max_retries` (default 2).
    pub health_check_max_retries: Option<u32>,
    /// `pgautofailover.health_check_retry_delay` (default 2000).
    pub health_check_retry_delay: Option<u32>,
    /// `pgautofailover.node_considered_unhealthy_timeout` (default 20000).
    pub node_considered_unhealthy_timeout: Option<u32>,
    /// `pgautofailover.primary_demote_timeout` (default 30000).
    pub primary_demote_timeout: Option<u32>,
    /// The keepers' `timeout.network_partition_timeout` in seconds (default 20): a primary that
    /// reaches neither the monitor nor a standby for this long stops itself. Kept below
    /// `primary_demote_timeout`, so a partitioned old primary has stopped before the monitor
    /// promotes the standby.
    pub network_partition_timeout_s: Option<u32>,
}

impl Timings {
    /// pg_auto_failover's defaults: nothing set.
    pub fn defaults() -> Self {
        Self::default()
    }

    /// Shortened for the test: health checks every second with a 1 s timeout and one retry
    /// after 0.5 s, a node unhealthy 4 s after its keeper last reported, the old primary given
    /// 5 s to demote, and a keeper that cannot reach anyone stopping its primary after 3 s.
    pub fn shortened() -> Self {
        Self {
            health_check_period: Some(1_000),
            health_check_timeout: Some(1_000),
            health_check_max_retries: Some(1),
            health_check_retry_delay: Some(500),
            node_considered_unhealthy_timeout: Some(4_000),
            primary_demote_timeout: Some(5_000),
            network_partition_timeout_s: Some(3),
        }
    }

    /// The monitor settings that are set, as (name, value).
    pub(super) fn monitor_settings(&self) -> Vec<(&'static str, u32)> {
        [
            ("health_check_period", self.health_check_period),
            ("health_check_timeout", self.health_check_timeout),
            ("health_check_max_retries", self.health_check_max_retries),
            ("health_check_retry_delay", self.health_check_retry_delay),
            (
                "node_considered_unhealthy_timeout",
                self.node_considered_unhealthy_timeout,
            ),
            ("primary_demote_timeout", self.primary_demote_timeout),
        ]
        .into_iter()
        .filter_map(|(name, v)| v.map(|v| (name, v)))
        .collect()
    }

    /// One line for the report.
    pub fn describe(&self) -> String {
        let mut parts: Vec<String> = self
            .monitor_settings()
            .into_iter()
            .map(|(name, v)| format!("pgautofailover.{name} = {v}"))
            .collect();
        if let Some(s) = self.network_partition_timeout_s {
            parts.push(format!("keepers' timeout.network_partition_timeout = {s}"));
        }
        if parts.is_empty() {
            "pg_auto_failover's default timings".to_owned()
        } else {
            parts.join(", ")
        }
    }
}
