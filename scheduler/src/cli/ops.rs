//! The operator commands that work against the database: `status`, `runs`, `logs`, `trigger`,
//! `pause`, `resume`. Each connects to the store named by `--database-url` (default
//! `SCHEDULER_DATABASE_URL`, else `DATABASE_URL`, else the embedded `sqlite://scheduler.db`, as a
//! node does), reads or acts through [`Store`] and [`operate`] (so every change is audited), and
//! prints a table for people or, with `--json`, one JSON document for programs.
//!
//! The commands never create or migrate a database: pointed at a file or a schema without the
//! scheduler's tables, they say so.

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use clap::{Args, Subcommand};
use serde_json::{Value, json};

use super::parse_instant;
use super::table::{cut, instant, near_names, span, table};
use crate::operate::{self, Actor};
use crate::redact::{redact_text, redact_url};
use crate::schedule::ScheduleSpec;
use crate::store::{
    Backend, DEFAULT_SQLITE_PATH, RunQuery, RunRecord, RunRequest, RunStatus, Store, StoreSettings,
    TaskState, Trigger, backend_of,
};

/// A node whose last heartbeat is older than this many heartbeat intervals is not alive (the
/// engine's own rule for silent nodes, at the default interval).
const ALIVE_WITHIN: Duration =
    Duration::from_secs(crate::engine::DEFAULT_HEARTBEAT_INTERVAL.as_secs() * 3);

/// The commands that read or change a deployment through its database.
#[derive(Debug, Subcommand)]
#[non_exhaustive]
pub enum OpsCommand {
    /// Every task and node, and any task missed or overdue.
    ///
    /// Per task: enabled, disabled or paused (and why), schedule, next run, last start and
    /// result, lock owner, failures in a row. Per node: host, version, last heartbeat, alive.
    Status(StatusArgs),
    /// Runs, newest first, filtered by task, status, trigger and start time.
    ///
    /// `--before ID` continues a listing (the last line says which ID).
    Runs(RunsArgs),
    /// What a run's handler logged (the first 500 lines and 256 KiB).
    Logs(LogsArgs),
    /// Run a task now, once.
    ///
    /// Through the same locking as any run: a node running the task starts it when the task is
    /// free. Recorded with trigger `manual` and who asked; audited. Refused for a paused task.
    Trigger(TriggerArgs),
    /// Stop new runs of a task on every node, with a reason.
    ///
    /// Until resumed, or until `--until` / `--for`; audited. A running run finishes. Ticks due
    /// meanwhile are recorded as skipped (`paused`). A config change never undoes a pause.
    Pause(PauseArgs),
    /// End a task's pause.
    ///
    /// Audited; its next run is its first tick from now (ticks missed meanwhile are not
    /// replayed).
    Resume(ResumeArgs),
}

/// Where the database is and how to print; shared by every operator command.
#[derive(Debug, Clone, Args)]
pub struct StoreArgs {
    /// `postgres://...` or `sqlite://PATH` [default: SCHEDULER_DATABASE_URL, else DATABASE_URL,
    /// else sqlite://scheduler.db].
    #[arg(long, value_name = "URL")]
    pub database_url: Option<String>,

    /// PostgreSQL only: the schema of the scheduler tables [default: SCHEDULER_SCHEMA, else
    /// public].
    #[arg(long, value_name = "NAME")]
    pub schema: Option<String>,

