//! Task config: the desired state (which registered tasks run, on what schedule), its formats and
//! its sources. (Stub: the Config issue fills this in; the signatures below are the contract.)

use serde::Deserialize;

/// One entry of the config document.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskConfig {
    /// The registered task's name.
    pub name: String,
    /// Whether the task should be scheduled.
    pub enabled: bool,
    /// The cron expression.
    pub cron: String,
    /// IANA zone; the scheduler's default zone when absent.
    #[serde(default)]
    pub timezone: Option<String>,
}

/// The whole config document: `{"tasks":[...]}`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct ConfigDocument {
    /// Optional monotonically increasing revision of the document.
    #[serde(default)]
    pub version: Option<i64>,
    /// The task entries.
    pub tasks: Vec<TaskConfig>,
}

/// The config could not be read or parsed.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct ConfigError {
    message: String,
}

impl ConfigDocument {
    /// Parses a JSON document.
    pub fn from_json(text: &str) -> Result<Self, ConfigError> {
        serde_json::from_str(text).map_err(|e| ConfigError {
            message: e.to_string(),
        })
    }
}

mod validate;
pub use validate::{DesiredTask, Refusal, RefusalReason, ValidatedConfig, validate};
