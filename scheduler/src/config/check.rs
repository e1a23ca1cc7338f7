//! `check-config`: validates a config file for operators' CI, without any database.
//!
//! Lists every problem at once (parse errors, refusals) and, for each accepted task, its zone,
//! enabled flag, calendar and next three fire times (its calendar applied). The CLI wiring (`myapp check-config tasks.json`,
//! non-zero exit unless [`CheckReport::is_ok`]) lives in `cli.rs`, not here.

use std::fmt;
use std::path::Path;

use chrono::{DateTime, SecondsFormat, Utc};
use chrono_tz::Tz;

use super::{ConfigDocument, ConfigError, ConfigFormat, Refusal, validate};
use crate::TaskRegistry;

/// How many upcoming fire times the report shows per task.
const FIRE_TIMES_SHOWN: usize = 3;

/// The result of [`check_config`].
#[derive(Debug)]
#[non_exhaustive]
pub struct CheckReport {
    /// The file checked.
    pub source: String,
    /// The document's `version`, if it parsed and has one.
    pub version: Option<i64>,
    /// Every problem found; empty means the config is fine.
    pub problems: Vec<CheckProblem>,
    /// The accepted tasks, by name.
    pub tasks: Vec<CheckedTask>,
    /// Registered tasks the document does not mention (not scheduled; a warning, not a problem).
    pub absent: Vec<String>,
}

/// One problem found by [`check_config`].
#[derive(Debug)]
#[non_exhaustive]
pub enum CheckProblem {
    /// The file could not be read or parsed; nothing else was checked.
    Unreadable(ConfigError),
    /// An entry was refused.
    Refused(Refusal),
    /// A limit of the document's `limits` was refused (the text says which and why).
    Limit(String),
}

impl fmt::Display for CheckProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unreadable(e) => write!(f, "{e}"),
            Self::Refused(r) => write!(f, "{r}"),
            Self::Limit(problem) => write!(f, "{problem}"),
        }
    }
}

/// An accepted task in a [`CheckReport`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CheckedTask {
    /// The task name.
    pub name: String,
    /// Whether it is enabled.
    pub enabled: bool,
    /// The cron expression as written.
    pub cron: String,
    /// The zone it is read in (the entry's, or the default).
    pub timezone: Tz,
    /// Its calendar, described (`calendar cn-holidays (skip)`), if it has one.
    pub calendar: Option<String>,
    /// The next fire times after `now`, in UTC (fewer than three if the schedule ends), the
    /// calendar's blocked ticks left out or moved.
    pub next_fire_times: Vec<DateTime<Utc>>,
    /// Its service levels, checked, if the entry has an `sla` block.
    pub sla: Option<super::Sla>,
    /// Who answers for it, as written (empty: the node's default owners).
    pub owners: Vec<String>,
    /// Its labels.
    pub labels: std::collections::BTreeMap<String, String>,
    /// How many runs each tick has (the entry's `shards`, else the attribute's, else 1; see
    /// [`Shard`](crate::Shard)).
    pub shards: super::ShardCount,
    /// The window each tick starts within (the entry's `jitter`, else the attribute's; zero:
    /// none).
    pub jitter: std::time::Duration,
    /// When each of [`next_fire_times`](Self::next_fire_times) starts: the tick itself, or the
    /// tick plus the task's offset within its jitter window.
    pub next_starts: Vec<DateTime<Utc>>,
    /// The limit shared by tasks its runs hold, with the size the document gives it.
    pub limit: Option<(String, u32)>,
}

impl CheckReport {
    /// Whether no problem was found.
    pub fn is_ok(&self) -> bool {
        self.problems.is_empty()
    }
}

