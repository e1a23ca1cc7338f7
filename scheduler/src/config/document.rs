//! The config document and its formats: JSON, TOML and YAML, parsed into one shape.
//!
//! This file owns parsing and format detection only. It does not check task names, cron
//! expressions or zones against anything; that is [`validate`](super::validate)'s job.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;
use std::str::FromStr;

use serde::Deserialize;
use serde::de::{self, MapAccess, SeqAccess, Visitor};

use super::{ConfigError, TaskSla};
use crate::schedule::{CalendarRules, OnBlocked};

/// One entry of the config document.
///
/// Build one with a struct literal ending in `..Default::default()`, so later optional fields
/// do not break the code.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct TaskConfig {
    /// The registered task's name.
    pub name: String,
    /// Whether the task should be scheduled.
    pub enabled: bool,
    /// The cron expression.
    pub cron: String,
    /// IANA zone; the scheduler's default zone when absent.
    #[serde(default)]
    pub timezone: Option<String>,
    /// Service levels: start deadline, run-time warning, wall-clock deadline, failures before
    /// alerting, reminders (see [`TaskSla`]).
    #[serde(default)]
    pub sla: Option<TaskSla>,
    /// When the task must not fire: a calendar of the document's `calendars` by name
    /// (`"cn-holidays"`), rules written here (`{"weekly": [{"days": ["sat", "sun"]}]}`), or a
    /// list of both. See [`crate::schedule::calendar`].
    #[serde(default)]
    pub calendar: Option<CalendarRef>,
    /// What becomes of a tick the calendar blocks: `skip` (the default) or `next_allowed`.
    #[serde(default)]
    pub on_blocked: Option<OnBlocked>,
    /// Who answers for the task: e-mail addresses or chat handles. Its alerts name them and are
    /// routed by them (see [`crate::channels`]); none: the node's default owners.
    #[serde(default)]
    pub owners: Vec<String>,
    /// Free-form labels (`team = "ads"`), shown with the task and matched by alert routes.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// How many runs each tick is split into (see [`Shard`](crate::Shard)): a count from 1 to
    /// 1,000 (`shards: 4`), or `nodes` for a broadcast, one
    /// run on each node alive at the tick (`shards: nodes`); the task attribute's `shards` (else
    /// 1) when absent. Any other value refuses the entry (check-config names it).
    #[serde(default)]
    pub shards: Option<ShardsEntry>,
    /// Instances of the task (each a schedule of its own named by a key, with arguments; see
    /// [`InstanceConfig`](super::InstanceConfig)). The reconciler owns them: it creates, changes and disables them
    /// (never deletes), and never touches an instance made at run time.
    #[serde(default)]
    pub instances: Vec<super::InstanceConfig>,
    /// A window (`"30s"`) each tick starts within, at a fixed offset for the task (and an
    /// instance's key) and the tick, so that tasks on one schedule do not all start in the same
    /// second; overrides the attribute's `jitter`. From `0s` (none) to `1day`; a window longer
    /// than the gap between two ticks is cut to it. See `docs/configuration.md`.
    #[serde(default)]
    pub jitter: Option<String>,
    /// The limit shared with other tasks its runs hold: a name of the document's `limits`
    /// (`limit: warehouse-db`); the task attribute's `limit` when absent. An entry naming a
    /// limit the document does not declare is refused. See `docs/shared-limits.md`.
    #[serde(default)]
    pub limit: Option<String>,
}

/// A task's `shards` as written: a number or a word, checked when the document is validated
/// (so a wrong value refuses its entry with a message instead of failing the whole document).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ShardsEntry {
    /// `shards: 4`.
    Count(i64),
    /// `shards: nodes` (or any other value, written out: refused when validated).
    Word(String),
}

impl<'de> Deserialize<'de> for ShardsEntry {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ShardsVisitor;

