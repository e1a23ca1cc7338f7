//! Every environment variable the library reads, by name, in one place.
//!
//! What each one sets, its default and its form are documented where it is read:
//! [`SchedulerBuilder::from_env`](crate::SchedulerBuilder::from_env) (a node's settings),
//! [`ConfigSettings::from_env`](crate::config::ConfigSettings::from_env) (`SCHEDULER_CONFIG*`,
//! also named [`config::ENV_CONFIG`](crate::config::ENV_CONFIG) and so on),
//! [`init_tracing`](crate::init_tracing) (the log format), and the operator commands of
//! [`cli`](crate::cli) (the database and its schema, as a node reads them). An invalid value of
//! a setting is an [`Error::InvalidSetting`](crate::Error::InvalidSetting) naming the variable.
//!
//! Not listed here, as no one sets it by hand: `SCHEDULER_ISOLATED_RUN`, which a node sets for
//! the child process of a task with `isolation = "process"` (see [`crate::isolation`]).
//!
//! The variables that hold the node's secrets are listed once, in [`SECRETS`]: an isolated
//! run's child process never gets them (nor the variables a channels file names with `env:`,
//! see [`secret_names`]).

use std::collections::BTreeSet;
use std::sync::Mutex;

/// The database URL (`postgres://`, `postgresql://` or `sqlite://PATH`).
pub const DATABASE_URL: &str = "SCHEDULER_DATABASE_URL";
/// Read when [`DATABASE_URL`] is unset.
pub const DATABASE_URL_FALLBACK: &str = "DATABASE_URL";
/// PostgreSQL only: the schema of the tables.
pub const SCHEMA: &str = "SCHEDULER_SCHEMA";
/// PostgreSQL only: connections per node.
pub const MAX_CONNECTIONS: &str = "SCHEDULER_MAX_CONNECTIONS";
/// PostgreSQL only: a direct URL for the change listener's `LISTEN` (when the database URL
/// goes through a transaction-mode pooler).
pub const LISTEN_URL: &str = "SCHEDULER_LISTEN_URL";
/// PostgreSQL only: `true` accepts asynchronous replication (no warning at start that ticks
/// claimed in the replication lag window may run twice after a failover).
pub const ACCEPT_ASYNC_REPLICATION: &str = "SCHEDULER_ACCEPT_ASYNC_REPLICATION";
/// Apply migrations at start.
pub const MIGRATE: &str = "SCHEDULER_MIGRATE";
/// Path (optionally `file://...`) or `http(s)://` URL of the config document.
pub const CONFIG: &str = "SCHEDULER_CONFIG";
/// How often the config is polled, in humantime (`1s`, `500ms`, `2m`). Default 10 s.
pub const CONFIG_POLL_INTERVAL: &str = "SCHEDULER_CONFIG_POLL_INTERVAL";
/// HTTP only: a token sent as `Authorization: Bearer <token>`.
pub const CONFIG_TOKEN: &str = "SCHEDULER_CONFIG_TOKEN";
/// HTTP only: extra request headers as comma-separated `Name=value` pairs with percent-encoded
/// values (`X-Env=prod,X-Api-Key=abc%2Cdef`), the `OTEL_EXPORTER_OTLP_HEADERS` convention.
pub const CONFIG_HEADERS: &str = "SCHEDULER_CONFIG_HEADERS";
/// HTTP only: request timeout in humantime. Default 10 s.
pub const CONFIG_TIMEOUT: &str = "SCHEDULER_CONFIG_TIMEOUT";
/// This node's id.
pub const NODE_ID: &str = "SCHEDULER_NODE_ID";
/// Lock lifetime.
pub const LOCK_LIFETIME: &str = "SCHEDULER_LOCK_LIFETIME";
/// Handlers one node runs at once.
pub const MAX_CONCURRENT: &str = "SCHEDULER_MAX_CONCURRENT";
/// Time handlers get to finish at shutdown.
pub const SHUTDOWN_TIMEOUT: &str = "SCHEDULER_SHUTDOWN_TIMEOUT";
/// Safety-net poll interval.
pub const POLL_INTERVAL: &str = "SCHEDULER_POLL_INTERVAL";
/// The most a claim runs ahead of its ticks.
pub const MAX_CLAIM_AHEAD: &str = "SCHEDULER_MAX_CLAIM_AHEAD";
/// Zone of config entries that name none.
pub const TIMEZONE: &str = "SCHEDULER_TIMEZONE";
/// How long finished runs are kept.
pub const RUN_RETENTION: &str = "SCHEDULER_RUN_RETENTION";
/// The recovery rule of tasks that set none (`rerun` or `never`).
pub const DEFAULT_RECOVERY: &str = "SCHEDULER_DEFAULT_RECOVERY";
/// The timeout of tasks that set none.
pub const DEFAULT_TIMEOUT: &str = "SCHEDULER_DEFAULT_TIMEOUT";
/// The retries of tasks that set none.
pub const DEFAULT_RETRIES: &str = "SCHEDULER_DEFAULT_RETRIES";
/// The retry backoff of tasks that set none.
pub const DEFAULT_BACKOFF: &str = "SCHEDULER_DEFAULT_BACKOFF";
/// The misfire rule of tasks that set none (`once` or `skip`).
pub const DEFAULT_MISFIRE: &str = "SCHEDULER_DEFAULT_MISFIRE";
/// How late a tick may start before its task counts as missed.
pub const MISSED_GRACE: &str = "SCHEDULER_MISSED_GRACE";
/// The webhook endpoint.
pub const WEBHOOK_URL: &str = "SCHEDULER_WEBHOOK_URL";
/// The webhook signing secret (`whsec_...`).
pub const WEBHOOK_SECRET: &str = "SCHEDULER_WEBHOOK_SECRET";
/// The event types the webhook sends, comma-separated.
pub const WEBHOOK_EVENTS: &str = "SCHEDULER_WEBHOOK_EVENTS";
/// How long one webhook delivery may take.
pub const WEBHOOK_TIMEOUT: &str = "SCHEDULER_WEBHOOK_TIMEOUT";
/// A file of alert channels and routes (see `scheduler::channels`).
pub const CHANNELS_FILE: &str = "SCHEDULER_CHANNELS_FILE";
/// Owners of tasks whose config entry names none, comma-separated.
pub const DEFAULT_OWNERS: &str = "SCHEDULER_DEFAULT_OWNERS";
/// The dashboard's public address, linked from alerts.
pub const PUBLIC_URL: &str = "SCHEDULER_PUBLIC_URL";
/// Where the admin server listens (off when unset), e.g. `127.0.0.1:9870`.
pub const ADMIN_ADDR: &str = "SCHEDULER_ADMIN_ADDR";
/// The bearer token admin mutations need (none: every mutation is refused).
pub const ADMIN_TOKEN: &str = "SCHEDULER_ADMIN_TOKEN";
// secrets area: the read-only token.
/// The bearer token that reads the admin API, the dashboard's data and `/metrics` beyond
/// loopback, and can change nothing (e.g. for a Prometheus scrape); at least 16 characters,
/// not the same as [`ADMIN_TOKEN`].
pub const ADMIN_VIEWER_TOKEN: &str = "SCHEDULER_ADMIN_VIEWER_TOKEN";
/// Names the admin server answers to besides its own address and loopback names,
/// comma-separated: `name` (any port) or `name:port`, e.g. `scheduler.internal,ops.example:443`.
/// A request whose `Host` or `Origin` names anything else is refused (DNS rebinding).
pub const ADMIN_HOSTS: &str = "SCHEDULER_ADMIN_HOSTS";
/// The admin server's connections at once (default 128; one more is answered 503).
pub const ADMIN_MAX_CONNECTIONS: &str = "SCHEDULER_ADMIN_MAX_CONNECTIONS";
/// How long an admin client may take to send a request's headers (default `10s`).
pub const ADMIN_HEADER_TIMEOUT: &str = "SCHEDULER_ADMIN_HEADER_TIMEOUT";
/// How long an admin connection may move no byte (default `60s`).
pub const ADMIN_IDLE_TIMEOUT: &str = "SCHEDULER_ADMIN_IDLE_TIMEOUT";
/// How long one admin request may take before it is answered 503 (default `30s`).
pub const ADMIN_REQUEST_TIMEOUT: &str = "SCHEDULER_ADMIN_REQUEST_TIMEOUT";
/// Admin API and `/metrics` requests served at once (default 1; the others wait their turn).
pub const ADMIN_MAX_CONCURRENT_READS: &str = "SCHEDULER_ADMIN_MAX_CONCURRENT_READS";

