//! Each record a store returns, decoded from a result row once for both backends, through the
//! row-reading seam ([`ReadRow`]): the columns each query returns under these names, whatever
//! the backend stores them as.

use super::row::{ReadRow, unknown};
use super::{
    AuditEntry, BackfillProgress, BackfillRecord, BackfillTick, Cancellation, ConfigState,
    DeliveryRecord, DueTask, ExpiredLock, IncidentRecord, InstanceRecord, InstanceSource,
    InstanceState, InstanceSummary, InstanceTags, InstanceTask, LatestInstanceRun, LockKey,
    LockedRun, LogChunk, NodeRecord, OutboxRow, OverdueTask, Pause, PendingBackfill, PendingManual,
    PendingRetry, Recovery, RunRecord, RunStatus, SkipReason, SkipRecord, Snooze, TaskRow,
    TaskState, Trigger,
};
use crate::shard::ShardFacts;

fn parse_status(s: &str) -> Result<RunStatus, sqlx::Error> {
    RunStatus::parse(s).ok_or_else(|| unknown("run status", s))
}

pub(crate) fn parse_trigger(s: &str) -> Result<Trigger, sqlx::Error> {
    Trigger::parse(s).ok_or_else(|| unknown("trigger", s))
}

fn parse_reason(s: &str) -> Result<SkipReason, sqlx::Error> {
    SkipReason::parse(s).ok_or_else(|| unknown("skip reason", s))
}

fn parse_recovery(s: &str) -> Recovery {
    // A value this binary does not know is treated as the safe default of older binaries.
    s.parse().unwrap_or_default()
}

/// A count as `u32`, saturating.
fn count(n: i64) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

// ---- runs and skips -----------------------------------------------------------------------

/// A run, decoded where its type is defined ([`RunRecord::read`]: the one place in Rust a column of
/// the runs table is named, beside `queries/run_columns.sql`).
pub(crate) fn run_record(row: &impl ReadRow) -> Result<RunRecord, sqlx::Error> {
    RunRecord::read(row)
}

pub(crate) fn skip_record(row: &impl ReadRow) -> Result<SkipRecord, sqlx::Error> {
    let mut skip = SkipRecord::new(
        row.text("task_name")?,
        parse_reason(&row.text("reason")?)?,
        row.time("first_tick")?,
        row.time("last_tick")?,
        row.int("ticks")?,
    );
    skip.exact = row.flag("exact")?;
    skip.run_id = row.int_opt("run_id")?;
    Ok(skip)
}

pub(crate) fn log_chunk(row: &impl ReadRow) -> Result<LogChunk, sqlx::Error> {
    Ok(LogChunk {
        run_id: row.int("run_id")?,
        seq: row.int32("seq")?,
        text: row.text("text")?,
        lines: row.int32("lines")?,
        truncated: row.flag("truncated")?,
    })
}

pub(crate) fn cancellation(row: &impl ReadRow) -> Result<Cancellation, sqlx::Error> {
    Ok(Cancellation {
        run_id: row.int("id")?,
        by: row.text("cancel_requested_by")?,
        at: row.time("cancel_requested_at")?,
    })
}

// ---- tasks --------------------------------------------------------------------------------

/// The pause held in a row's `paused_*` columns, if any.
pub(crate) fn pause_of(row: &impl ReadRow) -> Result<Option<Pause>, sqlx::Error> {
    Ok(match row.time_opt("paused_at")? {
        Some(at) => Some(Pause::new(
            at,
            row.text("paused_by")?,
            row.text("pause_reason")?,
            row.time_opt("pause_until")?,
        )),
        None => None,
    })
}