/// Checks the config file at `path`: format by extension (else sniffed), then parsing, then
/// [`validate`] against `registry`. Fire times are computed after `now`.
///
/// ```no_run
/// use scheduler::TaskRegistry;
/// use scheduler::config::check_config;
///
/// let registry = TaskRegistry::collect().expect("no duplicate task names");
/// let report = check_config("tasks.json", &registry, chrono_tz::UTC, chrono::Utc::now());
/// print!("{report}");
/// std::process::exit(if report.is_ok() { 0 } else { 1 });
/// ```
pub fn check_config(
    path: impl AsRef<Path>,
    registry: &TaskRegistry,
    default_tz: Tz,
    now: DateTime<Utc>,
) -> CheckReport {
    let path = path.as_ref();
    let source_name = path.display().to_string();
    match read_capped(path) {
        Ok(text) => check_config_text(
            &text,
            ConfigFormat::from_path(path),
            &source_name,
            registry,
            default_tz,
            now,
        ),
        Err(source) => CheckReport {
            source: source_name.clone(),
            version: None,
            problems: vec![CheckProblem::Unreadable(ConfigError::Io {
                source_name,
                source,
            })],
            tasks: Vec::new(),
            absent: Vec::new(),
        },
    }
}

/// The file's text, read no further than the size limit (a larger file is refused as such).
fn read_capped(path: &Path) -> std::io::Result<String> {
    use std::io::Read;
    let limit = crate::bounds::CONFIG_DOCUMENT_BYTES.max;
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(limit + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(std::io::Error::other(super::prescan::too_large()));
    }
    String::from_utf8(bytes).map_err(|e| {
        std::io::Error::new(std::io::ErrorKind::InvalidData, e.utf8_error().to_string())
    })
}

/// Like [`check_config`], for text already in memory; `format` `None` means sniffed.
///
/// ```
/// use scheduler::TaskRegistry;
/// use scheduler::config::{ConfigFormat, check_config_text};
///
/// let report = check_config_text(
///     "[[tasks]]\nname = \"gone\"\nenabled = true\ncron = \"0 0 * * * *\"\n",
///     Some(ConfigFormat::Toml),
///     "tasks.toml",
///     &TaskRegistry::default(),
///     chrono_tz::UTC,
///     chrono::Utc::now(),
/// );
/// assert!(!report.is_ok());
/// assert!(report.to_string().contains("task `gone`: no task with this name is registered"));
/// ```
pub fn check_config_text(
    text: &str,
    format: Option<ConfigFormat>,
    source_name: &str,
    registry: &TaskRegistry,
    default_tz: Tz,
    now: DateTime<Utc>,
) -> CheckReport {
    let mut report = CheckReport {
        source: source_name.to_owned(),
        version: None,
        problems: Vec::new(),
        tasks: Vec::new(),
        absent: Vec::new(),
    };
    let format = format.unwrap_or_else(|| ConfigFormat::sniff(text));
    let doc = match ConfigDocument::parse(text, format, source_name) {
        Ok(doc) => doc,
        Err(e) => {
            report.problems.push(CheckProblem::Unreadable(e));
            return report;
        }
    };
    report.version = doc.version;
    let validated = validate(&doc, registry, default_tz);
    report.problems = validated
        .limit_problems
        .into_iter()
        .map(CheckProblem::Limit)
        .chain(validated.refused.into_iter().map(CheckProblem::Refused))
        .collect();
    let sizes = validated.limits;
    report.tasks = validated
        .desired
        .into_values()
        .map(|task| CheckedTask {
            next_starts: task
                .schedule
                .iter_after(now)
                .take(FIRE_TIMES_SHOWN)
                .map(|tick| {
                    crate::ticks::jitter::start_of(&task.name, &task.schedule, tick, task.jitter)
                })
                .collect(),
            jitter: task.jitter,
            limit: task
                .limit
                .as_ref()
                .and_then(|l| sizes.get(l).map(|size| (l.clone(), *size))),
            shards: if task.broadcast {
                crate::shard::ShardCount::Nodes
            } else {
                crate::shard::ShardCount::Fixed(task.shards)
            },
            next_fire_times: task
                .schedule
                .iter_after(now)
                .take(FIRE_TIMES_SHOWN)
                .collect(),
            cron: task.schedule.expression().to_owned(),
            timezone: task.schedule.timezone(),
            sla: task.sla,
            calendar: task.schedule.calendar().map(|c| c.describe()),
            enabled: task.enabled,
            owners: task.owners,
            labels: task.labels,
            name: task.name,
        })
        .collect();
    report.absent = validated.absent;
    report
}

