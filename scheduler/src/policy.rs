//! Per-task policies for what the schedule cannot express on its own: ticks that nobody ran, runs
//! whose outcome nobody knows, and where a handler runs.
//!
//! This module owns only the vocabulary: the policy enums, their names (`once`, `skip`, `rerun`,
//! `never`, `in-process`, `process`, as written in `#[task(...)]` and in environment variables)
//! and their parsing. Which
//! policy applies to a task is decided in [`TaskOptions`](crate::registry::TaskOptions) and the
//! engine's settings; applying it is the engine's job.
//!
//! # Misfire: ticks missed while no node could run the task
//!
//! When every node was down, or the task was still running, past its next ticks, those ticks
//! *misfired*. [`Misfire::Once`] (the default) runs the task once for all of them as soon as a node
//! can; [`Misfire::Skip`] drops them and waits for the next tick on the schedule. Choose `skip` for
//! work that only makes sense at its time (a "good morning" notification), `once` for catch-up
//! work (a report sync that reads everything since the last run).
//!
//! ```
//! use scheduler::Misfire;
//!
//! let policy: Misfire = "skip".parse().unwrap();
//! assert_eq!(policy, Misfire::Skip);
//! assert_eq!(policy.to_string(), "skip");
//! assert_eq!(Misfire::default(), Misfire::Once);
//!
//! let error = "later".parse::<Misfire>().unwrap_err();
//! assert_eq!(
//!     error.to_string(),
//!     "unknown misfire policy `later`: expected `once` or `skip`"
//! );
//! ```
//!
//! # Recovery: runs whose outcome is unknown
//!
//! A run's outcome is unknown when its node crashed or lost its lock mid-run: the handler may have
//! finished its work, done half of it, or none. [`Recovery::Rerun`] (the default) runs the tick
//! again on another node (at-least-once; make the handler idempotent). [`Recovery::Never`]
//! records the run as `lost`, raises an alert and never re-runs it (at-most-once, like Quartz's
//! `requestsRecovery = false`): choose it for work that must not happen twice, such as sending
//! payments, and reconcile lost runs by hand.
//!
//! ```
//! use scheduler::Recovery;
//!
//! let policy: Recovery = "never".parse().unwrap();
//! assert_eq!(policy, Recovery::Never);
//! assert_eq!(policy.as_str(), "never");
//! assert_eq!(Recovery::default(), Recovery::Rerun);
//!
//! let error = "maybe".parse::<Recovery>().unwrap_err();
//! assert_eq!(
//!     error.to_string(),
//!     "unknown recovery policy `maybe`: expected `rerun` or `never`"
//! );
//! ```
//!
//! # Isolation: where a handler runs
//!
//! [`Isolation::InProcess`] (the default) runs the handler in the node's own process: cheapest,
//! and it shares the node's memory (shared state through
//! [`TaskContext::state`](crate::TaskContext::state)). [`Isolation::Process`]
//! (`#[task(isolation = "process")]`) runs each run's handler in a child process of the same
//! binary, so nothing the handler does can take the node down: a segfault, an abort, a panic, a
//! leak past its memory limit (`memory_limit = "512MiB"`) or a loop that never yields ends that
//! child only, and the run is recorded with what happened (the signal's name, the exit code). The
//! node keeps the run's lock while the child runs, turns the child's `tracing` output, stdout and
//! stderr into the run's log, and stops it (SIGTERM, then SIGKILL after a grace) on timeout,
//! cancel, lock loss or shutdown; see `docs/isolation.md` for the details.
//!
//! A child runs the binary's `main` again, up to `scheduler::run()` (or
//! [`Scheduler::run_until`](crate::Scheduler::run_until)), which runs the one handler instead of
//! a node. So:
//!
//! - whatever `main` does before `scheduler::run()` is done again in every child: keep it cheap,
//!   or skip it when [`isolation::child_request`](crate::isolation::child_request) is `Some`.
//!   An application that builds its scheduler itself must ask that before building it
//!   (building opens the store, and a SQLite file's lock is the node's);
//! - shared state is not available: [`TaskContext::state`](crate::TaskContext::state) returns an
//!   error saying so. Build what the handler needs inside the handler;
//! - a child never touches the database, the config or the admin server, and starts none of the
//!   node's services.
//!
//! Each run pays for starting a process (see `BENCHMARKS.md`, "Process isolation"). Process
//! isolation needs Unix; the memory limit and the child's death with its node are enforced on
//! Linux.
//!
//! ```
//! use scheduler::Isolation;
//!
//! let policy: Isolation = "process".parse().unwrap();
//! assert_eq!(policy, Isolation::Process);
//! assert_eq!(Isolation::default(), Isolation::InProcess);
//! assert_eq!(Isolation::InProcess.to_string(), "in-process");
//! ```

use std::fmt;
use std::str::FromStr;