pub(crate) fn task_state(row: &impl ReadRow) -> Result<TaskState, sqlx::Error> {
    Ok(TaskState {
        name: row.text("name")?,
        cron: row.text("cron")?,
        timezone: row.text("timezone")?,
        calendar: row.text_opt("calendar")?,
        enabled: row.flag("enabled")?,
        next_run_at: row.time_opt("next_run_at")?,
        next_tick: row.time_opt("next_tick")?.or(row.time_opt("next_run_at")?),
        lock_owner: row.text_opt("lock_owner")?,
        lock_expires_at: row.time_opt("lock_expires_at")?,
        last_run_at: row.time_opt("last_run_at")?,
        last_finished_at: row.time_opt("last_finished_at")?,
        last_status: row
            .text_opt("last_status")?
            .as_deref()
            .map(parse_status)
            .transpose()?,
        last_error: row.text_opt("last_error")?,
        consecutive_failures: row.int32("consecutive_failures")?,
        pause: pause_of(row)?,
        retry_at: row.time_opt("retry_at")?,
        manual_at: row.time_opt("manual_at")?,
        missed_since: row.time_opt("missed_since")?,
        orphaned_since: row.time_opt("orphaned_since")?,
        disabled_at: row.time_opt("disabled_at")?,
        shards: u32::try_from(row.int("shards")?).unwrap_or(1),
        broadcast: row.text_opt("node_pin")?.is_some(),
    })
}

/// A row a resume plans (`resume_select.sql`, `resume_instances.sql`): its state, and its
/// jitter window (`jitter_window_ms`: its own, else its task's; NULL: none).
pub(crate) fn resume_row(
    row: &impl ReadRow,
) -> Result<(TaskState, std::time::Duration), sqlx::Error> {
    let window = row
        .int_opt("jitter_window_ms")?
        .map_or(0, |ms| u64::try_from(ms).unwrap_or(0));
    Ok((task_state(row)?, std::time::Duration::from_millis(window)))
}

pub(crate) fn task_row(row: &impl ReadRow) -> Result<TaskRow, sqlx::Error> {
    let mut task = TaskRow::new(
        &row.text("name")?,
        &row.text("cron")?,
        &row.text("timezone")?,
        row.flag("enabled")?,
    );
    task.calendar = row.text_opt("calendar")?;
    task.next_run_at = row.time_opt("next_run_at")?;
    task.last_scheduled_at = row.time_opt("last_scheduled_at")?;
    task.orphaned_since = row.time_opt("orphaned_since")?;
    task.disabled_at = row.time_opt("disabled_at")?;
    task.paused = row.flag("paused")?;
    task.shards = u32::try_from(row.int("shards")?).unwrap_or(1);
    task.node_pin = row.text_opt("node_pin")?;
    task.removed = row.flag("removed")?;
    task.args = row.text_opt("args")?;
    task.instance_source = InstanceSource::parse(row.text_opt("instance_source")?.as_deref());
    task.limit = row.text_opt("limit_name")?;
    task.jitter = jitter_of(row)?;
    task.tags = instance_tags(row)?;
    Ok(task)
}

// ---- instances ----------------------------------------------------------------------------

/// An instance's row (`instances_list.sql`, `instance_row.sql`, `instance_upsert.sql`).
pub(crate) fn instance_record(row: &impl ReadRow) -> Result<InstanceRecord, sqlx::Error> {
    Ok(InstanceRecord {
        task: row.text("task")?,
        key: row.text("key")?,
        cron: row.text("cron")?,
        timezone: row.text("timezone")?,
        args: row.text_opt("args")?,
        enabled: row.flag("enabled")?,
        next_run_at: row.time_opt("next_run_at")?,
        next_tick: row.time_opt("next_tick")?,
        jitter: jitter_of(row)?,
        last_scheduled_at: row.time_opt("last_scheduled_at")?,
        removed: row.flag("removed")?,
        source: InstanceSource::parse(row.text_opt("instance_source")?.as_deref()),
        tags: instance_tags(row)?,
        limit: row.text_opt("limit_name")?,
        calendar: row.text_opt("calendar")?,
    })
}

/// A row's own owners, labels and service levels (`owners`, `labels`, `sla`: JSON text; NULL:
/// none of its own).
pub(crate) fn instance_tags(row: &impl ReadRow) -> Result<InstanceTags, sqlx::Error> {
    InstanceTags::from_columns(
        row.text_opt("owners")?.as_deref(),
        row.text_opt("labels")?.as_deref(),
        row.text_opt("sla")?,
    )
    .map_err(|e| sqlx::Error::Decode(Box::new(e)))
}

