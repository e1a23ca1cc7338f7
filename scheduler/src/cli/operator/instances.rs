//! `instances list`, `get`, `upsert`, `upsert-many`, `remove`, `pause` and `resume`: a task's
//! instances made,
//! changed and read from the command line, through [`Schedules`](crate::Schedules) and
//! [`operate`](crate::operate), so each change is audited as one made through the admin API.
//! The command registers no task: an instance is made of any task the database has a row of (a
//! node has started with it). Arguments are printed with their secrets hidden. `upsert-many`'s
//! file is read and checked by `instance_file.rs`.

use serde_json::{Value, json};

use super::super::table::{instant, table};
use super::actions::pause_end;
use super::args::{
    InstanceKeyArgs, InstancePauseArgs, InstanceTaskArgs, InstanceUpsertArgs,
    InstanceUpsertManyArgs, InstancesAction, InstancesArgs,
};
use super::instance_file::read_items;
use super::target::{Target, actor, fail, to_json};
use crate::config::labels_text;
use crate::instance::row_name;
use crate::operate::{self, Actor};
use crate::redact::redact_args;
use crate::store::Pause;
use crate::{Instance, Schedule, Schedules};

pub(super) async fn instances(args: &InstancesArgs) -> crate::Result<String> {
    match &args.action {
        InstancesAction::List(a) => list(a).await,
        InstancesAction::Get(a) => get(a).await,
        InstancesAction::Upsert(a) => upsert(a).await,
        InstancesAction::UpsertMany(a) => upsert_many(a).await,
        InstancesAction::Remove(a) => remove(a).await,
        InstancesAction::Pause(a) => pause(a).await,
        InstancesAction::Resume(a) => resume(a).await,
    }
}

/// The handle that reads and writes instances as `who`, of any task the store has.
fn schedules(target: &Target, who: &Actor) -> Schedules {
    Schedules::for_operator(target.store.clone(), None, who)
}

/// The handle that writes instances as `who`, with the config document at `config` (else
/// `SCHEDULER_CONFIG`'s) for their calendars when `named` (one of them names a calendar).
async fn writer(
    target: &Target,
    who: &Actor,
    named: bool,
    config: Option<&str>,
) -> crate::Result<Schedules> {
    let writer = schedules(target, who);
    if !named {
        return Ok(writer);
    }
    Ok(writer.with_config(super::calendars::document(config).await?))
}

/// A refusal of [`Schedules`], or the store's error, as the command's error.
fn refused(target: &Target, e: crate::Error) -> crate::Error {
    match e {
        crate::Error::Store(e) => target.check::<()>(Err(e)).unwrap_err(),
        crate::Error::Instance(refusal) => fail(refusal.to_string()),
        other => other,
    }
}

/// Instance `key` of `task`, or the error saying there is none.
pub(super) async fn existing(target: &Target, task: &str, key: &str) -> crate::Result<Instance> {
    let nobody = Actor::new("", "");
    match schedules(target, &nobody).get(task, key).await {
        Ok(Some(instance)) => Ok(instance),
        Ok(None) => {
            let known = target.check(target.store.task_states(Some(task)).await)?;
            if known.is_empty() {
                return Err(target.unknown_task(task).await);
            }
            Err(fail(format!(
                "task {task} has no instance `{key}`; `scheduler instances list {task}` lists them"
            )))
        }
        Err(e) => Err(refused(target, e)),
    }
}

/// The pause of instance `key` of `task`, if any.
async fn pause_of(target: &Target, task: &str, key: &str) -> crate::Result<Option<Pause>> {
    let states = target.check(target.store.task_states(Some(&row_name(task, key))).await)?;
    Ok(states.into_iter().next().and_then(|s| s.pause))
}

/// An instance as `--json` prints it: its arguments' secrets hidden.
fn as_json(instance: &Instance, pause: Option<&Pause>) -> Value {
    json!({
        "task": instance.task, "key": instance.key, "cron": instance.cron,
        "timezone": instance.timezone, "args": redact_args(&instance.args),
        "enabled": instance.enabled, "paused": pause.is_some(), "pause": pause,
        "next_run_at": instance.next_run_at, "next_tick": instance.next_tick,
        "owners": instance.owners, "labels": instance.labels, "limit": instance.limit,
        "sla": instance.sla, "calendar": instance.calendar,
        "removed": false,
    })
}

/// What an instance's state column says.
fn state(instance: &Instance, pause: Option<&Pause>) -> String {
    match pause {
        Some(p) => format!("paused by {}: {}", p.by, p.reason),
        None if instance.enabled => "enabled".to_owned(),
        None => "disabled (its task is)".to_owned(),
    }
}

