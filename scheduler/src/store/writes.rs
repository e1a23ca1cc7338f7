//! The writes both backends make alike, written once over [`Dialect`]: the same statement in
//! each backend's SQL, bound each backend's way (the store's clock bound by SQLite, read by
//! PostgreSQL's `now()`). Each public function is an operation of `store_methods!`, run as a
//! write of its own; `insert_audit` and `backfill_not_cancelled` are steps of the operator
//! actions, run on the connection of their transaction. The instances' writes are
//! [`instances`]'s.

use std::future::Future;

use async_trait::async_trait;
use std::time::Duration;

use crate::store::dialect::{Dialect, Fetch, Now, Sql, Statement};
use crate::store::records::{incident, run_record, snooze};
use crate::store::{
    AlertFold, AuditEntry, BackfillCancel, ConfigState, IncidentRecord, NodeInfo, RunRecord,
    Snooze, StoreResult,
};

mod instances;

pub(crate) use instances::{
    copy_instance_nodes_on, instances_wake_on, mark_config_instances_on, remove_instance_on,
    upsert_instance_on, upsert_instances_on,
};

/// Records an audit entry on `conn`, at the store's clock (whatever the entry's own `at` says).
pub(crate) async fn insert_audit<D: Dialect>(
    conn: &mut D::Conn,
    clock: D::Clock,
    a: &AuditEntry,
) -> Result<(), sqlx::Error> {
    let params = params![&a.actor, &a.action, &a.task, &a.detail, &a.source, Now];
    let statement = Statement {
        operation: "insert_audit",
        sql: statement!("audit_insert"),
        params: &params,
    };
    D::execute_on(conn, clock, statement).await.map(drop)
}

/// Records on `conn`, in a reconcile's transaction, that the config `state` is applied (at the
/// store's clock).
pub(crate) async fn save_config_state<D: Dialect>(
    conn: &mut D::Conn,
    clock: D::Clock,
    state: &ConfigState,
) -> Result<(), sqlx::Error> {
    let statement = Statement {
        operation: "apply_config",
        sql: statement!("config_state_save"),
        params: &params![state.version, &state.digest, &state.applied_by, Now],
    };
    D::execute_on(conn, clock, statement).await.map(drop)
}

/// Run `run_id` as it is, if any, read on `conn` in an operation's transaction.
pub(crate) async fn run_on<D: Dialect>(
    conn: &mut D::Conn,
    clock: D::Clock,
    run_id: i64,
) -> Result<Option<RunRecord>, sqlx::Error> {
    let statement = Statement {
        operation: "cancel_run",
        sql: statement!(runs "run_one"),
        params: &params![run_id],
    };
    let rows = D::run(conn, clock, statement, Fetch::First).await?.rows;
    rows.first().map(run_record).transpose()
}

/// What cancelling backfill `id` answers when its cancel changed nothing (read on `conn`, in the
/// cancel's transaction): it is over, or there is no such backfill.
pub(crate) async fn backfill_not_cancelled<D: Dialect>(
    conn: &mut D::Conn,
    clock: D::Clock,
    id: i64,
) -> Result<BackfillCancel, sqlx::Error> {
    let statement = Statement {
        operation: "cancel_backfill",
        sql: statement!("backfills_list"),
        params: &params![None::<&str>, 1_i64, id],
    };
    let known = D::run(conn, clock, statement, Fetch::First).await?.rows;
    Ok(if known.is_empty() {
        BackfillCancel::NotFound
    } else {
        BackfillCancel::AlreadyOver
    })
}

/// Task `task`'s open incident of type `kind`, if any, read on `conn` in a fold's transaction
/// (locked for it on PostgreSQL; SQLite's write transaction holds every row).
pub(crate) async fn open_incident<D: Dialect>(
    conn: &mut D::Conn,
    clock: D::Clock,
    task: &str,
    kind: &str,
) -> Result<Option<IncidentRecord>, sqlx::Error> {
    let statement = Statement {
        operation: "fold_alerts",
        sql: statement!("incident_open"),
        params: &params![task, kind],
    };
    let rows = D::run(conn, clock, statement, Fetch::First).await?.rows;
    rows.first().map(incident).transpose()
}

/// Records `fold` on `conn`, in the fold's transaction: into the `open` incident, or into one it
/// opens; `notify`: its alert is sent now (the first sending is kept). The incident as written,
/// or none if another transaction opened one first (on PostgreSQL; the fold then looks again).
pub(crate) async fn record_fold<D: Dialect>(
    conn: &mut D::Conn,
    clock: D::Clock,
    fold: &AlertFold,
    open: Option<&IncidentRecord>,
    notify: bool,
) -> Result<Option<IncidentRecord>, sqlx::Error> {
    let (key, remind) = (fold.key.as_deref(), fold.remind_every_ms());
    let (sql, params) = match open {
        None => (
            statement!("incident_insert"),
            params![
                &fold.task,
                &fold.kind,
                key,
                &fold.summary,
                notify,
                remind,
                Now
            ]
            .to_vec(),
        ),
        Some(open) => (
            statement!("incident_fold"),
            params![open.id, key, &fold.summary, notify, remind, Now].to_vec(),
        ),
    };
    let statement = Statement {
        operation: "fold_alerts",
        sql,
        params: &params,
    };
    let rows = D::run(conn, clock, statement, Fetch::First).await?.rows;
    rows.first().map(incident).transpose()
}