/// An instance's row with its state (`instance_states.sql`).
/// A task's instances at a glance (`instance_summaries.sql`).
pub(crate) fn instance_summary(row: &impl ReadRow) -> Result<InstanceSummary, sqlx::Error> {
    let count =
        |column| -> Result<u64, sqlx::Error> { Ok(u64::try_from(row.int(column)?).unwrap_or(0)) };
    let latest = match row.time_opt("last_run_at")? {
        Some(started_at) => Some(LatestInstanceRun {
            key: row.text("key")?,
            started_at,
            finished_at: row.time_opt("last_finished_at")?,
            status: row
                .text_opt("last_status")?
                .as_deref()
                .map(parse_status)
                .transpose()?,
        }),
        None => None,
    };
    Ok(InstanceSummary {
        task: row.text("task")?,
        instances: count("instances")?,
        running: count("running")?,
        failing: count("failing")?,
        ran: count("ran")?,
        next_run_at: row.time_opt("next_run_at")?,
        latest,
    })
}

pub(crate) fn instance_state(row: &impl ReadRow) -> Result<InstanceState, sqlx::Error> {
    Ok(InstanceState {
        task: row.text("task")?,
        key: row.text("key")?,
        args: row.text_opt("args")?,
        source: InstanceSource::parse(row.text_opt("instance_source")?.as_deref()),
        removed: row.flag("removed")?,
        tags: instance_tags(row)?,
        limit: row.text_opt("limit_name")?,
        jitter: jitter_of(row)?,
        state: task_state(row)?,
    })
}

/// A task's own row as an instance upsert reads it (`instance_task.sql`).
pub(crate) fn instance_task(row: &impl ReadRow) -> Result<InstanceTask, sqlx::Error> {
    Ok(InstanceTask {
        enabled: row.flag("enabled")?,
        shards: u32::try_from(row.int("shards")?).unwrap_or(1),
        node_pin: row.text_opt("node_pin")?,
        jitter: jitter_of(row)?,
        calendar: row.text_opt("calendar")?,
        pause: pause_of(row)?,
    })
}

pub(crate) fn config_state_of(row: &impl ReadRow) -> Result<ConfigState, sqlx::Error> {
    Ok(ConfigState::new(
        row.int_opt("version")?,
        row.text("digest")?,
        row.text("applied_by")?,
    ))
}

pub(crate) fn overdue_task(row: &impl ReadRow) -> Result<OverdueTask, sqlx::Error> {
    Ok(OverdueTask {
        name: row.text("name")?,
        cron: row.text("cron")?,
        timezone: row.text("timezone")?,
        calendar: row.text_opt("calendar")?,
        next_run_at: row.time("next_run_at")?,
        last_run_at: row.time_opt("last_run_at")?,
        checked_at: row.time("checked_at")?,
        tags: instance_tags(row)?,
    })
}

pub(crate) fn audit_entry(row: &impl ReadRow) -> Result<AuditEntry, sqlx::Error> {
    Ok(AuditEntry {
        id: row.int("id")?,
        at: row.time("at")?,
        actor: row.text("actor")?,
        action: row.text("action")?,
        task: row.text("task")?,
        detail: row.text("detail")?,
        source: row.text("source")?,
    })
}

// ---- claims -------------------------------------------------------------------------------

/// A row's own jitter window (`jitter_ms`; NULL: none of its own).
fn jitter_of(row: &impl ReadRow) -> Result<Option<std::time::Duration>, sqlx::Error> {
    Ok(row
        .int_opt("jitter_ms")?
        .map(|ms| std::time::Duration::from_millis(u64::try_from(ms).unwrap_or(0))))
}

