//! Run-state storage: everything the scheduler keeps between ticks and across nodes.
//!
//! [`Store`] is the one trait every part of the scheduler that keeps or reads state talks to: the
//! engine (claims, renewals, outcomes, upkeep, the webhook outbox), the reconciler (config), the
//! operator actions and the admin API, dashboard and CLI (reads). It is the sum of one trait
//! per role ([`NodeStore`], [`ClaimStore`], [`HistoryStore`], [`ConfigStore`],
//! [`OperatorStore`], [`OutboxStore`], [`IncidentStore`]) and what is the store itself.
//! [`postgres::PgStore`] is the production implementation for one or many nodes (its SQL in
//! `store/postgres/queries/`), and [`sqlite::SqliteStore`] keeps the same records in a local
//! file for a single process (its SQL in `store/sqlite/queries/`); the statements they run
//! alike are kept once, in `store/queries/`. Both pass one contract suite
//! (`tests/tests/store_contract.rs`). This module owns the data that crosses the boundary (one
//! file per role: `claim.rs`, `history.rs`, `nodes.rs`, `config.rs`, `operator.rs`,
//! `outbox.rs`), the store's error type, and what is written once for both backends: the list
//! of operations, by role, that generates their forwarding and `StoreLayer`'s (`methods.rs`),
//! the claim transaction over each backend's steps (`claim_loop.rs`), each record's decoding
//! from a result row (`records.rs`, over the typed getters of `row.rs` that each backend
//! implements for its driver's rows), the binding of a statement's parameters each backend's
//! way (`dialect.rs`), and the operations both run alike over it (`reads.rs`, `writes.rs`). It knows nothing about cron syntax, handlers or
//! config formats, and never names the engine.
//!
//! **Decide in Rust, record in the store.** Whatever a store writes that carries a rule (what a
//! lost run means, whether a tick runs again, what a finished run does to its task row, whether
//! a config document is stale) is decided by the engine and handed to the store as data:
//! `ClaimRules` answer inside the claim transaction, a `RunFinish` says what to write, a
//! `ConfigPlanner` plans a reconcile on rows locked for it. A store only applies decisions, so
//! every backend behaves alike and the rules are unit-tested without a database.

// First: its macros generate code in the modules below.
#[macro_use]
mod methods;
// Before the backends: the SQL they share.
#[cfg(any(feature = "postgres", feature = "sqlite"))]
#[macro_use]
mod queries;
// Before the backends: the seam they implement for what is written once for both
// (`dialect.rs`), and what is (`reads.rs`, `writes.rs`).
#[cfg(any(feature = "postgres", feature = "sqlite"))]
#[macro_use]
mod dialect;
#[cfg(any(feature = "postgres", feature = "sqlite"))]
mod reads;
#[cfg(any(feature = "postgres", feature = "sqlite"))]
mod writes;

#[allow(rustdoc::private_intra_doc_links)] // internal: documented for maintainers
pub(crate) mod backfill;
#[allow(rustdoc::private_intra_doc_links)] // internal: documented for maintainers
pub(crate) mod claim;
#[cfg(any(feature = "postgres", feature = "sqlite"))]
mod claim_loop;
#[allow(rustdoc::private_intra_doc_links)] // internal: documented for maintainers
pub(crate) mod config;
mod connect;
pub(crate) mod database;
mod dsn;
mod error;
#[allow(rustdoc::private_intra_doc_links)] // internal: documented for maintainers
pub(crate) mod history;
#[cfg(any(feature = "postgres", feature = "sqlite"))]
mod in_use;
#[allow(rustdoc::private_intra_doc_links)] // internal: documented for maintainers
pub(crate) mod incidents;
#[allow(rustdoc::private_intra_doc_links)] // internal: documented for maintainers
pub(crate) mod instance_views;
#[allow(rustdoc::private_intra_doc_links)] // internal: documented for maintainers
pub(crate) mod instances;
#[allow(rustdoc::private_intra_doc_links)] // internal: documented for maintainers
pub(crate) mod layer;
pub(crate) mod limits;
#[cfg(any(feature = "postgres", feature = "sqlite"))]
mod migrations;
#[allow(rustdoc::private_intra_doc_links)] // internal: documented for maintainers
pub(crate) mod nodes;
#[allow(rustdoc::private_intra_doc_links)] // internal: documented for maintainers
pub(crate) mod operator;
#[allow(rustdoc::private_intra_doc_links)] // internal: documented for maintainers
pub(crate) mod outbox;
#[cfg(feature = "postgres")]
pub mod postgres;
// Read by the backends only (written once for both, compiled without them too).
#[cfg_attr(not(any(feature = "postgres", feature = "sqlite")), allow(dead_code))]
mod records;
#[cfg_attr(not(any(feature = "postgres", feature = "sqlite")), allow(dead_code))]
mod row;
#[cfg(feature = "sqlite")]
pub mod sqlite;

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

