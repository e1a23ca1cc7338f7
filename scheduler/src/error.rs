//! The one error type at the library boundary.

use std::borrow::Cow;

/// Everything that can go wrong in the scheduler's public API.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Two or more tasks are registered under one name.
    #[error("{0}")]
    Registry(#[from] crate::registry::RegistryError),
    /// A cron expression or time zone was refused.
    #[error(transparent)]
    Schedule(#[from] crate::schedule::ScheduleError),
    /// The task config could not be read or is invalid.
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    /// The database failed or could not be reached.
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    /// Applying the schema migrations failed.
    #[error("migration {version} failed: {source}")]
    Migration {
        /// The migration that failed.
        version: i64,
        /// Why.
        #[source]
        source: sqlx::Error,
    },
    /// A setting (builder call or environment variable) is invalid.
    #[error("invalid setting `{name}`: {message}")]
    InvalidSetting {
        /// The setting or environment variable.
        name: Cow<'static, str>,
        /// What is wrong and what to write instead.
        message: String,
    },
    /// An I/O error outside the database (signals, files).
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// `Result` with the scheduler's [`Error`] as the default error type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
