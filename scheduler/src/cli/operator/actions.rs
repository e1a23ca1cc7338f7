//! `trigger`, `pause`, `resume`, `cancel`, `snooze` and `unsnooze`, through [`operate`](crate::operate), so each is
//! audited.

use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use serde_json::json;

use super::super::table::instant;
use super::args::{CancelArgs, PauseArgs, ResumeArgs, SnoozeArgs, TriggerArgs};
use super::target::{ALIVE_WITHIN, Target, actor, fail, to_json};
use crate::operate::{self, Actor};
use crate::store::{CancelRequest, RunRequest, Store};

pub(super) async fn trigger(args: &TriggerArgs) -> crate::Result<String> {
    let override_args = match args.args.as_deref().map(operate::check_override) {
        None => None,
        Some(Ok(text)) => Some(text),
        Some(Err(why)) => return Err(fail(format!("--args: {why}"))),
    };
    let target = Target::open(&args.store).await?;
    let who = actor(&args.actor);
    // What it runs: the task's own row, or one of its instances (which must exist).
    let (row, what, resume) = match &args.key {
        Some(key) => {
            super::instances::existing(&target, &args.task, key).await?;
            (
                crate::instance::row_name(&args.task, key),
                format!("instance {key} of {}", args.task),
                format!("scheduler instances resume {} {key}", args.task),
            )
        }
        None => (
            args.task.clone(),
            args.task.clone(),
            format!("scheduler resume {}", args.task),
        ),
    };
    let result =
        operate::trigger_with(target.store.as_ref(), &row, override_args.as_deref(), &who).await;
    let result = target.check_operation(result)?;
    let shown = override_args
        .as_deref()
        .map(crate::redact::redact_args_text);
    let (word, text) = match result {
        RunRequest::Queued => (
            "queued",
            format!(
                "asked for a run of {what} now (manual, by {}{}); a node running it starts it as soon as it is free\n",
                who.name,
                shown.as_deref().map_or(String::new(), |a| format!(
                    ", with args {a} for this run only"
                ))
            ),
        ),
        RunRequest::AlreadyQueued => (
            "already_queued",
            format!("a manual run of {what} was already waiting; nothing changed\n"),
        ),
        RunRequest::NotFound => return Err(target.unknown_task(&args.task).await),
        RunRequest::Paused(p) => {
            return Err(fail(format!(
                "{what} is paused (by {} at {}: {}); resume it first with `{resume}`",
                p.by,
                instant(Some(p.at)),
                p.reason,
            )));
        }
    };
    // Queued all the same (a node may start later), but say so when nobody would run it now.
    let nodes = target.store.nodes().await.unwrap_or_default();
    let (now, _) = target
        .store
        .load_tasks()
        .await
        .unwrap_or((Utc::now(), Vec::new()));
    let runners = nodes.iter().any(|n| {
        n.stopped_at.is_none()
            && now - n.heartbeat_at <= TimeDelta::from_std(ALIVE_WITHIN).unwrap_or_default()
            && n.tasks.contains(&args.task)
    });
    if !runners {
        eprintln!(
            "note: no live node registers {}; the run starts when one does",
            args.task
        );
    }
    Ok(if args.store.json {
        to_json(&json!({
            "task": args.task, "key": args.key, "result": word, "actor": who.name,
            "live_runner": runners,
            "args": shown.as_deref().and_then(|a| serde_json::from_str::<serde_json::Value>(a).ok()),
        }))
    } else {
        text
    })
}

/// When a pause or a snooze given `--until` or `--for` (from `now`) ends; `None` without either.
fn end_at(
    until: Option<DateTime<Utc>>,
    length: Option<Duration>,
    now: DateTime<Utc>,
) -> crate::Result<Option<DateTime<Utc>>> {
    match (until, length) {
        (Some(until), _) => Ok(Some(until)),
        (None, Some(length)) => TimeDelta::from_std(length)
            .ok()
            .and_then(|length| now.checked_add_signed(length))
            .map(Some)
            .ok_or_else(|| fail(format!("--for {length:?} is too long"))),
        (None, None) => Ok(None),
    }
}

