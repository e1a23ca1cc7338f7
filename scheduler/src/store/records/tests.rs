//! The decoders over a row held in memory: what each reads, and how a value it does not know
//! or a missing sum is taken.

use std::collections::HashMap;

use chrono::{DateTime, TimeZone, Utc};
use uuid::Uuid;

use super::*;

/// A value as a row holds it, whatever the backend.
#[derive(Clone)]
enum Value {
    Null,
    Text(&'static str),
    Int(i64),
    Flag(bool),
    Time(DateTime<Utc>),
    Uuid(Uuid),
}

/// A row by column name; a column it lacks is `ColumnNotFound`, a value of another kind a
/// decode error, as a driver's.
#[derive(Default)]
struct Row(HashMap<&'static str, Value>);

impl Row {
    fn with(mut self, column: &'static str, value: Value) -> Self {
        self.0.insert(column, value);
        self
    }

    fn get(&self, column: &str) -> Result<&Value, sqlx::Error> {
        self.0
            .get(column)
            .ok_or_else(|| sqlx::Error::ColumnNotFound(column.to_owned()))
    }

    fn wrong(column: &str) -> sqlx::Error {
        sqlx::Error::Decode(format!("column {column}: another type").into())
    }

    fn opt<T>(
        &self,
        column: &str,
        of: impl Fn(&Value) -> Option<T>,
    ) -> Result<Option<T>, sqlx::Error> {
        match self.get(column)? {
            Value::Null => Ok(None),
            value => of(value).map(Some).ok_or_else(|| Self::wrong(column)),
        }
    }

    fn req<T>(&self, column: &str, of: impl Fn(&Value) -> Option<T>) -> Result<T, sqlx::Error> {
        self.opt(column, of)?
            .ok_or_else(|| sqlx::Error::Decode(format!("column {column} is NULL").into()))
    }
}

fn text(v: &Value) -> Option<String> {
    match v {
        Value::Text(s) => Some((*s).to_owned()),
        _ => None,
    }
}

fn int(v: &Value) -> Option<i64> {
    match v {
        Value::Int(n) => Some(*n),
        _ => None,
    }
}

fn time(v: &Value) -> Option<DateTime<Utc>> {
    match v {
        Value::Time(t) => Some(*t),
        _ => None,
    }
}

impl ReadRow for Row {
    fn text(&self, column: &str) -> Result<String, sqlx::Error> {
        self.req(column, text)
    }
    fn text_opt(&self, column: &str) -> Result<Option<String>, sqlx::Error> {
        self.opt(column, text)
    }
    fn int(&self, column: &str) -> Result<i64, sqlx::Error> {
        self.req(column, int)
    }
    fn int_opt(&self, column: &str) -> Result<Option<i64>, sqlx::Error> {
        self.opt(column, int)
    }
    fn int32(&self, column: &str) -> Result<i32, sqlx::Error> {
        i32::try_from(self.int(column)?).map_err(|_| Self::wrong(column))
    }
    fn int32_opt(&self, column: &str) -> Result<Option<i32>, sqlx::Error> {
        self.int_opt(column)?
            .map(|n| i32::try_from(n).map_err(|_| Self::wrong(column)))
            .transpose()
    }
    fn flag(&self, column: &str) -> Result<bool, sqlx::Error> {
        self.req(column, |v| match v {
            Value::Flag(b) => Some(*b),
            _ => None,
        })
    }
    fn time(&self, column: &str) -> Result<DateTime<Utc>, sqlx::Error> {
        self.req(column, time)
    }
    fn time_opt(&self, column: &str) -> Result<Option<DateTime<Utc>>, sqlx::Error> {
        self.opt(column, time)
    }
    fn uuid(&self, column: &str) -> Result<Uuid, sqlx::Error> {
        self.req(column, |v| match v {
            Value::Uuid(u) => Some(*u),
            _ => None,
        })
    }
    fn names(&self, column: &str) -> Result<Vec<String>, sqlx::Error> {
        self.req(column, |v| {
            text(v).map(|s| s.split(',').map(str::to_owned).collect())
        })
    }
}

fn at(second: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 2, 3, 4, second).unwrap()
}

fn run_row(status: &'static str) -> Row {
    Row::default()
        .with("id", Value::Int(7))
        .with("task_name", Value::Text("report"))
        .with("scheduled_at", Value::Time(at(0)))
        .with("started_at", Value::Time(at(1)))
        .with("finished_at", Value::Null)
        .with("status", Value::Text(status))
        .with("node_id", Value::Text("n1"))
        .with("ticks_collapsed", Value::Int(3))
        .with("error", Value::Null)
        .with("attempt", Value::Int(2))
        .with("trigger", Value::Text("manual"))
        .with("triggered_by", Value::Text("ops"))
        .with("cancel_requested_at", Value::Null)
        .with("cancel_requested_by", Value::Null)
        .with("shard_index", Value::Int(-1))
        .with("shard_total", Value::Int(4))
        .with("instance_key", Value::Text("tenant-42"))
        .with(
            "args_override",
            Value::Text(r#"{"tenant":9,"token":"t0k"}"#),
        )
}

#[test]
fn a_run_is_read_from_its_columns() {
    let run = run_record(&run_row("running")).unwrap();
    assert_eq!(run.id, 7);
    assert_eq!(run.task_name, "report");
    assert_eq!(run.scheduled_at, at(0));
    assert_eq!(run.started_at, Some(at(1)));
    assert_eq!(run.finished_at, None);
    assert_eq!(run.status, RunStatus::Running);
    assert_eq!(run.ticks_collapsed, 3);
    assert_eq!(run.attempt, 2);
    assert_eq!(run.trigger, Trigger::Manual);
    assert_eq!(run.triggered_by.as_deref(), Some("ops"));
    // A shard index out of range reads as the first shard.
    assert_eq!((run.shard_index, run.shard_total), (0, 4));
    assert_eq!(run.instance_key.as_deref(), Some("tenant-42"));
    assert_eq!(
        run.args_override.as_deref(),
        Some(r#"{"tenant":9,"token":"t0k"}"#)
    );
    // Serialized (the CLI's `--json`), the override's secrets are hidden.
    let shown = serde_json::to_value(&run).unwrap();
    assert_eq!(
        shown["args_override"],
        serde_json::json!({"tenant": 9, "token": "***"})
    );
}

#[test]
fn an_unknown_status_is_a_decode_error() {
    let error = run_record(&run_row("exploded")).unwrap_err();
    assert!(
        error.to_string().contains("unknown run status `exploded`"),
        "{error}"
    );
}

#[test]
fn a_missing_column_is_the_drivers_error() {
    let row = run_row("running");
    let mut short = Row::default();
    for (k, v) in row.0.iter().filter(|(k, _)| **k != "node_id") {
        short = short.with(k, v.clone());
    }
    assert!(matches!(
        run_record(&short),
        Err(sqlx::Error::ColumnNotFound(c)) if c == "node_id"
    ));
}

fn backfill_row(cancelled: bool, sums: Value) -> Row {
    Row::default()
        .with("id", Value::Int(1))
        .with("task_name", Value::Text("report"))
        .with("range_from", Value::Time(at(0)))
        .with("range_to", Value::Time(at(9)))
        .with("all_ticks", Value::Flag(false))
        .with("max_runs", Value::Int(100))
        .with("concurrency", Value::Int(2))
        .with("pace_ms", Value::Int(0))
        .with("requested_by", Value::Text("ops"))
        .with("requested_at", Value::Time(at(0)))
        .with(
            "cancelled_at",
            if cancelled {
                Value::Time(at(5))
            } else {
                Value::Null
            },
        )
        .with("cancelled_by", Value::Null)
        .with("total", Value::Int(4))
        .with("unrun", Value::Int(3))
        .with("running", sums.clone())
        .with("succeeded", sums.clone())
        .with("failed", sums)
}

#[test]
fn a_backfills_unrun_ticks_are_pending_until_it_is_cancelled() {
    let open = backfill_record(&backfill_row(false, Value::Int(1))).unwrap();
    assert_eq!((open.progress.pending, open.progress.cancelled), (3, 0));
    assert_eq!(open.progress.running, 1);
    let cancelled = backfill_record(&backfill_row(true, Value::Int(1))).unwrap();
    assert_eq!(
        (cancelled.progress.pending, cancelled.progress.cancelled),
        (0, 3)
    );
}

#[test]
fn a_sum_over_no_tick_is_zero() {
    let record = backfill_record(&backfill_row(false, Value::Null)).unwrap();
    assert_eq!(
        (
            record.progress.running,
            record.progress.succeeded,
            record.progress.failed
        ),
        (0, 0, 0)
    );
}

#[test]
fn a_pause_is_read_only_when_paused_at_is_set() {
    let unpaused = Row::default().with("paused_at", Value::Null);
    assert_eq!(pause_of(&unpaused).unwrap(), None);
    let paused = Row::default()
        .with("paused_at", Value::Time(at(3)))
        .with("paused_by", Value::Text("ops"))
        .with("pause_reason", Value::Text("maintenance"))
        .with("pause_until", Value::Null);
    let pause = pause_of(&paused).unwrap().unwrap();
    assert_eq!(pause.at, at(3));
    assert_eq!(pause.by, "ops");
    assert_eq!(pause.until, None);
}

#[test]
fn shard_counts_saturate() {
    let row = Row::default()
        .with("behind", Value::Flag(true))
        .with("mine", Value::Int(-1))
        .with("others", Value::Int(i64::MAX))
        .with("rank", Value::Int(2))
        .with("started", Value::Int(0));
    let facts = shard_facts(&row).unwrap();
    assert!(facts.behind);
    assert_eq!(
        (facts.mine, facts.others, facts.rank, facts.started),
        (u32::MAX, u32::MAX, 2, 0)
    );
}

#[test]
fn a_lock_is_named_by_its_row_and_token() {
    let token = Uuid::new_v4();
    let row = Row::default()
        .with("name", Value::Text("report[1]"))
        .with("lock_token", Value::Uuid(token));
    let key = lock_key(&row).unwrap();
    assert_eq!(key.task_name, "report[1]");
    assert_eq!(key.token, token);
}