pub(crate) fn due_task(row: &impl ReadRow) -> Result<DueTask, sqlx::Error> {
    Ok(DueTask {
        name: row.text("name")?,
        cron: row.text("cron")?,
        timezone: row.text("timezone")?,
        calendar: row.text_opt("calendar")?,
        enabled: row.flag("enabled")?,
        next_run_at: row.time_opt("next_run_at")?,
        next_tick: row.time_opt("next_tick")?,
        jitter: jitter_of(row)?,
        last_scheduled_at: row.time_opt("last_scheduled_at")?,
        last_finished_at: row.time_opt("last_finished_at")?,
        retry: match row.time_opt("retry_at")? {
            Some(at) => Some(PendingRetry {
                tick: row.time("retry_tick")?,
                attempt: row.int32("retry_attempt")?,
                at,
            }),
            None => None,
        },
        manual: match row.time_opt("manual_at")? {
            Some(at) => Some(PendingManual {
                at,
                by: row.text_opt("manual_by")?,
            }),
            None => None,
        },
        pause: pause_of(row)?,
        missed_since: row.time_opt("missed_since")?,
        backfill: match (
            row.int_opt("backfill_id")?,
            row.time_opt("backfill_at")?,
            row.time_opt("backfill_tick")?,
        ) {
            (Some(id), Some(at), Some(tick)) => Some(PendingBackfill {
                id,
                tick,
                at,
                by: row.text_opt("backfill_by")?.unwrap_or_default(),
            }),
            _ => None,
        },
        shards: u32::try_from(row.int("shards")?).unwrap_or(1),
        node_pin: row.text_opt("node_pin")?,
        broadcast: None,
        args: row.text_opt("args")?,
        manual_args: row.text_opt("manual_args")?,
        tags: instance_tags(row)?,
        limit: row.text_opt("limit_name")?,
        limit_waiting_since: row.time_opt("limit_waiting_since")?,
    })
}

/// A lock as a row names it: its task's row (`name`) and its `lock_token`.
pub(crate) fn lock_key(row: &impl ReadRow) -> Result<LockKey, sqlx::Error> {
    Ok(LockKey::new(row.text("name")?, row.uuid("lock_token")?))
}

pub(crate) fn expired_lock(row: &impl ReadRow) -> Result<ExpiredLock, sqlx::Error> {
    let run = match row.int_opt("run_id")? {
        Some(run_id) => Some(LockedRun {
            run_id,
            scheduled_at: row.time("run_scheduled_at")?,
            recovery: parse_recovery(&row.text("run_recovery")?),
            attempt: row.int32("run_attempt")?,
            trigger: parse_trigger(&row.text("run_trigger")?)?,
            triggered_by: row.text_opt("run_triggered_by")?,
            cancel_requested_by: row.text_opt("run_cancel_requested_by")?,
        }),
        None => None,
    };
    Ok(ExpiredLock {
        key: lock_key(row)?,
        owner: row.text("lock_owner")?,
        expired_at: row.time("lock_expires_at")?,
        run,
        // Whether another transaction holds the row is the claim's to find out (PostgreSQL:
        // claim_expired_free.sql); SQLite has no row locks.
        busy: false,
    })
}

/// What the store knows about a shard's tick (the rest is filled in by the caller).
pub(crate) fn shard_facts(row: &impl ReadRow) -> Result<ShardFacts, sqlx::Error> {
    Ok(ShardFacts {
        behind: row.flag("behind")?,
        mine: count(row.int("mine")?),
        others: count(row.int("others")?),
        rank: count(row.int("rank")?),
        started: count(row.int("started")?),
        ..ShardFacts::default()
    })
}

// ---- backfills ----------------------------------------------------------------------------

pub(crate) fn backfill_record(row: &impl ReadRow) -> Result<BackfillRecord, sqlx::Error> {
    let cancelled_at = row.time_opt("cancelled_at")?;
    // Sums over no tick are NULL on SQLite.
    let sum = |column| Ok::<_, sqlx::Error>(row.int_opt(column)?.unwrap_or(0));
    let unrun = sum("unrun")?;
    let (pending, cancelled) = if cancelled_at.is_some() {
        (0, unrun)
    } else {
        (unrun, 0)
    };
    Ok(BackfillRecord {
        id: row.int("id")?,
        task_name: row.text("task_name")?,
        from: row.time("range_from")?,
        to: row.time("range_to")?,
        all_ticks: row.flag("all_ticks")?,
        max_runs: row.int("max_runs")?,
        concurrency: row.int("concurrency")?,
        pace_ms: row.int("pace_ms")?,
        requested_by: row.text("requested_by")?,
        requested_at: row.time("requested_at")?,
        cancelled_at,
        cancelled_by: row.text_opt("cancelled_by")?,
        progress: BackfillProgress {
            total: row.int("total")?,
            pending,
            running: sum("running")?,
            succeeded: sum("succeeded")?,
            failed: sum("failed")?,
            cancelled,
        },
    })
}