        impl Visitor<'_> for ShardsVisitor {
            type Value = ShardsEntry;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a shard count from 1 to 1000, or `nodes`")
            }

            fn visit_i64<E: de::Error>(self, v: i64) -> Result<ShardsEntry, E> {
                Ok(ShardsEntry::Count(v))
            }

            fn visit_u64<E: de::Error>(self, v: u64) -> Result<ShardsEntry, E> {
                Ok(i64::try_from(v).map_or(ShardsEntry::Word(v.to_string()), ShardsEntry::Count))
            }

            fn visit_f64<E: de::Error>(self, v: f64) -> Result<ShardsEntry, E> {
                Ok(ShardsEntry::Word(v.to_string()))
            }

            fn visit_bool<E: de::Error>(self, v: bool) -> Result<ShardsEntry, E> {
                Ok(ShardsEntry::Word(v.to_string()))
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<ShardsEntry, E> {
                Ok(ShardsEntry::Word(v.to_owned()))
            }
        }

        deserializer.deserialize_any(ShardsVisitor)
    }
}

impl ShardsEntry {
    /// The shard count this entry asks for, or why it cannot be one.
    pub fn count(&self) -> Result<super::ShardCount, super::InvalidShardCount> {
        match self {
            ShardsEntry::Count(n) => n.to_string().parse(),
            ShardsEntry::Word(word) => word.parse(),
        }
    }
}

/// A task's `calendar`: one or more calendars, each named or written inline.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CalendarRef(pub Vec<CalendarItem>);

/// One calendar a task refers to.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CalendarItem {
    /// A calendar of the document's `calendars`, by name.
    Named(String),
    /// Rules written on the task itself.
    Inline(CalendarRules),
}

impl<'de> Deserialize<'de> for CalendarItem {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ItemVisitor;
        impl<'de> Visitor<'de> for ItemVisitor {
            type Value = CalendarItem;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a calendar name or a calendar's rules (dates, weekly, ranges)")
            }
            fn visit_str<E: de::Error>(self, name: &str) -> Result<Self::Value, E> {
                Ok(CalendarItem::Named(name.to_owned()))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                CalendarRules::deserialize(de::value::MapAccessDeserializer::new(map))
                    .map(CalendarItem::Inline)
            }
        }
        deserializer.deserialize_any(ItemVisitor)
    }
}

impl<'de> Deserialize<'de> for CalendarRef {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct RefVisitor;
        impl<'de> Visitor<'de> for RefVisitor {
            type Value = CalendarRef;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(
                    "a calendar name, a calendar's rules (dates, weekly, ranges), or a list of them",
                )
            }
            fn visit_str<E: de::Error>(self, name: &str) -> Result<Self::Value, E> {
                Ok(CalendarRef(vec![CalendarItem::Named(name.to_owned())]))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                CalendarRules::deserialize(de::value::MapAccessDeserializer::new(map))
                    .map(|rules| CalendarRef(vec![CalendarItem::Inline(rules)]))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = seq.next_element::<CalendarItem>()? {
                    items.push(item);
                }
                Ok(CalendarRef(items))
            }
        }
        deserializer.deserialize_any(RefVisitor)
    }
}

/// The whole config document: `{"tasks":[...]}`.
///
/// `tasks` is required (an empty or truncated file must not read as "run nothing"); write
/// `"tasks": []` to schedule nothing on purpose.
///
/// ```
/// use scheduler::config::{ConfigDocument, ConfigFormat};
///
/// let yaml = r#"
/// version: 7
/// tasks:
///   - name: syncAdvertiserReport
///     enabled: true
///     cron: 0 */5 * * * *
///     timezone: Asia/Shanghai
///     owners: [ads-oncall@example.com, "@li.lei"]
///     labels: {team: ads}
/// "#;
/// let doc = ConfigDocument::parse(yaml, ConfigFormat::Yaml, "tasks.yaml")?;
/// assert_eq!(doc.version, Some(7));
/// assert_eq!(doc.tasks[0].cron, "0 */5 * * * *");
/// assert_eq!(doc.tasks[0].owners, ["ads-oncall@example.com", "@li.lei"]);
/// assert_eq!(doc.tasks[0].labels["team"], "ads");
///
/// // A typo is refused by name, with its position.
/// let err = ConfigDocument::parse(
///     r#"{"tasks":[{"name":"a","enable":true,"cron":"* * * * * *"}]}"#,
///     ConfigFormat::Json,
///     "tasks.json",
/// )
/// .unwrap_err();
/// assert!(err.to_string().contains("unknown field `enable`"), "{err}");
/// assert!(err.to_string().contains("tasks.json"), "{err}");
/// # Ok::<(), scheduler::config::ConfigError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct ConfigDocument {
    /// Optional monotonically increasing revision of the document.
    #[serde(default)]
    pub version: Option<i64>,
    /// Calendars tasks refer to by name (see [`TaskConfig::calendar`]).
    #[serde(default)]
    pub calendars: BTreeMap<String, CalendarRules>,
    /// Limits shared by tasks, by name, each with its size (`limits: {warehouse-db: 2}`): at
    /// most that many runs of the tasks naming the limit ([`TaskConfig::limit`], or the task
    /// attribute's `limit`) run at once across the nodes. A size outside 1 to 100,000 refuses
    /// the limit (it keeps its last size) and every entry naming it. See
    /// `docs/shared-limits.md`.
    #[serde(default)]
    pub limits: BTreeMap<String, i64>,
    /// The task entries.
    pub tasks: Vec<TaskConfig>,
}

