//! The views several resources answer with: a run (placed at its tick's start where its task
//! is known, [`run_starts`]), a task's pause.

use std::collections::{BTreeSet, HashMap};

use chrono::{DateTime, Utc};
use serde::Serialize;
use utoipa::ToSchema;

use crate::engine::EngineView;
use crate::store::{InstanceRecord, Pause, RunRecord, StoreResult, TaskState, Trigger};
use crate::ticks::starts::RunStarts;

/// One run.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct RunView {
    /// The run's id.
    id: i64,
    /// Its task.
    task: String,
    /// The tick it serves.
    scheduled_at: DateTime<Utc>,
    /// When its tick was due to start: the tick shifted by its row's jitter window in force now
    /// (the task's, or an instance's own else its task's; the tick itself without jitter), what
    /// its lateness counts from (`started_at - starts_at`). Given for the scheduled runs of a
    /// task's detail (`GET /api/tasks/{name}`), the run history (`GET /api/runs`), one run
    /// (`GET /api/runs/{id}`) and an instance's latest runs (`GET
    /// /api/tasks/{name}/instances?runs=N` and `.../instances/{key}`); left out for retries,
    /// manual and backfilled runs, a row gone or whose schedule this node cannot read, and in a
    /// cancel's answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    starts_at: Option<DateTime<Utc>>,
    /// When its handler started, on the database's clock (none: it never started, e.g. handed
    /// over at shutdown before its tick; while it runs, the start its claim planned).
    started_at: Option<DateTime<Utc>>,
    /// When it ended (none while running).
    finished_at: Option<DateTime<Utc>>,
    /// `running`, `succeeded`, `failed`, `timed_out`, `interrupted`, `lost`, `cancelled`.
    status: String,
    /// The node that ran it.
    node_id: String,
    /// Ticks this run served (more than 1 after a misfire collapsed several).
    ticks_collapsed: i64,
    /// The handler's error, if it failed.
    error: Option<String>,
    /// 1 for the first attempt of a tick, then 2, 3 for retries.
    attempt: i32,
    /// `schedule`, `retry`, `manual` or `backfill`.
    trigger: String,
    /// Who asked for a manual run.
    triggered_by: Option<String>,
    /// When an operator asked to cancel it, if anyone did.
    cancel_requested_at: Option<DateTime<Utc>>,
    /// Who asked to cancel it.
    cancel_requested_by: Option<String>,
    /// Which shard of its tick it ran, `0..shard_total` (0 for an ordinary task).
    shard_index: u32,
    /// How many shards its tick has (1: the task is not sharded).
    shard_total: u32,
    /// The key of the task's instance it ran (none: the task's own run).
    instance_key: Option<String>,
    /// The arguments a manual run was given in place of its task's or instance's own, secrets
    /// hidden (none: it ran with its own).
    args_override: Option<serde_json::Value>,
}

impl From<RunRecord> for RunView {
    fn from(r: RunRecord) -> Self {
        Self {
            id: r.id,
            task: r.task_name,
            scheduled_at: r.scheduled_at,
            starts_at: None,
            started_at: r.started_at,
            finished_at: r.finished_at,
            status: r.status.as_str().to_owned(),
            node_id: r.node_id,
            ticks_collapsed: r.ticks_collapsed,
            error: r.error,
            attempt: r.attempt,
            trigger: r.trigger.as_str().to_owned(),
            triggered_by: r.triggered_by,
            cancel_requested_at: r.cancel_requested_at,
            cancel_requested_by: r.cancel_requested_by,
            shard_index: r.shard_index,
            shard_total: r.shard_total,
            instance_key: r.instance_key,
            args_override: r.args_override.as_deref().map(|text| {
                match serde_json::from_str(text) {
                    Ok(value) => crate::redact::redact_args(&value),
                    Err(_) => serde_json::Value::String(crate::redact::redact_text(text)),
                }
            }),
        }
    }
}

/// An operator's pause of a task.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct PauseView {
    /// When it was paused.
    at: DateTime<Utc>,
    /// Who paused it.
    by: String,
    /// Why.
    reason: String,
    /// When the pause ends by itself (none: until resumed).
    until: Option<DateTime<Utc>>,
}

impl From<Pause> for PauseView {
    fn from(p: Pause) -> Self {
        Self {
            at: p.at,
            by: p.by,
            reason: p.reason,
            until: p.until,
        }
    }
}

impl RunView {
    /// The view of `run`, its tick's start placed by `starts`.
    pub(crate) fn placed(run: RunRecord, starts: &RunStarts) -> Self {
        let starts_at = starts.start(&run);
        Self {
            starts_at,
            ..Self::from(run)
        }
    }
}

/// The runs `runs` placed at their ticks' starts ([`RunStarts`]): the schedule of each task they
/// name (the rows in `known`, else read) and its window in force on this node (its config
/// entry's, else its attribute's), and the rows of the instances they name. The rows are read
/// in at most two reads, whatever the page holds: one of the tasks not in `known`, one of the
/// instances.
pub(crate) async fn run_starts(
    engine: &EngineView,
    known: &[&TaskState],
    runs: &[RunRecord],
) -> StoreResult<RunStarts> {
    let scheduled: Vec<&RunRecord> = runs
        .iter()
        .filter(|r| r.trigger == Trigger::Schedule)
        .collect();
    let mut tasks: BTreeSet<&str> = scheduled.iter().map(|r| r.task_name.as_str()).collect();
    let mut states: Vec<TaskState> = known
        .iter()
        .filter(|s| tasks.contains(s.name.as_str()))
        .map(|s| (*s).clone())
        .collect();
    for state in &states {
        tasks.remove(state.name.as_str());
    }
    let unknown: Vec<String> = tasks.into_iter().map(str::to_owned).collect();
    states.extend(engine.store().task_states_named(&unknown).await?);
    let mut starts = RunStarts::default();
    for state in &states {
        let own = engine
            .schedule(&state.cron, &state.timezone, state.calendar.as_deref())
            .ok();
        starts.task(&state.name, own, engine.task_jitter(&state.name));
    }
    // The instances of the tasks placed (a task no longer stored: its runs are not placed).
    let instances: BTreeSet<(String, String)> = scheduled
        .iter()
        .filter(|r| starts.knows(&r.task_name))
        .filter_map(|r| Some((r.task_name.clone(), r.instance_key.clone()?)))
        .collect();
    let instances: Vec<(String, String)> = instances.into_iter().collect();
    let mut rows: HashMap<(String, String), InstanceRecord> = engine
        .store()
        .instances_named(&instances)
        .await?
        .into_iter()
        .map(|i| ((i.task.clone(), i.key.clone()), i))
        .collect();
    for name in instances {
        let placed = rows.remove(&name).and_then(|i| {
            let spec = engine.schedule(&i.cron, &i.timezone, None).ok()?;
            Some((spec, i.jitter))
        });
        starts.instance(&name.0, &name.1, placed);
    }
    Ok(starts)
}

#[cfg(test)]
mod tests;
