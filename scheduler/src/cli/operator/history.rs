//! `runs` and `logs`: the history of runs (each scheduled run placed at its tick's start) and
//! what a run logged.

use std::collections::HashMap;

use serde_json::{Value, json};

use super::super::table::{cut, instant, printable, span, table};
use super::args::{LogsArgs, RunsArgs};
use super::target::{Target, fail, to_json, value_of};
use crate::schedule::ScheduleSpec;
use crate::store::{RunQuery, RunRecord, TaskRow, Trigger};
use crate::ticks::starts::RunStarts;

pub(super) async fn runs(args: &RunsArgs) -> crate::Result<String> {
    let target = Target::open(&args.store).await?;
    if let Some(task) = &args.task {
        let known = target.check(target.store.task_states(Some(task)).await)?;
        if known.is_empty() {
            return Err(target.unknown_task(task).await);
        }
    }
    let mut query = RunQuery::latest(args.limit).between(args.since, args.until);
    query.task = args.task.clone();
    query.status = args.status;
    query.trigger = args.trigger;
    query.before_id = args.before;
    let runs = target.check(target.store.runs(&query).await)?;
    let next_before = (runs.len() == args.limit as usize)
        .then(|| runs.last().map(|r| r.id))
        .flatten();
    let starts = run_starts(&target, &runs).await?;
    if args.store.json {
        return Ok(to_json(&json!({
            "runs": runs.iter().map(|run| placed(run, &starts)).collect::<Vec<_>>(),
            "next_before": next_before,
        })));
    }
    if runs.is_empty() {
        return Ok("no runs match\n".to_owned());
    }
    let rows: Vec<Vec<String>> = runs.iter().map(|run| run_row(run, &starts)).collect();
    let mut text = table(
        &[
            "ID", "TASK", "TICK", "OFFSET", "STARTED", "TOOK", "STATUS", "TRIGGER", "ATTEMPT",
            "NODE", "ERROR",
        ],
        &rows,
    );
    if let Some(id) = next_before {
        text.push_str(&format!("more: --before {id}\n"));
    }
    Ok(text)
}

/// The runs `runs` placed at their ticks' starts ([`RunStarts`]), as the admin API places them
/// but with each row's window as last reconciled (stored on the row: the command line reads no
/// config), and its schedule as stored.
async fn run_starts(target: &Target, runs: &[RunRecord]) -> crate::Result<RunStarts> {
    let mut starts = RunStarts::default();
    let scheduled: Vec<&RunRecord> = runs
        .iter()
        .filter(|r| r.trigger == Trigger::Schedule)
        .collect();
    if scheduled.is_empty() {
        return Ok(starts);
    }
    let (_, rows) = target.check(target.store.load_tasks().await)?;
    let rows: HashMap<&str, &TaskRow> = rows
        .iter()
        .filter(|r| !r.removed)
        .map(|r| (r.name.as_str(), r))
        .collect();
    let spec = |row: &TaskRow| {
        ScheduleSpec::stored(&row.cron, &row.timezone, row.calendar.as_deref()).ok()
    };
    for run in scheduled {
        let task = run.task_name.as_str();
        if !starts.knows(task) {
            let Some(row) = rows.get(task) else {
                continue; // a task no longer stored: its runs are not placed
            };
            starts.task(task, spec(row), row.jitter.unwrap_or_default());
        }
        if let Some(key) = run.instance_key.as_deref()
            && !starts.knows_instance(task, key)
        {
            let row = rows.get(crate::instance::row_name(task, key).as_str());
            let placed = row.and_then(|row| Some((spec(row)?, row.jitter)));
            starts.instance(task, key, placed);
        }
    }
    Ok(starts)
}

/// `run` as JSON, with its tick's start (`starts_at`) where `starts` places it.
fn placed(run: &RunRecord, starts: &RunStarts) -> Value {
    let mut value = value_of(run);
    if let (Some(start), Value::Object(fields)) = (starts.start(run), &mut value) {
        fields.insert("starts_at".to_owned(), json!(start));
    }
    value
}

fn run_row(run: &RunRecord, starts: &RunStarts) -> Vec<String> {
    let trigger = match (&run.trigger, &run.triggered_by) {
        (Trigger::Manual, Some(by)) => format!("manual ({by})"),
        (Trigger::Backfill, Some(by)) => format!("backfill ({by})"),
        (trigger, _) => trigger.to_string(),
    };
    vec![
        run.id.to_string(),
        run.task_name.clone(),
        instant(Some(run.scheduled_at)),
        // When its tick was due to start, after its tick ("-": not a scheduled run, or a row
        // that cannot be placed).
        starts.start(run).map_or("-".to_owned(), |start| {
            let offset = (start - run.scheduled_at).to_std().unwrap_or_default();
            format!("+{}", humantime::format_duration(offset))
        }),
        // "-" for a run whose handler never started.
        instant(run.started_at),
        run.finished_at
            .zip(run.started_at)
            .map_or("-".to_owned(), |(f, s)| span(f - s)),
        run.status.to_string(),
        trigger,
        run.attempt.to_string(),
        run.node_id.clone(),
        run.error.as_deref().map_or(String::new(), |e| cut(e, 60)),
    ]
}

pub(super) async fn logs(args: &LogsArgs) -> crate::Result<String> {
    let target = Target::open(&args.store).await?;
    let Some(run) = target.check(target.store.run(args.run_id).await)? else {
        return Err(fail(format!(
            "no run with id {} (it may have been pruned); `scheduler runs` lists them",
            args.run_id
        )));
    };
    let chunks = target.check(target.store.run_log(run.id).await)?;
    let text: String = chunks.iter().map(|c| c.text.as_str()).collect();
    let lines: i64 = chunks.iter().map(|c| i64::from(c.lines)).sum();
    let truncated = chunks.iter().any(|c| c.truncated);
    if args.store.json {
        return Ok(to_json(&json!({
            "run": value_of(&run),
            "lines": lines,
            "truncated": truncated,
            "text": text,
        })));
    }
    if text.is_empty() {
        eprintln!(
            "note: run {} ({}, {}) kept no log lines",
            run.id, run.task_name, run.status
        );
    }
    // What a handler logged reaches a terminal: no escape sequence of its gets there.
    Ok(printable(&text, true))
}