impl ConfigDocument {
    /// Parses `text` as `format`; `source_name` (a path or redacted URL) goes into errors.
    ///
    /// A leading byte-order mark (as some Windows editors write) is ignored. A text larger than
    /// 8 MiB or nested deeper than 32 levels is refused before it is parsed, with an error naming
    /// the limit (see `docs/limits.md`).
    pub fn parse(text: &str, format: ConfigFormat, source_name: &str) -> Result<Self, ConfigError> {
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        // Size and depth first, so that no parser ever sees a hostile document.
        if let Err(refused) = super::prescan::check(text, format) {
            return Err(ConfigError::Parse {
                source_name: source_name.to_owned(),
                format,
                line: refused.line,
                column: refused.column,
                message: refused.message,
            });
        }
        match format {
            ConfigFormat::Json => serde_json::from_str(text).map_err(|e| {
                let (line, column) = (e.line(), e.column());
                parse_error(
                    source_name,
                    format,
                    (line > 0).then_some(line),
                    (line > 0).then_some(column.max(1)),
                    e.to_string(),
                )
            }),
            ConfigFormat::Toml => toml::from_str(text).map_err(|e| {
                let (line, column) = match e.span() {
                    Some(span) => {
                        let (line, column) = line_column(text, span.start);
                        (Some(line), Some(column))
                    }
                    None => (None, None),
                };
                parse_error(
                    source_name,
                    format,
                    line,
                    column,
                    e.message().trim().to_owned(),
                )
            }),
            ConfigFormat::Yaml => serde_norway::from_str(text).map_err(|e| {
                let location = e.location();
                parse_error(
                    source_name,
                    format,
                    location.as_ref().map(|l| l.line()),
                    location.as_ref().map(|l| l.column()),
                    e.to_string(),
                )
            }),
        }
    }

    /// Parses `text`, detecting its format from the content (see [`ConfigFormat::sniff`]).
    pub fn parse_detected(text: &str, source_name: &str) -> Result<Self, ConfigError> {
        Self::parse(text, ConfigFormat::sniff(text), source_name)
    }

    /// Parses a JSON document.
    pub fn from_json(text: &str) -> Result<Self, ConfigError> {
        Self::parse(text, ConfigFormat::Json, "<json>")
    }
}

fn parse_error(
    source_name: &str,
    format: ConfigFormat,
    line: Option<usize>,
    column: Option<usize>,
    message: String,
) -> ConfigError {
    // serde_json and serde_norway append " at line L column C" to their messages; the position
    // is reported in its own fields, so drop the duplicate.
    let message = match (line, column) {
        (Some(line), Some(column)) => {
            message.replacen(&format!(" at line {line} column {column}"), "", 1)
        }
        _ => message,
    };
    ConfigError::Parse {
        source_name: source_name.to_owned(),
        format,
        line,
        column,
        message,
    }
}

/// 1-based line and column (in characters) of byte `offset` in `text`.
pub(super) fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before[line_start..].chars().count() + 1;
    (line, column)
}

/// A config document's format.
///
/// Chosen, in order, by an explicit setting, the file extension ([`from_path`](Self::from_path))
/// or the HTTP `Content-Type` ([`from_content_type`](Self::from_content_type)), and otherwise
/// sniffed from the text ([`sniff`](Self::sniff)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ConfigFormat {
    /// JSON.
    Json,
    /// TOML, tasks as `[[tasks]]` tables.
    Toml,
    /// YAML (one document).
    Yaml,
}