/// `json` for JSON log lines from [`init_tracing`](crate::init_tracing) (else human-readable
/// lines; their filter is tracing's own `RUST_LOG`).
pub const LOG_FORMAT: &str = "SCHEDULER_LOG_FORMAT";

// The standard OpenTelemetry variables the `otel` feature reads (see
// [`OtelSettings::from_env`](crate::otel::OtelSettings::from_env) with the feature on); without
// the feature none is read (an application may use them for telemetry of its own).

/// `true`: export no telemetry.
#[cfg(feature = "otel")]
pub const OTEL_SDK_DISABLED: &str = "OTEL_SDK_DISABLED";
/// The OTLP collector's base URL.
#[cfg(feature = "otel")]
pub const OTEL_EXPORTER_OTLP_ENDPOINT: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
/// The full URL spans are sent to.
#[cfg(feature = "otel")]
pub const OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: &str = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT";
/// The full URL metrics are sent to.
#[cfg(feature = "otel")]
pub const OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: &str = "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT";
/// `grpc` or `http/protobuf`.
#[cfg(feature = "otel")]
pub const OTEL_EXPORTER_OTLP_PROTOCOL: &str = "OTEL_EXPORTER_OTLP_PROTOCOL";
/// The spans' protocol.
#[cfg(feature = "otel")]
pub const OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: &str = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL";
/// The metrics' protocol.
#[cfg(feature = "otel")]
pub const OTEL_EXPORTER_OTLP_METRICS_PROTOCOL: &str = "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL";
/// Request headers, `name=value,...` (often an API key: never logged).
pub const OTEL_EXPORTER_OTLP_HEADERS: &str = "OTEL_EXPORTER_OTLP_HEADERS";
/// The spans' request headers.
pub const OTEL_EXPORTER_OTLP_TRACES_HEADERS: &str = "OTEL_EXPORTER_OTLP_TRACES_HEADERS";
/// The metrics' request headers.
pub const OTEL_EXPORTER_OTLP_METRICS_HEADERS: &str = "OTEL_EXPORTER_OTLP_METRICS_HEADERS";
/// One export's time limit, in milliseconds.
#[cfg(feature = "otel")]
pub const OTEL_EXPORTER_OTLP_TIMEOUT: &str = "OTEL_EXPORTER_OTLP_TIMEOUT";
/// The spans' export time limit.
#[cfg(feature = "otel")]
pub const OTEL_EXPORTER_OTLP_TRACES_TIMEOUT: &str = "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT";
/// The metrics' export time limit.
#[cfg(feature = "otel")]
pub const OTEL_EXPORTER_OTLP_METRICS_TIMEOUT: &str = "OTEL_EXPORTER_OTLP_METRICS_TIMEOUT";
/// `gzip` or `none`.
#[cfg(feature = "otel")]
pub const OTEL_EXPORTER_OTLP_COMPRESSION: &str = "OTEL_EXPORTER_OTLP_COMPRESSION";
/// The spans' compression.
#[cfg(feature = "otel")]
pub const OTEL_EXPORTER_OTLP_TRACES_COMPRESSION: &str = "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION";
/// The metrics' compression.
#[cfg(feature = "otel")]
pub const OTEL_EXPORTER_OTLP_METRICS_COMPRESSION: &str = "OTEL_EXPORTER_OTLP_METRICS_COMPRESSION";
/// A CA bundle for the collector (refused: not supported).
#[cfg(feature = "otel")]
pub const OTEL_EXPORTER_OTLP_CERTIFICATE: &str = "OTEL_EXPORTER_OTLP_CERTIFICATE";
/// A client certificate (refused: not supported).
#[cfg(feature = "otel")]
pub const OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE: &str = "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE";
/// A client key (refused: not supported).
#[cfg(feature = "otel")]
pub const OTEL_EXPORTER_OTLP_CLIENT_KEY: &str = "OTEL_EXPORTER_OTLP_CLIENT_KEY";
/// `otlp`, or `none` to export no spans.
#[cfg(feature = "otel")]
pub const OTEL_TRACES_EXPORTER: &str = "OTEL_TRACES_EXPORTER";
/// `otlp`, or `none` to export no metrics.
#[cfg(feature = "otel")]
pub const OTEL_METRICS_EXPORTER: &str = "OTEL_METRICS_EXPORTER";
/// The resource's `service.name`.
#[cfg(feature = "otel")]
pub const OTEL_SERVICE_NAME: &str = "OTEL_SERVICE_NAME";
/// Resource attributes, `key=value,...`.
#[cfg(feature = "otel")]
pub const OTEL_RESOURCE_ATTRIBUTES: &str = "OTEL_RESOURCE_ATTRIBUTES";
/// Milliseconds between metric exports.
#[cfg(feature = "otel")]
pub const OTEL_METRIC_EXPORT_INTERVAL: &str = "OTEL_METRIC_EXPORT_INTERVAL";

