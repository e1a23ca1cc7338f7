//! The reads both backends run alike, written once over [`Dialect`]: what they read is the same
//! statement in each backend's SQL, bound each backend's way, decoded by `records.rs`. The page
//! sizes, the checks of what a caller asked and the choice of statement are made here; a
//! backend's `operations/` keeps only what it runs its own way. Each function is an operation
//! of `store_methods!`, called by the backend's generated `impl Store` (`store_fns!`).

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::store::dialect::{Dialect, Now, Sql};
use crate::store::records::{
    audit_entry, backfill_record, backfill_tick, cancellation, config_state_of, delivery_record,
    incident, instance_record, instance_state, instance_summary, log_chunk, node_record,
    overdue_task, run_record, skip_record, snooze, task_state,
};
use crate::store::row::ReadRow;
use crate::store::{
    AuditEntry, BackfillRecord, BackfillTick, Cancellation, ConfigState, DeliveryRecord,
    IncidentQuery, IncidentRecord, InstanceQuery, InstanceRecord, InstanceState, InstanceSummary,
    LogChunk, NodeRecord, OverdueTask, RunQuery, RunRecord, SkipRecord, Snooze, StoreError,
    StoreResult, TaskState,
};

/// The most runs one query returns.
const MAX_RUNS_PER_PAGE: u32 = 1_000;
/// The most skip records one read of every task's returns.
const MAX_SKIPS_PER_READ: u32 = 10_000;

/// A limit as both backends bind it (a `u32` is never the negative LIMIT SQLite reads as none).
fn limit(n: u32) -> i64 {
    i64::from(n)
}

pub(crate) async fn runs(store: &impl Dialect, q: &RunQuery) -> StoreResult<Vec<RunRecord>> {
    // The filter that leads picks the statement: SQLite has one per leading filter, each
    // written so that the filter picks its index (a task's runs are few, a time window is
    // bounded, a status or a trigger of interest is usually rare); PostgreSQL one for all.
    let sql = if q.task.is_some() && q.key.is_some() {
        statement!(runs postgres: "runs_query", sqlite: "runs_by_instance")
    } else if q.task.is_some() {
        statement!(runs postgres: "runs_query", sqlite: "runs_by_task")
    } else if q.since.is_some() {
        statement!(runs postgres: "runs_query", sqlite: "runs_by_time")
    } else if q.status.is_some() {
        statement!(runs postgres: "runs_query", sqlite: "runs_by_status")
    } else if q.trigger.is_some() {
        statement!(runs postgres: "runs_query", sqlite: "runs_by_trigger")
    } else {
        statement!(runs "runs_query")
    };
    let params = params![
        q.task.as_deref(),
        q.status.map(|s| s.as_str()),
        q.trigger.map(|t| t.as_str()),
        q.since,
        q.until,
        q.before_id,
        limit(q.limit.clamp(1, MAX_RUNS_PER_PAGE)),
        q.key.as_deref(),
    ];
    store.fetch_all("runs", sql, &params, run_record).await
}

pub(crate) async fn run(store: &impl Dialect, run_id: i64) -> StoreResult<Option<RunRecord>> {
    let sql = statement!(runs "run_one");
    store
        .fetch_optional("run", sql, &params![run_id], run_record)
        .await
}

pub(crate) async fn recent_runs(
    store: &impl Dialect,
    task_name: Option<&str>,
    limit: i64,
) -> StoreResult<Vec<RunRecord>> {
    if limit < 0 {
        // SQLite reads a negative LIMIT as none; PostgreSQL refuses it. Refused alike, here.
        return Err(StoreError::Rejected {
            operation: "recent_runs",
            source: "LIMIT must not be negative".into(),
        });
    }
    let sql = statement!(runs "recent_runs");
    store
        .fetch_all("recent_runs", sql, &params![task_name, limit], run_record)
        .await
}

pub(crate) async fn skips(
    store: &impl Dialect,
    task_name: &str,
    since: DateTime<Utc>,
) -> StoreResult<Vec<SkipRecord>> {
    let sql = Sql::shared(shared_query!("skips_select"));
    store
        .fetch_all("skips", sql, &params![task_name, since], skip_record)
        .await
}

