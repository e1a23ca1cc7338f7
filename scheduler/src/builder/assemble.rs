//! Assembly: the settings a [`SchedulerBuilder`] gathered, defaulted and validated, made into an
//! engine, a store, a config feed and the admin server: a [`Scheduler`].

use std::sync::Arc;

use chrono_tz::Tz;

use super::{ConfigOrigin, SchedulerBuilder};
use crate::Scheduler;
use crate::config::ConfigWatcher;
use crate::engine::{
    ConfigFeed, DEFAULT_CONFIG_POLL_INTERVAL, DEFAULT_HEARTBEAT_INTERVAL, DEFAULT_LOCK_LIFETIME,
    DEFAULT_MAX_CLAIM_AHEAD, DEFAULT_MAX_CONCURRENT, DEFAULT_POLL_INTERVAL, DEFAULT_RUN_RETENTION,
    DEFAULT_SHUTDOWN_TIMEOUT, Engine, Settings,
};
use crate::store::Store;
#[cfg(feature = "webhook")]
use crate::vars;
use crate::{Result, TaskRegistry};

/// The scheduler `builder` describes: see [`SchedulerBuilder::build`].
pub(super) fn build(builder: SchedulerBuilder) -> Result<Scheduler> {
    crate::isolation::serve_if_child();
    let registry = match builder.registry {
        Some(r) => r,
        None => TaskRegistry::collect()?,
    };
    let lock_lifetime = builder.lock_lifetime.unwrap_or(DEFAULT_LOCK_LIFETIME);
    let renew_interval = builder
        .renew_interval
        .unwrap_or_else(|| Settings::default_renew_interval(lock_lifetime));
    let settings = Settings {
        node_id: builder
            .node_id
            .unwrap_or_else(crate::engine::default_node_id),
        lock_lifetime,
        renew_interval,
        takeover_wait: Settings::takeover_wait_for(renew_interval),
        missed_grace: builder.missed_grace,
        defaults: {
            let d = crate::engine::TaskDefaults::default();
            crate::engine::TaskDefaults {
                timeout: builder.default_timeout.or(d.timeout),
                retries: builder.default_retries.unwrap_or(d.retries),
                backoff: builder.default_backoff.unwrap_or(d.backoff),
                misfire: builder.default_misfire.unwrap_or(d.misfire),
                recovery: builder.default_recovery.unwrap_or(d.recovery),
            }
        },
        max_concurrent: builder.max_concurrent.unwrap_or(DEFAULT_MAX_CONCURRENT),
        shutdown_timeout: builder.shutdown_timeout.unwrap_or(DEFAULT_SHUTDOWN_TIMEOUT),
        poll_interval: builder.poll_interval.unwrap_or(DEFAULT_POLL_INTERVAL),
        max_claim_ahead: builder.max_claim_ahead.unwrap_or(DEFAULT_MAX_CLAIM_AHEAD),
        heartbeat_interval: builder
            .heartbeat_interval
            .unwrap_or(DEFAULT_HEARTBEAT_INTERVAL),
        run_retention: builder.run_retention.unwrap_or(DEFAULT_RUN_RETENTION),
        default_timezone: builder.default_timezone.unwrap_or(Tz::UTC),
        config_poll_interval: builder
            .config_poll_interval
            .unwrap_or(DEFAULT_CONFIG_POLL_INTERVAL),
        default_owners: builder.default_owners,
        public_url: builder.public_url,
        accept_async_replication: builder.accept_async_replication.unwrap_or(false),
        clock: builder.clock,
    };
    settings.validate()?;
    settings.validate_tasks(&registry)?;
    #[cfg(feature = "admin")]
    let admin = match builder.admin_addr {
        Some(addr) => Some(crate::admin::AdminListener::bind(
            addr,
            builder.admin_token.as_deref(),
            builder.admin_viewer_token.as_deref(),
            &builder.admin_hosts,
            builder.admin_limits,
        )?),
        None => None,
    };
    let store: Arc<dyn Store> = match builder.store {
        Some(store) => store,
        None => crate::store::connect(&builder.store_settings)?,
    };
    let config = match builder.config {
        None => None,
        Some(ConfigOrigin::Document(doc)) => Some(ConfigFeed::Fixed(Arc::new(doc))),
        Some(ConfigOrigin::Source(source)) => Some(ConfigFeed::Watched(
            ConfigWatcher::new(source).poll_interval(settings.config_poll_interval),
        )),
        Some(ConfigOrigin::Settings(mut config)) => {
            if let Some(interval) = builder.config_poll_interval {
                config.poll_interval = interval;
            }
            Some(ConfigFeed::Watched(config.watcher()?))
        }
    };
    let engine = Engine::assemble(
        store,
        registry,
        settings,
        builder.state,
        config,
        builder.migrate.unwrap_or(true),
        #[cfg(feature = "webhook")]
        alert_channels(builder.channels, builder.webhook)?,
    );
    #[cfg(feature = "admin")]
    let scheduler = Scheduler::new(engine, admin);
    #[cfg(not(feature = "admin"))]
    let scheduler = Scheduler::new(engine);
    #[cfg(feature = "otel")]
    let scheduler = scheduler.with_otel(builder.otel);
    Ok(scheduler)
}

/// The channels alerts go to: those configured, plus the webhook as the channel `webhook`.
#[cfg(feature = "webhook")]
fn alert_channels(
    channels: Option<crate::channels::Channels>,
    webhook: Option<crate::webhook::WebhookSettings>,
) -> Result<Option<crate::channels::Channels>> {
    let Some(webhook) = webhook else {
        return Ok(channels.filter(|c| !c.is_empty()));
    };
    let mut channels = channels.unwrap_or_default();
    if channels.channels.is_empty() {
        channels.max_pending = webhook.max_pending;
    }
    let channels = channels
        .with(crate::channels::Channel::webhook(&webhook))
        .map_err(|e| crate::env::invalid(vars::WEBHOOK_URL, e))?;
    Ok(Some(channels))
}