impl ConfigFormat {
    /// The format named by a path's extension: `.json`, `.toml`, `.yaml` or `.yml`
    /// (case-insensitive).
    ///
    /// ```
    /// use scheduler::config::ConfigFormat;
    /// assert_eq!(ConfigFormat::from_path("/etc/app/tasks.YML"), Some(ConfigFormat::Yaml));
    /// assert_eq!(ConfigFormat::from_path("tasks.conf"), None);
    /// ```
    pub fn from_path(path: impl AsRef<Path>) -> Option<Self> {
        let ext = path.as_ref().extension()?.to_str()?.to_ascii_lowercase();
        match ext.as_str() {
            "json" => Some(Self::Json),
            "toml" => Some(Self::Toml),
            "yaml" | "yml" => Some(Self::Yaml),
            _ => None,
        }
    }

    /// The format named by an HTTP `Content-Type`, ignoring parameters such as `charset`.
    ///
    /// Generic types (`text/plain`, `application/octet-stream`) name no format.
    ///
    /// ```
    /// use scheduler::config::ConfigFormat;
    /// assert_eq!(
    ///     ConfigFormat::from_content_type("application/json; charset=utf-8"),
    ///     Some(ConfigFormat::Json)
    /// );
    /// assert_eq!(ConfigFormat::from_content_type("application/x-yaml"), Some(ConfigFormat::Yaml));
    /// assert_eq!(ConfigFormat::from_content_type("text/plain"), None);
    /// ```
    pub fn from_content_type(content_type: &str) -> Option<Self> {
        let essence = content_type
            .split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase();
        let (kind, subtype) = essence.split_once('/')?;
        if !matches!(kind, "application" | "text") {
            return None;
        }
        let subtype = subtype.strip_prefix("x-").unwrap_or(subtype);
        // Structured-syntax suffixes: application/vnd.company.tasks+json.
        let subtype = subtype
            .rsplit_once('+')
            .map_or(subtype, |(_, suffix)| suffix);
        match subtype {
            "json" => Some(Self::Json),
            "toml" => Some(Self::Toml),
            "yaml" | "yml" => Some(Self::Yaml),
            _ => None,
        }
    }

    /// Guesses the format from the text: a leading `{` is JSON; a table header (`[tasks]`,
    /// `[[tasks]]`) or a `key = value` line is TOML; anything else is YAML. Blank lines, `#`
    /// comments and a byte-order mark are skipped first.
    ///
    /// ```
    /// use scheduler::config::ConfigFormat;
    /// assert_eq!(ConfigFormat::sniff(r#"  {"tasks": []}"#), ConfigFormat::Json);
    /// assert_eq!(ConfigFormat::sniff("# tasks\nversion = 3\n[[tasks]]\n"), ConfigFormat::Toml);
    /// assert_eq!(ConfigFormat::sniff("tasks:\n  - name: a\n"), ConfigFormat::Yaml);
    /// ```
    pub fn sniff(text: &str) -> Self {
        let text = text.trim_start_matches('\u{feff}');
        let first = text
            .lines()
            .map(str::trim)
            .find(|line| !line.is_empty() && !line.starts_with('#'));
        let Some(first) = first else {
            return Self::Yaml;
        };
        if first.starts_with('{') {
            return Self::Json;
        }
        if first.starts_with('[') {
            return Self::Toml;
        }
        let is_toml_key_value = first.split_once('=').is_some_and(|(key, _)| {
            let key = key.trim();
            !key.is_empty()
                && !key.contains(':')
                && key.chars().all(|c| {
                    c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '"' | '\'' | ' ')
                })
        });
        if is_toml_key_value {
            Self::Toml
        } else {
            Self::Yaml
        }
    }

    /// The lowercase name: `json`, `toml` or `yaml`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Json => "json",
            Self::Toml => "toml",
            Self::Yaml => "yaml",
        }
    }
}

impl fmt::Display for ConfigFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str().to_uppercase().as_str())
    }
}

impl FromStr for ConfigFormat {
    type Err = ConfigError;

    /// Accepts `json`, `toml`, `yaml` or `yml`, case-insensitive.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "json" => Ok(Self::Json),
            "toml" => Ok(Self::Toml),
            "yaml" | "yml" => Ok(Self::Yaml),
            _ => Err(ConfigError::invalid(
                "format",
                format!("unknown config format `{s}`; write `json`, `toml` or `yaml`"),
            )),
        }
    }
}

#[cfg(test)]
mod tests;
