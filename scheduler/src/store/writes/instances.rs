//! The writes of a task's instances (`crate::instance`), written once over [`Dialect`] as the
//! rest of `writes.rs`: an upsert of one and of a batch, each deciding on the rows it reads in
//! its transaction, a removal, and the config's instances marked in a reconcile. Each runs on
//! the connection of the transaction its backend opens.

use chrono::{DateTime, Utc};

use crate::store::dialect::{Dialect, Fetch, Now, Statement};
use crate::store::records::{instance_record, instance_task};
use crate::store::row::ReadRow;
use crate::store::{
    AuditEntry, InstanceBatchPlanner, InstanceFacts, InstancePlan, InstancePlanner, InstanceRecord,
    InstanceTask, InstanceUpsert, InstanceWrite,
};

/// The first row `statement` returns on `conn`, decoded by `decode`, if any.
async fn first_on<D: Dialect, T>(
    conn: &mut D::Conn,
    clock: D::Clock,
    statement: Statement<'_>,
    decode: fn(&D::Row) -> Result<T, sqlx::Error>,
) -> Result<Option<T>, sqlx::Error> {
    let rows = D::run(conn, clock, statement, Fetch::First).await?.rows;
    rows.first().map(decode).transpose()
}

/// Upserts an instance on `conn`, in the upsert's transaction: reads the store's clock, the
/// task's own row and the instance's (held for the transaction), offers them to `planner`, and
/// writes what it decided (see `crate::instance`). The audit entry is the backend's to write,
/// for a written instance.
pub(crate) async fn upsert_instance_on<D: Dialect>(
    conn: &mut D::Conn,
    clock: D::Clock,
    write: &InstanceWrite,
    planner: &InstancePlanner<'_>,
) -> Result<InstanceUpsert, sqlx::Error> {
    const OPERATION: &str = "upsert_instance";
    let now = instance_clock_on::<D>(conn, clock, OPERATION).await?;
    let task = instance_task_on::<D>(conn, clock, OPERATION, &write.task).await?;
    plan_instance_on::<D>(conn, clock, OPERATION, write, task, |facts| {
        planner(facts, now)
    })
    .await
}

/// Upserts a batch of instances on `conn`, in the batch's transaction, each as
/// [`upsert_instance_on`] does one: the store's clock read once, each task's own row once, then
/// every instance's row in one statement (all held for the transaction), each instance offered
/// to `planner` with its index in the batch and its row as the batch's earlier writes of its key
/// left it. The answers are in the batch's order. The audit entries are the backend's to write,
/// for the written instances.
///
/// The rows are written in the order of their names (a key given twice in the batch's order):
/// two batches making the same new instances lock them in the same order, where the batch's
/// own orders would deadlock (PostgreSQL: each insert waits on the other's uncommitted row).
pub(crate) async fn upsert_instances_on<D: Dialect>(
    conn: &mut D::Conn,
    clock: D::Clock,
    batch: &[(InstanceWrite, AuditEntry)],
    planner: &InstanceBatchPlanner<'_>,
) -> Result<Vec<InstanceUpsert>, sqlx::Error> {
    const OPERATION: &str = "upsert_instances";
    let now = instance_clock_on::<D>(conn, clock, OPERATION).await?;
    // The tasks' own rows first, by name, then the instances' (as a single upsert takes them).
    let mut tasks: std::collections::BTreeMap<&str, Option<InstanceTask>> = batch
        .iter()
        .map(|(write, _)| (write.task.as_str(), None))
        .collect();
    for (task, row) in &mut tasks {
        *row = instance_task_on::<D>(conn, clock, OPERATION, task).await?;
    }
    // Every row of the batch read (and held) at once; each write then stands in for its row,
    // so that a key given again sees the batch's earlier write, as a read after it would.
    let names: Vec<String> = batch.iter().map(|(write, _)| write.row()).collect();
    let statement = Statement {
        operation: OPERATION,
        sql: statement!("instance_rows"),
        params: &params![&names[..]],
    };
    let fetched = D::run(conn, clock, statement, Fetch::All).await?.rows;
    let mut rows: std::collections::HashMap<String, InstanceRecord> = Default::default();
    for row in &fetched {
        rows.insert(row.text("name")?, instance_record(row)?);
    }
    // Written by name (a stable sort: a key given twice in the batch's order).
    let mut order: Vec<usize> = (0..batch.len()).collect();
    order.sort_by(|a, b| names[*a].cmp(&names[*b]));
    let mut done: Vec<Option<InstanceUpsert>> = vec![None; batch.len()];
    for index in order {
        let (write, name) = (&batch[index].0, &names[index]);
        let facts = InstanceFacts {
            task: tasks.get(write.task.as_str()).cloned().flatten(),
            existing: rows.get(name).cloned(),
        };
        let upsert =
            write_instance_on::<D>(conn, clock, OPERATION, write, planner(index, &facts, now))
                .await?;
        if let InstanceUpsert::Written(record) = &upsert {
            rows.insert(name.clone(), record.clone());
            let plan = |facts: &InstanceFacts| planner(index, facts, now);
            write_shards_on::<D>(conn, clock, OPERATION, write, facts.task.as_ref(), plan).await?;
        }
        done[index] = Some(upsert);
    }
    Ok(done.into_iter().flatten().collect())
}

