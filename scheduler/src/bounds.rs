//! The range of every value a user sets, defined once.
//!
//! A duration, a count or a size that reaches the scheduler from outside (the config document,
//! an `sla` block, the channels file, the environment, an admin API body or query, a command-line
//! flag) is checked where it is read against one of the ranges below, and refused with an error
//! that names the field and the range. A value inside its range cannot overflow the arithmetic
//! done on it later (an instant plus a duration, a duration in SQL, a timer): the ranges are
//! chosen so that it fits with room to spare, and that arithmetic is checked or saturating
//! besides.
//!
//! `docs/limits.md` lists every range; a unit test keeps that page and [`ALL`] alike.

use std::time::Duration;

mod printable;
mod range;

pub(crate) use printable::{printable, printable_up_to};
#[cfg(test)]
use range::size;
pub(crate) use range::{CountRange, DurationRange, OutOfRange, Range};

const fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}
const fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}
const MINUTE: u64 = 60;
const HOUR: u64 = 60 * MINUTE;
const DAY: u64 = 24 * HOUR;
/// humantime's year (365.25 days), so that the range prints as `1year`.
const YEAR: u64 = 31_557_600;

// The ranges. Each is read where its value is read; `docs/limits.md` lists them all.

/// `sla.start_within`: how late a tick may start before `task.late`.
pub(crate) const SLA_START_WITHIN: DurationRange = DurationRange::new(ms(1), secs(YEAR));
/// `sla.warn_after`: how long a run may go on before `task.slow`.
pub(crate) const SLA_WARN_AFTER: DurationRange = DurationRange::new(ms(1), secs(YEAR));
/// `sla.remind_every`: how often an open incident's alert is sent again.
pub(crate) const SLA_REMIND_EVERY: DurationRange = DurationRange::new(secs(1), secs(YEAR));
/// `sla.alert_after_failures`: failures in a row before `run.failed` is sent.
pub(crate) const SLA_ALERT_AFTER_FAILURES: CountRange = CountRange::new(1, 10_000);
/// A channel's `timeout` in the channels file, and `SCHEDULER_WEBHOOK_TIMEOUT`.
#[cfg_attr(not(test), allow(dead_code))] // read by the channels area
pub(crate) const DELIVERY_TIMEOUT: DurationRange = DurationRange::new(ms(100), secs(10 * MINUTE));
/// A backfill's pace between runs (`pace_ms` in the API, `--pace` on the command line).
pub(crate) const BACKFILL_PACE: DurationRange = DurationRange::new(ms(0), secs(DAY));
/// A task's `jitter` (attribute, config entry, instance): the window each tick starts within.
pub(crate) const JITTER: DurationRange = DurationRange::new(ms(0), secs(DAY));

// --- BOUNDS area (issue 36 sweep): backfill, operator actions, admin API queries ---

/// A backfill's cap on runs (`max_runs` in the API, `--max-runs` on the command line).
pub(crate) const BACKFILL_MAX_RUNS: CountRange = CountRange::new(1, 1_000_000);
/// How long a pause or a snooze lasts when given as a duration (`--for`).
pub(crate) const HOLD_FOR: DurationRange = DurationRange::new(secs(1), secs(10 * YEAR));

/// Owners, and labels, of one config entry (`owners`, `labels`).
pub(crate) const TAGS_PER_TASK: CountRange = CountRange::new(0, 100);
/// Characters of an owner or of a label's value.
pub(crate) const TAG_LEN: CountRange = CountRange::new(0, 256);