/// A policy's `Display` and `FromStr`, both by its name (its `as_str`); `$kind` names the policy
/// in a [`ParsePolicyError`], `$names` lists its names for the docs.
macro_rules! by_name {
    ($policy:ident, $kind:literal, $names:literal) => {
        impl fmt::Display for $policy {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl FromStr for $policy {
            type Err = ParsePolicyError;

            #[doc = concat!("Parses a policy name exactly as [`", stringify!($policy),
                                                        "::as_str`] writes it (", $names, ").")]
            fn from_str(value: &str) -> Result<Self, Self::Err> {
                Self::ALL
                    .into_iter()
                    .find(|policy| policy.as_str() == value)
                    .ok_or_else(|| ParsePolicyError::new($kind, value, &Self::NAMES))
            }
        }
    };
}

/// What to do with ticks missed while no node could run the task. See the
/// [module docs](crate::policy#misfire-ticks-missed-while-no-node-could-run-the-task).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Misfire {
    /// Run once for all the missed ticks, as soon as a node can (the default).
    #[default]
    Once,
    /// Drop the missed ticks and wait for the next tick on the schedule.
    Skip,
}

impl Misfire {
    /// Every policy, in the order their names are listed in messages.
    const ALL: [Misfire; 2] = [Misfire::Once, Misfire::Skip];
    const NAMES: [&'static str; 2] = [Misfire::Once.as_str(), Misfire::Skip.as_str()];

    /// The policy's name as written in `#[task(misfire = "...")]` and in the environment.
    pub const fn as_str(self) -> &'static str {
        match self {
            Misfire::Once => "once",
            Misfire::Skip => "skip",
        }
    }
}

by_name!(Misfire, "misfire", "`once`, `skip`");

/// What to do with a run whose outcome is unknown because its node crashed or lost its lock
/// mid-run. See the [module docs](crate::policy#recovery-runs-whose-outcome-is-unknown).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Recovery {
    /// Run the tick again (at-least-once; the default).
    #[default]
    Rerun,
    /// Record the run as `lost`, raise an alert and never run the tick again (at-most-once).
    Never,
}

impl Recovery {
    /// Every policy, in the order their names are listed in messages.
    const ALL: [Recovery; 2] = [Recovery::Rerun, Recovery::Never];
    const NAMES: [&'static str; 2] = [Recovery::Rerun.as_str(), Recovery::Never.as_str()];

    /// The policy's name as written in `#[task(recovery = "...")]` and in the environment.
    pub const fn as_str(self) -> &'static str {
        match self {
            Recovery::Rerun => "rerun",
            Recovery::Never => "never",
        }
    }
}

by_name!(Recovery, "recovery", "`rerun`, `never`");

/// Where a task's handler runs. See the [module docs](crate::policy#isolation-where-a-handler-runs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Isolation {
    /// In the node's own process, beside the scheduler (the default).
    #[default]
    InProcess,
    /// In a child process of its own, started for each run.
    Process,
}

impl Isolation {
    /// Every policy, in the order their names are listed in messages.
    const ALL: [Isolation; 2] = [Isolation::InProcess, Isolation::Process];
    const NAMES: [&'static str; 2] = [Isolation::InProcess.as_str(), Isolation::Process.as_str()];

    /// The policy's name as written in `#[task(isolation = "...")]`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Isolation::InProcess => "in-process",
            Isolation::Process => "process",
        }
    }
}

by_name!(Isolation, "isolation", "`in-process`, `process`");

/// A policy name that is not one of the allowed values; the message lists them.
///
/// ```
/// use scheduler::Misfire;
///
/// // Names are exact: lowercase, no surrounding spaces.
/// let error = "Skip".parse::<Misfire>().unwrap_err();
/// assert_eq!(error.kind(), "misfire");
/// assert_eq!(error.value(), "Skip");
/// assert_eq!(error.allowed(), ["once", "skip"]);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {kind} policy `{value}`: expected {}", allowed_list(allowed))]
pub struct ParsePolicyError {
    kind: &'static str,
    value: String,
    allowed: &'static [&'static str],
}

impl ParsePolicyError {
    fn new(kind: &'static str, value: &str, allowed: &'static [&'static str]) -> Self {
        Self {
            kind,
            value: value.to_owned(),
            allowed,
        }
    }

    /// Which policy was being parsed: `misfire`, `recovery` or `isolation`.
    pub fn kind(&self) -> &'static str {
        self.kind
    }

    /// The value that was rejected.
    pub fn value(&self) -> &str {
        &self.value
    }

    /// The values that would have been accepted.
    pub fn allowed(&self) -> &'static [&'static str] {
        self.allowed
    }
}

/// "`a` or `b`", "`a`, `b` or `c`".
fn allowed_list(allowed: &[&str]) -> String {
    let quoted: Vec<String> = allowed.iter().map(|value| format!("`{value}`")).collect();
    match quoted.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => quoted.concat(),
    }
}
