//! Run-state storage: everything the scheduler keeps between ticks and across nodes.
//!
//! [`Store`] is the one trait every part of the scheduler that keeps or reads state talks to: the
//! engine (claims, renewals, outcomes, upkeep, the webhook outbox), the reconciler (config), the
//! operator actions and the admin API, dashboard and CLI (reads). It is the sum of one trait
//! per role ([`NodeStore`], [`ClaimStore`], [`HistoryStore`], [`ConfigStore`],
//! [`OperatorStore`], [`OutboxStore`], [`IncidentStore`], in `roles.rs`) and what is the store
//! itself.
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
mod roles;
#[cfg_attr(not(any(feature = "postgres", feature = "sqlite")), allow(dead_code))]
mod row;
#[cfg(feature = "sqlite")]
pub mod sqlite;

use async_trait::async_trait;

pub(crate) use crate::policy::Recovery;
pub(crate) use backfill::{
    BackfillCancel, BackfillCreate, BackfillProgress, BackfillRecord, BackfillTick, NewBackfill,
    PendingBackfill,
};
pub(crate) use claim::{
    ClaimOutcome, ClaimPlan, ClaimRequest, ClaimRules, ClaimedRun, DueDecision, DueTask,
    ExpiredLock, FailureCount, FinishResult, LastRun, LockKey, LockedRun, NextRun, PendingManual,
    PendingRetry, Renewal, Requeue, RescueDecision, RunEnd, RunFinish, WakeInfo,
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
pub use roles::{
    ClaimStore, ConfigStore, HistoryStore, IncidentStore, NodeStore, OperatorStore, OutboxStore,
    Reschedule,
};
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
