//! `faults`: the fault-injection orchestrator. Runs scenarios (each with its own PostgreSQL
//! cluster and `fault_node` processes), judges them, writes a Markdown report, and exits non-zero
//! if any invariant was violated.
//!
//! ```text
//! faults [all|kill|db|sigstop|clock|rolling|config-race|config-chaos|handlers|instances|autofailover|autofailover-defaults]
//!        [--minutes F] [--seed N] [--report PATH]
//! ```
//!
//! Runs on one thread: every node is spawned from it, so `PR_SET_PDEATHSIG` (tied to the
//! spawning thread) kills the nodes if the harness itself is killed. Ctrl-C or SIGTERM drops the
//! running scenario, whose destructors kill its nodes and stop its cluster.

use std::path::PathBuf;
use std::process::ExitCode;

use scheduler_faults::harness::Options;
use scheduler_faults::report::{self, Row};
use scheduler_faults::scenarios;

/// The task of the `instances` scenario, registered here too: the harness makes its instances
/// from Rust (`Schedules`), which takes only tasks its registry has. It never runs here.
#[scheduler::task(name = "f.inst")]
async fn instance_task(_ctx: scheduler::TaskContext) {}

const USAGE: &str = "usage: faults [all|kill|db|sigstop|clock|rolling|config-race|config-chaos|handlers|instances|autofailover|autofailover-defaults] \
                     [--minutes F (default 2)] [--seed N] [--report PATH (default target/faults/report.md)]";

#[derive(Debug)]
struct Args {
    command: String,
    minutes: f64,
    seed: u64,
    report: PathBuf,
}

fn parse_args() -> Result<Args, String> {
    let mut command = None;
    let mut minutes = 2.0;
    let mut seed = None;
    let mut report = PathBuf::from("target/faults/report.md");
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_owned(), Some(v.to_owned())),
            _ => (arg.clone(), None),
        };
        let mut value = |name: &str| {
            inline
                .clone()
                .or_else(|| args.next())
                .ok_or_else(|| format!("{name} needs a value\n{USAGE}"))
        };
        match flag.as_str() {
            "-h" | "--help" => return Err(USAGE.to_owned()),
            "--minutes" => {
                minutes = value("--minutes")?
                    .parse::<f64>()
                    .ok()
                    .filter(|m| m.is_finite() && *m > 0.0)
                    .ok_or("--minutes takes a positive number, e.g. 0.5")?;
            }
            "--seed" => {
                seed = Some(
                    value("--seed")?
                        .parse::<u64>()
                        .map_err(|_| "--seed takes a whole number")?,
                );
            }
            "--report" => report = PathBuf::from(value("--report")?),
            f if f.starts_with('-') => return Err(format!("unknown flag `{f}`\n{USAGE}")),
            name => {
                if command.is_some() {
                    return Err(format!("one scenario (or `all`) at a time\n{USAGE}"));
                }
                if name != "all" && !scenarios::ALL.contains(&name) {
                    return Err(format!("unknown scenario `{name}`\n{USAGE}"));
                }
                command = Some(name.to_owned());
            }
        }
    }
    let seed = seed.unwrap_or_else(|| {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        (now.as_nanos() as u64) ^ u64::from(std::process::id()).rotate_left(32)
    });
    Ok(Args {
        command: command.unwrap_or_else(|| "all".to_owned()),
        minutes,
        seed,
        report,
    })
}

/// Each scenario's seed depends on the master seed and its name only, so `faults kill --seed S`
/// repeats the `kill` part of `faults all --seed S`.
fn scenario_seed(master: u64, name: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    master ^ h
}

async fn run(args: Args) -> Result<ExitCode, Box<dyn std::error::Error>> {
    let node_bin = std::env::current_exe()?.with_file_name("fault_node");
    if !node_bin.is_file() {
        return Err(format!(
            "{} is missing: build both binaries with `cargo build --release -p scheduler-faults`",
            node_bin.display()
        )
        .into());
    }
    let out_dir = args
        .report
        .parent()
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."));
    std::fs::create_dir_all(&out_dir)?;
    let out_dir = std::fs::canonicalize(&out_dir)?;
    let names: Vec<&str> = if args.command == "all" {
        scenarios::ALL.to_vec()
    } else {
        vec![args.command.as_str()]
    };
    let command_line = format!(
        "faults {} --minutes {} --seed {}",
        args.command, args.minutes, args.seed
    );
    let mut rows = Vec::new();
    for name in names {
        let seed = scenario_seed(args.seed, name);
        eprintln!("[faults] === {name} (seed {seed}) ===");
        let opts = Options {
            minutes: args.minutes,
            seed,
            out_dir: out_dir.clone(),
            node_bin: node_bin.clone(),
        };
        let row = match scenarios::run(name, &opts).await {
            Ok(outcome) => {
                let v = &outcome.verdict;
                eprintln!(
                    "[faults] {name}: {} starts; finished twice {}, started again after success {}, overlaps {}, unaccounted {}/{}, bad exits {}",
                    v.starts,
                    v.finished_twice.len(),
                    v.started_after_success.len(),
                    v.overlaps.len(),
                    v.unaccounted.len(),
                    v.expected_ticks,
                    v.bad_exits.len()
                );
                Row::Judged(Box::new(outcome))
            }
            Err(e) => {
                eprintln!("[faults] {name}: harness error: {e}");
                Row::HarnessError {
                    name: name.to_owned(),
                    seed,
                    error: e.to_string(),
                }
            }
        };
        rows.push(row);
        std::fs::write(
            &args.report,
            report::render(&rows, &command_line, args.seed),
        )?;
    }
    let harness_errors = rows
        .iter()
        .filter(|r| matches!(r, Row::HarnessError { .. }))
        .count();
    let violated = rows.iter().filter(|r| r.failed()).count() - harness_errors;
    eprintln!("[faults] report: {}", args.report.display());
    eprintln!(
        "[faults] seed {}: {} scenario(s), {violated} with violations, {harness_errors} harness error(s)",
        args.seed,
        rows.len()
    );
    Ok(if harness_errors > 0 {
        ExitCode::from(2)
    } else if violated > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

async fn interrupted() -> &'static str {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut int), Ok(mut term)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = int.recv() => "SIGINT",
        _ = term.recv() => "SIGTERM",
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(msg) => {
            eprintln!("{msg}");
            return ExitCode::from(2);
        }
    };
    eprintln!(
        "[faults] {} --minutes {} --seed {} (rerun with --seed {})",
        args.command, args.minutes, args.seed, args.seed
    );
    tokio::select! {
        result = run(args) => match result {
            Ok(code) => code,
            Err(e) => {
                eprintln!("[faults] error: {e}");
                ExitCode::from(2)
            }
        },
        // Dropping `run` here kills the nodes and stops the cluster of the running scenario.
        sig = interrupted() => {
            eprintln!("[faults] {sig}: killing the nodes and removing the cluster");
            ExitCode::from(130)
        }
    }
}
