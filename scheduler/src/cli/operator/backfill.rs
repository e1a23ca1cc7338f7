//! `backfill TASK --from --to` (dry run or for real), `backfill status [ID]` and `backfill cancel
//! ID`, through [`operate`](crate::operate) (so each change is audited).

use serde_json::json;

use super::super::table::{instant, table};
use super::args::{BackfillAction, BackfillArgs, BackfillCancelArgs, BackfillStatusArgs};
use super::target::{Target, actor, fail, to_json};
use crate::backfill::{BackfillRefusal, BackfillRequest, parse_bound};
use crate::operate;
use crate::store::{BackfillCancel, BackfillRecord};

pub(super) async fn backfill(args: &BackfillArgs) -> crate::Result<String> {
    match &args.action {
        Some(BackfillAction::Status(status_args)) => return status(status_args).await,
        Some(BackfillAction::Cancel(cancel_args)) => return cancel(cancel_args).await,
        None => {}
    }
    let (Some(task), Some(from), Some(to)) = (&args.task, &args.from, &args.to) else {
        return Err(fail(
            "backfill needs a task and a range: scheduler backfill TASK --from T1 --to T2",
        ));
    };
    let target = Target::open(&args.store).await?;
    let Some(state) = target
        .check(target.store.task_states(Some(task)).await)?
        .into_iter()
        .find(|s| &s.name == task)
    else {
        return Err(target.unknown_task(task).await);
    };
    let zone = crate::schedule::parse_timezone(&state.timezone)?;
    let from = parse_bound(from, zone).map_err(|e| fail(format!("--from: {e}")))?;
    let to = parse_bound(to, zone).map_err(|e| fail(format!("--to: {e}")))?;
    let request = BackfillRequest::new(task, from, to)
        .all(args.all)
        .dry_run(args.dry_run)
        .max_runs(args.max_runs)
        .concurrency(args.concurrency)
        .pace(args.pace);
    let who = actor(&args.actor);
    let plan =
        target.check_operation(operate::backfill(target.store.as_ref(), &request, &who).await)?;
    let plan = match plan {
        Ok(plan) => plan,
        Err(BackfillRefusal::UnknownTask(_)) => return Err(target.unknown_task(task).await),
        Err(refusal) => return Err(fail(refusal.to_string())),
    };
    if args.store.json {
        return Ok(to_json(&json!({
            "id": plan.id, "task": plan.task, "timezone": plan.timezone, "from": plan.from,
            "to": plan.to, "dry_run": plan.dry_run, "ticks_in_range": plan.ticks_in_range,
            "already_succeeded": plan.already_succeeded, "runs": plan.runs,
            "ticks": plan.ticks, "actor": who.name,
        })));
    }
    let mut out = String::new();
    let head = match (plan.dry_run, plan.id) {
        (true, _) => "dry run: would run",
        (false, Some(_)) => "backfill recorded: will run",
        (false, None) => "nothing to run:",
    };
    let shards = match plan.runs / plan.ticks.len().max(1) {
        0 | 1 => String::new(),
        each => format!(", {} runs: {each} shards each", plan.runs),
    };
    out.push_str(&format!(
        "{head} {} of the {} ticks of {} in {} .. {} ({}; {} already succeeded{shards})\n",
        plan.ticks.len(),
        plan.ticks_in_range,
        plan.task,
        instant(Some(plan.from)),
        instant(Some(plan.to)),
        plan.timezone,
        plan.already_succeeded,
    ));
    for tick in &plan.ticks {
        out.push_str(&format!("  {}\n", instant(Some(*tick))));
    }
    if let Some(id) = plan.id {
        out.push_str(&format!(
            "backfill {id}: one run at a time, {} apart; follow it with `scheduler backfill status {id}`, stop it with `scheduler backfill cancel {id}`\n",
            humantime::format_duration(args.pace)
        ));
    }
    Ok(out)
}

fn progress_line(b: &BackfillRecord) -> String {
    let p = b.progress;
    format!(
        "{} done of {} ({} succeeded, {} failed), {} pending, {} running, {} cancelled",
        p.succeeded + p.failed,
        p.total,
        p.succeeded,
        p.failed,
        p.pending,
        p.running,
        p.cancelled
    )
}

fn record_json(b: &BackfillRecord) -> serde_json::Value {
    json!({
        "id": b.id, "task": b.task_name, "state": b.state(), "from": b.from, "to": b.to,
        "all": b.all_ticks, "max_runs": b.max_runs, "concurrency": b.concurrency,
        "pace_ms": b.pace_ms, "requested_by": b.requested_by, "requested_at": b.requested_at,
        "cancelled_at": b.cancelled_at, "cancelled_by": b.cancelled_by, "progress": b.progress,
    })
}

