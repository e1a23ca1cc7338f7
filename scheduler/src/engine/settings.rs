//! Engine settings: the defaults, a node's validated settings, and each task's settings (its
//! attribute's options over the node's defaults). The environment contract that fills them is
//! the builder's (`crate::vars` names every variable).

use std::borrow::Cow;
use std::time::Duration;

use chrono_tz::Tz;

use crate::bounds;
use crate::policy::{Misfire, Recovery};
use crate::registry::{TaskOptions, TaskRegistry, TaskSettings};
use crate::{Error, Result};

/// Default lock lifetime: a node that stops renewing loses its lock after this long.
///
/// 20 s, renewed every 4 s: a node killed with `kill -9` is taken over within the lifetime plus
/// the takeover wait (at most 24 s, inside the 30 s that users of Kubernetes' default grace
/// period expect), and a handler rides out a database failover or outage of at least 14 s
/// (lifetime - renew interval - stop margin) before it is asked to stop. For a database whose
/// failover takes longer (RDS Multi-AZ: 60-120 s), raise it above the failover time; takeover
/// after a crash then takes as long. See `RELIABILITY.md`.
pub const DEFAULT_LOCK_LIFETIME: Duration = Duration::from_secs(20);
/// Default number of handlers one node runs at once. Each task runs at most once at a time, so
/// this bounds distinct tasks; it is high enough that 1,000 tasks due on one tick all start
/// together (a lower bound delays the rest by a claim round trip per batch).
pub const DEFAULT_MAX_CONCURRENT: usize = 1000;
/// Default time running handlers get to finish after SIGTERM/SIGINT. With the hard stop (up to
/// [`HARD_STOP_WAIT`]) and the final flush of outcomes (up to [`FLUSH_TIMEOUT`]) a node exits
/// within 27 s, inside Kubernetes' default 30 s grace period, with its unfinished ticks handed
/// over.
pub const DEFAULT_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(20);
/// At shutdown, how long stopped handlers get to be gone after the shutdown timeout.
pub const HARD_STOP_WAIT: Duration = Duration::from_secs(2);
/// At shutdown, how long the last outcomes get to be recorded.
pub const FLUSH_TIMEOUT: Duration = Duration::from_secs(5);
/// Default safety-net interval: an idle node re-checks the store at least this often, even if no
/// notification arrives.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(30);
/// Default bound of how far ahead of a tick a node claims it: a claim takes time (10,000 rows
/// about half a second), so it is sent before the tick, and the runs start on it. The lead
/// used is 0.1 ms per registered task, bounded by this (see `engine::claimer`); a change made
/// that shortly before a tick applies from the next one.
pub const DEFAULT_MAX_CLAIM_AHEAD: Duration = Duration::from_secs(1);
/// Default interval of the node heartbeat.
pub const DEFAULT_HEARTBEAT_INTERVAL: Duration = Duration::from_secs(10);
/// Default retention of finished runs in `scheduler_runs`.
pub const DEFAULT_RUN_RETENTION: Duration = Duration::from_secs(14 * 24 * 3600);
/// Default interval between polls of the task config.
pub const DEFAULT_CONFIG_POLL_INTERVAL: Duration = Duration::from_secs(10);

/// Default retry backoff of a task with retries and no `backoff` of its own.
pub const DEFAULT_BACKOFF: Duration = Duration::from_secs(30);

/// The settings of tasks whose attribute sets none (builder calls, `SCHEDULER_DEFAULT_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TaskDefaults {
    pub timeout: Option<Duration>,
    pub retries: u32,
    pub backoff: Duration,
    pub misfire: Misfire,
    pub recovery: Recovery,
}

impl Default for TaskDefaults {
    fn default() -> Self {
        Self {
            timeout: None,
            retries: 0,
            backoff: DEFAULT_BACKOFF,
            misfire: Misfire::Once,
            recovery: Recovery::Rerun,
        }
    }
}

/// Validated engine settings. Built by [`SchedulerBuilder`](crate::SchedulerBuilder).
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub node_id: String,
    pub lock_lifetime: Duration,
    pub renew_interval: Duration,
    /// How long an expired lock is watched before it is released (see `engine::rules`).
    pub takeover_wait: Duration,
    /// The settings of tasks whose attribute sets none.
    pub defaults: TaskDefaults,
    /// How late a tick may start before its task counts as missed (`None`: from its interval).
    pub missed_grace: Option<Duration>,
    pub max_concurrent: usize,
    pub shutdown_timeout: Duration,
    pub poll_interval: Duration,
    /// The most a claim may run ahead of the ticks it takes (see [`Self::claim_ahead_bound`]).
    pub max_claim_ahead: Duration,
    pub heartbeat_interval: Duration,
    pub run_retention: Duration,
    pub default_timezone: Tz,
    pub config_poll_interval: Duration,
    /// Owners of tasks whose config entry names none.
    pub default_owners: Vec<String>,
    /// The dashboard's public address, linked from alerts.
    #[cfg_attr(not(feature = "webhook"), allow(dead_code))]
    pub public_url: Option<String>,
    /// The operator accepts asynchronous replication (no warning at start).
    pub accept_async_replication: bool,
    /// The wall clock the engine decides by (the system's but in tests; see `crate::clock`).
    pub clock: crate::clock::Clock,
}

impl Settings {
    /// The most a claim runs ahead of its ticks: the setting, at most a quarter of the lock
    /// lifetime (a lock taken ahead is renewed while it waits, but a renewal that fails then
    /// should still leave the run most of its lease).
    pub(crate) fn claim_ahead_bound(&self) -> Duration {
        self.max_claim_ahead.min(self.lock_lifetime / 4)
    }