pub(crate) async fn latest_runs_per_task(
    store: &impl Dialect,
    tasks: &[String],
    per_task: u32,
    since: DateTime<Utc>,
) -> StoreResult<Vec<RunRecord>> {
    let per_task = limit(per_task.clamp(1, MAX_RUNS_PER_PAGE));
    let sql = statement!(runs "runs_per_task");
    let params = params![tasks, per_task, since];
    store
        .fetch_all("latest_runs_per_task", sql, &params, run_record)
        .await
}

pub(crate) async fn skips_since(
    store: &impl Dialect,
    since: DateTime<Utc>,
    limit: u32,
) -> StoreResult<Vec<SkipRecord>> {
    let limit = self::limit(limit.clamp(1, MAX_SKIPS_PER_READ));
    let sql = Sql::shared(shared_query!("skips_since"));
    store
        .fetch_all("skips_since", sql, &params![since, limit], skip_record)
        .await
}

pub(crate) async fn latest_skips_per_task(
    store: &impl Dialect,
    tasks: &[String],
    per_task: u32,
    since: DateTime<Utc>,
) -> StoreResult<Vec<SkipRecord>> {
    let per_task = limit(per_task.clamp(1, MAX_SKIPS_PER_READ));
    let sql = statement!("skips_per_task");
    let params = params![tasks, per_task, since];
    store
        .fetch_all("latest_skips_per_task", sql, &params, skip_record)
        .await
}

pub(crate) async fn run_log(store: &impl Dialect, run_id: i64) -> StoreResult<Vec<LogChunk>> {
    let sql = Sql::shared(shared_query!("run_logs_select"));
    store
        .fetch_all("run_log", sql, &params![run_id], log_chunk)
        .await
}

pub(crate) async fn nodes(store: &impl Dialect) -> StoreResult<Vec<NodeRecord>> {
    store
        .fetch_all("nodes", statement!("nodes"), &[], node_record)
        .await
}

pub(crate) async fn task_states(
    store: &impl Dialect,
    task: Option<&str>,
) -> StoreResult<Vec<TaskState>> {
    let sql = statement!(states "task_states");
    store
        .fetch_all("task_states", sql, &params![task], task_state)
        .await
}

pub(crate) async fn task_states_named(
    store: &impl Dialect,
    tasks: &[String],
) -> StoreResult<Vec<TaskState>> {
    let sql = statement!(states "task_states_named");
    store
        .fetch_all("task_states_named", sql, &params![tasks], task_state)
        .await
}

pub(crate) async fn audit_log(
    store: &impl Dialect,
    limit: u32,
    before_id: Option<i64>,
) -> StoreResult<Vec<AuditEntry>> {
    let params = params![self::limit(limit), before_id];
    store
        .fetch_all("audit_log", statement!("audit_list"), &params, audit_entry)
        .await
}

pub(crate) async fn incidents(
    store: &impl Dialect,
    query: &IncidentQuery,
) -> StoreResult<Vec<IncidentRecord>> {
    let params = params![query.open, query.task.as_deref(), limit(query.limit)];
    store
        .fetch_all("incidents", statement!("incidents_list"), &params, incident)
        .await
}

pub(crate) async fn snoozes(store: &impl Dialect) -> StoreResult<Vec<Snooze>> {
    store
        .fetch_all("snoozes", statement!("snoozes"), &params![Now], snooze)
        .await
}

pub(crate) async fn overdue_tasks(
    store: &impl Dialect,
    late_by: Duration,
    limit: u32,
) -> StoreResult<Vec<OverdueTask>> {
    let params = params![late_by, self::limit(limit), Now];
    let sql = statement!("overdue_tasks");
    store
        .fetch_all("overdue_tasks", sql, &params, overdue_task)
        .await
}

pub(crate) async fn cancel_requests(
    store: &impl Dialect,
    run_ids: &[i64],
) -> StoreResult<Vec<Cancellation>> {
    let sql = statement!("cancel_requests");
    store
        .fetch_all("cancel_requests", sql, &params![run_ids], cancellation)
        .await
}

pub(crate) async fn deliveries(
    store: &impl Dialect,
    limit: u32,
) -> StoreResult<Vec<DeliveryRecord>> {
    let sql = Sql::shared(shared_query!("deliveries"));
    let params = params![self::limit(limit)];
    store
        .fetch_all("deliveries", sql, &params, delivery_record)
        .await
}

