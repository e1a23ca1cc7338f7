//! The protocol between a node and an isolated child: the request in the child's environment,
//! and the records the child sends on its event socket, one JSON object per line.
//!
//! Both ends are the same binary (the node re-executes itself), so the protocol never meets
//! another version of itself; [`VERSION`] only guards against a request read by mistake.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// The environment variable that holds a child's [`Request`].
pub(crate) const REQUEST_VAR: &str = "SCHEDULER_ISOLATED_RUN";
/// The protocol's version, in every request.
pub(crate) const VERSION: u32 = 1;

/// A child's exit code when its handler returned `Ok` (the record says so too).
pub(crate) const EXIT_SUCCEEDED: i32 = 0;
/// A child's exit code when its handler returned an error.
pub(crate) const EXIT_FAILED: i32 = 1;
/// A child's exit code when it could not start the handler (the record says why).
pub(crate) const EXIT_NOT_STARTED: i32 = 2;
/// A child's exit code when its handler panicked (Rust's own code for a panic in `main`).
pub(crate) const EXIT_PANICKED: i32 = 101;

/// Texts a child sends (a log line's text, an error, a panic message) are cut to this many
/// bytes.
pub(crate) const MAX_TEXT_BYTES: usize = 64 * 1024;
/// A record line longer than this cannot be one the child sent (JSON escapes a byte into at most
/// six); it is dropped.
pub(crate) const MAX_RECORD_BYTES: usize = 8 * MAX_TEXT_BYTES;

/// Which run to serve, and how to reach the node; serialized into [`REQUEST_VAR`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Request {
    pub v: u32,
    pub task: String,
    pub run_id: i64,
    pub scheduled_at: DateTime<Utc>,
    pub attempt: i32,
    pub trigger: String,
    pub node_id: String,
    /// The run's fencing token (absent from an older node's request: 0).
    #[serde(default)]
    pub fencing_token: u64,
    /// The run's shard, `[index, total]` (absent from an older node's request: 0 of 1).
    #[serde(default)]
    pub shard: Option<[u32; 2]>,
    /// An instance's arguments as JSON text (absent: none, or an older node's request).
    #[serde(default)]
    pub args: Option<String>,
    /// The node's pid: a process whose parent is another one (a process the handler started
    /// from the same binary, which inherits the environment) is not the child.
    pub parent_pid: u32,
    /// The child's end of the event socket.
    pub events_fd: i32,
}

/// One line on the event socket.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(crate) enum Record {
    /// The handler is about to be called, by the child's clock.
    Started { at: DateTime<Utc> },
    /// A `tracing` event of the child, at the child's time.
    Log {
        at: DateTime<Utc>,
        level: String,
        target: String,
        text: String,
    },
    /// The handler returned `Ok`.
    Succeeded,
    /// The handler returned an error, with its text and causes.
    Failed { error: String },
    /// The handler panicked, with the panic's message.
    Panicked { message: String },
    /// The handler could not be started, and why.
    NotStarted { reason: String },
}

impl Record {
    /// The record as one line, ending in a newline.
    pub(crate) fn to_line(&self) -> Vec<u8> {
        let mut line = serde_json::to_vec(self).unwrap_or_else(|_| b"{}".to_vec());
        line.push(b'\n');
        line
    }
}

/// Cuts `text` to at most [`MAX_TEXT_BYTES`] (on a character boundary), saying so.
pub(crate) fn cut(mut text: String) -> String {
    if text.len() > MAX_TEXT_BYTES {
        let mut end = MAX_TEXT_BYTES;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        let dropped = text.len() - end;
        text.truncate(end);
        text.push_str(&format!(" [cut: {dropped} more bytes]"));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_read_back_as_written() {
        let records = [
            Record::Started { at: Utc::now() },
            Record::Log {
                at: Utc::now(),
                level: "WARN".into(),
                target: "app".into(),
                text: "line\nwith \"quotes\" and \u{1}".into(),
            },
            Record::Succeeded,
            Record::Failed { error: "no".into() },
            Record::Panicked {
                message: "boom".into(),
            },
            Record::NotStarted {
                reason: "why".into(),
            },
        ];
        for record in records {
            let line = record.to_line();
            assert_eq!(line.iter().filter(|b| **b == b'\n').count(), 1);
            let back: Record = serde_json::from_slice(&line).unwrap();
            assert_eq!(back, record);
        }
    }

    #[test]
    fn long_texts_are_cut_on_a_character_boundary() {
        let text = "é".repeat(MAX_TEXT_BYTES);
        let cut = cut(text);
        assert!(cut.len() < MAX_TEXT_BYTES + 40);
        assert!(cut.ends_with(&format!("[cut: {} more bytes]", MAX_TEXT_BYTES)));
        assert_eq!(super::cut("short".into()), "short");
    }
}