pub(crate) use crate::policy::Recovery;
pub(crate) use backfill::{
    BackfillCancel, BackfillCreate, BackfillProgress, BackfillRecord, BackfillTick, NewBackfill,
    PendingBackfill,
};
pub(crate) use claim::{
    ClaimOutcome, ClaimPlan, ClaimRequest, ClaimRules, ClaimedRun, DueDecision, DueTask,
    ExpiredLock, FailureCount, FinishResult, LastRun, LockKey, LockedRun, NextRun, PendingManual,
    PendingRetry, Requeue, RescueDecision, RunEnd, RunFinish, WakeInfo,
};
pub(crate) use config::{
    ConfigPlan, ConfigPlanner, ConfigSnapshot, ConfigState, TaskChange, TaskRow,
};
pub use connect::{Backend, DEFAULT_SQLITE_PATH, StoreSettings, backend_of, connect};
pub(crate) use database::{DatabaseServer, Replication};
pub use error::{BoxError, StoreError, StoreResult};
pub use history::SkipReason;
pub(crate) use history::{LogChunk, RunQuery, RunRecord, RunStatus, SkipRecord, Trigger};
pub(crate) use incidents::{
    AlertFold, AlertMark, FoldDecision, FoldInput, Folded, IncidentClose, IncidentQuery,
    IncidentRecord, IncidentRule, Snooze,
};
pub(crate) use instance_views::{
    InstanceQuery, InstanceSource, InstanceState, InstanceSummary, LatestInstanceRun,
};
pub(crate) use instances::{
    InstanceBatchPlanner, InstanceFacts, InstancePlan, InstancePlanner, InstanceRecord,
    InstanceTags, InstanceTask, InstanceUpsert, InstanceWrite,
};
pub(crate) use limits::LimitState;
pub(crate) use nodes::{Heartbeat, NodeInfo, NodeRecord, OverdueTask};
pub(crate) use operator::{
    AuditEntry, CancelRequest, Cancellation, Pause, ResumePlan, ResumePlanner, RunRequest,
    TaskState,
};
pub(crate) use outbox::{Delivery, DeliveryRecord, NewEvent, OutboxRow};
// Used by the backends and the webhook delivery only.
#[cfg(any(feature = "postgres", feature = "sqlite", feature = "webhook"))]
pub(crate) use outbox::DeliveryNext;
#[cfg(feature = "postgres")]
pub use postgres::PgStore;
#[cfg(feature = "sqlite")]
pub use sqlite::{SqliteStore, SqliteStoreBuilder};
// Used by the backends (and unit tests) only.
#[cfg(any(feature = "postgres", feature = "sqlite", test))]
pub(crate) use claim::RescuedLock;

/// What a [`ChangeListener`] heard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Change {
    /// Something that may make a task due sooner: a lock released, a config applied, a manual
    /// run queued, a pause ended, or [`Store::notify`].
    Schedule,
    /// An operator asked to cancel a running run ([`OperatorStore::cancel_run`]).
    CancelRequested,
    /// Anything may have changed (the first call, a reconnect, another process's action that
    /// the backend cannot tell apart): look at everything.
    Unknown,
}

