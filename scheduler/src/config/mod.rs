//! Task config: the desired state (which registered tasks run, on what schedule), its document
//! formats, the sources it is fetched from, the watcher that keeps the last good document, and the
//! validation shared by the reconciler and `check-config`.
//!
//! Only *which* tasks run and *when* is configurable here. Handlers, concurrency, lock times and
//! business parameters live in code and are deliberately not part of the document. This module
//! never touches the database or the engine: it hands out [`ConfigDocument`]s and
//! [`ValidatedConfig`]s, and the reconciler decides what to do with them.
//!
//! # The document
//!
//! ```json
//! {
//!   "version": 42,
//!   "tasks": [
//!     {"name": "syncAdvertiserReport", "enabled": true, "cron": "0 */5 * * * *", "timezone": "Asia/Shanghai"}
//!   ]
//! }
//! ```
//!
//! The same shape is accepted as TOML (`[[tasks]]`) and YAML; see [`ConfigFormat`]. Unknown fields
//! are refused by name, so a typo such as `enable` can never silently mean "disabled".
//!
//! # Sources and environment
//!
//! A [`ConfigSource`] fetches the raw text: [`FileSource`] (a local file, also behind Kubernetes
//! ConfigMap symlinks), [`HttpSource`] (conditional GETs), or your own config centre (implement the
//! trait; see `examples/custom_source.rs`). [`ConfigSettings::from_env`] reads the environment
//! contract:
//!
//! | variable | meaning |
//! | --- | --- |
//! | `SCHEDULER_CONFIG` | path (optionally `file://`) or `http(s)://` URL of the document |
//! | `SCHEDULER_CONFIG_POLL_INTERVAL` | how often to poll, humantime (`1s`, `500ms`, `2m`); default 10 s |
//! | `SCHEDULER_CONFIG_TOKEN` | HTTP only: sent as `Authorization: Bearer <token>` |
//! | `SCHEDULER_CONFIG_HEADERS` | HTTP only: extra headers, `Name=value` pairs separated by commas, values percent-encoded (the `OTEL_EXPORTER_OTLP_HEADERS` convention) |
//! | `SCHEDULER_CONFIG_TIMEOUT` | HTTP only: request timeout, humantime; default 10 s |

mod check;
mod document;
mod error;
mod file;
#[cfg(feature = "http-config")]
mod http;
mod instances;
pub(crate) mod prescan;
mod settings;
mod sla;
mod source;
mod tags;
mod validate;
mod watcher;

pub use crate::shard::{InvalidShardCount, ShardCount};
pub use check::{CheckProblem, CheckReport, CheckedTask, check_config, check_config_text};
pub use document::{ConfigDocument, ConfigFormat, ShardsEntry, TaskConfig};
pub use error::ConfigError;
pub use file::FileSource;
#[cfg(feature = "http-config")]
pub use http::{HttpSource, HttpSourceBuilder};
pub(crate) use instances::InstanceCalendars;
pub use instances::{DesiredInstance, InstanceConfig};
pub use settings::{
    ConfigSettings, DEFAULT_HTTP_TIMEOUT, ENV_CONFIG, ENV_CONFIG_HEADERS, ENV_CONFIG_POLL_INTERVAL,
    ENV_CONFIG_TIMEOUT, ENV_CONFIG_TOKEN, source_from_location,
};
pub use sla::{MIN_REMIND_EVERY, Sla, TaskSla};
pub use source::{ConfigSource, Fetched, RawConfig};
pub(crate) use tags::{labels_problem, labels_text, owners_problem};
pub use validate::{DesiredTask, Refusal, RefusalReason, ValidatedConfig, validate};
pub(crate) use validate::{jitter_window, validate_with};
pub use watcher::{ConfigWatcher, DEFAULT_POLL_INTERVAL, MIN_POLL_INTERVAL, PollOutcome};