/// A standard OpenTelemetry variable the `otel` feature does not read (no logs are exported),
/// listed for [`SECRETS`]: it holds the same kind of API key as the other headers.
const OTEL_EXPORTER_OTLP_LOGS_HEADERS: &str = "OTEL_EXPORTER_OTLP_LOGS_HEADERS";

// Isolation area: the node's secrets, kept from isolated children.

/// Every variable that holds one of the node's secrets or a URL that may embed one: the database
/// URLs (passwords), the admin and viewer tokens, the webhook's URL and secret, the config
/// source's token and headers, the OTLP headers (API keys). An isolated run's child process is
/// started without them (see `docs/isolation.md`); nothing in a child needs them.
///
/// A unit test keeps this list in step with the constants above: a new constant whose name says
/// it holds a secret (`TOKEN`, `SECRET`, `PASSWORD`, `HEADERS`, `_URL` of a database) fails it
/// until it is listed here or in that test's list of the harmless ones.
pub const SECRETS: &[&str] = &[
    DATABASE_URL,
    DATABASE_URL_FALLBACK,
    LISTEN_URL,
    CONFIG,
    CONFIG_TOKEN,
    CONFIG_HEADERS,
    WEBHOOK_URL,
    WEBHOOK_SECRET,
    ADMIN_TOKEN,
    ADMIN_VIEWER_TOKEN,
    OTEL_EXPORTER_OTLP_HEADERS,
    OTEL_EXPORTER_OTLP_TRACES_HEADERS,
    OTEL_EXPORTER_OTLP_METRICS_HEADERS,
    OTEL_EXPORTER_OTLP_LOGS_HEADERS,
];