pub(crate) async fn webhook_disabled(
    store: &impl Dialect,
    url_digest: &str,
) -> StoreResult<Option<String>> {
    let sql = Sql::shared(shared_query!("webhook_state"));
    store
        .fetch_optional("webhook_disabled", sql, &params![url_digest], |row| {
            row.text("disabled_reason")
        })
        .await
}

pub(crate) async fn config_state(store: &impl Dialect) -> StoreResult<Option<ConfigState>> {
    let sql = Sql::shared(shared_query!("config_state"));
    store
        .fetch_optional("config_state", sql, &[], config_state_of)
        .await
}

pub(crate) async fn succeeded_ticks(
    store: &impl Dialect,
    task_name: &str,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> StoreResult<Vec<DateTime<Utc>>> {
    let sql = Sql::shared(shared_query!("backfill_succeeded"));
    // An instance's (`task/key`) runs are recorded under its task with its key.
    let (task, key) = match crate::instance::split_row(task_name) {
        Some((task, key)) => (task, Some(key)),
        None => (task_name, None),
    };
    store
        .fetch_all(
            "succeeded_ticks",
            sql,
            &params![task, from, to, key],
            |row| row.time("scheduled_at"),
        )
        .await
}

pub(crate) async fn backfills(
    store: &impl Dialect,
    task_name: Option<&str>,
    limit: u32,
) -> StoreResult<Vec<BackfillRecord>> {
    let params = params![task_name, self::limit(limit), None::<i64>];
    let sql = statement!("backfills_list");
    store
        .fetch_all("backfills", sql, &params, backfill_record)
        .await
}

pub(crate) async fn backfill(
    store: &impl Dialect,
    id: i64,
) -> StoreResult<Option<(BackfillRecord, Vec<BackfillTick>)>> {
    let params = params![None::<&str>, 1_i64, id];
    let sql = statement!("backfills_list");
    let Some(record) = store
        .fetch_optional("backfill", sql, &params, backfill_record)
        .await?
    else {
        return Ok(None);
    };
    let sql = Sql::shared(shared_query!("backfill_ticks"));
    let mut ticks = store
        .fetch_all("backfill", sql, &params![id], backfill_tick)
        .await?;
    // Every tick runs on each of the backfill's rows: its shards.
    let shards: std::collections::BTreeSet<u32> = ticks.iter().map(|t| t.shard_index).collect();
    let total = u32::try_from(shards.len()).unwrap_or(u32::MAX).max(1);
    for tick in &mut ticks {
        tick.shard_total = total;
    }
    // By tick, then by shard (the rows' names sort `t[10]` before `t[2]`).
    ticks.sort_by_key(|t| (t.tick, t.shard_index));
    Ok(Some((record, ticks)))
}

pub(crate) async fn instances(
    store: &impl Dialect,
    task: &str,
) -> StoreResult<Vec<InstanceRecord>> {
    let sql = statement!("instances_list");
    store
        .fetch_all("instances", sql, &params![task], instance_record)
        .await
}

pub(crate) async fn instance(
    store: &impl Dialect,
    task: &str,
    key: &str,
) -> StoreResult<Option<InstanceRecord>> {
    let row = crate::instance::row_name(task, key);
    let sql = statement!("instance_one");
    let params = params![row.as_str(), task, key];
    store
        .fetch_optional("instance", sql, &params, instance_record)
        .await
}

pub(crate) async fn instances_named(
    store: &impl Dialect,
    instances: &[(String, String)],
) -> StoreResult<Vec<InstanceRecord>> {
    // Read by their rows' names (the primary key), each kept only if its row is the task's
    // instance of that key, as `instance` reads one.
    let rows: Vec<String> = instances
        .iter()
        .map(|(task, key)| crate::instance::row_name(task, key))
        .collect();
    let wanted: std::collections::HashSet<(&str, &str)> = instances
        .iter()
        .map(|(task, key)| (task.as_str(), key.as_str()))
        .collect();
    let sql = statement!("instances_named");
    let found = store
        .fetch_all("instances_named", sql, &params![&rows[..]], instance_record)
        .await?;
    Ok(found
        .into_iter()
        .filter(|i| wanted.contains(&(i.task.as_str(), i.key.as_str())))
        .collect())
}

pub(crate) async fn instance_states(
    store: &impl Dialect,
    query: &InstanceQuery,
) -> StoreResult<Vec<InstanceState>> {
    if let Some(key) = &query.key {
        // One instance: read by its row, whatever the number of its task's instances; the
        // other filters are checked here.
        let contains = query.key_contains.as_deref().is_none_or(|text| {
            key.to_ascii_lowercase()
                .contains(&text.to_ascii_lowercase())
        });
        let after = query
            .after_key
            .as_deref()
            .is_none_or(|after| key.as_str() > after);
        if !contains || !after || query.limit == 0 {
            return Ok(Vec::new());
        }
        let row = crate::instance::row_name(&query.task, key);
        let params = params![
            row.as_str(),
            query.task.as_str(),
            key.as_str(),
            query.removed
        ];
        let sql = statement!(states "instance_state_one");
        return store
            .fetch_all("instance_states", sql, &params, instance_state)
            .await;
    }
    let pattern = query.like_pattern();
    let params = params![
        query.task.as_str(),
        pattern.as_str(),
        query.key.as_deref(),
        query.after_key.as_deref(),
        limit(
            query
                .limit
                .clamp(1, super::instance_views::MAX_INSTANCES_PER_PAGE)
        ),
        query.removed,
    ];
    let sql = statement!(states "instance_states");
    store
        .fetch_all("instance_states", sql, &params, instance_state)
        .await
}

pub(crate) async fn instance_summaries(
    store: &impl Dialect,
    task: Option<&str>,
) -> StoreResult<Vec<InstanceSummary>> {
    let mut rows = match task {
        None => {
            let sql = Sql::shared(shared_query!("instance_summaries"));
            store
                .fetch_all("instance_summaries", sql, &[], instance_summary)
                .await?
        }
        Some(task) => {
            let sql = Sql::shared(assembled_query!(
                crate::store::queries::one_task_instance_summaries,
                shared_query!("instance_summaries")
            ));
            let params = params![task];
            store
                .fetch_all("instance_summaries", sql, &params, instance_summary)
                .await?
        }
    };
    one_latest_per_task(&mut rows);
    Ok(rows)
}

/// Keeps one row per task: of the rows tied on a task's latest start, the one of the first key.
fn one_latest_per_task(rows: &mut Vec<InstanceSummary>) {
    let key = |s: &InstanceSummary| s.latest.as_ref().map(|l| l.key.clone());
    rows.sort_by(|a, b| a.task.cmp(&b.task).then_with(|| key(a).cmp(&key(b))));
    rows.dedup_by(|later, first| later.task == first.task);
}

pub(crate) async fn latest_runs_per_instance(
    store: &impl Dialect,
    task: &str,
    keys: &[String],
    per_key: u32,
) -> StoreResult<Vec<RunRecord>> {
    let per_key = limit(per_key.clamp(1, MAX_RUNS_PER_PAGE));
    let sql = statement!(runs "runs_per_instance");
    let params = params![task, keys, per_key];
    store
        .fetch_all("latest_runs_per_instance", sql, &params, run_record)
        .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::LatestInstanceRun;

    fn summary(task: &str, key: Option<&str>) -> InstanceSummary {
        InstanceSummary {
            task: task.to_owned(),
            instances: 2,
            running: 0,
            failing: 0,
            ran: 2,
            next_run_at: None,
            latest: key.map(|key| LatestInstanceRun {
                key: key.to_owned(),
                started_at: DateTime::<Utc>::UNIX_EPOCH,
                finished_at: None,
                status: None,
            }),
        }
    }

    #[test]
    fn rows_tied_on_a_tasks_latest_start_keep_the_first_key() {
        let mut rows = vec![
            summary("b", Some("z")),
            summary("a", Some("y")),
            summary("b", Some("x")),
            summary("c", None),
        ];
        one_latest_per_task(&mut rows);
        let kept: Vec<(&str, Option<&str>)> = rows
            .iter()
            .map(|s| (s.task.as_str(), s.latest.as_ref().map(|l| l.key.as_str())))
            .collect();
        assert_eq!(kept, [("a", Some("y")), ("b", Some("x")), ("c", None)]);
    }
}
