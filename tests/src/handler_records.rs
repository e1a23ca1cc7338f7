//! What handlers in node processes saw, written by them and judged by the tests.
//!
//! A handler in a node process (`handler_node`) appends one line per event to a file of its own
//! process (`<dir>/<node>-<pid>.log`), flushed at once, so a process killed mid-run leaves every
//! line it wrote: `start`, `beat` (while it works, even while it blocks its thread) and `end`.
//! The judge reads every file of the directory and looks for what must never happen: two runs
//! of one task at the same time, a tick started twice, a run whose fencing token is not larger
//! than the one of the run of its task that started before it.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

/// What a handler line says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The handler started.
    Start,
    /// The handler is still working.
    Beat,
    /// The handler returned (or is about to).
    End,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::Start => "start",
            Kind::Beat => "beat",
            Kind::End => "end",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "start" => Kind::Start,
            "beat" => Kind::Beat,
            "end" => Kind::End,
            _ => return None,
        })
    }
}

/// One line a handler wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// What happened.
    pub kind: Kind,
    /// The task.
    pub task: String,
    /// The tick the run serves (RFC 3339, as the handler's context gave it).
    pub tick: String,
    /// The run's id.
    pub run_id: i64,
    /// The node that ran it.
    pub node: String,
    /// The node's process.
    pub pid: u32,
    /// The run's fencing token (`ctx.fencing_token()`).
    pub fence: u64,
    /// Wall-clock time of the event, nanoseconds since the Unix epoch (every process of a test
    /// runs on one machine, so the times compare).
    pub at_nanos: u128,
}

/// Nanoseconds since the Unix epoch, now.
pub fn now_nanos() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

/// Appends a process's records to its file in a directory.
pub struct RecordWriter {
    file: Mutex<std::fs::File>,
}

impl RecordWriter {
    /// The writer of this process, in `dir` (created if missing).
    pub fn open(dir: &Path, node: &str) -> std::io::Result<Self> {
        std::fs::create_dir_all(dir)?;
        let path = dir.join(format!("{node}-{}.log", std::process::id()));
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        Ok(Self {
            file: Mutex::new(file),
        })
    }

    /// Writes one line at once (one `write` of the whole line, so lines never interleave).
    pub fn write(&self, kind: Kind, task: &str, tick: &str, run_id: i64, node: &str, fence: u64) {
        let line = format!(
            "{} {task} {tick} {run_id} {node} {} {fence} {}\n",
            kind.as_str(),
            std::process::id(),
            now_nanos()
        );
        let mut file = self.file.lock().unwrap_or_else(|e| e.into_inner());
        let _ = file.write_all(line.as_bytes());
    }
}

/// Every record in every file of `dir`, in file order.
pub fn read_dir(dir: &Path) -> Vec<Record> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|entries| entries.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    files.sort();
    let mut records = Vec::new();
    for file in files {
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        for line in text.lines() {
            if let Some(record) = parse(line) {
                records.push(record);
            }
        }
    }
    records
}

fn parse(line: &str) -> Option<Record> {
    let mut f = line.split(' ');
    let record = Record {
        kind: Kind::parse(f.next()?)?,
        task: f.next()?.to_owned(),
        tick: f.next()?.to_owned(),
        run_id: f.next()?.parse().ok()?,
        node: f.next()?.to_owned(),
        pid: f.next()?.parse().ok()?,
        fence: f.next()?.parse().ok()?,
        at_nanos: f.next()?.parse().ok()?,
    };
    f.next().is_none().then_some(record)
}

/// One run as its handler recorded it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunSpan {
    /// The task.
    pub task: String,
    /// The tick it served.
    pub tick: String,
    /// The run.
    pub run_id: i64,
    /// Its node.
    pub node: String,
    /// Its process.
    pub pid: u32,
    /// Its start.
    pub start: u128,
    /// Its last sign of life: the end if it recorded one, else its last beat (a run whose
    /// process was killed ends some time after that).
    pub last: u128,
    /// Whether it recorded its end.
    pub ended: bool,
}

/// Each run's span, by task, in start order.
pub fn runs(records: &[Record]) -> BTreeMap<String, Vec<RunSpan>> {
    let mut by_run: HashMap<(u32, i64), RunSpan> = HashMap::new();
    for r in records {
        let span = by_run.entry((r.pid, r.run_id)).or_insert_with(|| RunSpan {
            task: r.task.clone(),
            tick: r.tick.clone(),
            run_id: r.run_id,
            node: r.node.clone(),
            pid: r.pid,
            start: r.at_nanos,
            last: r.at_nanos,
            ended: false,
        });
        match r.kind {
            Kind::Start => span.start = span.start.min(r.at_nanos),
            Kind::Beat => span.last = span.last.max(r.at_nanos),
            Kind::End => {
                span.last = span.last.max(r.at_nanos);
                span.ended = true;
            }
        }
    }
    let mut by_task: BTreeMap<String, Vec<RunSpan>> = BTreeMap::new();
    for span in by_run.into_values() {
        by_task.entry(span.task.clone()).or_default().push(span);
    }
    for spans in by_task.values_mut() {
        spans.sort_by_key(|s| s.start);
    }
    by_task
}

