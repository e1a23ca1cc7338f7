//! What the reconciler reads and writes through the store: task rows, the changes a reconcile
//! writes, the config applied last, and the plan decided on the rows locked for it
//! ([`ConfigStore::apply_config`](super::ConfigStore::apply_config)).

use chrono::{DateTime, Utc};

use super::SkipRecord;

/// A task row as the reconciler sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TaskRow {
    /// Task name.
    pub name: String,
    /// Stored cron expression.
    pub cron: String,
    /// Stored zone.
    pub timezone: String,
    /// Stored calendar (`TaskCalendar`'s stored form), if the task has one.
    pub calendar: Option<String>,
    /// Whether enabled.
    pub enabled: bool,
    /// Next run.
    pub next_run_at: Option<DateTime<Utc>>,
    /// The tick most recently claimed: a reconcile never schedules the next run at or before it.
    pub last_scheduled_at: Option<DateTime<Utc>>,
    /// Flagged as known to neither config nor code since.
    pub orphaned_since: Option<DateTime<Utc>>,
    /// Disabled since (the skip record of its ticks is written when it is enabled again).
    pub disabled_at: Option<DateTime<Utc>>,
    /// Paused by an operator (a reconcile never changes it).
    pub paused: bool,
    /// The task's shard count as last reconciled (1: not sharded).
    pub shards: u32,
    /// The node the row is pinned to: a broadcast task's node row names its node, the task's
    /// own row is pinned to no node (`""`); `None`: any node may claim it. See [`crate::shard`].
    pub node_pin: Option<String>,
    /// An instance's row (`task/key`, see `crate::instance`) removed while a run of it was in
    /// flight, kept until its lock is released: a reconcile leaves it alone.
    pub removed: bool,
    /// An instance's arguments as JSON text, if any.
    pub args: Option<String>,
    /// Who owns an instance's row: the config (a reconcile keeps it as the document declares
    /// it) or the run time (a reconcile never changes it but with its task's `enabled`).
    pub instance_source: super::InstanceSource,
    /// The limit shared by tasks its runs hold, as last reconciled (see
    /// `docs/shared-limits.md`); `None`: none.
    pub limit: Option<String>,
    /// Its jitter window as stored (`jitter_ms`): an instance's own, or on a task's own row the
    /// task's window as last reconciled (its config entry's, else its attribute's); `None`: none
    /// stored. See `crate::ticks::jitter`.
    pub jitter: Option<std::time::Duration>,
    /// An instance's own owners and labels (empty: its task's).
    pub tags: super::InstanceTags,
}

impl TaskRow {
    /// A row with nothing scheduled, claimed or flagged yet.
    pub fn new(name: &str, cron: &str, timezone: &str, enabled: bool) -> Self {
        Self {
            name: name.to_owned(),
            cron: cron.to_owned(),
            timezone: timezone.to_owned(),
            calendar: None,
            enabled,
            next_run_at: None,
            last_scheduled_at: None,
            orphaned_since: None,
            disabled_at: None,
            paused: false,
            shards: 1,
            node_pin: None,
            removed: false,
            args: None,
            instance_source: super::InstanceSource::Runtime,
            limit: None,
            jitter: None,
            tags: super::InstanceTags::default(),
        }
    }
}

/// One change the reconciler writes. Lock columns are never part of a change.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TaskChange {
    /// Insert a new row.
    Create {
        /// Task name.
        name: String,
        /// Cron expression.
        cron: String,
        /// Zone.
        timezone: String,
        /// Calendar, stored form (`None`: none).
        calendar: Option<String>,
        /// Enabled.
        enabled: bool,
        /// First run: when its first tick starts (the tick, or shifted by its jitter).
        next_run_at: Option<DateTime<Utc>>,
        /// The tick `next_run_at` starts when jitter shifted it (`None`: it is the tick).
        next_tick: Option<DateTime<Utc>>,
    },
    /// Update schedule / enabled flag of an existing row in place.
    Update {
        /// Task name.
        name: String,
        /// Cron expression.
        cron: String,
        /// Zone.
        timezone: String,
        /// Calendar, stored form (`None`: none).
        calendar: Option<String>,
        /// Enabled.
        enabled: bool,
        /// Recomputed next run, its start (`None`: keep the stored one, and its tick).
        next_run_at: Option<DateTime<Utc>>,
        /// The tick a recomputed `next_run_at` starts when jitter shifted it (`None`: it is the
        /// tick).
        next_tick: Option<DateTime<Utc>>,
    },
    /// Set the shard count of a task's row (each of its shards' rows has one, see
    /// [`crate::shard`]); a row `task[i]` also learns its task.
    Shards {
        /// The row's name.
        name: String,
        /// The task's shard count.
        shards: u32,
        /// The node the row is pinned to (see [`TaskRow::node_pin`]); a row created for a
        /// task's shard or node takes the task's pause with it.
        node_pin: Option<String>,
    },
    /// Make a row (created or updated by a change before this one) the config's instance `key`
    /// of `task`, with `args` and its own `tags`: owned by the config, not removed; a row not
    /// paused takes its task's pause in force, as an instance made at run time does.
    ConfigInstance {
        /// The row's name (`task/key`).
        name: String,
        /// Its task.
        task: String,
        /// Its key.
        key: String,
        /// Its arguments as JSON text, if any.
        args: Option<String>,
        /// Its own owners and labels (empty: its task's).
        tags: super::InstanceTags,
    },
    /// Set the limit shared by tasks a row's runs hold (see `docs/shared-limits.md`).
    Limit {
        /// The row's name.
        name: String,
        /// The limit (`None`: none).
        limit: Option<String>,
    },
    /// Set the jitter window stored on a task's own row: the task's window as the reconcile
    /// knows it (its config entry's, else its attribute's), read by the writers that have no
    /// config (an instance made through the admin API or the command line).
    Jitter {
        /// The row's name.
        name: String,
        /// The window (`None`: none).
        window: Option<std::time::Duration>,
    },
    /// Make a created row (a broadcast instance's node row, `task/key[@node]`) a row of the
    /// instance `of` (`task/key`): its task, key, arguments, own owners, labels, limit and
    /// jitter window copied from the instance's row.
    InstanceNode {
        /// The row's name.
        name: String,
        /// The instance's own row.
        of: String,
    },
    /// Mark or clear the orphan flag of a row.
    Orphaned {
        /// Task name.
        name: String,
        /// Set (true) or clear (false).
        orphaned: bool,
    },
}