/// `text` with its control characters (an escape sequence, a carriage return, a newline inside
/// a value) written as escapes, so what a config says reaches the terminal as text.
fn shown(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(char::is_control) {
        return std::borrow::Cow::Borrowed(text);
    }
    std::borrow::Cow::Owned(crate::bounds::printable_up_to(text, usize::MAX))
}

/// `start within 30s, warn after 10m, succeed by 08:00, alert after 3 failures, remind every 1h`.
fn describe_sla(sla: &super::Sla) -> String {
    let mut parts = Vec::new();
    let human = |d: std::time::Duration| humantime::format_duration(d).to_string();
    if let Some(d) = sla.start_within {
        parts.push(format!("start within {}", human(d)));
    }
    if let Some(d) = sla.warn_after {
        parts.push(format!("warn after {}", human(d)));
    }
    if let Some(t) = sla.succeed_by {
        parts.push(format!("succeed by {t}"));
    }
    parts.push(match sla.alert_after_failures {
        1 => "alert on the first failure".to_owned(),
        n => format!("alert after {n} failures in a row"),
    });
    if let Some(d) = sla.remind_every {
        parts.push(format!("remind every {}", human(d)));
    }
    parts.join(", ")
}

impl fmt::Display for CheckReport {
    /// A listing for humans: a summary line, the problems, the accepted tasks with their next
    /// fire times, then registered tasks the document does not mention.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let version = self
            .version
            .map(|v| format!(" (version {v})"))
            .unwrap_or_default();
        match self.problems.len() {
            0 => writeln!(
                f,
                "{}{version}: ok, {} task(s)",
                shown(&self.source),
                self.tasks.len()
            )?,
            n => writeln!(
                f,
                "{}{version}: {n} problem(s), {} valid task(s)",
                shown(&self.source),
                self.tasks.len()
            )?,
        }
        for problem in &self.problems {
            writeln!(f, "  error: {}", shown(&problem.to_string()))?;
        }
        for task in &self.tasks {
            writeln!(
                f,
                "  task `{}`: {}, cron `{}`, zone {}{}{}",
                shown(&task.name),
                if task.enabled { "enabled" } else { "disabled" },
                shown(&task.cron),
                task.timezone,
                task.calendar
                    .as_deref()
                    .map(|c| format!(", {}", shown(c)))
                    .unwrap_or_default(),
                match task.shards {
                    crate::shard::ShardCount::Fixed(1) => String::new(),
                    crate::shard::ShardCount::Fixed(n) => format!(", {n} shards"),
                    crate::shard::ShardCount::Nodes => {
                        ", broadcast (one run on each live node)".to_owned()
                    }
                },
            )?;
            if !task.jitter.is_zero() {
                writeln!(
                    f,
                    "    jitter: {} (each tick starts at its own offset within it)",
                    humantime::format_duration(task.jitter)
                )?;
            }
            if let Some((limit, size)) = &task.limit {
                writeln!(
                    f,
                    "    limit: {} (at most {size} of its tasks' runs at once)",
                    shown(limit)
                )?;
            }
            if let Some(sla) = &task.sla {
                writeln!(f, "    sla: {}", describe_sla(sla))?;
            }
            if !task.owners.is_empty() {
                writeln!(f, "    owners: {}", shown(&task.owners.join(", ")))?;
            }
            if !task.labels.is_empty() {
                let labels = super::labels_text(&task.labels);
                writeln!(f, "    labels: {}", shown(&labels))?;
            }
            if task.next_fire_times.is_empty() {
                writeln!(f, "    never fires after now")?;
            }
            for (i, at) in task.next_fire_times.iter().enumerate() {
                let starts = match task.next_starts.get(i) {
                    Some(start) if start != at => format!(
                        ", starts {}",
                        start.to_rfc3339_opts(SecondsFormat::AutoSi, true)
                    ),
                    _ => String::new(),
                };
                writeln!(
                    f,
                    "    next: {}{starts}",
                    at.to_rfc3339_opts(SecondsFormat::AutoSi, true)
                )?;
            }
        }
        for name in &self.absent {
            writeln!(
                f,
                "  warning: registered task `{}` is not in the config and will not be scheduled",
                shown(name)
            )?;
        }
        Ok(())
    }
}
