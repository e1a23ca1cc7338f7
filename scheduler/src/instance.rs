//! Instances of a task: copies of one task made at run time from Rust, each named by the task
//! and a key, each with its own schedule and arguments, run by the task's handler.
//!
//! **What an instance is.** A task registered with `#[task]` is one schedule of one handler. An
//! instance is another schedule of the same handler: `syncAdvertiserReport` for `tenant-42`
//! every five minutes in Shanghai, with `{"tenant": 42}` as its arguments. The handler reads
//! which instance it runs with [`TaskContext::key`](crate::TaskContext::key) and its arguments
//! with [`TaskContext::args`](crate::TaskContext::args). Instances are made, changed and removed
//! through [`Schedules`](crate::Schedules) ([`Scheduler::schedules`](crate::Scheduler::schedules)), from any
//! node, and every node registering the task runs them.
//!
//! **Storage.** An instance is a row of the tasks table named `task/key` ([`row_name`]): task
//! names cannot contain `/`, and keys cannot contain `/`, `[`, `]` or `@`, so an instance's row
//! never collides with a task's, a shard's (`task[i]`) or a broadcast node's (`task[@node]`).
//! The row has its own cron, zone, next run, lock, fencing token, retry and manual request, so
//! the engine claims, locks, renews, retries, times out, misfires and records an instance's
//! runs exactly as it does a task's own row's, with the task's policies (its handler, timeout,
//! retries, misfire and recovery). Its runs are recorded under the task's name with the
//! instance's key. It may have owners, labels and a shared limit of its own (columns `owners`,
//! `labels`, `limit_name` of its row; none: its task's), read with its row by each claim.
//!
//! This module is what every layer shares: the row names, the limits and the refusals; the
//! handle is `schedules.rs`.
//!
//! **The rules.**
//!
//! - An instance belongs to a task registered in the process that makes it, and whose row is
//!   in the store (a node has started with it). An instance of a task with N shards has N
//!   rows, `task/key` and `task/key[i]`; an instance of a broadcast task has its own row
//!   (never run) and one per node, `task/key[@node]` (see `crate::shard`): its ticks run as its
//!   task's do, its rows grouped under its own row, apart from its task's and the other
//!   instances'.
//! - The config file never disables nor deletes an instance made at run time: a document that
//!   does not name it leaves it alone. Disabling the task in config disables its instances;
//!   enabling the task enables them again, each from its next tick after now (the ticks in
//!   between are not run, as for a task enabled again).
//! - The config file may declare instances of its own (a task entry's `instances`): the
//!   reconciler creates, changes and disables them (never deletes them), and an upsert of a key
//!   the config declares is refused ([`InstanceRefusal::ConfigOwned`]); see
//!   `crate::config::InstanceConfig`.
//! - [`Schedules::upsert`](crate::Schedules::upsert) changes an instance in place: its history stays, and a changed cron
//!   or zone moves its next run to the new schedule's first tick after now, as a reconcile does
//!   for a task.
//! - [`Schedules::remove`](crate::Schedules::remove) ends an instance: no tick of it runs after the removal; a run in
//!   flight finishes and is recorded (its row goes when its lock is released). Every upsert and
//!   removal is written to the audit log.
//! - A key is 1 to [`MAX_KEY_LEN`] ASCII letters, digits, `_`, `.`, `:` and `-`; arguments are
//!   a JSON value of at most [`MAX_ARGS_BYTES`] bytes as text.

/// The longest instance key accepted, in bytes.
pub const MAX_KEY_LEN: usize = 128;

/// The most bytes an instance's arguments may take as JSON text (64 KiB).
pub const MAX_ARGS_BYTES: usize = 64 * 1024;

/// The most instances one [`Schedules::upsert_many`](crate::Schedules::upsert_many) writes (one
/// transaction holds each batch's rows until it commits: a bound on how long it holds them).
pub const MAX_BATCH: usize = 1_000;

/// What separates a task's name from an instance's key in the instance's row name.
const SEPARATOR: char = '/';