/// An instance for people, one field a line.
fn describe(instance: &Instance, pause: Option<&Pause>) -> String {
    table(
        &["FIELD", "VALUE"],
        &[
            vec!["task".into(), instance.task.clone()],
            vec!["key".into(), instance.key.clone()],
            vec!["cron".into(), instance.cron.clone()],
            vec!["timezone".into(), instance.timezone.clone()],
            vec!["state".into(), state(instance, pause)],
            vec!["next run".into(), instant(instance.next_run_at)],
            vec!["args".into(), redact_args(&instance.args).to_string()],
            vec![
                "owners".into(),
                tags_shown(instance.owners.join(", "), "its task's"),
            ],
            vec![
                "labels".into(),
                tags_shown(labels_text(&instance.labels), "none of its own"),
            ],
            vec![
                "limit".into(),
                instance
                    .limit
                    .clone()
                    .unwrap_or_else(|| "its task's".into()),
            ],
            vec![
                "calendar".into(),
                instance
                    .calendar
                    .clone()
                    .unwrap_or_else(|| "its task's".into()),
            ],
            vec![
                "sla".into(),
                instance.sla.as_ref().map_or_else(
                    || "its task's".into(),
                    |sla| serde_json::to_string(sla).unwrap_or_default(),
                ),
            ],
        ],
    )
}

/// `text`, or `none` when it is empty.
fn tags_shown(text: String, none: &str) -> String {
    if text.is_empty() {
        none.to_owned()
    } else {
        text
    }
}

async fn list(args: &InstanceTaskArgs) -> crate::Result<String> {
    let target = Target::open(&args.store).await?;
    let nobody = Actor::new("", "");
    let instances = schedules(&target, &nobody)
        .list(&args.task)
        .await
        .map_err(|e| refused(&target, e))?;
    if instances.is_empty() {
        let known = target.check(target.store.task_states(Some(&args.task)).await)?;
        if known.is_empty() {
            return Err(target.unknown_task(&args.task).await);
        }
    }
    // The instances' pauses, in one read of the task rows.
    let states = target.check(target.store.task_states(None).await)?;
    let pause = |key: &str| {
        let row = row_name(&args.task, key);
        states
            .iter()
            .find(|s| s.name == row)
            .and_then(|s| s.pause.clone())
    };
    if args.store.json {
        let all: Vec<Value> = instances
            .iter()
            .map(|i| as_json(i, pause(&i.key).as_ref()))
            .collect();
        return Ok(to_json(&Value::Array(all)));
    }
    if instances.is_empty() {
        return Ok(format!("{} has no instances\n", args.task));
    }
    let rows: Vec<Vec<String>> = instances
        .iter()
        .map(|i| {
            vec![
                i.key.clone(),
                i.cron.clone(),
                i.timezone.clone(),
                state(i, pause(&i.key).as_ref()),
                instant(i.next_run_at),
                redact_args(&i.args).to_string(),
            ]
        })
        .collect();
    Ok(table(
        &["KEY", "CRON", "ZONE", "STATE", "NEXT RUN", "ARGS"],
        &rows,
    ))
}

async fn get(args: &InstanceKeyArgs) -> crate::Result<String> {
    let target = Target::open(&args.store).await?;
    let instance = existing(&target, &args.task, &args.key).await?;
    let pause = pause_of(&target, &args.task, &args.key).await?;
    Ok(if args.store.json {
        to_json(&as_json(&instance, pause.as_ref()))
    } else {
        describe(&instance, pause.as_ref())
    })
}

async fn upsert(args: &InstanceUpsertArgs) -> crate::Result<String> {
    let mut schedule = Schedule::new(&args.task, &args.key)
        .cron(&args.cron)
        .timezone(&args.timezone);
    if let Some(text) = &args.args {
        schedule = schedule.args_json(text);
    }
    if !args.owners.is_empty() {
        schedule = schedule.owners(args.owners.iter().cloned());
    }
    if !args.labels.is_empty() {
        schedule = schedule.labels(args.labels.iter().cloned());
    }
    if let Some(limit) = &args.limit {
        schedule = schedule.limit(limit);
    }
    if let Some(text) = &args.sla {
        let sla: crate::config::TaskSla = serde_json::from_str(text).map_err(|e| {
            fail(format!(
                "--sla is not a service-level block ({{\"start_within\", \"warn_after\", \"succeed_by\", \"alert_after_failures\", \"remind_every\"}}): {e}"
            ))
        })?;
        schedule = schedule.sla(sla);
    }
    if let Some(calendar) = &args.calendar {
        schedule = schedule.calendar(calendar);
    }
    let target = Target::open(&args.store).await?;
    let who = actor(&args.actor);
    let writer = writer(
        &target,
        &who,
        args.calendar.is_some(),
        args.config.as_deref(),
    )
    .await?;
    let written = writer
        .upsert(schedule)
        .await
        .map_err(|e| refused(&target, e))?;
    let pause = pause_of(&target, &args.task, &args.key).await?;
    Ok(if args.store.json {
        to_json(&as_json(&written, pause.as_ref()))
    } else {
        format!(
            "wrote instance {} of {} (by {}): `{}` in {}, next run {}, args {}\n",
            written.key,
            written.task,
            who.name,
            written.cron,
            written.timezone,
            instant(written.next_run_at),
            redact_args(&written.args)
        )
    })
}

/// One instance `upsert-many` refused: its place in the file (from 1), its key, why.
struct FileRefusal {
    place: usize,
    key: String,
    message: String,
}

