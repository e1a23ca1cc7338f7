//! The command line shared by the `scheduler` binary and by applications built on
//! [`run`](crate::run): `next` previews a schedule; the operator commands ([`OpsCommand`]:
//! `status`, `runs`, `logs`, `trigger`, `pause`, `resume`, `cancel`) read and steer a deployment through
//! its database; in an application, `check-config` validates a config file against the tasks the
//! binary registers, and no subcommand (or `run`) runs the scheduler.
//!
//! This module owns argument parsing (clap derive) and what each subcommand prints; the logic
//! it calls lives in the modules it names ([`schedule`](crate::schedule) for `next`,
//! [`store`](crate::store) and the crate's operator actions for the operator commands, so every
//! change is audited like one made through the admin API). It must not start the engine; only
//! the operator commands touch the database, and never to create or migrate it.
//!
//! Each subcommand is a variant of [`Command`] (or [`AppCommand`]) with its own `Args` struct;
//! adding one is a new variant and a new arm in [`Cli::run`] (or in the application entry).
//! Files: `operator/` the operator commands (one file per group), `table.rs` how they print for
//! people. (The store's `operations/` directories are its operations on the database; these are
//! the operator's commands.)
//!
//! ```
//! use clap::Parser;
//! use scheduler::cli::Cli;
//!
//! let cli = Cli::try_parse_from([
//!     "scheduler", "next", "30 2 * * *",
//!     "--tz", "America/New_York",
//!     "--after", "2026-03-07T12:00:00Z",
//!     "--count", "2",
//! ])?;
//! let mut out = Vec::new();
//! cli.run(&mut out)?;
//! // 02:30 does not exist on 2026-03-08 in New York: the job runs at 03:00 EDT.
//! assert_eq!(String::from_utf8(out)?, "2026-03-08T07:00:00Z\n2026-03-09T06:30:00Z\n");
//!
//! // With a jitter window, each tick with the instant it starts for that task (and key).
//! let cli = Cli::try_parse_from([
//!     "scheduler", "next", "0 0 * * * *", "--after", "2026-12-07T00:30:00Z", "--count", "1",
//!     "--jitter", "30s", "--task", "syncAdvertiserReport", "--key", "tenant-42",
//! ])?;
//! let mut out = Vec::new();
//! cli.run(&mut out)?;
//! assert_eq!(
//!     String::from_utf8(out)?,
//!     "2026-12-07T01:00:00Z starts 2026-12-07T01:00:17.619Z (+17s 619ms)\n"
//! );
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::io::Write;
use std::process::ExitCode;

use chrono::{DateTime, SecondsFormat, Utc};
use clap::{Args, Parser, Subcommand};

use std::path::PathBuf;

mod operator;
mod parse;
mod table;

pub use operator::{
    ActorArgs, BackfillAction, BackfillArgs, BackfillCancelArgs, BackfillStatusArgs, CancelArgs,
    InstanceKeyArgs, InstancePauseArgs, InstanceTaskArgs, InstanceUpsertArgs,
    InstanceUpsertManyArgs, InstancesAction, InstancesArgs, LogsArgs, OpsCommand, PauseArgs,
    ResumeArgs, RunsArgs, StatusArgs, StoreArgs, TriggerArgs,
};

use parse::parse_instant;

use crate::TaskRegistry;
use crate::config::{ConfigDocument, ConfigError, ConfigFormat, check_config};
use crate::schedule::{
    Calendar, CalendarRules, OnBlocked, ScheduleError, ScheduleSpec, TaskCalendar, parse_timezone,
};

/// `scheduler <COMMAND>`: operator tools for a scheduler deployment.
#[derive(Debug, Parser)]
#[command(name = "scheduler", version, about, long_about = None)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
#[non_exhaustive]
pub enum Command {
    /// Print the next fire instants of a cron expression, one a line, in UTC.
    Next(NextArgs),
    /// Run a task (or, with `--key`, one of its instances) now, once: the same as `trigger`.
    Run(TriggerArgs),
    /// The operator commands against the database.
    #[command(flatten)]
    Ops(OpsCommand),
}