/// The last config applied by any node.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConfigState {
    /// The document's version, if it carried one.
    pub version: Option<i64>,
    /// Content digest of the document.
    pub digest: String,
    /// The node that applied it.
    pub applied_by: String,
}

impl ConfigState {
    /// The state recording a document.
    pub fn new(
        version: Option<i64>,
        digest: impl Into<String>,
        applied_by: impl Into<String>,
    ) -> Self {
        Self {
            version,
            digest: digest.into(),
            applied_by: applied_by.into(),
        }
    }
}

/// What the store holds when a reconcile is planned inside its transaction: the rows are
/// locked for it, and no claim can interleave.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ConfigSnapshot {
    /// The database clock (the statement's, not the transaction's start).
    pub db_now: DateTime<Utc>,
    /// The config applied last, if any.
    pub applied: Option<ConfigState>,
    /// Every task row.
    pub rows: Vec<TaskRow>,
}

#[cfg_attr(not(any(feature = "postgres", feature = "sqlite")), allow(dead_code))]
impl ConfigSnapshot {
    /// The snapshot of `rows` at `db_now`, the config state row read as `state` (a row with an
    /// empty digest records no document: none applied).
    pub(crate) fn of(
        db_now: DateTime<Utc>,
        state: Option<ConfigState>,
        rows: Vec<TaskRow>,
    ) -> Self {
        ConfigSnapshot {
            db_now,
            applied: state.filter(|state| !state.digest.is_empty()),
            rows,
        }
    }
}

/// What a reconcile writes, decided on a [`ConfigSnapshot`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigPlan {
    /// Write `changes` and record `state`.
    Apply {
        /// The changes.
        changes: Vec<TaskChange>,
        /// The document applied.
        state: ConfigState,
        /// Ticks recorded as skipped (those of tasks enabled again, due while disabled).
        skips: Vec<SkipRecord>,
    },
    /// Write nothing: the document is older than the applied one.
    Stale {
        /// The applied version.
        current: i64,
    },
    /// Write nothing: the rows already match.
    Nothing,
}

#[cfg_attr(not(any(feature = "postgres", feature = "sqlite")), allow(dead_code))]
impl ConfigPlan {
    /// What the plan writes, if anything: the changes, the state recorded, the skip records.
    pub(crate) fn writes(&self) -> Option<(&[TaskChange], &ConfigState, &[SkipRecord])> {
        match self {
            ConfigPlan::Apply {
                changes,
                state,
                skips,
            } => Some((changes, state, skips)),
            ConfigPlan::Stale { .. } | ConfigPlan::Nothing => None,
        }
    }
}

/// A task row a reconcile creates or updates, as a store writes it.
#[cfg_attr(not(any(feature = "postgres", feature = "sqlite")), allow(dead_code))]
pub(crate) struct TaskWrite<'a> {
    pub(crate) name: &'a str,
    pub(crate) cron: &'a str,
    pub(crate) timezone: &'a str,
    pub(crate) calendar: Option<&'a str>,
    pub(crate) enabled: bool,
    pub(crate) next_run_at: Option<DateTime<Utc>>,
    pub(crate) next_tick: Option<DateTime<Utc>>,
}

/// A sharded task's row a reconcile writes: how many shards, the task it is a node row of (if
/// it is one), the node it is pinned to.
#[cfg_attr(not(any(feature = "postgres", feature = "sqlite")), allow(dead_code))]
pub(crate) struct ShardWrite<'a> {
    pub(crate) row: &'a str,
    pub(crate) shards: u32,
    pub(crate) shard_of: Option<&'a str>,
    pub(crate) node_pin: Option<&'a str>,
}

