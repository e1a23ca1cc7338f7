//! Reading what a child writes: its stdout and stderr into the run's log, line by line, and its
//! event socket (its start, its `tracing` events, how its handler ended).

use std::sync::{Arc, Mutex};

use chrono::Utc;
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tracing::Level;

use super::{NOTE_TARGET, Observed};
use crate::isolation::wire::{self, Record};
use crate::run_log::RunLogLines;

/// Reads a child's stdout or stderr into the log, one line per line (cut at
/// [`wire::MAX_TEXT_BYTES`]), to its end; the log's own bounds decide what is kept, and the
/// pipe is read to its end either way so the child never blocks on it. On stderr
/// (`observed` given) it also looks for Rust's allocation-failure message.
pub(super) async fn read_output(
    stream: impl AsyncRead + Unpin,
    level: Level,
    target: &'static str,
    log: RunLogLines,
    observed: Option<Arc<Mutex<Observed>>>,
) {
    read_lines(stream, wire::MAX_TEXT_BYTES, |line, cut| {
        let mut text = String::from_utf8_lossy(line).into_owned();
        if cut {
            text.push_str(&format!(
                " [line cut at {} KiB]",
                wire::MAX_TEXT_BYTES / 1024
            ));
        }
        if let Some(observed) = &observed
            && text.starts_with("memory allocation of ")
            && text.ends_with(" bytes failed")
        {
            observed
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .allocation_failure = Some(text.clone());
        }
        log.push(Utc::now(), level, target, &text);
    })
    .await;
}

/// Reads the child's event socket: its start, its `tracing` events (into the log) and how its
/// handler ended.
pub(super) async fn read_events(
    stream: impl AsyncRead + Unpin,
    log: RunLogLines,
    observed: Arc<Mutex<Observed>>,
) {
    read_lines(stream, wire::MAX_RECORD_BYTES, |line, cut| {
        let record = if cut {
            None
        } else {
            serde_json::from_slice::<Record>(line).ok()
        };
        match record {
            Some(Record::Log {
                at,
                level,
                target,
                text,
            }) => {
                let level = level.parse().unwrap_or(Level::INFO);
                log.push(at, level, &target, &text);
            }
            Some(Record::Started { at }) => {
                observed
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .started_at = Some(at);
            }
            Some(end) => {
                let mut observed = observed.lock().unwrap_or_else(|e| e.into_inner());
                if observed.end.is_none() {
                    observed.end = Some(end);
                }
            }
            None => log.push(
                Utc::now(),
                Level::WARN,
                NOTE_TARGET,
                &format!(
                    "the handler's process sent an event this node cannot read ({} bytes)",
                    line.len()
                ),
            ),
        }
    })
    .await;
}

/// Calls `on_line(line, cut)` for every line of `stream` (without its `\n` or `\r\n`), the
/// last one even without a newline; a line longer than `max` is passed cut to `max` bytes
/// (`cut` true) and the rest of it skipped. Ends at the stream's end or on a read error.
pub(super) async fn read_lines(
    stream: impl AsyncRead + Unpin,
    max: usize,
    mut on_line: impl FnMut(&[u8], bool),
) {
    let mut reader = BufReader::with_capacity(16 * 1024, stream);
    let mut line = Vec::new();
    let mut skipping = false;
    loop {
        let chunk = match reader.fill_buf().await {
            Ok([]) | Err(_) => break,
            Ok(chunk) => chunk,
        };
        let (piece, ends_line, used) = match chunk.iter().position(|b| *b == b'\n') {
            Some(at) => (&chunk[..at], true, at + 1),
            None => (chunk, false, chunk.len()),
        };
        if !skipping {
            let room = max - line.len();
            if piece.len() > room {
                line.extend_from_slice(&piece[..room]);
                on_line(trim_cr(&line), true);
                line.clear();
                skipping = true;
            } else {
                line.extend_from_slice(piece);
            }
        }
        reader.consume(used);
        if ends_line {
            if !skipping {
                on_line(trim_cr(&line), false);
            }
            line.clear();
            skipping = false;
        }
    }
    if !line.is_empty() && !skipping {
        on_line(trim_cr(&line), false);
    }
}

fn trim_cr(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\r").unwrap_or(line)
}