/// Arguments of `scheduler next`.
#[derive(Debug, Clone, Args)]
pub struct NextArgs {
    /// The cron expression: 5 fields, 6 with a leading second, or an alias such as `@daily`.
    pub expression: String,

    /// The IANA time zone the expression is read in, such as `Europe/London`.
    #[arg(long, value_name = "ZONE", default_value = "UTC")]
    pub tz: String,

    /// Print fire instants strictly after this RFC 3339 instant [default: now].
    #[arg(long, value_name = "RFC3339", value_parser = parse_instant)]
    pub after: Option<DateTime<Utc>>,

    /// How many fire instants to print.
    #[arg(long, value_name = "N", default_value_t = 5,
          value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub count: u32,

    /// A config document (JSON, TOML or YAML) whose `calendars` `--calendar` names.
    #[arg(long, value_name = "FILE", requires = "calendar")]
    pub config: Option<PathBuf>,

    /// Apply this calendar of `--config`'s document (repeat for several): blocked ticks are
    /// skipped, or moved with `--on-blocked next_allowed`.
    #[arg(long, value_name = "NAME", requires = "config")]
    pub calendar: Vec<String>,

    /// What becomes of a blocked tick: `skip` or `next_allowed`.
    #[arg(long, value_name = "MODE", default_value = "skip", value_parser = parse_on_blocked)]
    pub on_blocked: OnBlocked,

    /// A jitter window (`30s`): print each tick with the instant it starts, at its offset for
    /// `--task` (and `--key`) within the window.
    #[arg(long, value_name = "WINDOW", requires = "task", value_parser = parse_jitter)]
    pub jitter: Option<std::time::Duration>,

    /// The task whose offsets `--jitter` shows.
    #[arg(long, value_name = "NAME", requires = "jitter")]
    pub task: Option<String>,

    /// The instance of `--task` whose offsets `--jitter` shows (none: the task's own).
    #[arg(long, value_name = "KEY", requires = "task")]
    pub key: Option<String>,
}

impl Cli {
    /// Parses the process arguments, runs the command with output on stdout, and reports an
    /// error on stderr with a non-zero exit code. This is the whole `main` of the binary.
    pub fn main() -> ExitCode {
        let cli = Cli::parse();
        let stdout = std::io::stdout();
        match cli.run(&mut stdout.lock()) {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("error: {error}");
                ExitCode::FAILURE
            }
        }
    }

    /// Runs the command, writing its output to `out`. Nothing is written when the input is
    /// refused. An operator command runs on a Tokio runtime of its own, so call this outside
    /// one (inside, call [`OpsCommand::run`]).
    pub fn run(self, out: &mut dyn Write) -> crate::Result<()> {
        match self.command {
            Command::Next(args) => args.run(out),
            Command::Run(args) => OpsCommand::Trigger(args).run_blocking(out),
            Command::Ops(command) => command.run_blocking(out),
        }
    }
}

impl NextArgs {
    /// Prints the next [`count`](Self::count) fire instants after [`after`](Self::after).
    pub fn run(&self, out: &mut dyn Write) -> crate::Result<()> {
        let mut spec = ScheduleSpec::parse(&self.expression, &self.tz)?;
        if let Some(path) = &self.config {
            let calendar = self.calendar_of(path, spec.timezone())?;
            spec = spec.with_calendar(calendar);
        }
        let after = self.after.unwrap_or_else(Utc::now);
        let mut lines = String::new();
        let mut printed = 0;
        let row = self.task.as_deref().map(|task| match &self.key {
            Some(key) => crate::instance::row_name(task, key),
            None => task.to_owned(),
        });
        for fire in spec.iter_after(after).take(self.count as usize) {
            lines.push_str(&fire.to_rfc3339_opts(SecondsFormat::AutoSi, true));
            if let (Some(window), Some(row)) = (self.jitter, &row) {
                let start = crate::ticks::jitter::start_of(row, &spec, fire, window);
                let offset = (start - fire).to_std().unwrap_or_default();
                lines.push_str(&format!(
                    " starts {} (+{})",
                    start.to_rfc3339_opts(SecondsFormat::AutoSi, true),
                    humantime::format_duration(offset)
                ));
            }
            lines.push('\n');
            printed += 1;
        }
        out.write_all(lines.as_bytes())?;
        out.flush()?;
        if printed < self.count {
            // Only past the year 5000, where the search stops.
            eprintln!("note: only {printed} fire instants follow {after}");
        }
        Ok(())
    }
}