    pub(crate) fn validate(&self) -> Result<()> {
        let invalid = |name: &'static str, message: String| {
            Err(Error::InvalidSetting {
                name: Cow::Borrowed(name),
                message,
            })
        };
        if self.node_id.is_empty() || self.node_id.len() > 200 {
            return invalid("node_id", "must be 1 to 200 characters".into());
        }
        self.check_ranges()?;
        if self.renew_interval.is_zero() || self.renew_interval * 2 > self.lock_lifetime {
            return invalid(
                "lock_renew_interval",
                format!(
                    "must be more than zero and at most half the lock lifetime ({})",
                    humantime::format_duration(self.lock_lifetime)
                ),
            );
        }
        Ok(())
    }

    /// Every duration and count against its range (`bounds`, `docs/limits.md`), named as the
    /// builder's setter.
    fn check_ranges(&self) -> Result<()> {
        let d = &self.defaults;
        for (name, range, value) in [
            (
                "lock_lifetime",
                bounds::LOCK_LIFETIME,
                Some(self.lock_lifetime),
            ),
            (
                "shutdown_timeout",
                bounds::SHUTDOWN_TIMEOUT,
                Some(self.shutdown_timeout),
            ),
            (
                "poll_interval",
                bounds::POLL_INTERVAL,
                Some(self.poll_interval),
            ),
            (
                "max_claim_ahead",
                bounds::MAX_CLAIM_AHEAD,
                Some(self.max_claim_ahead),
            ),
            (
                "heartbeat_interval",
                bounds::HEARTBEAT_INTERVAL,
                Some(self.heartbeat_interval),
            ),
            (
                "run_retention",
                bounds::RUN_RETENTION,
                Some(self.run_retention),
            ),
            (
                "config_poll_interval",
                bounds::CONFIG_POLL_INTERVAL,
                Some(self.config_poll_interval),
            ),
            ("missed_grace", bounds::MISSED_GRACE, self.missed_grace),
            ("default_timeout", bounds::TASK_TIMEOUT, d.timeout),
            ("default_backoff", bounds::TASK_BACKOFF, Some(d.backoff)),
        ] {
            if let Some(value) = value {
                range.check(name, value).map_err(out_of_range)?;
            }
        }
        bounds::MAX_CONCURRENT
            .check("max_concurrent", self.max_concurrent)
            .map_err(out_of_range)?;
        bounds::TASK_RETRIES
            .check("default_retries", d.retries)
            .map_err(out_of_range)?;
        Ok(())
    }

    /// The options of every registered task (`#[task(timeout, retries, backoff,
    /// lock_lifetime)]`) against their ranges, named `task `name`: timeout`.
    pub(crate) fn validate_tasks(&self, registry: &crate::TaskRegistry) -> Result<()> {
        for task in registry.iter() {
            let o = &task.options;
            let field = |what: &str| format!("task `{}`: {what}", task.name);
            for (what, range, value) in [
                ("timeout", bounds::TASK_TIMEOUT, o.timeout),
                ("backoff", bounds::TASK_BACKOFF, o.backoff),
                ("lock_lifetime", bounds::LOCK_LIFETIME, o.lock_lifetime),
            ] {
                if let Some(value) = value {
                    range.check(field(what), value).map_err(out_of_range)?;
                }
            }
            if let Some(retries) = o.retries {
                bounds::TASK_RETRIES
                    .check(field("retries"), retries)
                    .map_err(out_of_range)?;
            }
        }
        Ok(())
    }

    /// The settings of a task with these attribute options.
    pub(crate) fn task_settings(&self, options: &TaskOptions) -> TaskSettings {
        let d = &self.defaults;
        TaskSettings {
            timeout: options.timeout.or(d.timeout),
            retries: options.retries.unwrap_or(d.retries),
            backoff: options.backoff.unwrap_or(d.backoff),
            misfire: options.misfire.unwrap_or(d.misfire),
            recovery: options.recovery.unwrap_or(d.recovery),
            lock_lifetime: options.lock_lifetime.unwrap_or(self.lock_lifetime),
        }
    }

    /// The settings of a task registered in `registry`, and its descriptor (`None`: not
    /// registered there).
    pub(crate) fn registered(
        &self,
        registry: &TaskRegistry,
        task: &str,
    ) -> Option<(TaskSettings, &'static crate::TaskDescriptor)> {
        let descriptor = registry.get(task)?;
        Some((self.task_settings(&descriptor.options), descriptor))
    }

    /// The default renew interval for a lock lifetime: a fifth of it.
    pub(crate) fn default_renew_interval(lock_lifetime: Duration) -> Duration {
        lock_lifetime / 5
    }

    /// The takeover wait for a renew interval: the interval itself (an owner in touch with the
    /// store renews at least that often, and retries four times as often after a failure), at
    /// least 200 ms.
    pub(crate) fn takeover_wait_for(renew_interval: Duration) -> Duration {
        renew_interval.max(Duration::from_millis(200))
    }
}

/// A setting out of its range, as the crate's error.
fn out_of_range(e: bounds::OutOfRange) -> Error {
    Error::InvalidSetting {
        name: e.field,
        message: e.problem,
    }
}

/// The default node id: `hostname-pid`.
pub(crate) fn default_node_id() -> String {
    format!("{}-{}", hostname(), std::process::id())
}

pub(crate) fn hostname() -> String {
    gethostname::gethostname().to_string_lossy().into_owned()
}
