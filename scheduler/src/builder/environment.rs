//! The builder's part of the environment contract: the `SCHEDULER_*` variables read into a
//! [`SchedulerBuilder`] (and into [`ConfigSettings`]), refusing those a left-out feature would
//! ignore.

use super::{ConfigOrigin, SchedulerBuilder};
use crate::Result;
use crate::bounds;
use crate::config::ConfigSettings;
use crate::env::{Env, InvalidSetting};
use crate::store::StoreSettings;
use crate::vars;

/// The builder the environment contract describes, its variables read through `lookup` (see
/// [`SchedulerBuilder::from_env`]).
pub(super) fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<SchedulerBuilder> {
    let env = Env::new(&lookup);
    refuse_missing_features(&env)?;
    Ok(SchedulerBuilder {
        store_settings: StoreSettings {
            url: env
                .string(vars::DATABASE_URL)
                .or_else(|| env.string(vars::DATABASE_URL_FALLBACK)),
            schema: env.string(vars::SCHEMA),
            max_connections: env.count_in(vars::MAX_CONNECTIONS, bounds::MAX_CONNECTIONS)?,
            listen_url: env.string(vars::LISTEN_URL),
        },
        config: ConfigSettings::from_reader(&env)?.map(ConfigOrigin::Settings),
        node_id: env.string(vars::NODE_ID),
        lock_lifetime: env.duration_in(vars::LOCK_LIFETIME, bounds::LOCK_LIFETIME)?,
        max_concurrent: env.count_in(vars::MAX_CONCURRENT, bounds::MAX_CONCURRENT)?,
        shutdown_timeout: env.duration_in(vars::SHUTDOWN_TIMEOUT, bounds::SHUTDOWN_TIMEOUT)?,
        poll_interval: env.duration_in(vars::POLL_INTERVAL, bounds::POLL_INTERVAL)?,
        max_claim_ahead: env.duration_in(vars::MAX_CLAIM_AHEAD, bounds::MAX_CLAIM_AHEAD)?,
        default_timezone: env.timezone(vars::TIMEZONE)?,
        run_retention: env.duration_in(vars::RUN_RETENTION, bounds::RUN_RETENTION)?,
        default_recovery: env.parsed(vars::DEFAULT_RECOVERY)?,
        default_timeout: env.duration_in(vars::DEFAULT_TIMEOUT, bounds::TASK_TIMEOUT)?,
        default_retries: env.count_in(vars::DEFAULT_RETRIES, bounds::TASK_RETRIES)?,
        default_backoff: env.duration_in(vars::DEFAULT_BACKOFF, bounds::TASK_BACKOFF)?,
        default_misfire: env.parsed(vars::DEFAULT_MISFIRE)?,
        missed_grace: env.duration_in(vars::MISSED_GRACE, bounds::MISSED_GRACE)?,
        #[cfg(feature = "webhook")]
        webhook: crate::webhook::WebhookSettings::from_reader(&env)?,
        #[cfg(feature = "webhook")]
        channels: match env.string(vars::CHANNELS_FILE) {
            Some(path) => Some(
                // The variables it names (`env:NAME`) are secrets the node keeps from
                // isolated children.
                crate::channels::Channels::from_file_with(
                    std::path::Path::new(&path),
                    &|name: &str| {
                        vars::note_secret(name);
                        lookup(name)
                    },
                )
                .map_err(|e| crate::env::invalid(vars::CHANNELS_FILE, e))?,
            ),
            None => None,
        },
        default_owners: env
            .string(vars::DEFAULT_OWNERS)
            .map(|owners| {
                owners
                    .split(',')
                    .map(str::trim)
                    .filter(|o| !o.is_empty())
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default(),
        public_url: env.string(vars::PUBLIC_URL),
        migrate: env.boolean(vars::MIGRATE)?,
        accept_async_replication: env.boolean(vars::ACCEPT_ASYNC_REPLICATION)?,
        #[cfg(feature = "admin")]
        admin_addr: env.socket_addr(vars::ADMIN_ADDR)?,
        #[cfg(feature = "admin")]
        admin_token: admin_token_from(&env, vars::ADMIN_TOKEN)?,
        #[cfg(feature = "admin")]
        admin_viewer_token: admin_token_from(&env, vars::ADMIN_VIEWER_TOKEN)?,
        #[cfg(feature = "admin")]
        admin_hosts: env
            .string(vars::ADMIN_HOSTS)
            .map(|hosts| {
                hosts
                    .split(',')
                    .filter(|h| !h.trim().is_empty())
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default(),
        #[cfg(feature = "admin")]
        admin_limits: admin_limits_from(&env)?,
        #[cfg(feature = "otel")]
        otel: crate::otel::OtelSettings::from_reader(&env)?,
        ..SchedulerBuilder::default()
    })
}

// Config's part of the environment contract. Written here rather than in `config`, because they
// return the crate's `Error`, which wraps config's own errors (config names nothing above it).
impl ConfigSettings {
    /// Reads the `SCHEDULER_CONFIG*` variables ([`ENV_CONFIG`](crate::config::ENV_CONFIG) and
    /// friends). `Ok(None)` when `SCHEDULER_CONFIG` is unset or empty. An invalid value is an
    /// [`Error::InvalidSetting`](crate::Error::InvalidSetting) naming the variable.
    pub fn from_env() -> Result<Option<Self>> {
        Self::from_lookup(crate::env::process)
    }

    /// Like [`from_env`](Self::from_env), reading variables through `lookup` (for tests, or
    /// another prefix).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Option<Self>> {
        Ok(Self::from_reader(&Env::new(&lookup))?)
    }
}

/// Refuses a variable whose feature this build leaves out, naming the feature: set, it would
/// otherwise be ignored (no admin server, no alerts) without a word.
fn refuse_missing_features(env: &Env<'_>) -> Result<(), InvalidSetting> {
    let missing: &[(&str, &str)] = &[
        #[cfg(not(feature = "admin"))]
        (vars::ADMIN_ADDR, "admin"),
        #[cfg(not(feature = "admin"))]
        (vars::ADMIN_TOKEN, "admin"),
        #[cfg(not(feature = "admin"))]
        (vars::ADMIN_VIEWER_TOKEN, "admin"),
        #[cfg(not(feature = "admin"))]
        (vars::ADMIN_HOSTS, "admin"),
        #[cfg(not(feature = "admin"))]
        (vars::ADMIN_MAX_CONNECTIONS, "admin"),
        #[cfg(not(feature = "admin"))]
        (vars::ADMIN_HEADER_TIMEOUT, "admin"),
        #[cfg(not(feature = "admin"))]
        (vars::ADMIN_IDLE_TIMEOUT, "admin"),
        #[cfg(not(feature = "admin"))]
        (vars::ADMIN_REQUEST_TIMEOUT, "admin"),
        #[cfg(not(feature = "admin"))]
        (vars::ADMIN_MAX_CONCURRENT_READS, "admin"),
        #[cfg(not(feature = "webhook"))]
        (vars::WEBHOOK_URL, "webhook"),
        #[cfg(not(feature = "webhook"))]
        (vars::WEBHOOK_SECRET, "webhook"),
        #[cfg(not(feature = "webhook"))]
        (vars::WEBHOOK_EVENTS, "webhook"),
        #[cfg(not(feature = "webhook"))]
        (vars::WEBHOOK_TIMEOUT, "webhook"),
        #[cfg(not(feature = "webhook"))]
        (vars::CHANNELS_FILE, "webhook"),
    ];
    for (name, feature) in missing {
        if env.string(name).is_some() {
            return Err(crate::env::invalid(
                *name,
                format!(
                    "needs the `{feature}` feature of the scheduler crate, which this build leaves out \
                     (add it to the dependency's `features`)"
                ),
            ));
        }
    }
    Ok(())
}

/// An admin token of the environment contract, `name` (only with `SCHEDULER_ADMIN_ADDR`).
#[cfg(feature = "admin")]
fn admin_token_from(env: &Env<'_>, name: &'static str) -> Result<Option<String>, InvalidSetting> {
    let token = env.string(name);
    if token.is_some() && env.string(vars::ADMIN_ADDR).is_none() {
        return Err(crate::env::invalid(
            name,
            format!("only applies with {}", vars::ADMIN_ADDR),
        ));
    }
    Ok(token)
}

/// The admin server's limits of the environment contract; unset ones keep their defaults.
#[cfg(feature = "admin")]
fn admin_limits_from(env: &Env<'_>) -> Result<crate::admin::AdminLimits, InvalidSetting> {
    let mut limits = crate::admin::AdminLimits::default();
    if let Some(n) = env.count_in(vars::ADMIN_MAX_CONNECTIONS, bounds::ADMIN_MAX_CONNECTIONS)? {
        limits = limits.max_connections(n);
    }
    if let Some(t) = env.duration_in(vars::ADMIN_HEADER_TIMEOUT, bounds::ADMIN_TIMEOUT)? {
        limits = limits.header_read_timeout(t);
    }
    if let Some(t) = env.duration_in(vars::ADMIN_IDLE_TIMEOUT, bounds::ADMIN_TIMEOUT)? {
        limits = limits.idle_timeout(t);
    }
    if let Some(t) = env.duration_in(vars::ADMIN_REQUEST_TIMEOUT, bounds::ADMIN_TIMEOUT)? {
        limits = limits.request_timeout(t);
    }
    if let Some(n) = env.count_in(
        vars::ADMIN_MAX_CONCURRENT_READS,
        bounds::ADMIN_MAX_CONCURRENT_READS,
    )? {
        limits = limits.max_concurrent_reads(n);
    }
    Ok(limits)
}