/// Wakes a waiting engine when another node changed something (a lock released, a config
/// applied, a run to cancel).
#[async_trait]
pub trait ChangeListener: Send {
    /// Waits for the next change notification and says what kind it was. Errors mean the
    /// listener lost its connection; it reconnects on the next call.
    ///
    /// The first call, and the first call after a reconnect, returns [`Change::Unknown`] at
    /// once without waiting: whatever changed while nobody was listening may have been a
    /// change, so the caller looks at the store once before it sleeps. A return is a hint to
    /// look, never a promise that something changed (PostgreSQL also returns after a silent
    /// period once it has checked its connection).
    async fn recv(&mut self) -> StoreResult<Change>;
}

/// The cluster's membership: the engine registers its node, beats its heart, reports what it
/// runs on and leaves; the admin API, the dashboard and the CLI read [`nodes`](Self::nodes).
///
/// Part of [`Store`]: every `Store` implements it, and a `dyn Store` calls these methods without
/// importing this trait.
#[async_trait]
pub trait NodeStore: Send + Sync {
    /// Records this node as a member of the cluster (upsert).
    async fn register_node(&self, node: &NodeInfo) -> StoreResult<()>;
    /// Refreshes this node's heartbeat and reports the cluster's health.
    async fn heartbeat(&self, node_id: &str, silent_after: Duration) -> StoreResult<Heartbeat>;
    /// Marks this node stopped.
    async fn deregister_node(&self, node_id: &str) -> StoreResult<()>;
    /// Records which of this node's background services are not running (`down`, by name;
    /// empty: all run), for [`nodes`](Self::nodes).
    async fn report_services(&self, node_id: &str, down: &[String]) -> StoreResult<()>;
    /// Records the database server this node's connections go to (`host:port`; `None`: none,
    /// or not known), for [`nodes`](Self::nodes).
    async fn report_database_server(&self, node_id: &str, server: Option<&str>) -> StoreResult<()>;
    /// Every known node, with how many runs each holds a lock for.
    async fn nodes(&self) -> StoreResult<Vec<NodeRecord>>;
}

/// A next run the upkeep gives a task that has none ([`ClaimStore::reschedule`]): the task,
/// when its next tick starts, and that tick when jitter shifted the start off it (`None`: the
/// start is the tick; see `crate::ticks::jitter`).
pub type Reschedule = (String, DateTime<Utc>, Option<DateTime<Utc>>);

/// Claiming and running tasks, and the upkeep of their schedule: called by the engine only (its
/// claim loop, its lock renewals and run outcomes, and its maintenance services).
///
/// Every lock write is fenced by the lock token; the store's clock decides what is due and what
/// has expired; what to do with a due task or an expired lock is decided by the engine's
/// [`ClaimRules`] inside the claim transaction.
///
/// Part of [`Store`]: every `Store` implements it, and a `dyn Store` calls these methods without
/// importing this trait.
#[async_trait]
pub trait ClaimStore: Send + Sync {
    // ---- claiming and running (the engine) ---------------------------------------------

    /// When anything claimable by node `node_id` registering `tasks` becomes due (rows pinned
    /// to another node, a broadcast task's, are not), or any lock expires.
    async fn next_wake(&self, node_id: &str, tasks: &[String]) -> StoreResult<WakeInfo>;
    /// In one transaction: offers every expired lock to `rules.rescue` and applies its
    /// decisions; then locks up to `limit` unlocked tasks among `tasks` that have something due
    /// — an enabled, unpaused task's tick or retry, an expired pause, or a manual run of an
    /// unpaused task — (skipping rows other transactions hold), offers each to `rules.plan`,
    /// and applies its decision: a run takes the lock, moves the schedule as planned, records a
    /// running run and clears what it serves; a skip moves the schedule and records the skipped
    /// ticks.
    async fn claim(
        &self,
        request: ClaimRequest<'_>,
        rules: &dyn ClaimRules,
    ) -> StoreResult<ClaimOutcome>;
    /// Extends the locks `node_id` holds, in one write, each by its own lifetime. Fenced by
    /// owner and token, not by expiry: an expired lock nobody released is extended again.
    /// Returns the locks extended; any other was taken over.
    async fn renew_locks(
        &self,
        node_id: &str,
        held: &[(LockKey, Duration)],
    ) -> StoreResult<Vec<LockKey>>;
    /// The cancel requests recorded for any of `run_ids` (runs the caller is running), in no
    /// particular order. Cheap when there are none: the engine asks after each lock renewal.
    async fn cancel_requests(&self, run_ids: &[i64]) -> StoreResult<Vec<Cancellation>>;
    /// Records the end of a batch of runs (also over a run another node marked `lost`), writes
    /// their skip records, and, for each lock still held under its token, releases it and
    /// applies its requeue.
    async fn finish_runs(&self, finishes: &[RunFinish]) -> StoreResult<Vec<FinishResult>>;
    /// Records ranges of ticks that did not get a run of their own (outside any run's finish).
    async fn record_skips(&self, skips: &[SkipRecord]) -> StoreResult<()>;
    /// Appends chunks of runs' logs.
    async fn append_run_logs(&self, chunks: &[LogChunk]) -> StoreResult<()>;

