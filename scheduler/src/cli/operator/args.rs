//! The arguments of the operator commands, as clap reads them, with their value parsers. The
//! commands' modules read them; this module reads none of theirs.

use std::time::Duration;

use chrono::{DateTime, Utc};
use clap::{Args, Subcommand};

use crate::cli::parse::parse_instant;
use crate::store::{RunStatus, Trigger};

/// Arguments of `backfill`.
#[derive(Debug, Clone, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct BackfillArgs {
    /// `status` or `cancel` (without one: start a backfill of TASK).
    #[command(subcommand)]
    pub action: Option<BackfillAction>,
    /// The task to backfill.
    #[arg(required = true)]
    pub task: Option<String>,
    /// The range's start, inclusive (RFC 3339, or `2026-03-01`, `2026-03-01T06:00` in the
    /// task's zone).
    #[arg(long, value_name = "INSTANT", required = true)]
    pub from: Option<String>,
    /// The range's end, inclusive (same forms); ticks after now are left to the schedule.
    #[arg(long, value_name = "INSTANT", required = true)]
    pub to: Option<String>,
    /// Every tick of the range, not only those without a succeeded run.
    #[arg(long)]
    pub all: bool,
    /// List what would run; write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Refuse a backfill of more runs than this. Runs, not ticks: a tick of a task with N shards
    /// (or of an instance of one) is N runs, one per shard.
    #[arg(long, value_name = "N", default_value_t = crate::backfill::DEFAULT_MAX_RUNS,
          value_parser = parse_max_runs)]
    pub max_runs: u32,
    /// Runs at once: 1, the only value allowed (a task never overlaps itself).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub concurrency: u32,
    /// The least time between the starts of two of its runs (`1s`, `500ms`, `0s`; at most
    /// `1day`).
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_pace)]
    pub pace: Duration,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub actor: ActorArgs,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub store: StoreArgs,
}

/// `backfill status` and `backfill cancel`.
#[derive(Debug, Clone, Subcommand)]
#[non_exhaustive]
pub enum BackfillAction {
    /// The newest backfills with their progress, or one (`ID`) with its ticks.
    Status(BackfillStatusArgs),
    /// Cancel a backfill: its ticks not yet run never run (its running run goes on: `scheduler
    /// cancel RUN_ID` stops it). Audited.
    Cancel(BackfillCancelArgs),
}

/// Arguments of `backfill status`.
#[derive(Debug, Clone, Args)]
pub struct BackfillStatusArgs {
    /// The backfill's id (without one: the newest backfills).
    pub id: Option<i64>,
    /// Only this task's backfills.
    #[arg(long)]
    pub task: Option<String>,
    /// At most this many backfills.
    #[arg(long, value_name = "N", default_value_t = 20,
          value_parser = clap::value_parser!(u32).range(1..=500))]
    pub limit: u32,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub store: StoreArgs,
}

/// Arguments of `backfill cancel`.
#[derive(Debug, Clone, Args)]
pub struct BackfillCancelArgs {
    /// The backfill's id (from `scheduler backfill status`).
    pub id: i64,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub actor: ActorArgs,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub store: StoreArgs,
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
    /// Only runs with this status (running, succeeded, failed, timed_out, interrupted, lost,
    /// cancelled).
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

/// Arguments of `trigger` (and `run`).
#[derive(Debug, Clone, Args)]
pub struct TriggerArgs {
    /// The task to run.
    pub task: String,
    /// Run this instance of the task (its key) instead of the task's own schedule.
    #[arg(long, value_name = "KEY")]
    pub key: Option<String>,
    /// Arguments for this run only, in place of the instance's (or the task's) own: JSON of at
    /// most 64 KiB, read by the handler with `ctx.args()` and recorded with the run.
    #[arg(long, value_name = "JSON")]
    pub args: Option<String>,
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
    #[arg(long = "for", id = "for_", value_name = "DURATION", value_parser = parse_hold_for)]
    pub for_: Option<Duration>,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub actor: ActorArgs,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub store: StoreArgs,
}

/// Arguments of `snooze`.
#[derive(Debug, Clone, Args)]
pub struct SnoozeArgs {
    /// The task whose alerts to hold back.
    pub task: String,
    /// Why (shown wherever the snooze is).
    #[arg(long)]
    pub reason: String,
    /// Until this RFC 3339 instant.
    #[arg(long, value_name = "RFC3339", value_parser = parse_instant,
          required_unless_present = "for_", conflicts_with = "for_")]
    pub until: Option<DateTime<Utc>>,
    /// For this long (`30m`, `2h`, `1day`).
    #[arg(long = "for", id = "for_", value_name = "DURATION", value_parser = parse_hold_for)]
    pub for_: Option<Duration>,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub actor: ActorArgs,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub store: StoreArgs,
}