async fn status(args: &BackfillStatusArgs) -> crate::Result<String> {
    let target = Target::open(&args.store).await?;
    if let Some(id) = args.id {
        let Some((record, ticks)) = target.check(target.store.backfill(id).await)? else {
            return Err(fail(format!(
                "no backfill {id}; `scheduler backfill status` lists them"
            )));
        };
        if args.store.json {
            let mut doc = record_json(&record);
            doc["ticks"] = json!(
                ticks
                    .iter()
                    .map(|t| json!({"tick": t.tick, "shard_index": t.shard_index, "shard_total": t.shard_total, "run_id": t.run_id, "run_status": t.run_status.map(|s| s.as_str())}))
                    .collect::<Vec<_>>()
            );
            return Ok(to_json(&doc));
        }
        let cancelled = record.cancelled_at.is_some();
        let rows: Vec<Vec<String>> = ticks
            .iter()
            .map(|t| {
                vec![
                    instant(Some(t.tick)),
                    format!("{} of {}", t.shard_index, t.shard_total),
                    t.run_id.map_or("-".into(), |id| id.to_string()),
                    match (t.run_status, cancelled) {
                        (Some(s), _) => s.as_str().to_owned(),
                        (None, true) => "cancelled".to_owned(),
                        (None, false) => "pending".to_owned(),
                    },
                ]
            })
            .collect();
        return Ok(format!(
            "backfill {} of {} ({}): {} .. {}, by {} at {}{}\n{}\n{}",
            record.id,
            record.task_name,
            record.state(),
            instant(Some(record.from)),
            instant(Some(record.to)),
            record.requested_by,
            instant(Some(record.requested_at)),
            match (&record.cancelled_by, record.cancelled_at) {
                (Some(by), Some(at)) => format!("; cancelled by {by} at {}", instant(Some(at))),
                _ => String::new(),
            },
            progress_line(&record),
            table(&["TICK", "SHARD", "RUN", "STATUS"], &rows)
        ));
    }
    let list = target.check(
        target
            .store
            .backfills(args.task.as_deref(), args.limit)
            .await,
    )?;
    if args.store.json {
        return Ok(to_json(&json!(
            list.iter().map(record_json).collect::<Vec<_>>()
        )));
    }
    if list.is_empty() {
        return Ok("no backfills\n".to_owned());
    }
    let rows: Vec<Vec<String>> = list
        .iter()
        .map(|b| {
            let p = b.progress;
            vec![
                b.id.to_string(),
                b.task_name.clone(),
                b.state().to_owned(),
                format!("{} .. {}", instant(Some(b.from)), instant(Some(b.to))),
                format!("{}/{}", p.succeeded + p.failed, p.total),
                p.succeeded.to_string(),
                p.failed.to_string(),
                p.pending.to_string(),
                b.requested_by.clone(),
            ]
        })
        .collect();
    Ok(table(
        &[
            "ID", "TASK", "STATE", "RANGE", "DONE", "OK", "FAILED", "PENDING", "BY",
        ],
        &rows,
    ))
}

async fn cancel(args: &BackfillCancelArgs) -> crate::Result<String> {
    let target = Target::open(&args.store).await?;
    let who = actor(&args.actor);
    let result = target
        .check_operation(operate::cancel_backfill(target.store.as_ref(), args.id, &who).await)?;
    let (word, dropped, running) = match result {
        BackfillCancel::Cancelled { dropped, running } => ("cancelled", dropped, running),
        BackfillCancel::AlreadyOver => ("already_over", 0, Vec::new()),
        BackfillCancel::NotFound => {
            return Err(fail(format!(
                "no backfill {}; `scheduler backfill status` lists them",
                args.id
            )));
        }
    };
    if args.store.json {
        return Ok(to_json(&json!({
            "id": args.id, "result": word, "dropped": dropped, "running": running,
            "actor": who.name,
        })));
    }
    Ok(match word {
        "cancelled" if running.is_empty() => format!(
            "cancelled backfill {}: {dropped} ticks will not run\n",
            args.id
        ),
        "cancelled" => format!(
            "cancelled backfill {}: {dropped} ticks will not run; its run {} goes on (`scheduler cancel RUN_ID` stops it)\n",
            args.id,
            running
                .iter()
                .map(i64::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
        _ => format!(
            "backfill {} was already over (cancelled, or no tick left to run); nothing changed\n",
            args.id
        ),
    })
}
