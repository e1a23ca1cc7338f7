//! The operator commands that work against the database: `status`, `runs`, `logs`, `trigger`,
//! `pause`, `resume`, `cancel`, `snooze`, `unsnooze`, `backfill`. Each connects to the store named by `--database-url` (default
//! `SCHEDULER_DATABASE_URL`, else `DATABASE_URL`, else the embedded `sqlite://scheduler.db`, as a
//! node does; `--schema`, default `SCHEDULER_SCHEMA`, for PostgreSQL), reads or acts through
//! [`Store`](crate::store::Store) and [`operate`](crate::operate) (so every change is audited
//! with who asked, `--actor`, default `$USER@hostname`, from `cli@hostname`), and prints a table
//! for people or, with `--json`, one JSON document for programs.
//!
//! Exit status: 0 done; 1 refused or failed, with the reason on stderr (an unknown task with
//! the names near it, a paused task, an unreachable database named with its password hidden);
//! 2 a usage error. The commands never create or migrate a database: pointed at a missing file
//! or a schema without the scheduler's tables, they say so. Against SQLite they open the file
//! in operator mode ([`SqliteStoreBuilder::operator`](crate::store::sqlite::SqliteStoreBuilder::operator)):
//! beside the node that owns it (without its lock file), and the node sees a trigger, pause,
//! resume or cancel within about a second.
//!
//! Files: `args.rs` the commands' arguments, `target.rs` opening the store and what every
//! command shares, `status.rs`,
//! `history.rs` (`runs`, `logs`), `instances.rs` (`instances ...`, the calendars they name read by `calendars.rs`, `upsert-many`'s file by `instance_file.rs`), `actions.rs` (`trigger`, `pause`, `resume`, `cancel`, `snooze`, `unsnooze`),
//! `backfill.rs` (`backfill`, `backfill status`, `backfill cancel`).

mod actions;
mod args;
mod backfill;
mod calendars;
mod history;
mod instance_file;
mod instances;
mod status;
mod target;

use std::io::Write;

use clap::Subcommand;

pub use args::{
    ActorArgs, BackfillAction, BackfillArgs, BackfillCancelArgs, BackfillStatusArgs, CancelArgs,
    InstanceKeyArgs, InstancePauseArgs, InstanceTaskArgs, InstanceUpsertArgs,
    InstanceUpsertManyArgs, InstancesAction, InstancesArgs, LogsArgs, PauseArgs, ResumeArgs,
    RunsArgs, SnoozeArgs, StatusArgs, StoreArgs, TriggerArgs,
};

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
    /// A scheduled run shows its tick and, under `OFFSET`, how long after it the tick was due to
    /// start (its jitter; `starts_at` with `--json`). `--before ID` continues a listing (the
    /// last line says which ID).
    Runs(RunsArgs),
    /// What a run's handler logged (the first 500 lines and 256 KiB).
    Logs(LogsArgs),
    /// Run a task now, once (`--key KEY`: one of its instances; `--args JSON`: with other
    /// arguments).
    ///
    /// Through the same locking as any run: a node running the task starts it when the task is
    /// free. Recorded with trigger `manual` and who asked; audited. Refused for a paused task.
    /// `--args` replaces the instance's (or the task's) arguments for this run only (the next
    /// scheduled run uses its own), recorded with the run.
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
    /// Stop a running run, on whichever node runs it.
    ///
    /// Its handler is told at once (`ctx.cancelled()`) and stopped by force if it has not
    /// returned 10 s later. Recorded `cancelled` with who asked; its tick is not run again. A
    /// handler that returns `Ok` all the same finished its work (`succeeded`). Audited. Refused
    /// for a run that has ended.
    Cancel(CancelArgs),
    /// Hold a task's alerts back until a time, with a reason.
    ///
    /// Not a pause: the task keeps running, and its alerts are still folded into its
    /// incidents, but none is sent (nor reminded) until `--until` / `--for` or `unsnooze`.
    /// Replaces a snooze in force. Audited.
    Snooze(SnoozeArgs),
    /// Lift a task's snooze: its alerts are sent again from now on. Audited.
    Unsnooze(ResumeArgs),
    /// Run a range of a task's past ticks again; `backfill status [ID]`, `backfill cancel ID`.
    ///
    /// `backfill TASK --from T1 --to T2`: the ticks of the task's schedule in [T1, T2] (in its
    /// zone; RFC 3339, or a date and time without an offset read in the task's zone), up to
    /// now; by default only those without a succeeded run, every one with `--all`.
    /// `--dry-run` lists them and writes nothing. Refused above `--max-runs` (default 1000).
    /// The nodes run them one at a time through the task's lock (never beside its own runs),
    /// `--pace` apart (default 1s), recorded with trigger `backfill`; `ctx.scheduled_at()` is
    /// the backfilled tick. Durable: any node takes the work, a restart loses none. Audited.
    Backfill(Box<BackfillArgs>),
    /// A task's instances: `instances list TASK`, `get TASK KEY`, `upsert TASK KEY --cron ..
    /// [--timezone ..] [--args JSON]`, `upsert-many TASK --file FILE`, `remove TASK KEY`, `pause
    /// TASK KEY --reason ..`, `resume TASK KEY`.
    ///
    /// Changes are audited; arguments are printed with their secrets hidden. Run one now with
    /// `trigger TASK --key KEY`.
    Instances(InstancesArgs),
}

impl OpsCommand {
    /// Runs the command and returns what it prints.
    pub async fn output(&self) -> crate::Result<String> {
        match self {
            OpsCommand::Status(args) => status::status(args).await,
            OpsCommand::Runs(args) => history::runs(args).await,
            OpsCommand::Logs(args) => history::logs(args).await,
            OpsCommand::Trigger(args) => actions::trigger(args).await,
            OpsCommand::Pause(args) => actions::pause(args).await,
            OpsCommand::Resume(args) => actions::resume(args).await,
            OpsCommand::Cancel(args) => actions::cancel(args).await,
            OpsCommand::Snooze(args) => actions::snooze(args).await,
            OpsCommand::Unsnooze(args) => actions::unsnooze(args).await,
            OpsCommand::Backfill(args) => backfill::backfill(args).await,
            OpsCommand::Instances(args) => instances::instances(args).await,
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