    /// Print one JSON document instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Who is acting, for the commands that change something.
#[derive(Debug, Clone, Args)]
pub struct ActorArgs {
    /// Who asks, for the audit trail (default: $USER@hostname).
    #[arg(long, value_name = "NAME")]
    pub actor: Option<String>,
}

/// Arguments of `status`.
#[derive(Debug, Clone, Args)]
pub struct StatusArgs {
    #[command(flatten)]
    #[allow(missing_docs)]
    pub store: StoreArgs,
}

/// Arguments of `runs`.
#[derive(Debug, Clone, Args)]
pub struct RunsArgs {
    /// Only this task's runs.
    pub task: Option<String>,
    /// Only runs with this status (running, succeeded, failed, timed_out, interrupted, lost).
    #[arg(long, value_parser = parse_status)]
    pub status: Option<RunStatus>,
    /// Only runs started so (schedule, retry, manual).
    #[arg(long, value_parser = parse_trigger)]
    pub trigger: Option<Trigger>,
    /// Only runs started at or after this RFC 3339 instant.
    #[arg(long, value_name = "RFC3339", value_parser = parse_instant)]
    pub since: Option<DateTime<Utc>>,
    /// Only runs started before this RFC 3339 instant.
    #[arg(long, value_name = "RFC3339", value_parser = parse_instant)]
    pub until: Option<DateTime<Utc>>,
    /// At most this many runs.
    #[arg(long, value_name = "N", default_value_t = 20,
          value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub limit: u32,
    /// Only runs older than the run with this id (the next page of a listing).
    #[arg(long, value_name = "ID")]
    pub before: Option<i64>,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub store: StoreArgs,
}

/// Arguments of `logs`.
#[derive(Debug, Clone, Args)]
pub struct LogsArgs {
    /// The run's id (from `scheduler runs`).
    pub run_id: i64,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub store: StoreArgs,
}

/// Arguments of `trigger`.
#[derive(Debug, Clone, Args)]
pub struct TriggerArgs {
    /// The task to run.
    pub task: String,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub actor: ActorArgs,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub store: StoreArgs,
}

/// Arguments of `pause`.
#[derive(Debug, Clone, Args)]
pub struct PauseArgs {
    /// The task to pause.
    pub task: String,
    /// Why (shown everywhere the pause is).
    #[arg(long)]
    pub reason: String,
    /// End the pause by itself at this RFC 3339 instant.
    #[arg(long, value_name = "RFC3339", value_parser = parse_instant, conflicts_with = "for_")]
    pub until: Option<DateTime<Utc>>,
    /// End the pause by itself after this long (`30m`, `2h`, `1day`).
    #[arg(long = "for", id = "for_", value_name = "DURATION", value_parser = parse_duration)]
    pub for_: Option<Duration>,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub actor: ActorArgs,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub store: StoreArgs,
}

/// Arguments of `resume`.
#[derive(Debug, Clone, Args)]
pub struct ResumeArgs {
    /// The task to resume.
    pub task: String,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub actor: ActorArgs,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub store: StoreArgs,
}

impl OpsCommand {
    /// Runs the command and returns what it prints.
    pub async fn output(&self) -> crate::Result<String> {
        match self {
            OpsCommand::Status(args) => status(args).await,
            OpsCommand::Runs(args) => runs(args).await,
            OpsCommand::Logs(args) => logs(args).await,
            OpsCommand::Trigger(args) => trigger(args).await,
            OpsCommand::Pause(args) => pause(args).await,
            OpsCommand::Resume(args) => resume(args).await,
        }
    }

    /// Runs the command, writing its output to `out`.
    pub async fn run(&self, out: &mut dyn Write) -> crate::Result<()> {
        let text = self.output().await?;
        out.write_all(text.as_bytes())?;
        out.flush()?;
        Ok(())
    }