/// The variables a channels file read by this process named with `env:NAME` (an SMTP password, a
/// bot's secret, a hook's URL): secrets of the node like [`SECRETS`].
static NAMED_BY_CHANNELS: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());

/// Records that `name` holds a secret of this node (a channels file's `env:NAME`), so that
/// isolated children are started without it.
#[cfg_attr(not(feature = "webhook"), allow(dead_code))]
pub(crate) fn note_secret(name: &str) {
    NAMED_BY_CHANNELS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(name.to_owned());
}

/// The secret variables named by channels files so far, with [`SECRETS`].
pub(crate) fn secret_names() -> Vec<String> {
    let named = NAMED_BY_CHANNELS.lock().unwrap_or_else(|e| e.into_inner());
    SECRETS
        .iter()
        .map(|name| (*name).to_owned())
        .chain(named.iter().cloned())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The constants of this file whose name or value says they may hold a secret, and are not
    /// in [`SECRETS`] on purpose (they hold none).
    const NOT_SECRET: &[&str] = &[
        "SCHEDULER_PUBLIC_URL",
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
        "OTEL_EXPORTER_OTLP_CLIENT_KEY",
    ];

    #[test]
    fn every_variable_that_may_hold_a_secret_is_listed() {
        let source = include_str!("vars.rs");
        let mut names = Vec::new();
        for line in source.lines() {
            let line = line.trim();
            let Some(rest) = line
                .strip_prefix("pub const ")
                .or_else(|| line.strip_prefix("const "))
            else {
                continue;
            };
            let Some((_, value)) = rest.split_once(": &str = \"") else {
                continue;
            };
            names.push(value.trim_end_matches("\";").to_owned());
        }
        assert!(names.len() > 50, "the constants were read: {names:?}");
        let secret_like = ["TOKEN", "SECRET", "PASSWORD", "HEADERS", "_URL", "KEY"];
        for name in names {
            if secret_like.iter().any(|word| name.contains(word)) && !NOT_SECRET.contains(&&*name) {
                assert!(
                    SECRETS.contains(&&*name),
                    "`{name}` may hold a secret: list it in SECRETS (or in NOT_SECRET if not)"
                );
            }
        }
    }

    #[test]
    fn variables_named_by_a_channels_file_are_secrets() {
        let secret = |name: &str| secret_names().iter().any(|n| n == name);
        assert!(secret(ADMIN_TOKEN) && secret("DATABASE_URL"));
        assert!(!secret("PATH") && !secret("VARS_TEST_SMTP_PASSWORD"));
        note_secret("VARS_TEST_SMTP_PASSWORD");
        assert!(secret("VARS_TEST_SMTP_PASSWORD"));
    }
}
