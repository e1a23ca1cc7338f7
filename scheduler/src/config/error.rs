//! [`ConfigError`]: why a config document could not be fetched or parsed.
//!
//! Every variant names the source (a path or a redacted URL) so a log line is enough to find the
//! broken document. Refusals of individual entries are not errors; see
//! [`RefusalReason`](super::RefusalReason).

use std::borrow::Cow;
use std::time::Duration;

use super::ConfigFormat;

/// The config could not be read or parsed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The text is not a valid document in its format (syntax error, unknown or missing field,
    /// wrong type).
    #[error("{source_name}: invalid {format} config{}: {message}", position(*.line, *.column))]
    Parse {
        /// The path or redacted URL the text came from.
        source_name: String,
        /// The format the text was parsed as.
        format: ConfigFormat,
        /// 1-based line of the problem, when the parser knows it.
        line: Option<usize>,
        /// 1-based column of the problem, when the parser knows it.
        column: Option<usize>,
        /// What is wrong, without the position.
        message: String,
    },
    /// A local file could not be read.
    #[error("{source_name}: cannot read config file: {source}")]
    Io {
        /// The path.
        source_name: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The server answered with a status that is neither success nor `304 Not Modified`.
    #[error("{source_name}: config server answered {status}{}", reason(*.status))]
    HttpStatus {
        /// The redacted URL.
        source_name: String,
        /// The status code.
        status: u16,
    },
    /// The request did not complete within the configured timeout.
    #[error("{source_name}: config request timed out after {}", humantime::format_duration(*.timeout))]
    Timeout {
        /// The redacted URL.
        source_name: String,
        /// The timeout that was exceeded.
        timeout: Duration,
    },
    /// Fetching failed for another reason (connection refused, TLS, a config centre's own error).
    #[error("{source_name}: cannot fetch config: {message}")]
    Fetch {
        /// The path, redacted URL or config centre the text came from.
        source_name: String,
        /// Why, with secrets removed.
        message: String,
    },
    /// A location or a source builder call is invalid (environment variables are reported as
    /// [`Error::InvalidSetting`](crate::Error::InvalidSetting), like every other setting).
    #[error("invalid config {what}: {message}")]
    Invalid {
        /// What is invalid (`location`, `header`, ...).
        what: Cow<'static, str>,
        /// What is wrong and what to write instead.
        message: String,
    },
}

#[cfg(not(feature = "http-config"))]
fn reason(_status: u16) -> String {
    // Only the HTTP source (`http-config`) reports a status.
    String::new()
}

#[cfg(feature = "http-config")]
fn reason(status: u16) -> String {
    reqwest::StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .map(|r| format!(" {r}"))
        .unwrap_or_default()
}

fn position(line: Option<usize>, column: Option<usize>) -> String {
    match (line, column) {
        (Some(line), Some(column)) => format!(" at line {line}, column {column}"),
        (Some(line), None) => format!(" at line {line}"),
        _ => String::new(),
    }
}

impl ConfigError {
    /// A fetch failure reported by a custom [`ConfigSource`](super::ConfigSource).
    ///
    /// `message` must not contain secrets: it is logged as is.
    pub fn fetch(source_name: impl Into<String>, message: impl std::fmt::Display) -> Self {
        Self::Fetch {
            source_name: source_name.into(),
            message: message.to_string(),
        }
    }

    /// An invalid location or source builder argument.
    pub fn invalid(what: impl Into<Cow<'static, str>>, message: impl Into<String>) -> Self {
        Self::Invalid {
            what: what.into(),
            message: message.into(),
        }
    }

    /// The source the error is about, if it is about one.
    pub fn source_name(&self) -> Option<&str> {
        match self {
            Self::Parse { source_name, .. }
            | Self::Io { source_name, .. }
            | Self::HttpStatus { source_name, .. }
            | Self::Timeout { source_name, .. }
            | Self::Fetch { source_name, .. } => Some(source_name),
            Self::Invalid { .. } => None,
        }
    }

    /// Whether the text was fetched but is not a valid document.
    pub fn is_parse(&self) -> bool {
        matches!(self, Self::Parse { .. })
    }
}