/// Pairs of runs of one task whose spans overlap (the later one started before the earlier
/// one's last sign of life).
pub fn overlaps(records: &[Record]) -> Vec<(RunSpan, RunSpan)> {
    let mut found = Vec::new();
    for spans in runs(records).values() {
        for (i, a) in spans.iter().enumerate() {
            for b in &spans[i + 1..] {
                if b.start < a.last {
                    found.push((a.clone(), b.clone()));
                }
            }
        }
    }
    found
}

/// `(task, tick, starts)` for every tick started more than once.
pub fn ticks_started_twice(records: &[Record]) -> Vec<(String, String, usize)> {
    let mut starts: BTreeMap<(String, String), usize> = BTreeMap::new();
    for r in records.iter().filter(|r| r.kind == Kind::Start) {
        *starts.entry((r.task.clone(), r.tick.clone())).or_default() += 1;
    }
    starts
        .into_iter()
        .filter(|(_, n)| *n > 1)
        .map(|((task, tick), n)| (task, tick, n))
        .collect()
}

/// Pairs of starts of one task, in start order, where the later run's fencing token is not
/// larger than the earlier's (runs of a task never overlap, and each claim takes a larger token).
pub fn fences_out_of_order(records: &[Record]) -> Vec<(Record, Record)> {
    let mut starts: BTreeMap<&str, Vec<&Record>> = BTreeMap::new();
    for r in records.iter().filter(|r| r.kind == Kind::Start) {
        starts.entry(&r.task).or_default().push(r);
    }
    let mut found = Vec::new();
    for list in starts.values_mut() {
        list.sort_by_key(|r| r.at_nanos);
        for pair in list.windows(2) {
            if pair[1].fence <= pair[0].fence {
                found.push((pair[0].clone(), pair[1].clone()));
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(kind: Kind, task: &str, tick: &str, run_id: i64, pid: u32, at: u128) -> Record {
        Record {
            kind,
            task: task.into(),
            tick: tick.into(),
            run_id,
            node: format!("n{pid}"),
            pid,
            fence: u64::try_from(run_id).unwrap(),
            at_nanos: at,
        }
    }

    #[test]
    fn lines_round_trip_and_garbage_is_skipped() {
        let dir = std::env::temp_dir().join(format!("records-{}", now_nanos()));
        let writer = RecordWriter::open(&dir, "a").unwrap();
        writer.write(Kind::Start, "t", "2026-01-01T00:00:00Z", 7, "a", 3);
        writer.write(Kind::End, "t", "2026-01-01T00:00:00Z", 7, "a", 3);
        std::fs::write(dir.join("junk.log"), "not a record\nstart x\n").unwrap();
        let records = read_dir(&dir);
        assert_eq!(records.len(), 2);
        assert_eq!(records[0].kind, Kind::Start);
        assert_eq!(records[1].run_id, 7);
        assert_eq!(records[1].fence, 3);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn overlapping_runs_of_a_task_are_found_by_their_last_sign_of_life() {
        let records = vec![
            rec(Kind::Start, "t", "a", 1, 1, 0),
            rec(Kind::Beat, "t", "a", 1, 1, 50),
            // no end: its process was killed after the beat
            rec(Kind::Start, "t", "b", 2, 2, 40),
            rec(Kind::End, "t", "b", 2, 2, 60),
            rec(Kind::Start, "t", "c", 3, 2, 60),
            rec(Kind::End, "t", "c", 3, 2, 70),
            rec(Kind::Start, "u", "a", 4, 1, 10),
            rec(Kind::End, "u", "a", 4, 1, 80),
        ];
        let found = overlaps(&records);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!((found[0].0.run_id, found[0].1.run_id), (1, 2));
        assert!(ticks_started_twice(&records).is_empty());
        let again = [records.clone(), vec![rec(Kind::Start, "t", "a", 9, 3, 90)]].concat();
        assert_eq!(
            ticks_started_twice(&again),
            vec![("t".into(), "a".into(), 2)]
        );
    }

    #[test]
    fn a_start_whose_token_is_not_larger_than_the_previous_start_is_found() {
        let mut stale = rec(Kind::Start, "t", "c", 3, 1, 30);
        stale.fence = 2;
        let records = vec![
            rec(Kind::Start, "t", "a", 1, 1, 0),
            rec(Kind::Start, "u", "a", 9, 1, 5),
            rec(Kind::Start, "t", "b", 2, 2, 20),
            stale.clone(),
            rec(Kind::End, "t", "c", 1, 1, 40),
        ];
        let found = fences_out_of_order(&records);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].1, stale);
    }
}