/// Arguments of `resume` (and `unsnooze`).
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

/// Arguments of `instances`.
#[derive(Debug, Clone, Args)]
pub struct InstancesArgs {
    /// What to do.
    #[command(subcommand)]
    pub action: InstancesAction,
}

/// `instances list`, `get`, `upsert`, `upsert-many`, `remove`, `pause`, `resume`.
#[derive(Debug, Clone, Subcommand)]
#[non_exhaustive]
pub enum InstancesAction {
    /// Every instance of a task, by key: schedule, next run, pause, arguments (secrets hidden).
    List(InstanceTaskArgs),
    /// One instance of a task.
    Get(InstanceKeyArgs),
    /// Make an instance of a task, or change it in place (its history stays). Audited.
    ///
    /// A changed cron or zone moves its next run to the new schedule's first tick after now;
    /// changed arguments apply from its next run.
    Upsert(InstanceUpsertArgs),
    /// Make or change many instances of a task from a JSON file, in batches of at most 1,000.
    ///
    /// The file is a JSON list of the admin API's batch items (`PUT /api/tasks/{name}/instances`):
    /// `[{"key": .., "cron": .., "timezone": .., "args": .., "calendar": ..}, ...]`, `timezone`
    /// (default `UTC`) and the rest optional; `-` reads it from stdin. Each batch is one transaction; each instance
    /// is written or refused alone, as `upsert` would, and audited on its own. Prints how many
    /// were written and each refusal (its place in the file, its key, why); exit status 0 once
    /// the file is written, refusals or not (`--json`: `refused` lists them), 1 when the file
    /// cannot be read, the task is not in the database, or the store fails (the batches before
    /// it stay written, and the count says how many).
    UpsertMany(InstanceUpsertManyArgs),
    /// Remove an instance: none of its ticks starts after this; a run in flight finishes.
    /// Audited.
    Remove(InstanceKeyArgs),
    /// Stop new runs of one instance on every node, with a reason (its task and the other
    /// instances go on). Audited.
    Pause(InstancePauseArgs),
    /// End an instance's pause; its next run is its first tick from now. Audited.
    Resume(InstanceKeyArgs),
}

/// Arguments of `instances list`.
#[derive(Debug, Clone, Args)]
pub struct InstanceTaskArgs {
    /// The task.
    pub task: String,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub store: StoreArgs,
}

/// Arguments of `instances get`, `remove` and `resume`.
#[derive(Debug, Clone, Args)]
pub struct InstanceKeyArgs {
    /// The task.
    pub task: String,
    /// The instance's key.
    pub key: String,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub actor: ActorArgs,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub store: StoreArgs,
}

/// Arguments of `instances upsert`.
#[derive(Debug, Clone, Args)]
pub struct InstanceUpsertArgs {
    /// The task (a node must have started with it).
    pub task: String,
    /// The instance's key: 1 to 128 ASCII letters, digits, `_`, `.`, `:` and `-`.
    pub key: String,
    /// Its cron expression, in the task attribute's syntax (5 or 6 fields, or an alias).
    #[arg(long, value_name = "EXPR")]
    pub cron: String,
    /// The IANA zone its cron is read in.
    #[arg(long, value_name = "ZONE", default_value = "UTC")]
    pub timezone: String,
    /// Its arguments: JSON of at most 64 KiB, read by the handler with `ctx.args()`.
    #[arg(long, value_name = "JSON")]
    pub args: Option<String>,
    /// One of its own owners (repeat for more): its events carry them, and its alerts are
    /// routed by them, in place of its task's. None: its task's.
    #[arg(long = "owner", value_name = "OWNER")]
    pub owners: Vec<String>,
    /// One of its own labels (repeat for more), over its task's in its events. None: none of
    /// its own.
    #[arg(long = "label", value_name = "KEY=VALUE", value_parser = label_pair)]
    pub labels: Vec<(String, String)>,
    /// The limit shared by tasks its runs hold, in place of its task's. None: its task's.
    #[arg(long, value_name = "NAME")]
    pub limit: Option<String>,
    /// Its own service levels, in place of its task's: a config entry's `sla` block as JSON
    /// (`{"start_within": "30s", "succeed_by": "08:00"}`). None: its task's.
    #[arg(long, value_name = "JSON")]
    pub sla: Option<String>,
    /// Its own calendar, in place of its task's: the name of one of the config document's
    /// `calendars` (the document read from --config). None: its task's.
    #[arg(long, value_name = "NAME")]
    pub calendar: Option<String>,
    /// Where the config document whose `calendars` --calendar names is: a path or an
    /// http(s):// URL [default: SCHEDULER_CONFIG]. Read only when a calendar is named.
    #[arg(long, value_name = "LOCATION")]
    pub config: Option<String>,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub actor: ActorArgs,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub store: StoreArgs,
}

