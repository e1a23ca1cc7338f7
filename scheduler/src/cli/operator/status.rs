//! `status`: every task and node, and any task missed or overdue.

use chrono::{DateTime, TimeDelta, Utc};
use serde_json::{Value, json};

use super::super::table::{cut, instant, printable, span, table};
use super::args::StatusArgs;
use super::target::{ALIVE_WITHIN, Target, to_json, value_of};
use crate::schedule::ScheduleSpec;
use crate::store::{RunStatus, TaskState};

/// Whether a task's next run is late: `missed` once a node opened an incident, `overdue` when
/// it is past its grace but nobody has flagged it yet.
fn lateness(task: &TaskState, now: DateTime<Utc>) -> Option<&'static str> {
    if !task.enabled || task.pause.as_ref().is_some_and(|p| p.in_force(now)) {
        return None;
    }
    if task.missed_since.is_some() {
        return Some("missed");
    }
    let next = task.next_run_at?;
    let grace = ScheduleSpec::stored(&task.cron, &task.timezone, task.calendar.as_deref())
        .map(|spec| crate::ticks::missed_grace(&spec, next, None))
        .unwrap_or(TimeDelta::seconds(5));
    (task.lock_owner.is_none() && now - next > grace).then_some("overdue")
}

pub(super) async fn status(args: &StatusArgs) -> crate::Result<String> {
    let target = Target::open(&args.store).await?;
    let (now, _) = target.check(target.store.load_tasks().await)?;
    let tasks = target.check(target.store.task_states(None).await)?;
    let nodes = target.check(target.store.nodes().await)?;
    let alive = |heartbeat: DateTime<Utc>, stopped: Option<DateTime<Utc>>| {
        stopped.is_none()
            && now - heartbeat <= TimeDelta::from_std(ALIVE_WITHIN).unwrap_or_default()
    };
    let late: Vec<(&TaskState, &str)> = tasks
        .iter()
        .filter_map(|t| lateness(t, now).map(|why| (t, why)))
        .collect();
    if args.store.json {
        let tasks: Vec<Value> = tasks
            .iter()
            .map(|t| {
                let mut v = value_of(t);
                v["paused"] = json!(t.pause.as_ref().is_some_and(|p| p.in_force(now)));
                v["late"] = json!(lateness(t, now));
                v
            })
            .collect();
        let nodes: Vec<Value> = nodes
            .iter()
            .map(|n| {
                let mut v = value_of(n);
                v["alive"] = json!(alive(n.heartbeat_at, n.stopped_at));
                v
            })
            .collect();
        let late: Vec<&str> = late.iter().map(|(t, _)| t.name.as_str()).collect();
        return Ok(to_json(&json!({
            "database": target.shown,
            "now": now,
            "tasks": tasks,
            "nodes": nodes,
            "late": late,
        })));
    }
    let mut text = String::new();
    if tasks.is_empty() {
        text.push_str("no tasks yet (a node records its tasks when it applies a config)\n");
    } else {
        let rows: Vec<Vec<String>> = tasks
            .iter()
            .map(|t| {
                let state = match (&t.pause, t.enabled) {
                    (Some(p), _) if p.in_force(now) => "paused",
                    (_, false) => "disabled",
                    _ => "enabled",
                };
                vec![
                    t.name.clone(),
                    state.to_owned(),
                    t.cron.clone(),
                    t.timezone.clone(),
                    instant(t.next_run_at),
                    instant(t.last_run_at),
                    t.last_status.map_or("-".to_owned(), |s| s.to_string()),
                    t.consecutive_failures.to_string(),
                    t.lock_owner.clone().unwrap_or_else(|| "-".to_owned()),
                ]
            })
            .collect();
        text.push_str(&table(
            &[
                "TASK",
                "STATE",
                "CRON",
                "ZONE",
                "NEXT RUN",
                "LAST START",
                "LAST RESULT",
                "FAILS",
                "LOCK OWNER",
            ],
            &rows,
        ));
        for t in &tasks {
            if let Some(p) = t.pause.as_ref().filter(|p| p.in_force(now)) {
                let until = p
                    .until
                    .map_or(String::new(), |u| format!(" until {}", instant(Some(u))));
                text.push_str(&format!(
                    "  {} paused by {} at {}{}: {}\n",
                    t.name,
                    printable(&p.by, false),
                    instant(Some(p.at)),
                    until,
                    printable(&p.reason, false)
                ));
            }
            if let Some(at) = t.manual_at {
                text.push_str(&format!(
                    "  {}: a manual run is waiting (asked at {})\n",
                    t.name,
                    instant(Some(at))
                ));
            }
            if let Some(at) = t.retry_at {
                text.push_str(&format!(
                    "  {}: a retry is due at {}\n",
                    t.name,
                    instant(Some(at))
                ));
            }
            if let Some(since) = t.orphaned_since {
                text.push_str(&format!(
                    "  {}: known to neither the config nor any node's code since {}\n",
                    t.name,
                    instant(Some(since))
                ));
            }
            if t.last_status.is_some_and(|s| s != RunStatus::Succeeded)
                && let Some(error) = &t.last_error
            {
                text.push_str(&format!("  {}: last error: {}\n", t.name, cut(error, 200)));
            }
        }
    }
    text.push('\n');
    if nodes.is_empty() {
        text.push_str("no nodes have registered\n");
    } else {
        let rows: Vec<Vec<String>> = nodes
            .iter()
            .map(|n| {
                let state = if n.stopped_at.is_some() {
                    "stopped"
                } else if alive(n.heartbeat_at, n.stopped_at) {
                    "yes"
                } else {
                    "no (silent)"
                };
                vec![
                    n.node_id.clone(),
                    n.hostname.clone(),
                    n.version.clone(),
                    format!(
                        "{} ({} ago)",
                        instant(Some(n.heartbeat_at)),
                        span(now - n.heartbeat_at)
                    ),
                    state.to_owned(),
                    n.running.to_string(),
                ]
            })
            .collect();
        text.push_str(&table(
            &[
                "NODE",
                "HOST",
                "VERSION",
                "LAST HEARTBEAT",
                "ALIVE",
                "RUNNING",
            ],
            &rows,
        ));
    }
    text.push('\n');
    if late.is_empty() {
        text.push_str("no task is missed or overdue\n");
    } else {
        for (t, why) in &late {
            let next = t.next_run_at.or(t.missed_since);
            text.push_str(&format!(
                "{why}: {} was due at {} ({} ago)\n",
                t.name,
                instant(next),
                next.map_or("?".to_owned(), |n| span(now - n))
            ));
        }
    }
    Ok(text)
}
