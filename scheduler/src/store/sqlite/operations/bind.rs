//! Values as SQLite stores and binds them: times as unix microseconds, durations added to or
//! taken from them, lock tokens as hyphenated text, lists of names as JSON arrays.

use std::time::Duration;

use chrono::{DateTime, Utc};
use uuid::Uuid;
use uuid::fmt::Hyphenated;

/// A timestamp as stored: unix microseconds.
pub(crate) fn micros(t: DateTime<Utc>) -> i64 {
    t.timestamp_micros()
}

/// A duration in microseconds, saturating.
pub(super) fn span(d: Duration) -> i64 {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}

pub(super) fn later(t: DateTime<Utc>, d: Duration) -> i64 {
    micros(t).saturating_add(span(d))
}

pub(super) fn earlier(t: DateTime<Utc>, d: Duration) -> i64 {
    micros(t).saturating_sub(span(d))
}

pub(super) fn token(t: Uuid) -> Hyphenated {
    t.hyphenated()
}

/// A list of names as the JSON array the queries read with `json_each`.
pub(super) fn names_json(names: &[String]) -> String {
    serde_json::to_string(names).expect("strings serialize")
}

/// A limit as SQLite binds it (a `u32` is never the negative LIMIT SQLite reads as none).
pub(super) fn limit_of(n: u32) -> i64 {
    i64::from(n)
}
