//! The nodes' own record of what their handlers did: one JSON line per event, one file per node
//! process (`<node_id>-<pid>.jsonl` under `FAULT_RECORD_DIR`).
//!
//! This module owns the line format (written by `fault_node`, read by the harness) and reading
//! the files while they grow. It knows nothing about the engine's tables.

use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// What a handler reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Ev {
    /// The handler began serving a tick.
    Start,
    /// Still working (long handlers, every 100 ms).
    Beat,
    /// The handler is about to return.
    End,
}

/// One line of a record file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// The event.
    pub ev: Ev,
    /// The task's configured name.
    pub task: String,
    /// The tick the run serves (`ctx.scheduled_at()`), written as RFC 3339.
    #[serde(with = "rfc3339")]
    pub tick: DateTime<Utc>,
    /// The run's id in `scheduler_runs`.
    pub run_id: i64,
    /// The node id.
    pub node: String,
    /// The node's process id.
    pub pid: u32,
    /// Unix milliseconds from the node's own clock (skewed nodes: corrected by the judge).
    pub t_ms: i64,
    /// `end` only: whether the handler returns success.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ok: Option<bool>,
    /// `end` only: whether it stopped because it was told to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancelled: Option<bool>,
}

/// RFC 3339 text for a timestamp (chrono's own serde support is not enabled in the workspace).
mod rfc3339 {
    use chrono::{DateTime, SecondsFormat, Utc};
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(t: &DateTime<Utc>, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&t.to_rfc3339_opts(SecondsFormat::AutoSi, true))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<DateTime<Utc>, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        DateTime::parse_from_rfc3339(&text)
            .map(|t| t.with_timezone(&Utc))
            .map_err(serde::de::Error::custom)
    }
}

impl Record {
    /// The line as written: JSON and a newline.
    pub fn to_line(&self) -> String {
        let mut line = serde_json::to_string(self).expect("a record serializes");
        line.push('\n');
        line
    }
}

/// The record file of one node process.
pub fn record_path(dir: &Path, node: &str, pid: u32) -> PathBuf {
    dir.join(format!("{node}-{pid}.jsonl"))
}

/// Appends complete lines to a record file with one `write` each and no buffering in user space,
/// so a SIGKILL loses at most the line being written.
#[derive(Debug)]
pub struct RecordWriter {
    file: std::fs::File,
}

impl RecordWriter {
    /// Opens (creates) `path` for appending.
    pub fn open(path: &Path) -> std::io::Result<Self> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        Ok(Self { file })
    }

    /// Appends one record.
    pub fn append(&self, record: &Record) -> std::io::Result<()> {
        (&self.file).write_all(record.to_line().as_bytes())
    }
}

/// Reads every record file in a directory as the files grow: only complete lines are parsed.
#[derive(Debug, Default)]
pub struct RecordTail {
    dir: PathBuf,
    files: HashMap<PathBuf, FileTail>,
    records: Vec<Record>,
    /// Lines that did not parse (a line cut short when its writer was killed).
    pub bad_lines: Vec<String>,
}

#[derive(Debug, Default)]
struct FileTail {
    offset: u64,
    partial: Vec<u8>,
}

impl RecordTail {
    /// A tail of the files in `dir` (which may not exist yet).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            ..Self::default()
        }
    }

    /// Every complete record read so far, in the order read (per file, in write order).
    pub fn records(&self) -> &[Record] {
        &self.records
    }

    /// Reads what was appended since the last call. Returns how many records were added.
    pub fn poll(&mut self) -> usize {
        let before = self.records.len();
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return 0;
        };
        let mut paths: Vec<PathBuf> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
            .collect();
        paths.sort();
        for path in paths {
            let tail = self.files.entry(path.clone()).or_default();
            let Ok(mut file) = std::fs::File::open(&path) else {
                continue;
            };
            if file.seek(SeekFrom::Start(tail.offset)).is_err() {
                continue;
            }
            let mut fresh = Vec::new();
            let Ok(n) = file.read_to_end(&mut fresh) else {
                continue;
            };
            tail.offset += n as u64;
            tail.partial.extend_from_slice(&fresh);
            let Some(last_newline) = tail.partial.iter().rposition(|b| *b == b'\n') else {
                continue;
            };
            let complete: Vec<u8> = tail.partial.drain(..=last_newline).collect();
            for line in complete.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
                match serde_json::from_slice::<Record>(line) {
                    Ok(r) => self.records.push(r),
                    Err(_) => self
                        .bad_lines
                        .push(String::from_utf8_lossy(line).into_owned()),
                }
            }
        }
        self.records.len() - before
    }

    /// Trailing fragments without a newline (the line being written when a node was killed).
    pub fn torn_tails(&self) -> usize {
        self.files
            .values()
            .filter(|f| !f.partial.is_empty())
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_round_trip_and_partial_lines_wait() {
        let dir = std::env::temp_dir().join(format!("faults-record-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let rec = Record {
            ev: Ev::End,
            task: "f.tick.00".into(),
            tick: "2026-01-01T00:00:01Z".parse().unwrap(),
            run_id: 7,
            node: "a".into(),
            pid: 42,
            t_ms: 1_767_225_601_100,
            ok: Some(true),
            cancelled: Some(false),
        };
        let path = record_path(&dir, "a", 42);
        let w = RecordWriter::open(&path).unwrap();
        w.append(&rec).unwrap();
        let mut tail = RecordTail::new(&dir);
        assert_eq!(tail.poll(), 1);
        assert_eq!(tail.records()[0], rec);
        // A fragment (as left by a SIGKILL mid-write) is held back until its newline arrives.
        let line = rec.to_line();
        let (head, rest) = line.split_at(10);
        (&std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap())
            .write_all(head.as_bytes())
            .unwrap();
        assert_eq!(tail.poll(), 0);
        assert_eq!(tail.torn_tails(), 1);
        (&std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap())
            .write_all(rest.as_bytes())
            .unwrap();
        assert_eq!(tail.poll(), 1);
        assert!(tail.bad_lines.is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