/// A config instance's row a reconcile marks: `(row, task, key, args, its own tags)`.
pub(crate) type ConfigInstanceWrite<'a> = (
    &'a str,
    &'a str,
    &'a str,
    Option<&'a str>,
    &'a super::InstanceTags,
);

/// The most rows one statement of a reconcile writes (PostgreSQL's `unnest` lists, the copy of
/// instances' rows): a change that reaches 10,000 instances (a task's shard count that grows
/// gives each its new rows) is written in statements of this many, in the reconcile's one
/// transaction.
#[cfg_attr(not(any(feature = "postgres", feature = "sqlite")), allow(dead_code))]
pub(crate) const RECONCILE_BATCH: usize = 1_000;

/// A reconcile's changes by kind, in the order a store writes them: creates, then updates (a row
/// once, as its last update says), then shard rows, then orphan flags (PostgreSQL: one statement per kind), then the config's
/// instances (one statement each, `writes::mark_config_instances_on`).
#[derive(Default)]
#[cfg_attr(not(any(feature = "postgres", feature = "sqlite")), allow(dead_code))]
pub(crate) struct ChangesByKind<'a> {
    pub(crate) creates: Vec<TaskWrite<'a>>,
    pub(crate) updates: Vec<TaskWrite<'a>>,
    pub(crate) shards: Vec<ShardWrite<'a>>,
    pub(crate) orphans: Vec<(&'a str, bool)>,
    /// The config's instances: `(row, task, key, args, own tags)`, written after the creates and
    /// updates.
    pub(crate) instances: Vec<ConfigInstanceWrite<'a>>,
    /// Rows and the limit each names (after the creates).
    pub(crate) limits: Vec<(&'a str, Option<&'a str>)>,
    /// Task rows and the jitter window each stores, in whole milliseconds (after the creates).
    pub(crate) jitters: Vec<(&'a str, Option<i64>)>,
    /// Broadcast instances' node rows and the instance row each copies (after the creates).
    pub(crate) instance_nodes: Vec<(&'a str, &'a str)>,
}

#[cfg_attr(not(any(feature = "postgres", feature = "sqlite")), allow(dead_code))]
impl<'a> ChangesByKind<'a> {
    /// `changes` by kind, each kind in the plan's order.
    pub(crate) fn of(changes: &'a [TaskChange]) -> Self {
        let mut by_kind = Self::default();
        for change in changes {
            match change {
                TaskChange::Create {
                    name,
                    cron,
                    timezone,
                    calendar,
                    enabled,
                    next_run_at,
                    next_tick,
                }
                | TaskChange::Update {
                    name,
                    cron,
                    timezone,
                    calendar,
                    enabled,
                    next_run_at,
                    next_tick,
                } => {
                    let write = TaskWrite {
                        name,
                        cron,
                        timezone,
                        calendar: calendar.as_deref(),
                        enabled: *enabled,
                        next_run_at: *next_run_at,
                        next_tick: next_tick.filter(|_| next_run_at.is_some()),
                    };
                    if matches!(change, TaskChange::Create { .. }) {
                        by_kind.creates.push(write);
                    } else {
                        by_kind.updates.push(write);
                    }
                }
                TaskChange::Shards {
                    name,
                    shards,
                    node_pin,
                } => {
                    // The row its shards group under: its task's, or an instance's own.
                    let group = crate::shard::group_row(name);
                    by_kind.shards.push(ShardWrite {
                        row: name,
                        shards: *shards,
                        shard_of: (group != name).then_some(group),
                        node_pin: node_pin.as_deref(),
                    });
                }
                TaskChange::Orphaned { name, orphaned } => by_kind.orphans.push((name, *orphaned)),
                TaskChange::InstanceNode { name, of } => by_kind.instance_nodes.push((name, of)),
                TaskChange::ConfigInstance {
                    name,
                    task,
                    key,
                    args,
                    tags,
                } => by_kind
                    .instances
                    .push((name, task, key, args.as_deref(), tags)),
                TaskChange::Limit { name, limit } => by_kind.limits.push((name, limit.as_deref())),
                TaskChange::Jitter { name, window } => by_kind.jitters.push((
                    name,
                    window.map(|w| i64::try_from(w.as_millis()).unwrap_or(i64::MAX)),
                )),
            }
        }
        // One statement cannot update a row twice: a row two changes of a plan update is
        // written once, as the last of them says.
        let mut seen = std::collections::HashSet::new();
        by_kind.updates.reverse();
        by_kind.updates.retain(|write| seen.insert(write.name));
        by_kind.updates.reverse();
        by_kind
    }
}

/// Plans a reconcile inside [`ConfigStore::apply_config`](super::ConfigStore::apply_config)'s
/// transaction.
pub type ConfigPlanner<'a> = dyn Fn(&ConfigSnapshot) -> ConfigPlan + Send + Sync + 'a;