    /// [`run`](Self::run) on a runtime of its own, for a synchronous `main`.
    pub fn run_blocking(&self, out: &mut dyn Write) -> crate::Result<()> {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?
            .block_on(self.run(out))
    }
}

/// A refusal or failure of a command, as the error the binary prints.
fn fail(message: impl Into<String>) -> crate::Error {
    std::io::Error::other(message.into()).into()
}

/// The store the arguments (or the environment) name, with a check that it can be read.
struct Target {
    store: Arc<dyn Store>,
    shown: String,
}

impl Target {
    async fn open(args: &StoreArgs) -> crate::Result<Self> {
        let env = |name: &str| crate::env::process(name).filter(|v| !v.trim().is_empty());
        let url = args
            .database_url
            .clone()
            .or_else(|| env("SCHEDULER_DATABASE_URL"))
            .or_else(|| env("DATABASE_URL"))
            .unwrap_or_else(|| format!("sqlite://{DEFAULT_SQLITE_PATH}"));
        let shown = redact_url(&url);
        let backend = backend_of(&url)?;
        let schema = match backend {
            Backend::Postgres => args.schema.clone().or_else(|| env("SCHEDULER_SCHEMA")),
            // SCHEDULER_SCHEMA is a PostgreSQL setting: a leftover in the environment does not
            // stop a look at an SQLite file, but `--schema` does.
            _ => args.schema.clone(),
        };
        if backend == Backend::Sqlite {
            let path = url.split_once("://").map_or("", |(_, rest)| rest);
            let path = path.split('?').next().unwrap_or(path);
            if !std::path::Path::new(path).exists() {
                return Err(fail(format!(
                    "no scheduler database at `{shown}` (the file does not exist); give the database with --database-url or DATABASE_URL"
                )));
            }
        }
        let mut settings = StoreSettings::url(url);
        settings.schema = schema;
        settings.max_connections = (backend == Backend::Postgres).then_some(2);
        let store = crate::store::connect(&settings)?;
        let target = Self { store, shown };
        target.check(target.store.nodes().await)?;
        Ok(target)
    }

    /// A store error as the command's error: where, what, and a hint for missing tables.
    fn check<T>(&self, result: crate::store::StoreResult<T>) -> crate::Result<T> {
        result.map_err(|error| {
            let text = redact_text(&crate::error::error_chain(&error));
            let hint = if text.contains("does not exist") || text.contains("no such table") {
                " (no scheduler tables there: a node creates them when it starts; check the URL and --schema)"
            } else {
                ""
            };
            fail(format!(
                "cannot use the scheduler database at `{}`: {text}{hint}",
                self.shown
            ))
        })
    }