    // ---- upkeep (the engine's maintenance) ---------------------------------------------

    /// Gives each named enabled, unlocked task that has no next run the next run decided for it,
    /// `(task, start, tick)`: when its next tick starts, and the tick when jitter shifted the
    /// start off it (`None`: the start is the tick). Returns the tasks changed (others got a
    /// next run or a lock meanwhile).
    async fn reschedule(&self, next_runs: &[Reschedule]) -> StoreResult<Vec<String>>;
    /// Enabled, unpaused tasks without an open missed-run incident whose next run is older than
    /// `late_by`, at most `limit`.
    async fn overdue_tasks(&self, late_by: Duration, limit: u32) -> StoreResult<Vec<OverdueTask>>;
    /// Opens a missed-run incident for each `(task, tick)` whose next run is still that tick
    /// and that has none open; returns the tasks whose incident this call opened.
    async fn open_missed(&self, incidents: &[(String, DateTime<Utc>)]) -> StoreResult<Vec<String>>;
    /// Deletes finished runs (with their logs), skip records, delivered or failed outbox events
    /// with their delivery log, audit entries, closed incidents and alert marks older than
    /// `retention`, in batches of at most
    /// `batch` rows per statement; returns how many runs.
    async fn prune_history(&self, retention: Duration, batch: u32) -> StoreResult<u64>;
}