/// Whether the nodes must be told of the instances `upserts` wrote, now, in their transaction:
/// only when one of them may be due sooner than everything the nodes running its task wait for.
/// A node running a task wakes for the earliest of its rows (enabled, unpaused, unlocked) and
/// then reads them all again, so an instance due no sooner than another row of its task is seen
/// by then without a word; that spares every node a wake (and its store round) per instance when
/// thousands are made. Told, as before, when none of them is due (disabled, paused or locked:
/// nothing to compare) or no other row of the task is due after now.
pub(crate) async fn instances_wake_on<D: Dialect>(
    conn: &mut D::Conn,
    clock: D::Clock,
    upserts: &[InstanceUpsert],
) -> Result<bool, sqlx::Error> {
    let mut by_task: std::collections::BTreeMap<&str, Vec<String>> = Default::default();
    for upsert in upserts {
        if let InstanceUpsert::Written(record) = upsert {
            by_task
                .entry(record.task.as_str())
                .or_default()
                .push(crate::instance::row_name(&record.task, &record.key));
        }
    }
    for (task, names) in &by_task {
        let statement = Statement {
            operation: "instance_wake",
            sql: statement!("instance_wake"),
            params: &params![*task, &names[..], Now],
        };
        let dues = first_on::<D, _>(conn, clock, statement, |r| {
            Ok((r.time_opt("mine")?, r.time_opt("others")?))
        })
        .await?;
        match dues {
            Some((Some(mine), Some(others))) if others <= mine => {}
            _ => return Ok(true),
        }
    }
    Ok(false)
}

/// The store's clock, read on `conn` for an instance upsert's decision.
async fn instance_clock_on<D: Dialect>(
    conn: &mut D::Conn,
    clock: D::Clock,
    operation: &'static str,
) -> Result<DateTime<Utc>, sqlx::Error> {
    let statement = Statement {
        operation,
        sql: statement!("instance_clock"),
        params: &params![Now],
    };
    first_on::<D, _>(conn, clock, statement, |r| r.time("db_now"))
        .await?
        .ok_or(sqlx::Error::RowNotFound)
}

/// Task `task`'s own row as an instance upsert decides on it, held for the transaction.
async fn instance_task_on<D: Dialect>(
    conn: &mut D::Conn,
    clock: D::Clock,
    operation: &'static str,
    task: &str,
) -> Result<Option<InstanceTask>, sqlx::Error> {
    let statement = Statement {
        operation,
        sql: statement!("instance_task"),
        params: &params![task],
    };
    first_on::<D, _>(conn, clock, statement, instance_task).await
}

/// Reads `write`'s row (held for the transaction), offers it with its task's row `task` to
/// `plan`, and writes what it decided; with its shard rows, for a task with shards.
async fn plan_instance_on<D: Dialect>(
    conn: &mut D::Conn,
    clock: D::Clock,
    operation: &'static str,
    write: &InstanceWrite,
    task: Option<InstanceTask>,
    plan: impl Fn(&InstanceFacts) -> InstancePlan,
) -> Result<InstanceUpsert, sqlx::Error> {
    let row = write.row();
    let statement = Statement {
        operation,
        sql: statement!("instance_row"),
        params: &params![&row],
    };
    let existing = first_on::<D, _>(conn, clock, statement, instance_record).await?;
    let facts = InstanceFacts { task, existing };
    let upsert = write_instance_on::<D>(conn, clock, operation, write, plan(&facts)).await?;
    if matches!(upsert, InstanceUpsert::Written(_)) {
        write_shards_on::<D>(conn, clock, operation, write, facts.task.as_ref(), plan).await?;
    }
    Ok(upsert)
}

/// Applies `plan` to `write`'s row: written as decided (the row as written returned), or
/// nothing for a refusal.
async fn write_instance_on<D: Dialect>(
    conn: &mut D::Conn,
    clock: D::Clock,
    operation: &'static str,
    write: &InstanceWrite,
    plan: InstancePlan,
) -> Result<InstanceUpsert, sqlx::Error> {
    write_row_on::<D>(conn, clock, operation, &write.row(), write, plan).await
}