async fn upsert_many(args: &InstanceUpsertManyArgs) -> crate::Result<String> {
    let items = read_items(&args.file)?;
    let target = Target::open(&args.store).await?;
    // A task the store lacks refuses the file whole (not each of its instances).
    let known = target.check(target.store.task_states(Some(&args.task)).await)?;
    if known.is_empty() {
        return Err(target.unknown_task(&args.task).await);
    }
    let who = actor(&args.actor);
    let named = items.iter().any(|item| item.calendar.is_some());
    let writer = writer(&target, &who, named, args.config.as_deref()).await?;
    let total = items.len();
    let (mut written, mut batches, mut refusals) = (0, 0, Vec::new());
    for (n, chunk) in items.chunks(Schedules::MAX_BATCH).enumerate() {
        let batch = chunk.iter().map(|item| item.schedule(&args.task));
        let answers = match writer.upsert_many(batch).await {
            Ok(answers) => answers,
            Err(e) => {
                let e = refused(&target, e);
                return Err(fail(format!(
                    "{e}\n{written} of {total} instances of {} written (in {}) before it; the rest not",
                    args.task,
                    batches_of(batches)
                )));
            }
        };
        batches += 1;
        for (i, (item, answer)) in chunk.iter().zip(answers).enumerate() {
            match answer {
                Ok(_) => written += 1,
                Err(e) => refusals.push(FileRefusal {
                    place: n * Schedules::MAX_BATCH + i + 1,
                    key: item.key.clone(),
                    message: e.to_string(),
                }),
            }
        }
    }
    if args.store.json {
        let refused: Vec<Value> = refusals
            .iter()
            .map(|r| json!({"place": r.place, "key": r.key, "message": r.message}))
            .collect();
        return Ok(to_json(&json!({
            "task": args.task, "written": written, "total": total, "batches": batches,
            "refused": refused, "actor": who.name,
        })));
    }
    let mut out = format!(
        "wrote {written} of {total} instances of {} (by {}, in {})\n",
        args.task,
        who.name,
        batches_of(batches)
    );
    if !refusals.is_empty() {
        out.push_str(&format!("refused {}:\n", refusals.len()));
        for r in &refusals {
            out.push_str(&format!("  #{} `{}`: {}\n", r.place, r.key, r.message));
        }
    }
    Ok(out)
}

/// `n` batches, in words.
fn batches_of(n: usize) -> String {
    if n == 1 {
        "1 batch".to_owned()
    } else {
        format!("{n} batches")
    }
}

async fn remove(args: &InstanceKeyArgs) -> crate::Result<String> {
    let target = Target::open(&args.store).await?;
    let who = actor(&args.actor);
    let removed = schedules(&target, &who)
        .remove(&args.task, &args.key)
        .await
        .map_err(|e| refused(&target, e))?;
    if !removed {
        existing(&target, &args.task, &args.key).await?;
    }
    Ok(if args.store.json {
        to_json(&json!({"task": args.task, "key": args.key, "removed": true, "actor": who.name}))
    } else {
        format!(
            "removed instance {} of {} (by {}): none of its ticks starts from now; a run in flight finishes\n",
            args.key, args.task, who.name
        )
    })
}

async fn pause(args: &InstancePauseArgs) -> crate::Result<String> {
    let until = pause_end(&args.reason, args.until, args.for_)?;
    let target = Target::open(&args.store).await?;
    existing(&target, &args.task, &args.key).await?;
    let who = actor(&args.actor);
    let row = row_name(&args.task, &args.key);
    let paused = operate::pause(target.store.as_ref(), &row, &who, args.reason.trim(), until).await;
    if !target.check_operation(paused)? {
        return existing(&target, &args.task, &args.key)
            .await
            .map(|_| String::new());
    }
    Ok(if args.store.json {
        to_json(&json!({
            "task": args.task, "key": args.key, "paused": true, "reason": args.reason.trim(),
            "until": until, "actor": who.name,
        }))
    } else {
        format!(
            "paused instance {} of {} (by {}{}): {}\n",
            args.key,
            args.task,
            who.name,
            until.map_or(String::new(), |u| format!(", until {}", instant(Some(u)))),
            args.reason.trim()
        )
    })
}

async fn resume(args: &InstanceKeyArgs) -> crate::Result<String> {
    let target = Target::open(&args.store).await?;
    existing(&target, &args.task, &args.key).await?;
    let who = actor(&args.actor);
    let row = row_name(&args.task, &args.key);
    let ended = target.check_operation(operate::resume(target.store.as_ref(), &row, &who).await)?;
    Ok(if args.store.json {
        to_json(&json!({
            "task": args.task, "key": args.key, "resumed": ended.is_some(), "pause": ended,
            "actor": who.name,
        }))
    } else {
        match ended {
            Some(p) => format!(
                "resumed instance {} of {} (paused by {} at {}: {}); its next run is its first tick from now\n",
                args.key,
                args.task,
                p.by,
                instant(Some(p.at)),
                p.reason
            ),
            None => format!(
                "instance {} of {} was not paused; nothing changed\n",
                args.key, args.task
            ),
        }
    })
}
