//! The one error type at the library boundary.

use std::borrow::Cow;

/// Everything that can go wrong in the scheduler's public API.
///
/// `Debug` prints the message and its causes rather than the enum's structure, because
/// `fn main() -> scheduler::Result<()>` shows an error through `Debug`: an operator should read
/// "invalid setting `SCHEDULER_LOCK_LIFETIME`: ...", not a struct dump.
#[derive(thiserror::Error)]
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
    /// The store (database) failed, could not be reached, or cannot be used as configured.
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    /// A setting (builder call or environment variable) is invalid.
    #[error("invalid setting `{name}`: {message}")]
    InvalidSetting {
        /// The setting or environment variable.
        name: Cow<'static, str>,
        /// What is wrong and what to write instead.
        message: String,
    },
    /// An instance of a task was refused by [`Schedules`](crate::Schedules): the refusal says
    /// why and what to write instead.
    #[error(transparent)]
    Instance(#[from] crate::instance::InstanceRefusal),
    /// An I/O error outside the database (signals, files).
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// An operator command (`scheduler trigger`, `pause`, ...) was refused or could not be
    /// done; the message says why and what to do instead (an unknown task with the names near
    /// it, a paused task, a database that cannot be reached, named with its password hidden).
    #[error("{0}")]
    Command(String),
}

impl From<crate::env::InvalidSetting> for Error {
    fn from(e: crate::env::InvalidSetting) -> Self {
        Error::InvalidSetting {
            name: e.name,
            message: e.message,
        }
    }
}

/// `Result` with the scheduler's [`Error`] as the default error type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl std::fmt::Debug for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{self}")?;
        let mut source = std::error::Error::source(self);
        let mut first = true;
        while let Some(cause) = source {
            let text = cause.to_string();
            if !self.to_string().contains(&text) {
                if first {
                    f.write_str("\n\nCaused by:")?;
                    first = false;
                }
                write!(f, "\n    {text}")?;
            }
            source = cause.source();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_reads_like_a_message() {
        let e = Error::InvalidSetting {
            name: Cow::Borrowed("SCHEDULER_LOCK_LIFETIME"),
            message: "`abc` is not a duration".into(),
        };
        assert_eq!(
            format!("{e:?}"),
            "invalid setting `SCHEDULER_LOCK_LIFETIME`: `abc` is not a duration"
        );
    }
}
