//! The value parsers that the commands' arguments share.

use chrono::{DateTime, Utc};

/// An RFC 3339 instant, as `--from`, `--since`, `--until` read it.
pub(crate) fn parse_instant(text: &str) -> Result<DateTime<Utc>, String> {
    DateTime::parse_from_rfc3339(text)
        .map(|instant| instant.to_utc())
        .map_err(|error| {
            format!(
                "`{text}` is not an RFC 3339 instant ({error}); write e.g. 2026-03-08T00:00:00Z"
            )
        })
}
