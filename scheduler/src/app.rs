//! The application entry: [`run`] is the whole `main` of a scheduler application (command
//! line, log output, settings from the environment, signals, exit status). Nothing here is
//! needed to embed a scheduler in an application of its own: build one with
//! [`SchedulerBuilder`] and call [`Scheduler::run_until`](crate::Scheduler::run_until).

use crate::{Result, SchedulerBuilder};

/// Completes on SIGINT (Ctrl-C) or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            tracing::error!(error = %e, "cannot listen for Ctrl-C");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(e) => {
                tracing::error!(error = %e, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => tracing::info!("received SIGINT"),
        _ = terminate => tracing::info!("received SIGTERM"),
    }
}

/// Installs the default log output: `RUST_LOG` filter (default `info`), human-readable lines,
/// or JSON lines with `SCHEDULER_LOG_FORMAT=json`, and the capture of each run's log
/// ([`run_log_layer`](crate::run_log_layer): what a handler logs at the enabled levels is kept
/// with its run). Does nothing if a subscriber is already set; an application with its own adds
/// `.with(scheduler::run_log_layer())` to it.
pub fn init_tracing() {
    use tracing_subscriber::EnvFilter;
    use tracing_subscriber::prelude::*;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let subscriber = tracing_subscriber::registry()
        .with(filter)
        .with(crate::run_log::layer());
    let output = tracing_subscriber::fmt::layer().with_target(false);
    let json = crate::env::process(crate::vars::LOG_FORMAT)
        .is_some_and(|f| f.trim().eq_ignore_ascii_case("json"));
    let _ = if json {
        subscriber.with(output.json()).try_init()
    } else {
        subscriber.with(output).try_init()
    };
}

/// The whole `main` of a scheduler application: runs the scheduler with settings from the
/// environment (see [`SchedulerBuilder::from_env`]) until SIGTERM or SIGINT, then shuts down
/// gracefully.
///
/// In a child process that a node started for a task with `isolation = "process"`, it runs
/// that task's handler instead and exits (see [`child_request`](crate::child_request)); whatever `main` does
/// before calling `run` is done again in every such child.
///
/// With the `cli` feature (a default), the process arguments select an operator command instead
/// (see [`AppCli`](crate::cli::AppCli)):
/// `myapp check-config tasks.json` checks a config file against the tasks this binary registers
/// without touching the database, and exits non-zero on any problem; `myapp next '<cron>'`
/// previews a schedule; `myapp status`, `runs`, `logs`, `trigger`, `pause` and `resume` are the
/// operator commands of the `scheduler` binary ([`OpsCommand`](crate::cli::OpsCommand)), against
/// the database given by `--database-url` or the environment. `run` owns the command line: an application with arguments of its own
/// builds the scheduler with [`SchedulerBuilder::from_env`] and calls
/// [`Scheduler::run_until`](crate::Scheduler::run_until) instead (and can still offer the commands through
/// [`cli::AppCommand`](crate::cli::AppCommand)).
///
/// Without the `cli` feature there are no commands: `run` ignores the process arguments and
/// runs the scheduler.
///
/// ```no_run
/// #[tokio::main]
/// async fn main() -> scheduler::Result<()> {
///     scheduler::run().await
/// }
/// ```
pub async fn run() -> Result<()> {
    // A child process of an isolated task runs that one handler and exits: no command line,
    // no config, no database.
    if let Some(request) = crate::isolation::child_request() {
        crate::isolation::run_child(request).await;
    }
    #[cfg(feature = "cli")]
    return command().await;
    #[cfg(not(feature = "cli"))]
    run_node().await
}

/// Runs the scheduler with settings from the environment until SIGTERM or SIGINT.
async fn run_node() -> Result<()> {
    init_tracing();
    let scheduler = SchedulerBuilder::from_env()?.build()?;
    scheduler.run_until(shutdown_signal()).await
}

/// The command the process arguments select.
#[cfg(feature = "cli")]
async fn command() -> Result<()> {
    use clap::Parser;

    use crate::TaskRegistry;
    use crate::cli::{AppCli, AppCommand};

    match AppCli::parse().command {
        None | Some(AppCommand::Run) => run_node().await,
        Some(AppCommand::CheckConfig(args)) => {
            let registry = TaskRegistry::collect()?;
            if !args.run(&registry, &mut std::io::stdout().lock())? {
                // The report above lists the problems; the exit code is what CI reads.
                std::process::exit(1);
            }
            Ok(())
        }
        Some(AppCommand::Next(args)) => args.run(&mut std::io::stdout().lock()),
        Some(AppCommand::Ops(command)) => {
            let text = command.output().await?;
            use std::io::Write;
            let mut stdout = std::io::stdout().lock();
            stdout.write_all(text.as_bytes())?;
            Ok(stdout.flush()?)
        }
    }
}