/// Lifts what `lift` ends on `args.task` (its pause, its snooze), audited as `args`' actor:
/// what was lifted, `None` if nothing was in force; an unknown task is an error.
async fn lift<T>(
    args: &ResumeArgs,
    lift: impl AsyncFnOnce(&dyn Store, &str, &Actor) -> crate::Result<Option<T>>,
) -> crate::Result<(Option<T>, Actor)> {
    let target = Target::open(&args.store).await?;
    let who = actor(&args.actor);
    let ended = target.check_operation(lift(target.store.as_ref(), &args.task, &who).await)?;
    if ended.is_none() {
        let known = target.check(target.store.task_states(Some(&args.task)).await)?;
        if known.is_empty() {
            return Err(target.unknown_task(&args.task).await);
        }
    }
    Ok((ended, who))
}

/// When a pause given `--reason`, `--until` or `--for` ends (`None`: when resumed), the
/// request checked as [`operate::check_pause`] checks it.
pub(super) fn pause_end(
    reason: &str,
    until: Option<DateTime<Utc>>,
    length: Option<Duration>,
) -> crate::Result<Option<DateTime<Utc>>> {
    let until = end_at(until, length, Utc::now())?;
    match operate::check_pause(reason, until, Utc::now()) {
        Ok(()) => Ok(until),
        Err(operate::PauseRefusal::UntilPast) => {
            Err(fail(format!("--until {} is already past", instant(until))))
        }
        Err(_) => Err(fail("a pause needs a reason: --reason 'why'")),
    }
}

pub(super) async fn pause(args: &PauseArgs) -> crate::Result<String> {
    let until = pause_end(&args.reason, args.until, args.for_)?;
    let target = Target::open(&args.store).await?;
    let who = actor(&args.actor);
    let paused = operate::pause(
        target.store.as_ref(),
        &args.task,
        &who,
        args.reason.trim(),
        until,
    )
    .await;
    let paused = target.check_operation(paused)?;
    if !paused {
        return Err(target.unknown_task(&args.task).await);
    }
    Ok(if args.store.json {
        to_json(&json!({
            "task": args.task, "paused": true, "reason": args.reason.trim(),
            "until": until, "actor": who.name,
        }))
    } else {
        let until = until.map_or(" until resumed".to_owned(), |u| {
            format!(" until {}", instant(Some(u)))
        });
        format!(
            "paused {}{until}: {} (no new runs on any node; a running one finishes)\n",
            args.task,
            args.reason.trim()
        )
    })
}

pub(super) async fn resume(args: &ResumeArgs) -> crate::Result<String> {
    let (ended, who) = lift(args, operate::resume).await?;
    Ok(if args.store.json {
        to_json(
            &json!({"task": args.task, "resumed": ended.is_some(), "pause": ended, "actor": who.name}),
        )
    } else {
        match ended {
            Some(p) => format!(
                "resumed {} (paused by {} at {}: {}); its next run is its next tick\n",
                args.task,
                p.by,
                instant(Some(p.at)),
                p.reason
            ),
            None => format!("{} was not paused; nothing changed\n", args.task),
        }
    })
}

