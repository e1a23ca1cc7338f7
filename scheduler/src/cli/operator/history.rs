//! `runs` and `logs`: the history of runs and what a run logged.

use serde_json::json;

use super::super::table::{cut, instant, printable, span, table};
use super::args::{LogsArgs, RunsArgs};
use super::target::{Target, fail, to_json, value_of};
use crate::store::{RunQuery, RunRecord, Trigger};

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
    if args.store.json {
        return Ok(to_json(&json!({
            "runs": runs.iter().map(value_of).collect::<Vec<_>>(),
            "next_before": next_before,
        })));
    }
    if runs.is_empty() {
        return Ok("no runs match\n".to_owned());
    }
    let rows: Vec<Vec<String>> = runs.iter().map(run_row).collect();
    let mut text = table(
        &[
            "ID", "TASK", "TICK", "STARTED", "TOOK", "STATUS", "TRIGGER", "ATTEMPT", "NODE",
            "ERROR",
        ],
        &rows,
    );
    if let Some(id) = next_before {
        text.push_str(&format!("more: --before {id}\n"));
    }
    Ok(text)
}

fn run_row(run: &RunRecord) -> Vec<String> {
    let trigger = match (&run.trigger, &run.triggered_by) {
        (Trigger::Manual, Some(by)) => format!("manual ({by})"),
        (Trigger::Backfill, Some(by)) => format!("backfill ({by})"),
        (trigger, _) => trigger.to_string(),
    };
    vec![
        run.id.to_string(),
        run.task_name.clone(),
        instant(Some(run.scheduled_at)),
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