impl NextArgs {
    /// The named calendars of the document at `path`, merged, in `zone`.
    fn calendar_of(&self, path: &std::path::Path, zone: chrono_tz::Tz) -> crate::Result<Calendar> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Io {
            source_name: path.display().to_string(),
            source,
        })?;
        let format = ConfigFormat::from_path(path).unwrap_or_else(|| ConfigFormat::sniff(&text));
        let doc = ConfigDocument::parse(&text, format, &path.display().to_string())?;
        let mut rules = CalendarRules::default();
        for name in &self.calendar {
            let Some(named) = doc.calendars.get(name) else {
                return Err(ConfigError::invalid(
                    "calendar",
                    format!(
                        "calendar `{name}` is not in {}'s `calendars`",
                        path.display()
                    ),
                )
                .into());
            };
            rules.extend(named);
        }
        let calendar = TaskCalendar::new(self.calendar.clone(), self.on_blocked, rules)
            .compile(zone)
            .map_err(ScheduleError::from)?;
        Ok(calendar)
    }
}

fn parse_jitter(text: &str) -> Result<std::time::Duration, String> {
    crate::config::jitter_window(text)
}

fn parse_on_blocked(text: &str) -> Result<OnBlocked, String> {
    match text {
        "skip" => Ok(OnBlocked::Skip),
        "next_allowed" => Ok(OnBlocked::NextAllowed),
        _ => Err(format!(
            "`{text}` is not a mode; write skip or next_allowed"
        )),
    }
}

/// The command line of an application whose `main` calls [`run`](crate::run):
///
/// ```text
/// myapp                          run the scheduler (settings from the environment)
/// myapp run                      the same
/// myapp check-config tasks.json  validate a config file against this binary's tasks; no database
/// myapp next '0 9 * * MON-FRI' --tz Asia/Shanghai --count 3
/// myapp status                   the operator commands of the `scheduler` binary, against
/// myapp trigger TASK             the database the application is configured with
/// ```
///
/// ```
/// use clap::Parser;
/// use scheduler::cli::{AppCli, AppCommand};
///
/// let cli = AppCli::try_parse_from(["myapp", "check-config", "tasks.json"])?;
/// assert!(matches!(cli.command, Some(AppCommand::CheckConfig(_))));
/// assert!(AppCli::try_parse_from(["myapp"])?.command.is_none());
/// let status = AppCli::try_parse_from(["myapp", "status", "--json"])?;
/// assert!(matches!(status.command, Some(AppCommand::Ops(scheduler::cli::OpsCommand::Status(_)))));
/// # Ok::<(), clap::Error>(())
/// ```
#[derive(Debug, Parser)]
#[command(version, about = "A scheduler node; run without a command to start it", long_about = None)]
pub struct AppCli {
    /// What to do; nothing means `run`.
    #[command(subcommand)]
    pub command: Option<AppCommand>,
}

/// The subcommands of an application.
#[derive(Debug, Subcommand)]
#[non_exhaustive]
pub enum AppCommand {
    /// Run the scheduler until SIGTERM or SIGINT (the default).
    Run,
    /// Check a config file against the tasks this binary registers, without a database: every
    /// problem is listed, and the next three fire times of each valid task. Exits non-zero on
    /// any problem.
    CheckConfig(CheckConfigArgs),
    /// Print the next fire instants of a cron expression, one a line, in UTC.
    Next(NextArgs),
    /// The operator commands against the database (`status`, `runs`, `logs`, `trigger`,
    /// `pause`, `resume`, `cancel`).
    #[command(flatten)]
    Ops(OpsCommand),
}

/// Arguments of `check-config`.
#[derive(Debug, Clone, Args)]
pub struct CheckConfigArgs {
    /// The config file (JSON, TOML or YAML, by extension).
    pub path: PathBuf,