/// What happened, for reading: task states, runs, skips, logs, backfills and the audit log.
/// Called by the admin API, the dashboard and the CLI (and by the operator actions that check a
/// task's state or history before they act); nothing here writes.
///
/// Part of [`Store`]: every `Store` implements it, and a `dyn Store` calls these methods without
/// importing this trait.
#[async_trait]
pub trait HistoryStore: Send + Sync {
    /// Everything about one task's row, or every task's (by name).
    async fn task_states(&self, task: Option<&str>) -> StoreResult<Vec<TaskState>>;
    /// Everything about the rows named in `tasks` (by name; a name with no row is left out): one
    /// read for a page of runs of many tasks.
    async fn task_states_named(&self, tasks: &[String]) -> StoreResult<Vec<TaskState>>;
    /// The newest audit entries, older than `before_id` if given.
    async fn audit_log(&self, limit: u32, before_id: Option<i64>) -> StoreResult<Vec<AuditEntry>>;
    /// Runs matching `query`, newest first.
    async fn runs(&self, query: &RunQuery) -> StoreResult<Vec<RunRecord>>;
    /// One run.
    async fn run(&self, run_id: i64) -> StoreResult<Option<RunRecord>>;
    /// The latest runs of a task, newest first (or of all tasks with `None`).
    async fn recent_runs(&self, task_name: Option<&str>, limit: i64)
    -> StoreResult<Vec<RunRecord>>;
    /// The latest `per_task` (1 to 1,000) runs of each of `tasks` that started at or after
    /// `since`, newest first (one read for a dashboard of many tasks): each task's own, its
    /// instances' runs left out (see [`latest_runs_per_instance`](Self::latest_runs_per_instance)).
    async fn latest_runs_per_task(
        &self,
        tasks: &[String],
        per_task: u32,
        since: DateTime<Utc>,
    ) -> StoreResult<Vec<RunRecord>>;
    /// Skip records of a task whose ranges end at or after `since`, oldest first.
    async fn skips(&self, task_name: &str, since: DateTime<Utc>) -> StoreResult<Vec<SkipRecord>>;
    /// Skip records of every task whose ranges end at or after `since`: the `limit` (1 to
    /// 10,000) latest-ending, newest first (one read for a dashboard of many tasks).
    async fn skips_since(&self, since: DateTime<Utc>, limit: u32) -> StoreResult<Vec<SkipRecord>>;
    /// The latest-ending `per_task` (1 to 10,000) skip records of each of `tasks` whose ranges
    /// end at or after `since`, newest first (one read for the strips of many tasks, each
    /// bounded by its own share, so a busy task cannot crowd a sparse one out).
    async fn latest_skips_per_task(
        &self,
        tasks: &[String],
        per_task: u32,
        since: DateTime<Utc>,
    ) -> StoreResult<Vec<SkipRecord>>;
    /// A run's log chunks, in order.
    async fn run_log(&self, run_id: i64) -> StoreResult<Vec<LogChunk>>;
    /// The distinct ticks in `[from, to]` that `task_name` has a succeeded run of (any trigger),
    /// in order: of each of its shards, for a task with shards; an instance's (`task/key`) own,
    /// a task's without its instances'.
    async fn succeeded_ticks(
        &self,
        task_name: &str,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> StoreResult<Vec<DateTime<Utc>>>;
    /// The newest `limit` backfills (of `task_name`, or of every task), newest first, each with
    /// its progress.
    async fn backfills(
        &self,
        task_name: Option<&str>,
        limit: u32,
    ) -> StoreResult<Vec<BackfillRecord>>;
    /// One backfill with its progress and its ticks in order.
    async fn backfill(&self, id: i64) -> StoreResult<Option<(BackfillRecord, Vec<BackfillTick>)>>;
    /// A page of a task's instances, by key, each with its row's state.
    async fn instance_states(&self, query: &InstanceQuery) -> StoreResult<Vec<InstanceState>>;
    /// Each task's instances at a glance (removed ones left out), for every task that has any
    /// (`None`), or for `task` alone (none when it has no instances): how many, how many run or
    /// fail, the latest run among them. One read, for all tasks or for one (which reads only
    /// that task's instances).
    async fn instance_summaries(&self, task: Option<&str>) -> StoreResult<Vec<InstanceSummary>>;
    /// The latest `per_key` (1 to 1,000) runs of each instance of `task` named in `keys`,
    /// newest first.
    async fn latest_runs_per_instance(
        &self,
        task: &str,
        keys: &[String],
        per_key: u32,
    ) -> StoreResult<Vec<RunRecord>>;
    /// Every limit shared by tasks, declared or named by a row, by name: its size, the runs
    /// holding it and the rows waiting for it.
    async fn limits(&self) -> StoreResult<Vec<LimitState>>;
}

/// The applied config and the task rows it wrote: called by the reconciler (which applies a
/// config document), and read by the engine's maintenance and the CLI.
///
/// Part of [`Store`]: every `Store` implements it, and a `dyn Store` calls these methods without
/// importing this trait.
#[async_trait]
pub trait ConfigStore: Send + Sync {
    /// Reads all task rows and the database clock.
    async fn load_tasks(&self) -> StoreResult<(DateTime<Utc>, Vec<TaskRow>)>;
    /// The last applied config.
    async fn config_state(&self) -> StoreResult<Option<ConfigState>>;
    /// In one transaction serialised across nodes: reads the applied config and every task row
    /// (locked), asks `planner` what to write, and writes it.
    async fn apply_config(&self, planner: &ConfigPlanner<'_>) -> StoreResult<ConfigPlan>;
    /// Writes the sizes of the limits shared by tasks, `(name, size)` (sizes checked by the
    /// caller), creating those not stored; limits left out are kept. Returns the names written.
    async fn save_limits(&self, limits: &[(String, u32)]) -> StoreResult<Vec<String>>;
}

/// What an operator does to tasks and runs, each action audited: manual runs, pauses,
/// cancellations, backfills and alert snoozes. Called by the admin API and the CLI.
///
/// Part of [`Store`]: every `Store` implements it, and a `dyn Store` calls these methods without
/// importing this trait.
#[async_trait]
pub trait OperatorStore: Send + Sync {
    /// Asks for a manual run of `task` (a task's row, or an instance's `task/key`) by `by`
    /// (audited), unless the task is paused; `args` (JSON text, checked by the caller) replace
    /// the row's own arguments for that run only (`None`: its own), and are recorded with it.
    async fn request_run(
        &self,
        task: &str,
        by: &str,
        args: Option<&str>,
        audit: &AuditEntry,
    ) -> StoreResult<RunRequest>;
    /// Pauses `task` (audited); false if there is no such task. A pause already in force is
    /// replaced. A task's instances take its pause too: those not paused, and those holding
    /// the pause it replaces (one paused on its own keeps its own).
    async fn pause_task(&self, task: &str, pause: &Pause, audit: &AuditEntry) -> StoreResult<bool>;
    /// Ends `task`'s pause (audited), writing what `planner` decides on the locked row, and on
    /// each of its instances' rows that held the same pause; returns the pause that ended, or
    /// `None` if the task was not paused (or does not exist).
    async fn resume_task(
        &self,
        task: &str,
        audit: &AuditEntry,
        planner: &ResumePlanner<'_>,
    ) -> StoreResult<Option<Pause>>;
    /// Asks running run `run_id` to stop (audited with `audit`, and every node's listener hears
    /// [`Change::CancelRequested`]): records who asked (`by`) and when, unless somebody asked
    /// already. A run that has ended, or a run that does not exist, is left alone and said so.
    async fn cancel_run(
        &self,
        run_id: i64,
        by: &str,
        audit: &AuditEntry,
    ) -> StoreResult<CancelRequest>;
    /// Records a backfill (audited) and makes its first tick due now, unless the task does
    /// not exist or another backfill of it still has ticks to run; wakes every node.
    async fn create_backfill(
        &self,
        backfill: &NewBackfill,
        audit: &AuditEntry,
    ) -> StoreResult<BackfillCreate>;
    /// Cancels backfill `id` by `by` (audited): its ticks not yet claimed never run; its runs
    /// still running go on (each may be cancelled with [`cancel_run`](Self::cancel_run)).
    async fn cancel_backfill(
        &self,
        id: i64,
        by: &str,
        audit: &AuditEntry,
    ) -> StoreResult<BackfillCancel>;
    /// Snoozes a task's alerts (audited), replacing a snooze in force; false if there is no
    /// such task.
    async fn snooze_task(&self, snooze: &Snooze, audit: &AuditEntry) -> StoreResult<bool>;
    /// Lifts `task`'s snooze (audited); returns it, or `None` if none was in force.
    async fn unsnooze_task(&self, task: &str, audit: &AuditEntry) -> StoreResult<Option<Snooze>>;
    /// The snoozes in force (until later than now).
    async fn snoozes(&self) -> StoreResult<Vec<Snooze>>;
    /// In one transaction: reads the store's clock, task `instance.task`'s own row and the
    /// instance's row (`task/key`, see `crate::instance`), offers them to `planner`, and
    /// applies its decision: the instance written (created, or changed in place with its lock,
    /// fence, retry and history kept; a removed one back) and `audit` recorded, or nothing.
    async fn upsert_instance(
        &self,
        instance: &InstanceWrite,
        audit: &AuditEntry,
        planner: &InstancePlanner<'_>,
    ) -> StoreResult<InstanceUpsert>;
    /// In one transaction, each instance of `batch` as [`upsert_instance`](Self::upsert_instance)
    /// does one: its rows read (the batch's earlier writes of its key seen), offered to
    /// `planner` with its index in the batch and the store's clock (read once), and its decision
    /// applied, its audit entry recorded with it when written. Planned and written in the order
    /// of the rows' names (a key given twice in the batch's order), so that two batches sharing
    /// rows never deadlock; one answer per instance, in the batch's order; the nodes are woken
    /// once.
    async fn upsert_instances(
        &self,
        batch: &[(InstanceWrite, AuditEntry)],
        planner: &InstanceBatchPlanner<'_>,
    ) -> StoreResult<Vec<InstanceUpsert>>;
    /// Instance `key` of `task` (a removed one left out), read by its row alone.
    async fn instance(&self, task: &str, key: &str) -> StoreResult<Option<InstanceRecord>>;
    /// The instances named in `instances`, each a `(task, key)`, as [`instance`](Self::instance)
    /// reads one (removed ones left out; one with no row is left out), in one read: for a page
    /// of runs of many instances. In no particular order.
    async fn instances_named(
        &self,
        instances: &[(String, String)],
    ) -> StoreResult<Vec<InstanceRecord>>;
    /// The instances of `task` (removed ones left out), by key.
    async fn instances(&self, task: &str) -> StoreResult<Vec<InstanceRecord>>;
    /// Removes instance `key` of `task` and records `audit`: its row deleted, or, while a run of
    /// it holds its lock, marked removed (nothing of it due again; the row deleted by
    /// [`prune_history`](ClaimStore::prune_history) once the lock is released). False if there
    /// is no such instance.
    async fn remove_instance(&self, task: &str, key: &str, audit: &AuditEntry)
    -> StoreResult<bool>;
}

/// The webhook outbox: the engine enqueues events and its delivery service claims, delivers
/// and records them; the dashboard reads [`deliveries`](Self::deliveries).
///
/// Part of [`Store`]: every `Store` implements it, and a `dyn Store` calls these methods without
/// importing this trait.
#[async_trait]
pub trait OutboxStore: Send + Sync {
    /// Writes events to deliver.
    async fn enqueue_events(&self, events: &[NewEvent]) -> StoreResult<()>;
    /// Bounds the backlog: the oldest pending events beyond the newest `keep` are given up
    /// (`failed`, with `reason` as their last error), so an endpoint that hangs or refuses
    /// cannot grow the outbox without bound. Returns how many were given up.
    async fn trim_outbox(&self, keep: u32, reason: &str) -> StoreResult<u64>;
    /// Claims up to `limit` due, pending events for `node_id` to the named `channels` (the
    /// ones this node knows), each for `lease` (another node takes an event over only once its
    /// lease ran out), oldest first.
    async fn claim_outbox(
        &self,
        node_id: &str,
        channels: &[String],
        limit: u32,
        lease: Duration,
    ) -> StoreResult<Vec<OutboxRow>>;
    /// Records delivery attempts and what happens to each event next; a
    /// [`DeliveryNext::Disabled`] also disables the pending events of its channel.
    async fn record_deliveries(&self, deliveries: &[Delivery]) -> StoreResult<()>;
    /// The newest delivery attempts.
    async fn deliveries(&self, limit: u32) -> StoreResult<Vec<DeliveryRecord>>;
    /// Why the webhook endpoint with this URL digest was disabled, if it was.
    async fn webhook_disabled(&self, url_digest: &str) -> StoreResult<Option<String>>;
    /// Disables the webhook endpoint with this URL digest for every node.
    async fn disable_webhook(&self, url_digest: &str, reason: &str) -> StoreResult<()>;
}

/// Incidents: the engine's alerts fold into them, close them, remind of them and mark
/// cluster-wide alerts raised once; the admin API, the dashboard and the CLI read them
/// ([`incidents`](Self::incidents)). Snoozes are operator actions ([`OperatorStore`]).
///
/// Part of [`Store`]: every `Store` implements it, and a `dyn Store` calls these methods without
/// importing this trait.
#[async_trait]
pub trait IncidentStore: Send + Sync {
    /// Folds each alert, in order, into its task's open incident of its type, in one
    /// transaction: shows `rule` the locked open incident (if any) and the task's snooze in
    /// force (if any), then writes what it decided (a duplicate writes nothing; a record opens
    /// the incident or counts the alert into it, and marks it notified if it is to be sent now).
    async fn fold_alerts(
        &self,
        folds: &[AlertFold],
        rule: &IncidentRule,
    ) -> StoreResult<Vec<Folded>>;
    /// Closes each task's open incidents of the given types; returns those this call closed
    /// (one node closes each).
    async fn close_incidents(&self, closes: &[IncidentClose]) -> StoreResult<Vec<IncidentRecord>>;
    /// Claims up to `limit` reminders due: open incidents whose alert was sent, with a reminder
    /// interval that has passed since the last reminder (or the alert), whose task is not
    /// snoozed; each is marked reminded now (one node reminds each) and returned.
    async fn claim_reminders(&self, limit: u32) -> StoreResult<Vec<IncidentRecord>>;
    /// Records each mark unless it is recorded already; returns those this call recorded (one
    /// node raises each cluster-wide alert).
    async fn mark_alerts(&self, marks: &[AlertMark]) -> StoreResult<Vec<AlertMark>>;
    /// Incidents matching `query`, newest first.
    async fn incidents(&self, query: &IncidentQuery) -> StoreResult<Vec<IncidentRecord>>;
}

/// Everything the scheduler keeps or reads in persistent storage: the sum of its role traits,
/// each a group of operations by who calls it, plus what is the store itself.
///
/// | Role | Caller | Trait |
/// |---|---|---|
/// | The store itself | the composition root, the engine | `Store` (below) |
/// | Notifications | the engine listens; anyone may wake it | `Store` (below) |
/// | Nodes | the engine; the admin reads | [`NodeStore`] |
/// | Claiming, running and upkeep | the engine | [`ClaimStore`] |
/// | History | the admin API, the dashboard, the CLI | [`HistoryStore`] |
/// | Config | the reconciler | [`ConfigStore`] |
/// | Operator actions | the admin API, the CLI | [`OperatorStore`] |
/// | Webhook outbox | the engine's delivery (and the dashboard) | [`OutboxStore`] |
/// | Incidents | the engine's alerts; the admin reads | [`IncidentStore`] |
///
/// A caller holding a `dyn Store` (or generic over `S: Store`) calls every role's methods
/// without importing the role traits; a caller holding a concrete store (`PgStore`,
/// `SqliteStore`) imports the role it calls.
///
/// Every lock write is fenced by the lock token; the store's clock decides what is due and what
/// has expired; every rule is decided by the caller (see the module docs). The contract suite
/// (`tests/tests/store_contract.rs`) pins each method's behaviour for every backend.
///
/// **Adding a method**: declare it in its role trait, add it to that role's group in the list
/// in `store/methods.rs` (which generates each backend's implementations and `StoreLayer`'s
/// forwarding), write it for each backend (a function of the same name in
/// `store/<backend>/operations/`), and pin it in the contract suite. Wrappers built on
/// `StoreLayer` need no change. A new role trait is declared here, added as a group of the list
/// and as a supertrait of `Store`.
#[async_trait]
pub trait Store:
    NodeStore
    + ClaimStore
    + HistoryStore
    + ConfigStore
    + OperatorStore
    + OutboxStore
    + IncidentStore
    + Send
    + Sync
    + 'static
{
    // ---- the store itself --------------------------------------------------------------

    /// What this store is, for logs: backend and location, never a password.
    fn describe(&self) -> String;
    /// The database server the store's connections go to now, and how often that changed
    /// (failovers); `None` for a store without a server (SQLite) or before its first choice.
    /// Cheap: no query.
    fn database_server(&self) -> Option<DatabaseServer> {
        None
    }
    /// Creates or upgrades the schema. Safe when several nodes start at once.
    async fn migrate(&self) -> StoreResult<()>;
    /// How the database server replicates (for the node's start-up line); `None` for a store
    /// without replication (SQLite).
    async fn replication(&self) -> StoreResult<Option<Replication>>;

    // ---- notifications -----------------------------------------------------------------

    /// A listener for change notifications from other nodes.
    async fn listener(&self) -> StoreResult<Box<dyn ChangeListener>>;
    /// Wakes every node's listener (a manual run was asked for, a pause ended).
    async fn notify(&self) -> StoreResult<()>;
}