/// The store row of `task`'s instance `key`: `task/key`.
///
/// ```
/// use scheduler::testing::instance::{row_name, split_row};
///
/// assert_eq!(row_name("report", "tenant-42"), "report/tenant-42");
/// assert_eq!(split_row("report/tenant-42"), Some(("report", "tenant-42")));
/// assert_eq!(split_row("report"), None);
/// assert_eq!(split_row("report[2]"), None);
/// ```
pub fn row_name(task: &str, key: &str) -> String {
    format!("{task}{SEPARATOR}{key}")
}

/// The task and key of an instance's row ([`row_name`]'s inverse), or of one of its shard rows
/// (`task/key[i]`, see `crate::shard`); `None` for any other row.
///
/// ```
/// use scheduler::testing::instance::split_row;
///
/// assert_eq!(split_row("report/tenant-42[2]"), Some(("report", "tenant-42")));
/// ```
pub fn split_row(row: &str) -> Option<(&str, &str)> {
    let (task, key) = row.split_once(SEPARATOR)?;
    // Keys cannot hold `[`: what follows one is a shard's suffix.
    let key = key.split_once('[').map_or(key, |(key, _)| key);
    (!task.is_empty() && !key.is_empty()).then_some((task, key))
}

/// Why [`Schedules`](crate::Schedules) refused an instance (a bad cron or zone is
/// [`Error::Schedule`](crate::Error::Schedule) instead).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InstanceRefusal {
    /// No task of this name is registered in this process.
    #[error("no task `{task}` is registered here: an instance runs a registered task's handler")]
    UnknownTask {
        /// The task asked for.
        task: String,
    },
    /// The task is registered but has no row in the store yet.
    #[error(
        "task `{task}` is not in the store yet: start a node registering it (its reconcile writes the task's row) before making instances of it"
    )]
    TaskNotStored {
        /// The task asked for.
        task: String,
    },
    /// Not returned any more: tasks with shards and broadcast tasks have instances (see
    /// `crate::shard`). Kept for the code that matches on it.
    #[error("task `{task}` has shards or runs on every node: such a task has no instances")]
    Sharded {
        /// The task asked for.
        task: String,
    },
    /// The config document declares this instance: it is the reconciler's to change.
    #[error(
        "instance `{task}/{key}` is declared in the config document: change it there (a key the config declares is the config's)"
    )]
    ConfigOwned {
        /// The task.
        task: String,
        /// The key.
        key: String,
    },
    /// The key is empty, too long, or holds a character row names reserve.
    #[error(
        "instance key `{key}` is refused: use 1 to {MAX_KEY_LEN} ASCII letters, digits, `_`, `.`, `:` and `-`"
    )]
    BadKey {
        /// The key asked for.
        key: String,
    },
    /// No cron was given.
    #[error("instance `{task}/{key}` has no cron: call `Schedule::cron`")]
    NoCron {
        /// The task.
        task: String,
        /// The key.
        key: String,
    },
    /// The arguments are not JSON.
    #[error("the arguments of instance `{task}/{key}` are not JSON: {reason}")]
    ArgsNotJson {
        /// The task.
        task: String,
        /// The key.
        key: String,
        /// What the JSON parser said.
        reason: String,
    },
    /// The arguments are larger than [`Schedule::MAX_ARGS_BYTES`](crate::Schedule::MAX_ARGS_BYTES).
    #[error(
        "the arguments of instance `{task}/{key}` take {size} bytes as JSON; the most is {MAX_ARGS_BYTES}"
    )]
    ArgsTooLarge {
        /// The task.
        task: String,
        /// The key.
        key: String,
        /// Their size as JSON text.
        size: usize,
    },
    /// A batch of more than [`Schedules::MAX_BATCH`](crate::Schedules::MAX_BATCH) instances was
    /// given to [`Schedules::upsert_many`](crate::Schedules::upsert_many): none of it is written.
    #[error(
        "a batch of {count} instances is refused: at most {MAX_BATCH} are written at once (split it)"
    )]
    BatchTooLarge {
        /// How many instances the batch had.
        count: usize,
    },
    /// Its own owners are unusable, as a config entry's would be: more than 100, or one blank,
    /// padded with whitespace, holding control characters, longer than 256 characters or
    /// listed twice.
    #[error("the owners of instance `{task}/{key}`: {reason}")]
    BadOwners {
        /// The task.
        task: String,
        /// The key.
        key: String,
        /// What is wrong.
        reason: String,
    },
    /// Its own labels are unusable, as a config entry's would be: more than 100, a key that is
    /// not 1 to 63 of `A-Z a-z 0-9 _ . - /`, or a value holding control characters or longer
    /// than 256 characters.
    #[error("the labels of instance `{task}/{key}`: {reason}")]
    BadLabels {
        /// The task.
        task: String,
        /// The key.
        key: String,
        /// What is wrong.
        reason: String,
    },
    /// The name of its own limit is not a limit's name (1 to 64 ASCII letters, digits, `_`,
    /// `.`, `:` and `-`). A well-formed name no document declares is written: the instance's
    /// ticks then wait for it (see `docs/shared-limits.md`).
    #[error("the limit of instance `{task}/{key}`: {reason}")]
    BadLimit {
        /// The task.
        task: String,
        /// The key.
        key: String,
        /// What is wrong.
        reason: String,
    },
    /// Its own service levels are unusable, as a config entry's `sla` block would be (each
    /// problem naming its field: `sla.start_within`, `sla.succeed_by`, ...).
    #[error("the service levels of instance `{task}/{key}`: {reason}")]
    BadSla {
        /// The task.
        task: String,
        /// The key.
        key: String,
        /// What is wrong.
        reason: String,
    },
    /// Its own calendar cannot be had: the name is not one of the `calendars` of the config
    /// document the handle reads (the reason names it and lists those the document has), or
    /// the handle has no document.
    #[error("the calendar of instance `{task}/{key}`: {reason}")]
    BadCalendar {
        /// The task.
        task: String,
        /// The key.
        key: String,
        /// What is wrong, naming the calendar.
        reason: String,
    },
    /// The jitter window is not a duration from `0s` to `1day`.
    #[error("the jitter of instance `{task}/{key}`: {reason}")]
    BadJitter {
        /// The task.
        task: String,
        /// The key.
        key: String,
        /// What is wrong, with the range.
        reason: String,
    },
}