    /// The zone of entries that name none [default: SCHEDULER_TIMEZONE, else UTC].
    #[arg(long, value_name = "ZONE")]
    pub tz: Option<String>,

    /// The alert channels file, checked as the node reads it [default:
    /// SCHEDULER_CHANNELS_FILE, if set].
    #[arg(long, value_name = "FILE")]
    pub channels: Option<PathBuf>,
}

impl CheckConfigArgs {
    /// Checks the file against `registry`, prints the report to `out`, and returns whether the
    /// config is free of problems.
    pub fn run(&self, registry: &TaskRegistry, out: &mut dyn Write) -> crate::Result<bool> {
        let tz = match &self.tz {
            Some(zone) => parse_timezone(zone.trim())?,
            None => crate::env::Env::new(&crate::env::process)
                .timezone(crate::vars::TIMEZONE)?
                .unwrap_or(chrono_tz::Tz::UTC),
        };
        let report = check_config(&self.path, registry, tz, Utc::now());
        write!(out, "{report}")?;
        let channels_ok = self.check_channels(out)?;
        out.flush()?;
        Ok(report.is_ok() && channels_ok)
    }

    /// Checks the channels file (`--channels`, else `SCHEDULER_CHANNELS_FILE`), if any, as the
    /// node reads it: the same errors the node gives at its start.
    fn check_channels(&self, out: &mut dyn Write) -> crate::Result<bool> {
        #[cfg(feature = "webhook")]
        {
            let path = self.channels.clone().or_else(|| {
                crate::env::Env::new(&crate::env::process)
                    .string(crate::vars::CHANNELS_FILE)
                    .map(PathBuf::from)
            });
            let Some(path) = path else {
                return Ok(true);
            };
            match crate::channels::Channels::from_file(&path) {
                Ok(channels) => {
                    writeln!(
                        out,
                        "channels file {}: ok, {} channel(s), {} route(s)",
                        crate::bounds::printable(&path.display().to_string()),
                        channels.channels.len(),
                        channels.routes.len()
                    )?;
                    Ok(true)
                }
                Err(e) => {
                    // Word for word what the node says when it refuses to start.
                    let refused = crate::env::invalid(crate::vars::CHANNELS_FILE, e);
                    let text: String = refused
                        .to_string()
                        .chars()
                        .flat_map(|c| {
                            let raw = c == '\n' || !c.is_control();
                            raw.then_some(c)
                                .into_iter()
                                .chain((!raw).then(|| c.escape_default()).into_iter().flatten())
                        })
                        .collect();
                    writeln!(out, "{text}")?;
                    Ok(false)
                }
            }
        }
        #[cfg(not(feature = "webhook"))]
        {
            if self.channels.is_some() {
                writeln!(
                    out,
                    "channels file: the alert channels need the scheduler's `webhook` feature"
                )?;
                return Ok(false);
            }
            let _ = out;
            Ok(true)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_is_trigger_with_a_key_and_arguments() {
        let cli = Cli::try_parse_from([
            "scheduler",
            "run",
            "report",
            "--key",
            "tenant-42",
            "--args",
            r#"{"tenant": 42}"#,
        ])
        .unwrap();
        let Command::Run(args) = cli.command else {
            panic!("{cli:?}");
        };
        assert_eq!(args.task, "report");
        assert_eq!(args.key.as_deref(), Some("tenant-42"));
        assert_eq!(args.args.as_deref(), Some(r#"{"tenant": 42}"#));
        let cli = Cli::try_parse_from([
            "scheduler",
            "instances",
            "upsert",
            "report",
            "tenant-42",
            "--cron",
            "0 * * * *",
        ])
        .unwrap();
        let Command::Ops(OpsCommand::Instances(InstancesArgs {
            action: InstancesAction::Upsert(upsert),
        })) = cli.command
        else {
            panic!("{cli:?}");
        };
        assert_eq!((upsert.timezone.as_str(), upsert.args), ("UTC", None));
        // An application's `run` stays the node's: its operator command is `trigger`.
        assert!(AppCli::try_parse_from(["myapp", "trigger", "report", "--key", "k"]).is_ok());
    }
}