/// The other rows of an instance of a task with shards (`task/key[i]` for shard `i >= 1`) or of
/// a broadcast task (`task/key[@node]` for each node registering the task, or with a row of
/// the instance already; see `crate::shard`), after its own row was written: each read (held
/// for the transaction), offered to `plan` on its own as the instance's row was (a row whose
/// schedule did not change keeps its next run: a shard behind on a tick still runs it), and
/// written with the instance's cron, zone, arguments and tags; then every row of the instance
/// carries the task's shard count, each of the other rows names the instance's row as the row
/// it groups under (`shard_of`) and a broadcast's are pinned (its own row to no node, `''`), so
/// that the claim's spread, overlap and broadcast rules, a pause, a resume and a removal of the
/// instance reach them. Nothing for any other task. Rows of shards the task no longer has are
/// left to the reconcile, which disables them as it does a task's.
async fn write_shards_on<D: Dialect>(
    conn: &mut D::Conn,
    clock: D::Clock,
    operation: &'static str,
    write: &InstanceWrite,
    task: Option<&InstanceTask>,
    plan: impl Fn(&InstanceFacts) -> InstancePlan,
) -> Result<(), sqlx::Error> {
    let Some(task) = task.filter(|t| t.shards > 1 || t.node_pin.is_some()) else {
        return Ok(());
    };
    let own = write.row();
    // A broadcast instance's rows: one per node registering the task (and not stopped), each
    // pinned to its node; a node that starts later has its reconcile make its own.
    let (names, pins): (Vec<String>, Vec<Option<String>>) = if task.node_pin.is_some() {
        let statement = Statement {
            operation,
            sql: statement!("instance_nodes"),
            params: &params![&write.task, &own],
        };
        let nodes = D::run(conn, clock, statement, Fetch::All).await?.rows;
        let mut pins = Vec::with_capacity(nodes.len());
        for node in &nodes {
            pins.push(node.text("node_id")?);
        }
        pins.sort();
        pins.into_iter()
            .map(|node| (crate::shard::node_row(&own, &node), Some(node)))
            .unzip()
    } else {
        (1..task.shards)
            .map(|index| (crate::shard::row_name(&own, index), None))
            .unzip()
    };
    let statement = Statement {
        operation,
        sql: statement!("instance_rows"),
        params: &params![&names[..]],
    };
    let fetched = D::run(conn, clock, statement, Fetch::All).await?.rows;
    let mut rows: std::collections::HashMap<String, InstanceRecord> = Default::default();
    for row in &fetched {
        rows.insert(row.text("name")?, instance_record(row)?);
    }
    let shards = i64::from(task.shards.max(1));
    // A broadcast instance's own row is pinned to no node: never run, it holds the instance.
    let own_pin = task.node_pin.as_ref().map(|_| "");
    set_shard_on::<D>(conn, clock, operation, &own, shards, None, own_pin).await?;
    for (name, pin) in names.iter().zip(&pins) {
        let facts = InstanceFacts {
            task: Some(task.clone()),
            existing: rows.remove(name),
        };
        write_row_on::<D>(conn, clock, operation, name, write, plan(&facts)).await?;
        let pin = pin.as_deref();
        set_shard_on::<D>(conn, clock, operation, name, shards, Some(&own), pin).await?;
    }
    Ok(())
}

/// Marks instance row `row` a row of `shards` shards, grouped under row `of` (`None`: it is
/// the instance's own row, shard 0), pinned to node `pin` (a broadcast instance's rows: `""`
/// for its own row; `None`: any node).
async fn set_shard_on<D: Dialect>(
    conn: &mut D::Conn,
    clock: D::Clock,
    operation: &'static str,
    row: &str,
    shards: i64,
    of: Option<&str>,
    pin: Option<&str>,
) -> Result<(), sqlx::Error> {
    let statement = Statement {
        operation,
        sql: statement!("instance_shard_set"),
        params: &params![row, shards, of, pin],
    };
    D::execute_on(conn, clock, statement).await?;
    Ok(())
}