/// `limit` of `GET /api/runs` and `GET /api/backfills`.
pub(crate) const API_LIST_LIMIT: CountRange = CountRange::new(1, 500);
/// `limit` of `GET /api/incidents`.
pub(crate) const API_INCIDENTS_LIMIT: CountRange = CountRange::new(1, 1_000);
/// `count` of `GET /api/ticks`.
pub(crate) const API_TICKS_COUNT: CountRange = CountRange::new(1, 200);
/// `count` (next fire times) and `runs` of `GET /api/tasks/{name}`.
pub(crate) const API_TASK_DETAIL: CountRange = CountRange::new(1, 100);
/// `limit` of `GET /api/tasks/{name}/instances`.
pub(crate) const API_INSTANCES_LIMIT: CountRange = CountRange::new(1, 1_000);
/// `runs` of `GET /api/tasks/{name}/instances` and `.../instances/{key}`.
pub(crate) const API_INSTANCE_RUNS: CountRange = CountRange::new(0, 30);
/// `ticks` (each instance's strip) of `GET /api/tasks/{name}/instances` and `.../instances/{key}`.
pub(crate) const API_INSTANCE_TICKS: CountRange = CountRange::new(0, 30);

/// The node's lock lifetime (`lock_lifetime`, `SCHEDULER_LOCK_LIFETIME`, a task's
/// `lock_lifetime`).
pub(crate) const LOCK_LIFETIME: DurationRange = DurationRange::new(ms(300), secs(DAY));
/// Handler slots of a node (`max_concurrent`, `SCHEDULER_MAX_CONCURRENT`).
pub(crate) const MAX_CONCURRENT: CountRange = CountRange::new(1, 1_000_000);
/// How long a stopping node waits for its runs (`shutdown_timeout`,
/// `SCHEDULER_SHUTDOWN_TIMEOUT`).
pub(crate) const SHUTDOWN_TIMEOUT: DurationRange = DurationRange::new(ms(0), secs(DAY));
/// How often a node looks for due work without a wake-up (`poll_interval`,
/// `SCHEDULER_POLL_INTERVAL`).
pub(crate) const POLL_INTERVAL: DurationRange = DurationRange::new(ms(10), secs(DAY));
/// How far a claim may run ahead of its ticks (`max_claim_ahead`, `SCHEDULER_MAX_CLAIM_AHEAD`).
pub(crate) const MAX_CLAIM_AHEAD: DurationRange = DurationRange::new(ms(0), secs(HOUR));
/// How often a node records that it is alive (`heartbeat_interval`).
pub(crate) const HEARTBEAT_INTERVAL: DurationRange = DurationRange::new(ms(10), secs(HOUR));
/// How long finished runs are kept (`run_retention`, `SCHEDULER_RUN_RETENTION`).
pub(crate) const RUN_RETENTION: DurationRange = DurationRange::new(secs(1), secs(1000 * YEAR));
/// How often the config source is read (`config_poll_interval`,
/// `SCHEDULER_CONFIG_POLL_INTERVAL`).
pub(crate) const CONFIG_POLL_INTERVAL: DurationRange = DurationRange::new(ms(100), secs(DAY));
/// The timeout of a request for an HTTP config source (`SCHEDULER_CONFIG_TIMEOUT`).
pub(crate) const CONFIG_HTTP_TIMEOUT: DurationRange =
    DurationRange::new(ms(100), secs(10 * MINUTE));
/// How late a tick may start before it counts as missed (`missed_grace`,
/// `SCHEDULER_MISSED_GRACE`).
pub(crate) const MISSED_GRACE: DurationRange = DurationRange::new(secs(1), secs(YEAR));
/// How long one run may take (`default_timeout`, `SCHEDULER_DEFAULT_TIMEOUT`, a task's
/// `timeout`).
pub(crate) const TASK_TIMEOUT: DurationRange = DurationRange::new(ms(1), secs(YEAR));
/// Retries of a failed run (`default_retries`, `SCHEDULER_DEFAULT_RETRIES`, a task's
/// `retries`).
pub(crate) const TASK_RETRIES: CountRange = CountRange::new(0, 10_000);
/// The pause before a retry (`default_backoff`, `SCHEDULER_DEFAULT_BACKOFF`, a task's
/// `backoff`); doubled per attempt, capped at a day.
pub(crate) const TASK_BACKOFF: DurationRange = DurationRange::new(ms(1), secs(DAY));
/// Store connections of a node (`SCHEDULER_MAX_CONNECTIONS`).
pub(crate) const MAX_CONNECTIONS: CountRange = CountRange::new(1, 10_000);
/// The admin server's connections (`SCHEDULER_ADMIN_MAX_CONNECTIONS`).
pub(crate) const ADMIN_MAX_CONNECTIONS: CountRange = CountRange::new(1, 100_000);
/// The admin server's timeouts (`SCHEDULER_ADMIN_HEADER_TIMEOUT`, `SCHEDULER_ADMIN_IDLE_TIMEOUT`,
/// `SCHEDULER_ADMIN_REQUEST_TIMEOUT`).
pub(crate) const ADMIN_TIMEOUT: DurationRange = DurationRange::new(ms(100), secs(HOUR));
/// Heavy reads the admin server serves at once (`SCHEDULER_ADMIN_MAX_CONCURRENT_READS`).
pub(crate) const ADMIN_MAX_CONCURRENT_READS: CountRange = CountRange::new(1, 1_000);