pub(crate) fn backfill_tick(row: &impl ReadRow) -> Result<BackfillTick, sqlx::Error> {
    // Its row's shard (`task[i]`, `task/key[i]`); the total is the backfill's rows, counted by
    // the caller over every entry.
    let row_name = row.text("row_name")?;
    Ok(BackfillTick {
        tick: row.time("tick")?,
        shard_index: crate::shard::split_row(&row_name).1,
        shard_total: 1,
        run_id: row.int_opt("run_id")?,
        run_status: row
            .text_opt("status")?
            .as_deref()
            .map(parse_status)
            .transpose()?,
    })
}

// ---- incidents ----------------------------------------------------------------------------

pub(crate) fn incident(row: &impl ReadRow) -> Result<IncidentRecord, sqlx::Error> {
    Ok(IncidentRecord {
        id: row.int("id")?,
        task_name: row.text("task_name")?,
        kind: row.text("kind")?,
        opened_at: row.time("opened_at")?,
        last_seen_at: row.time("last_seen_at")?,
        count: row.int("count")?,
        last_key: row.text_opt("last_key")?,
        summary: row.text("summary")?,
        notified_at: row.time_opt("notified_at")?,
        remind_every_ms: row.int_opt("remind_every_ms")?,
        reminded_at: row.time_opt("reminded_at")?,
        reminders: row.int("reminders")?,
        closed_at: row.time_opt("closed_at")?,
        closed_by: row.text_opt("closed_by")?,
    })
}

pub(crate) fn snooze(row: &impl ReadRow) -> Result<Snooze, sqlx::Error> {
    Ok(Snooze {
        task_name: row.text("task_name")?,
        until: row.time("until")?,
        reason: row.text("reason")?,
        by: row.text("snoozed_by")?,
        at: row.time("snoozed_at")?,
    })
}

// ---- nodes and the outbox -----------------------------------------------------------------

pub(crate) fn node_record(row: &impl ReadRow) -> Result<NodeRecord, sqlx::Error> {
    Ok(NodeRecord {
        node_id: row.text("node_id")?,
        hostname: row.text("hostname")?,
        pid: row.int32("pid")?,
        version: row.text("version")?,
        tasks: row.names("tasks")?,
        started_at: row.time("started_at")?,
        heartbeat_at: row.time("heartbeat_at")?,
        stopped_at: row.time_opt("stopped_at")?,
        running: row.int("running")?,
        services_down: super::nodes::split_services(&row.text("services_down")?),
        database_server: row.text_opt("database_server")?,
    })
}

pub(crate) fn outbox_row(row: &impl ReadRow) -> Result<OutboxRow, sqlx::Error> {
    Ok(OutboxRow {
        id: row.int("id")?,
        channel: row.text("channel")?,
        kind: row.text("event_type")?,
        payload: row.text("payload")?,
        attempts: row.int32("attempts")?,
        created_at: row.time("created_at")?,
    })
}

pub(crate) fn delivery_record(row: &impl ReadRow) -> Result<DeliveryRecord, sqlx::Error> {
    Ok(DeliveryRecord {
        outbox_id: row.int("outbox_id")?,
        channel: row.text("channel")?,
        kind: row.text("event_type")?,
        attempt: row.int32("attempt")?,
        node_id: row.text("node_id")?,
        at: row.time("at")?,
        status: row.int32_opt("status")?,
        error: row.text_opt("error")?,
        duration_ms: row.int32("duration_ms")?,
    })
}

#[cfg(test)]
mod tests;