pub(super) async fn cancel(args: &CancelArgs) -> crate::Result<String> {
    let target = Target::open(&args.store).await?;
    let who = actor(&args.actor);
    let asked = operate::cancel(target.store.as_ref(), args.run_id, &who).await;
    let asked = target.check_operation(asked)?;
    let grace = humantime::format_duration(operate::CANCEL_GRACE);
    let (word, run) = match asked {
        CancelRequest::Requested(run) => ("requested", run),
        CancelRequest::AlreadyRequested(run) => ("already_requested", run),
        CancelRequest::Ended(run) => {
            return Err(fail(format!(
                "run {} of {} has ended already ({}{}): nothing to cancel",
                run.id,
                run.task_name,
                run.status,
                run.finished_at
                    .map_or(String::new(), |at| format!(" at {}", instant(Some(at))))
            )));
        }
        CancelRequest::NotFound => {
            return Err(fail(format!(
                "no run with id {} (it may have been pruned); `scheduler runs --status running` lists the running ones",
                args.run_id
            )));
        }
    };
    Ok(if args.store.json {
        to_json(&json!({
            "run_id": run.id, "task": run.task_name, "node": run.node_id, "result": word,
            "cancel_requested_by": run.cancel_requested_by,
            "cancel_requested_at": run.cancel_requested_at,
            "grace_seconds": operate::CANCEL_GRACE.as_secs(), "actor": who.name,
        }))
    } else if word == "requested" {
        format!(
            "asked run {} of {} on node {} to stop (cancelled by {}): its handler is told at once and stopped by force after {grace}; the run is recorded cancelled and its tick is not run again (`scheduler runs {} --status cancelled`)\n",
            run.id, run.task_name, run.node_id, who.name, run.task_name
        )
    } else {
        format!(
            "run {} of {} was already asked to stop (by {} at {}); nothing changed\n",
            run.id,
            run.task_name,
            run.cancel_requested_by.as_deref().unwrap_or("?"),
            instant(run.cancel_requested_at)
        )
    })
}

pub(super) async fn snooze(args: &SnoozeArgs) -> crate::Result<String> {
    let Some(until) = end_at(args.until, args.for_, Utc::now())? else {
        return Err(fail("a snooze needs an end: --until RFC3339 or --for 2h"));
    };
    match operate::check_snooze(&args.reason, until, Utc::now()) {
        Ok(()) => {}
        Err(operate::SnoozeRefusal::UntilPast) => {
            return Err(fail(format!(
                "--until {} is already past",
                instant(Some(until))
            )));
        }
        Err(operate::SnoozeRefusal::ReasonTooLong) => {
            return Err(fail(format!(
                "--reason is longer than {} characters",
                operate::MAX_REASON
            )));
        }
        Err(_) => return Err(fail("a snooze needs a reason: --reason 'why'")),
    }
    let target = Target::open(&args.store).await?;
    let who = actor(&args.actor);
    let snoozed =
        operate::snooze(target.store.as_ref(), &args.task, &who, &args.reason, until).await;
    let snoozed = target.check_operation(snoozed)?;
    if !snoozed {
        return Err(target.unknown_task(&args.task).await);
    }
    Ok(if args.store.json {
        to_json(&json!({
            "task": args.task, "snoozed": true, "reason": args.reason.trim(),
            "until": until, "actor": who.name,
        }))
    } else {
        format!(
            "snoozed the alerts of {} until {}: {} (it keeps running; its alerts are recorded in its incidents, not sent)\n",
            args.task,
            instant(Some(until)),
            args.reason.trim()
        )
    })
}

pub(super) async fn unsnooze(args: &ResumeArgs) -> crate::Result<String> {
    let (ended, who) = lift(args, operate::unsnooze).await?;
    Ok(if args.store.json {
        to_json(&json!({
            "task": args.task, "unsnoozed": ended.is_some(), "snooze": ended, "actor": who.name,
        }))
    } else {
        match ended {
            Some(s) => format!(
                "lifted the snooze of {} (by {}: {}); its alerts are sent again\n",
                args.task, s.by, s.reason
            ),
            None => format!("{} was not snoozed; nothing changed\n", args.task),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pause_or_snooze_ends_at_until_or_after_for_or_never() {
        let now = Utc::now();
        let at = now + TimeDelta::hours(3);
        assert_eq!(end_at(Some(at), None, now).unwrap(), Some(at));
        assert_eq!(
            end_at(None, Some(Duration::from_secs(7200)), now).unwrap(),
            Some(now + TimeDelta::hours(2))
        );
        assert_eq!(end_at(None, None, now).unwrap(), None);
        let e = end_at(None, Some(Duration::MAX), now).unwrap_err();
        assert!(e.to_string().contains("too long"), "{e}");
    }
}
