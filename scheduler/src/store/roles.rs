//! The store's roles: one trait per part of the scheduler that talks to it (the engine's node
//! membership and claims, the history the admin API reads, the reconciler's config, the
//! operator's actions, the webhook outbox, incidents). [`Store`](super::Store) is their sum.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::{
    AlertFold, AlertMark, AuditEntry, BackfillCancel, BackfillCreate, BackfillRecord, BackfillTick,
    CancelRequest, Cancellation, ClaimOutcome, ClaimRequest, ClaimRules, ConfigPlan, ConfigPlanner,
    ConfigState, Delivery, DeliveryRecord, FinishResult, Folded, Heartbeat, IncidentClose,
    IncidentQuery, IncidentRecord, IncidentRule, InstanceBatchPlanner, InstancePlanner,
    InstanceQuery, InstanceRecord, InstanceState, InstanceSummary, InstanceUpsert, InstanceWrite,
    LimitState, LockKey, LogChunk, NewBackfill, NewEvent, NodeInfo, NodeRecord, OutboxRow,
    OverdueTask, Pause, Renewal, ResumePlanner, RunFinish, RunQuery, RunRecord, RunRequest,
    SkipRecord, Snooze, StoreResult, TaskRow, TaskState, WakeInfo,
};

/// The cluster's membership: the engine registers its node, beats its heart, reports what it
/// runs on and leaves; the admin API, the dashboard and the CLI read [`nodes`](Self::nodes).
///
/// Part of [`Store`](super::Store): every `Store` implements it, and a `dyn Store` calls these methods without
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
/// Part of [`Store`](super::Store): every `Store` implements it, and a `dyn Store` calls these methods without
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
    /// owner and token, not by expiry: an expired lock nobody released is extended again. A
    /// lock whose row another transaction holds is not waited for: it comes back busy. Returns
    /// the locks extended and those busy; any other was taken over.
    async fn renew_locks(
        &self,
        node_id: &str,
        held: &[(LockKey, Duration)],
    ) -> StoreResult<Renewal>;
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
/// Part of [`Store`](super::Store): every `Store` implements it, and a `dyn Store` calls these methods without
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
/// Part of [`Store`](super::Store): every `Store` implements it, and a `dyn Store` calls these methods without
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
/// Part of [`Store`](super::Store): every `Store` implements it, and a `dyn Store` calls these methods without
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
    /// [`Change::CancelRequested`](super::Change::CancelRequested)): records who asked (`by`) and when, unless somebody asked
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
/// Part of [`Store`](super::Store): every `Store` implements it, and a `dyn Store` calls these methods without
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
    /// [`DeliveryNext::Disabled`](super::DeliveryNext::Disabled) also disables the pending events of its channel.
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
/// Part of [`Store`](super::Store): every `Store` implements it, and a `dyn Store` calls these methods without
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