/// Why arguments given as JSON text are refused (for an instance, or a manual run's override).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ArgsRefusal {
    /// Not JSON: what the parser said (it never quotes the text).
    NotJson(String),
    /// Larger than [`MAX_ARGS_BYTES`] as compact JSON text: its size.
    TooLarge(usize),
}

impl std::fmt::Display for ArgsRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ArgsRefusal::NotJson(reason) => write!(f, "the arguments are not JSON: {reason}"),
            ArgsRefusal::TooLarge(size) => write!(
                f,
                "the arguments take {size} bytes as JSON; the most is {MAX_ARGS_BYTES}"
            ),
        }
    }
}

/// Arguments given as JSON text, checked as an instance's are: read as JSON and kept compact,
/// at most [`MAX_ARGS_BYTES`].
pub(crate) fn check_args_text(text: &str) -> Result<String, ArgsRefusal> {
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|e| ArgsRefusal::NotJson(e.to_string()))?;
    check_args(&value)
}

/// Arguments given as a JSON value, as compact text, at most [`MAX_ARGS_BYTES`].
pub(crate) fn check_args(value: &serde_json::Value) -> Result<String, ArgsRefusal> {
    let text = value.to_string();
    if text.len() > MAX_ARGS_BYTES {
        return Err(ArgsRefusal::TooLarge(text.len()));
    }
    Ok(text)
}

/// Whether `key` may name an instance (see the module docs).
pub(crate) fn valid_key(key: &str) -> bool {
    !key.is_empty()
        && key.len() <= MAX_KEY_LEN
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b':' | b'-'))
}

#[cfg(test)]
mod tests;