// PARSERS (issue 36): what a config document may be before a parser sees it.
/// The size of a config document, in bytes (a file, an HTTP body, a config centre's value).
pub(crate) const CONFIG_DOCUMENT_BYTES: CountRange = CountRange::new(0, 8 * 1024 * 1024);
/// How deep a config document nests: collections in collections (a task's calendar's weekly
/// window's days is 7 levels deep).
pub(crate) const CONFIG_DOCUMENT_DEPTH: CountRange = CountRange::new(1, 32);
// End of PARSERS.

// Isolation area: the limits of an isolated task's process (`#[task(isolation = "process", ...)]`),
// checked by the macro at compile time with the same numbers (a test below keeps them alike) and
// again when the process is started.

/// `memory_limit`, in bytes (`RLIMIT_DATA`).
pub(crate) const MEMORY_LIMIT: CountRange = CountRange::new(64 << 20, 1 << 50);
/// `max_processes` (`RLIMIT_NPROC`, counted over the node's user).
pub(crate) const MAX_PROCESSES: CountRange = CountRange::new(16, 4_194_304);
/// `cpu_limit`, whole seconds (`RLIMIT_CPU`).
pub(crate) const CPU_LIMIT: DurationRange = DurationRange::new(secs(1), secs(YEAR));
/// `max_file_size`, in bytes (`RLIMIT_FSIZE`).
pub(crate) const MAX_FILE_SIZE: CountRange = CountRange::new(1 << 10, 1 << 50);
// Shared limits (issue 39).
/// The size of a limit shared by tasks (the config document's `limits`).
pub(crate) const LIMIT_SIZE: CountRange = CountRange::new(1, 100_000);
/// The limits one config document may declare.
pub(crate) const LIMITS_PER_DOCUMENT: CountRange = CountRange::new(0, 1_000);