/// Applies `plan` to row `row` of `write` (its own, or one of its shards'): written as decided
/// (the row as written returned), or nothing for a refusal.
async fn write_row_on<D: Dialect>(
    conn: &mut D::Conn,
    clock: D::Clock,
    operation: &'static str,
    row: &str,
    write: &InstanceWrite,
    plan: InstancePlan,
) -> Result<InstanceUpsert, sqlx::Error> {
    let (enabled, next_run_at, next_tick, pause) = match plan {
        InstancePlan::Write {
            enabled,
            next_run_at,
            next_tick,
            pause,
        } => (enabled, next_run_at, next_tick, pause),
        InstancePlan::NoTask => return Ok(InstanceUpsert::NoTask),
        InstancePlan::Sharded => return Ok(InstanceUpsert::Sharded),
        InstancePlan::ConfigOwned => return Ok(InstanceUpsert::ConfigOwned),
    };
    let (owners, labels) = write.tags.columns();
    let params = params![
        row,
        &write.cron,
        &write.timezone,
        enabled,
        next_run_at,
        &write.task,
        &write.key,
        write.args.as_deref(),
        Now,
        next_tick,
        write.jitter.map(|w| crate::bounds::JITTER.capped_millis(w)),
        pause.as_ref().map(|p| p.at),
        pause.as_ref().map(|p| p.by.as_str()),
        pause.as_ref().map(|p| p.reason.as_str()),
        pause.as_ref().and_then(|p| p.until),
        owners.as_deref(),
        labels.as_deref(),
        write.limit.as_deref(),
        write.tags.sla.as_deref(),
        write.calendar.as_deref(),
    ];
    let statement = Statement {
        operation,
        sql: statement!("instance_upsert"),
        params: &params,
    };
    let written = first_on::<D, _>(conn, clock, statement, instance_record)
        .await?
        .ok_or(sqlx::Error::RowNotFound)?;
    Ok(InstanceUpsert::Written(written))
}

/// Removes instance `key` of `task` on `conn`, in the removal's transaction: its row (and each
/// of its shard rows, `task/key[i]`) is deleted, or, while a run of it holds its lock, marked
/// removed (nothing of it is due again; the row goes once the lock is released, by
/// `prune_history`). `false`: no such instance. The audit entry is the backend's to write, for
/// a removal.
pub(crate) async fn remove_instance_on<D: Dialect>(
    conn: &mut D::Conn,
    clock: D::Clock,
    task: &str,
    key: &str,
) -> Result<bool, sqlx::Error> {
    let row = crate::instance::row_name(task, key);
    let params = params![&row, Now];
    // The rows without a run in flight deleted, then those left (held by a run) marked.
    let mut removed = 0;
    for (sql, params) in [
        (statement!("instance_delete"), &params[..1]),
        (statement!("instance_mark_removed"), &params[..]),
    ] {
        let statement = Statement {
            operation: "remove_instance",
            sql,
            params,
        };
        removed += D::execute_on(conn, clock, statement).await?;
    }
    Ok(removed > 0)
}

/// Makes the rows `instances` name, `(row, task, key, args, own tags)`, the config's instances
/// on `conn`, in a reconcile's transaction (after its creates and updates wrote their
/// schedules): their task, key, arguments and own owners and labels set, owned by the config,
/// not removed.
pub(crate) async fn mark_config_instances_on<D: Dialect>(
    conn: &mut D::Conn,
    clock: D::Clock,
    instances: &[crate::store::config::ConfigInstanceWrite<'_>],
) -> Result<(), sqlx::Error> {
    for &(row, task, key, args, tags) in instances {
        let (owners, labels) = tags.columns();
        let params = params![
            row,
            task,
            key,
            args,
            Now,
            owners.as_deref(),
            labels.as_deref(),
            tags.sla.as_deref()
        ];
        let statement = Statement {
            operation: "apply_config",
            sql: statement!("instance_config_mark"),
            params: &params,
        };
        D::execute_on(conn, clock, statement).await?;
    }
    Ok(())
}

/// Makes each created row of `rows`, `(row, instance)`, a row of an instance made at run time
/// (a broadcast instance's node row `task/key[@node]`, or a shard row `task/key[i]` its task's
/// grown count adds; see `crate::shard`) on `conn`, in a reconcile's transaction (after its
/// creates): the instance's task, key, arguments, own owners, labels, service levels, limit
/// and jitter window copied from the instance's own row. A statement per
/// [`RECONCILE_BATCH`](crate::store::config::RECONCILE_BATCH) rows.
pub(crate) async fn copy_instance_nodes_on<D: Dialect>(
    conn: &mut D::Conn,
    clock: D::Clock,
    rows: &[(&str, &str)],
) -> Result<(), sqlx::Error> {
    for batch in rows.chunks(crate::store::config::RECONCILE_BATCH) {
        let (names, of): (Vec<String>, Vec<String>) = batch
            .iter()
            .map(|&(row, of)| (row.to_owned(), of.to_owned()))
            .unzip();
        let statement = Statement {
            operation: "apply_config",
            sql: statement!("instance_node_copy"),
            params: &params![&names[..], &of[..]],
        };
        D::execute_on(conn, clock, statement).await?;
    }
    Ok(())
}