/// Task `task`'s snooze in force at the store's clock, if any, read on `conn`.
pub(crate) async fn snooze_of<D: Dialect>(
    conn: &mut D::Conn,
    clock: D::Clock,
    task: &str,
) -> Result<Option<Snooze>, sqlx::Error> {
    let statement = Statement {
        operation: "fold_alerts",
        sql: statement!("snooze_of"),
        params: &params![task, Now],
    };
    let rows = D::run(conn, clock, statement, Fetch::First).await?.rows;
    rows.first().map(snooze).transpose()
}

pub(crate) async fn register_node(store: &impl Dialect, node: &NodeInfo) -> StoreResult<()> {
    store.refuse_operator("register a node")?;
    let pid = i64::from(node.pid);
    let params = params![
        &node.node_id,
        &node.hostname,
        pid,
        &node.version,
        &node.tasks[..],
        Now
    ];
    let sql = statement!("register_node");
    store.execute("register_node", sql, &params).await.map(drop)
}

pub(crate) async fn report_services(
    store: &impl Dialect,
    node_id: &str,
    down: &[String],
) -> StoreResult<()> {
    let down = down.join(",");
    let sql = Sql::shared(shared_query!("report_services"));
    let params = params![node_id, down.as_str()];
    store
        .execute("report_services", sql, &params)
        .await
        .map(drop)
}

pub(crate) async fn report_database_server(
    store: &impl Dialect,
    node_id: &str,
    server: Option<&str>,
) -> StoreResult<()> {
    let sql = Sql::shared(shared_query!("report_database_server"));
    let params = params![node_id, server];
    store
        .execute("report_database_server", sql, &params)
        .await
        .map(drop)
}

pub(crate) async fn deregister_node(store: &impl Dialect, node_id: &str) -> StoreResult<()> {
    let sql = statement!("deregister_node");
    store
        .execute("deregister_node", sql, &params![node_id, Now])
        .await
        .map(drop)
}

/// What a backend prunes its own way, for [`prune_history`].
#[async_trait]
pub(crate) trait Prune: Dialect {
    /// Prunes the finished runs (with their logs) and the outbox's finished events (with their
    /// delivery log) older than `retention`, in batches of `batch` rows; says how many runs it
    /// deleted.
    async fn prune_runs(&self, retention: Duration, batch: i64) -> StoreResult<u64>;

    /// Prunes the nodes stopped or silent for longer than `retention`, and their rows.
    async fn prune_nodes(&self, retention: Duration) -> StoreResult<()>;
}

pub(crate) async fn prune_history(
    store: &impl Prune,
    retention: Duration,
    batch: u32,
) -> StoreResult<u64> {
    let batch = i64::from(batch.max(1));
    let pruned_runs = store.prune_runs(retention, batch).await?;
    prune_tables(store, retention, batch).await?;
    store.prune_nodes(retention).await?;
    // The rows of instances removed while a run of them was in flight, once it has ended.
    let sweep = Sql::shared(shared_query!("instances_sweep"));
    store.execute("prune_history", sweep, &[]).await?;
    Ok(pruned_runs)
}

/// One batch of a prune: the rows it found, the rows it deleted, and where the next batch goes
/// on from.
pub(crate) struct Pruned<S> {
    pub(crate) found: u64,
    pub(crate) deleted: u64,
    pub(crate) next: S,
}

/// Runs `prune` from `from`, one batch of at most `batch` rows at a time, until a batch finds
/// fewer, and says how many rows the batches deleted. Judged by what a batch found, not by what
/// it deleted: a batch racing another node's prune deletes fewer, and the pass is not done.
pub(crate) async fn in_batches<S, F, Fut>(batch: i64, from: S, mut prune: F) -> StoreResult<u64>
where
    F: FnMut(S) -> Fut,
    Fut: Future<Output = StoreResult<Pruned<S>>>,
{
    let (mut from, mut deleted) = (from, 0);
    loop {
        let pruned = prune(from).await?;
        deleted += pruned.deleted;
        if i64::try_from(pruned.found).unwrap_or(i64::MAX) < batch {
            return Ok(deleted);
        }
        from = pruned.next;
    }
}

/// Prunes the records older than `retention` that one statement a batch deletes alike on both
/// backends (skips, audit entries, closed incidents, alert marks, broadcast ticks), each batch
/// a write of its own, so the write lock is never held for long.
async fn prune_tables(store: &impl Dialect, retention: Duration, batch: i64) -> StoreResult<()> {
    for sql in [
        statement!("prune_skips"),
        statement!("prune_audit"),
        statement!("prune_incidents"),
        statement!("prune_alert_marks"),
        statement!("prune_broadcast_ticks"),
    ] {
        in_batches(batch, (), |()| async move {
            let params = params![retention, batch];
            let deleted = store.execute("prune_history", sql, &params).await?;
            Ok(Pruned {
                found: deleted,
                deleted,
                next: (),
            })
        })
        .await?;
    }
    Ok(())
}