/// A `--label` as `KEY=VALUE` (the value may be empty, or hold `=`).
fn label_pair(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((key, value)) => Ok((key.to_owned(), value.to_owned())),
        None => Err("write a label as KEY=VALUE".to_owned()),
    }
}

/// Arguments of `instances upsert-many`.
#[derive(Debug, Clone, Args)]
pub struct InstanceUpsertManyArgs {
    /// The task (a node must have started with it).
    pub task: String,
    /// The JSON file of instances (`-`: stdin).
    #[arg(long, value_name = "FILE")]
    pub file: std::path::PathBuf,
    /// Where the config document whose `calendars` the file's `calendar` names is: a path or
    /// an http(s):// URL [default: SCHEDULER_CONFIG]. Read only when a calendar is named.
    #[arg(long, value_name = "LOCATION")]
    pub config: Option<String>,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub actor: ActorArgs,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub store: StoreArgs,
}

/// Arguments of `instances pause`.
#[derive(Debug, Clone, Args)]
pub struct InstancePauseArgs {
    /// The task.
    pub task: String,
    /// The instance's key.
    pub key: String,
    /// Why (shown everywhere the pause is).
    #[arg(long)]
    pub reason: String,
    /// End the pause by itself at this RFC 3339 instant.
    #[arg(long, value_name = "RFC3339", value_parser = parse_instant, conflicts_with = "for_")]
    pub until: Option<DateTime<Utc>>,
    /// End the pause by itself after this long (`30m`, `2h`, `1day`).
    #[arg(long = "for", id = "for_", value_name = "DURATION", value_parser = parse_hold_for)]
    pub for_: Option<Duration>,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub actor: ActorArgs,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub store: StoreArgs,
}

/// Arguments of `cancel`.
#[derive(Debug, Clone, Args)]
pub struct CancelArgs {
    /// The run's id (from `scheduler runs TASK --status running`).
    pub run_id: i64,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub actor: ActorArgs,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub store: StoreArgs,
}

fn parse_status(text: &str) -> Result<RunStatus, String> {
    RunStatus::parse(text).ok_or_else(|| {
        format!("`{text}` is not a run status; use running, succeeded, failed, timed_out, interrupted, lost or cancelled")
    })
}

fn parse_trigger(text: &str) -> Result<Trigger, String> {
    Trigger::parse(text).ok_or_else(|| {
        format!("`{text}` is not a trigger; use schedule, retry, manual or backfill")
    })
}

/// `--pace`, in [`bounds::BACKFILL_PACE`](crate::bounds::BACKFILL_PACE).
fn parse_pace(text: &str) -> Result<Duration, String> {
    crate::bounds::BACKFILL_PACE
        .parse("--pace", text)
        .map_err(|e| e.to_string())
}

/// `--for` of a pause or a snooze, in [`bounds::HOLD_FOR`](crate::bounds::HOLD_FOR).
fn parse_hold_for(text: &str) -> Result<Duration, String> {
    crate::bounds::HOLD_FOR
        .parse("--for", text)
        .map_err(|e| e.to_string())
}

/// `--max-runs`, in [`bounds::BACKFILL_MAX_RUNS`](crate::bounds::BACKFILL_MAX_RUNS).
fn parse_max_runs(text: &str) -> Result<u32, String> {
    let n: u32 = text.trim().parse().map_err(|_| {
        format!(
            "`--max-runs`: `{}` is not a whole number; accepted: {}",
            crate::bounds::printable(text),
            crate::bounds::BACKFILL_MAX_RUNS
        )
    })?;
    crate::bounds::BACKFILL_MAX_RUNS
        .check("--max-runs", n)
        .map_err(|e| e.to_string())
}
