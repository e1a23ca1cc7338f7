//! What the operator surfaces read of a task's instances (`crate::instance`): a page of them
//! with each row's state ([`InstanceQuery`], [`InstanceState`]), each task's instances at a
//! glance ([`InstanceSummary`]), and an instance's latest runs. The reads are
//! [`HistoryStore`](super::HistoryStore)'s `instance_states`, `instance_summaries` and
//! `latest_runs_per_instance`, written once for both backends (`reads.rs`).

use super::TaskState;

/// The most instances one read returns.
#[cfg_attr(not(any(feature = "postgres", feature = "sqlite")), allow(dead_code))]
pub const MAX_INSTANCES_PER_PAGE: u32 = 1_000;

/// Who owns an instance's row (column `instance_source`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum InstanceSource {
    /// Made at run time ([`Schedules`](crate::Schedules), the admin API): a reconcile never
    /// touches it.
    #[default]
    Runtime,
    /// Declared in the config document: the reconciler creates, changes and disables it, and
    /// an upsert of its key from Rust or the API is refused.
    Config,
}

impl InstanceSource {
    /// As stored (`config`, `runtime`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Runtime => "runtime",
            Self::Config => "config",
        }
    }

    /// The stored value read back: `config`, anything else (NULL included) the runtime's.
    pub fn parse(stored: Option<&str>) -> Self {
        match stored {
            Some("config") => Self::Config,
            _ => Self::Runtime,
        }
    }
}

/// Which instances of a task [`HistoryStore::instance_states`](super::HistoryStore::instance_states)
/// reads: by key, after `after_key` (the previous page's last key), at most `limit`; removed
/// ones (their run in flight finishing) only when asked for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct InstanceQuery {
    /// The task.
    pub task: String,
    /// Only keys containing this text, ASCII case ignored (`None`: every key).
    pub key_contains: Option<String>,
    /// Only this key (one instance).
    pub key: Option<String>,
    /// Only keys after this one (the next page).
    pub after_key: Option<String>,
    /// At most this many (1 to [`MAX_INSTANCES_PER_PAGE`]).
    pub limit: u32,
    /// Removed instances too (their run in flight finishing).
    pub removed: bool,
}

impl InstanceQuery {
    /// The first `limit` instances of `task`, by key.
    pub fn of(task: impl Into<String>, limit: u32) -> Self {
        Self {
            task: task.into(),
            limit,
            ..Self::default()
        }
    }

    /// Only keys containing `text` (ASCII case ignored).
    pub fn key_contains(mut self, text: impl Into<String>) -> Self {
        self.key_contains = Some(text.into());
        self
    }

    /// Only instance `key`, even removed (its run in flight finishing).
    pub fn key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(key.into());
        self.removed = true;
        self
    }

    /// Only keys after `key`.
    pub fn after(mut self, key: impl Into<String>) -> Self {
        self.after_key = Some(key.into());
        self
    }

    /// The `LIKE` pattern of [`key_contains`](Self::key_contains), lowercased, its wildcards
    /// escaped with `\` (`%` for every key).
    #[cfg_attr(not(any(feature = "postgres", feature = "sqlite")), allow(dead_code))]
    pub(crate) fn like_pattern(&self) -> String {
        let text = self
            .key_contains
            .as_deref()
            .unwrap_or("")
            .to_ascii_lowercase();
        let mut pattern = String::with_capacity(text.len() + 2);
        pattern.push('%');
        for c in text.chars() {
            if matches!(c, '%' | '_' | '\\') {
                pattern.push('\\');
            }
            pattern.push(c);
        }
        pattern.push('%');
        pattern
    }
}

/// An instance's row as the operator surfaces read it: its task and key, arguments, owner,
/// whether it is removed, and the row's state as a task's (its name `task/key`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct InstanceState {
    /// Its task.
    pub task: String,
    /// Its key.
    pub key: String,
    /// Its arguments as JSON text, if any.
    pub args: Option<String>,
    /// Who owns it.
    pub source: InstanceSource,
    /// Removed, its row kept until the run in flight releases its lock.
    pub removed: bool,
    /// Its own owners and labels (empty: its task's).
    pub tags: super::InstanceTags,
    /// Its own limit shared by tasks (`None`: its task's).
    pub limit: Option<String>,
    /// Its own jitter window (`None`: its task's).
    pub jitter: Option<std::time::Duration>,
    /// The row's state: schedule, next run, lock, last run, pause.
    pub state: TaskState,
}

/// A task's instances at a glance (removed ones left out), read for every task at once (or for
/// one task alone): how many it has, how many run now or failed their last run, and the latest
/// run among them.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct InstanceSummary {
    /// The task.
    pub task: String,
    /// How many instances it has.
    pub instances: u64,
    /// How many of them run now (their row locked).
    pub running: u64,
    /// How many of them failed their last run (`consecutive_failures > 0`).
    pub failing: u64,
    /// How many of them ever ran.
    pub ran: u64,
    /// The earliest next run among them, of those enabled and not paused.
    pub next_run_at: Option<chrono::DateTime<chrono::Utc>>,
    /// The instance whose run started last (`None`: none ran).
    pub latest: Option<LatestInstanceRun>,
}

/// The run that started last among a task's instances, as its instance's row records it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LatestInstanceRun {
    /// Its instance's key.
    pub key: String,
    /// When it started.
    pub started_at: chrono::DateTime<chrono::Utc>,
    /// When it ended (`None` while it runs).
    pub finished_at: Option<chrono::DateTime<chrono::Utc>>,
    /// How it ended (`None` while it runs).
    pub status: Option<super::RunStatus>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_filter_escapes_like_wildcards_and_ignores_case() {
        let q = InstanceQuery::of("t", 10);
        assert_eq!(q.like_pattern(), "%%");
        let q = q.key_contains("Tenant_4%");
        assert_eq!(q.like_pattern(), "%tenant\\_4\\%%");
    }

    #[test]
    fn a_source_reads_back_as_written() {
        for s in [InstanceSource::Runtime, InstanceSource::Config] {
            assert_eq!(InstanceSource::parse(Some(s.as_str())), s);
        }
        assert_eq!(InstanceSource::parse(None), InstanceSource::Runtime);
    }
}