    /// The error for a task the database does not know, with the names near it.
    async fn unknown_task(&self, task: &str) -> crate::Error {
        let states = self.store.task_states(None).await.unwrap_or_default();
        let near = near_names(task, states.iter().map(|s| s.name.as_str()));
        if near.is_empty() {
            fail(format!(
                "no task named `{task}` in the database; `scheduler status` lists them"
            ))
        } else {
            fail(format!(
                "no task named `{task}` in the database; did you mean {}?",
                near.iter()
                    .map(|n| format!("`{n}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        }
    }
}

fn actor(args: &ActorArgs) -> Actor {
    let host = gethostname::gethostname().to_string_lossy().into_owned();
    let name = args.actor.clone().unwrap_or_else(|| {
        let user = crate::env::process("USER")
            .or_else(|| crate::env::process("USERNAME"))
            .unwrap_or_else(|| "unknown".to_owned());
        format!("{user}@{host}")
    });
    Actor::new(name, format!("cli@{host}"))
}

fn to_json(value: &Value) -> String {
    let mut text = serde_json::to_string_pretty(value).unwrap_or_default();
    text.push('\n');
    text
}

fn value_of<T: serde::Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

// ---- status -------------------------------------------------------------------------------

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
    let grace = ScheduleSpec::parse(&task.cron, &task.timezone)
        .map(|spec| crate::engine::missed_grace(&spec, next, None))
        .unwrap_or(TimeDelta::seconds(5));
    (task.lock_owner.is_none() && now - next > grace).then_some("overdue")
}

async fn status(args: &StatusArgs) -> crate::Result<String> {
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
                    p.by,
                    instant(Some(p.at)),
                    until,
                    p.reason
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

// ---- runs ---------------------------------------------------------------------------------

async fn runs(args: &RunsArgs) -> crate::Result<String> {
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
        (trigger, _) => trigger.to_string(),
    };
    vec![
        run.id.to_string(),
        run.task_name.clone(),
        instant(Some(run.scheduled_at)),
        instant(Some(run.started_at)),
        run.finished_at
            .map_or("-".to_owned(), |f| span(f - run.started_at)),
        run.status.to_string(),
        trigger,
        run.attempt.to_string(),
        run.node_id.clone(),
        run.error.as_deref().map_or(String::new(), |e| cut(e, 60)),
    ]
}

// ---- logs ---------------------------------------------------------------------------------

async fn logs(args: &LogsArgs) -> crate::Result<String> {
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
    Ok(text)
}

// ---- trigger, pause, resume -----------------------------------------------------------------

async fn trigger(args: &TriggerArgs) -> crate::Result<String> {
    let target = Target::open(&args.store).await?;
    let who = actor(&args.actor);
    let result = operate::trigger(target.store.as_ref(), &args.task, &who).await;
    let result = match result {
        Err(crate::Error::Store(e)) => return target.check(Err(e)),
        other => other?,
    };
    let (word, text) = match result {
        RunRequest::Queued => (
            "queued",
            format!(
                "asked for a run of {} now (manual, by {}); a node running it starts it as soon as the task is free\n",
                args.task, who.name
            ),
        ),
        RunRequest::AlreadyQueued => (
            "already_queued",
            format!(
                "a manual run of {} was already waiting; nothing changed\n",
                args.task
            ),
        ),
        RunRequest::NotFound => return Err(target.unknown_task(&args.task).await),
        RunRequest::Paused(p) => {
            return Err(fail(format!(
                "{} is paused (by {} at {}: {}); resume it first with `scheduler resume {}`",
                args.task,
                p.by,
                instant(Some(p.at)),
                p.reason,
                args.task
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
        to_json(
            &json!({"task": args.task, "result": word, "actor": who.name, "live_runner": runners}),
        )
    } else {
        text
    })
}

async fn pause(args: &PauseArgs) -> crate::Result<String> {
    if args.reason.trim().is_empty() {
        return Err(fail("a pause needs a reason: --reason 'why'"));
    }
    let until = match (args.until, args.for_) {
        (Some(until), _) => Some(until),
        (None, Some(length)) => Some(
            Utc::now()
                + TimeDelta::from_std(length)
                    .map_err(|_| fail(format!("--for {length:?} is too long")))?,
        ),
        (None, None) => None,
    };
    if until.is_some_and(|u| u <= Utc::now()) {
        return Err(fail(format!("--until {} is already past", instant(until))));
    }
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
    let paused = match paused {
        Err(crate::Error::Store(e)) => return target.check(Err(e)),
        other => other?,
    };
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

async fn resume(args: &ResumeArgs) -> crate::Result<String> {
    let target = Target::open(&args.store).await?;
    let who = actor(&args.actor);
    let ended = operate::resume(target.store.as_ref(), &args.task, &who).await;
    let ended = match ended {
        Err(crate::Error::Store(e)) => return target.check(Err(e)),
        other => other?,
    };
    if ended.is_none() {
        let known = target.check(target.store.task_states(Some(&args.task)).await)?;
        if known.is_empty() {
            return Err(target.unknown_task(&args.task).await);
        }
    }
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

fn parse_status(text: &str) -> Result<RunStatus, String> {
    RunStatus::parse(text).ok_or_else(|| {
        format!("`{text}` is not a run status; use running, succeeded, failed, timed_out, interrupted or lost")
    })
}

fn parse_trigger(text: &str) -> Result<Trigger, String> {
    Trigger::parse(text)
        .ok_or_else(|| format!("`{text}` is not a trigger; use schedule, retry or manual"))
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text.trim())
        .map_err(|e| format!("`{text}` is not a duration ({e}); write e.g. 30m, 2h or 1day"))
}