/// Every range, by the name it has in `docs/limits.md`.
#[cfg_attr(not(test), allow(dead_code))] // the listing is read by tests
pub(crate) const ALL: &[(&str, Range)] = &[
    ("sla.start_within", Range::Duration(SLA_START_WITHIN)),
    ("sla.warn_after", Range::Duration(SLA_WARN_AFTER)),
    ("sla.remind_every", Range::Duration(SLA_REMIND_EVERY)),
    (
        "sla.alert_after_failures",
        Range::Count(SLA_ALERT_AFTER_FAILURES),
    ),
    (
        "channel `timeout`, SCHEDULER_WEBHOOK_TIMEOUT",
        Range::Duration(DELIVERY_TIMEOUT),
    ),
    (
        "backfill pace (`pace_ms`, `--pace`)",
        Range::Duration(BACKFILL_PACE),
    ),
    (
        "`jitter` (attribute, config entry, instance)",
        Range::Duration(JITTER),
    ),
    // --- BOUNDS area ---
    (
        "backfill cap on runs (`max_runs`, `--max-runs`)",
        Range::Count(BACKFILL_MAX_RUNS),
    ),
    (
        "pause or snooze duration (`--for`)",
        Range::Duration(HOLD_FOR),
    ),
    (
        "owners, labels of a config entry",
        Range::Count(TAGS_PER_TASK),
    ),
    (
        "characters of an owner (not blank), of a label's value",
        Range::Count(TAG_LEN),
    ),
    (
        "`limit` of GET /api/runs, /api/backfills",
        Range::Count(API_LIST_LIMIT),
    ),
    (
        "`limit` of GET /api/incidents",
        Range::Count(API_INCIDENTS_LIMIT),
    ),
    ("`count` of GET /api/ticks", Range::Count(API_TICKS_COUNT)),
    (
        "`count`, `runs` of GET /api/tasks/{name}",
        Range::Count(API_TASK_DETAIL),
    ),
    (
        "`limit` of GET /api/tasks/{name}/instances",
        Range::Count(API_INSTANCES_LIMIT),
    ),
    (
        "`runs` of GET /api/tasks/{name}/instances, .../instances/{key}",
        Range::Count(API_INSTANCE_RUNS),
    ),
    (
        "`ticks` of GET /api/tasks/{name}/instances, .../instances/{key}",
        Range::Count(API_INSTANCE_TICKS),
    ),
    ("lock_lifetime", Range::Duration(LOCK_LIFETIME)),
    ("max_concurrent", Range::Count(MAX_CONCURRENT)),
    ("shutdown_timeout", Range::Duration(SHUTDOWN_TIMEOUT)),
    ("poll_interval", Range::Duration(POLL_INTERVAL)),
    ("max_claim_ahead", Range::Duration(MAX_CLAIM_AHEAD)),
    ("heartbeat_interval", Range::Duration(HEARTBEAT_INTERVAL)),
    ("run_retention", Range::Duration(RUN_RETENTION)),
    (
        "config_poll_interval",
        Range::Duration(CONFIG_POLL_INTERVAL),
    ),
    (
        "SCHEDULER_CONFIG_TIMEOUT",
        Range::Duration(CONFIG_HTTP_TIMEOUT),
    ),
    ("missed_grace", Range::Duration(MISSED_GRACE)),
    (
        "task timeout (`timeout`, `default_timeout`)",
        Range::Duration(TASK_TIMEOUT),
    ),
    (
        "task retries (`retries`, `default_retries`)",
        Range::Count(TASK_RETRIES),
    ),
    (
        "task backoff (`backoff`, `default_backoff`)",
        Range::Duration(TASK_BACKOFF),
    ),
    ("SCHEDULER_MAX_CONNECTIONS", Range::Count(MAX_CONNECTIONS)),
    (
        "SCHEDULER_ADMIN_MAX_CONNECTIONS",
        Range::Count(ADMIN_MAX_CONNECTIONS),
    ),
    (
        "SCHEDULER_ADMIN_HEADER_TIMEOUT, _IDLE_TIMEOUT, _REQUEST_TIMEOUT",
        Range::Duration(ADMIN_TIMEOUT),
    ),
    (
        "SCHEDULER_ADMIN_MAX_CONCURRENT_READS",
        Range::Count(ADMIN_MAX_CONCURRENT_READS),
    ),
    // PARSERS (issue 36).
    (
        "config document size, in bytes",
        Range::Count(CONFIG_DOCUMENT_BYTES),
    ),
    (
        "config document nesting depth",
        Range::Count(CONFIG_DOCUMENT_DEPTH),
    ),
    // Isolation area.
    ("task `memory_limit`", Range::Size(MEMORY_LIMIT)),
    ("task `max_processes`", Range::Count(MAX_PROCESSES)),
    ("task `cpu_limit`", Range::Duration(CPU_LIMIT)),
    ("task `max_file_size`", Range::Size(MAX_FILE_SIZE)),
    // Shared limits area.
    (
        "size of a shared limit (`limits`)",
        Range::Count(LIMIT_SIZE),
    ),
    (
        "shared limits a config document declares",
        Range::Count(LIMITS_PER_DOCUMENT),
    ),
];

#[cfg(test)]
mod tests;
