//! What a task's entry says of its other rows, each read once per request (for every task, or
//! for the one task asked for), never per task: the locks of its shards' and broadcast nodes'
//! rows (`state.lock`), its instances' runs at a glance (`instance_runs`, one grouped read of
//! the instances' rows) and a wait for a limit shared by tasks of any of its rows
//! (`state.waiting`: its own row's, else its shards', nodes' or instances').

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use serde::Serialize;
use utoipa::ToSchema;

use crate::admin::api::tick_waits::{WaitHolderView, WaitingView, Waits};
use crate::admin::error::ApiError;
use crate::engine::EngineView;
use crate::store::{InstanceSummary, TaskState};

/// The task rows among `states` (in their order), each with how many of its rows are locked:
/// a sharded task's shards' rows (`name[i]`) and a broadcast's nodes' rows (`name[@node]`, see
/// [`crate::shard`]) are folded into their task's, which shows the lock of its own row, else of
/// the first of its other rows that is locked. (A broadcast's own row is never run, and a
/// sharded task's shard 0 may be idle while other shards run.)
pub(super) fn task_rows(states: Vec<TaskState>) -> Vec<(TaskState, u32)> {
    let mut others: std::collections::HashMap<String, Vec<TaskState>> = Default::default();
    let mut tasks = Vec::new();
    for s in states {
        if crate::shard::is_task_row(&s.name) {
            tasks.push(s);
        } else if s.lock_owner.is_some() {
            let task = crate::shard::split_row(&s.name).0.to_owned();
            others.entry(task).or_default().push(s);
        }
    }
    tasks
        .into_iter()
        .map(|mut task| {
            let locked = others.remove(&task.name).unwrap_or_default();
            let count = u32::from(task.lock_owner.is_some()) + locked.len() as u32;
            if task.lock_owner.is_none()
                && let Some(row) = locked.into_iter().next()
            {
                task.lock_owner = row.lock_owner;
                task.lock_expires_at = row.lock_expires_at;
            }
            (task, count)
        })
        .collect()
}

/// A task's instances' runs at a glance (`GET /api/tasks/{name}/instances` lists them).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub(super) struct InstanceRunsView {
    /// How many of its instances run now.
    running: u64,
    /// How many of them failed their last run.
    pub(super) failing: u64,
    /// How many of them ever ran.
    ran: u64,
    /// The earliest next run among them (of those enabled and not paused; none: no such
    /// instance has a next run).
    next_run_at: Option<DateTime<Utc>>,
    /// The run that started last among them (none: none ran).
    latest: Option<LatestInstanceRunView>,
}

/// The run that started last among a task's instances.
#[derive(Debug, Clone, Serialize, ToSchema)]
struct LatestInstanceRunView {
    /// Its instance's key.
    key: String,
    /// When it started.
    started_at: DateTime<Utc>,
    /// When it ended (none while it runs).
    finished_at: Option<DateTime<Utc>>,
    /// How it ended (`succeeded`, `failed`, ...; none while it runs).
    result: Option<String>,
}

/// Each task's instances at a glance, by task.
#[derive(Default)]
pub(super) struct Instances(HashMap<String, InstanceSummary>);

impl Instances {
    /// Every task's instances (`None`), or `task`'s alone: one read either way.
    pub(super) async fn read(engine: &EngineView, task: Option<&str>) -> Result<Self, ApiError> {
        let summaries = engine.store().instance_summaries(task).await?;
        Ok(Self(
            summaries.into_iter().map(|s| (s.task.clone(), s)).collect(),
        ))
    }

    /// How many instances `task` has, and its instances' runs (none without instances).
    pub(super) fn of(&self, task: &str) -> (u64, Option<InstanceRunsView>) {
        let Some(s) = self.0.get(task).filter(|s| s.instances > 0) else {
            return (0, None);
        };
        let runs = InstanceRunsView {
            running: s.running,
            failing: s.failing,
            ran: s.ran,
            next_run_at: s.next_run_at,
            latest: s.latest.as_ref().map(|l| LatestInstanceRunView {
                key: l.key.clone(),
                started_at: l.started_at,
                finished_at: l.finished_at,
                result: l.status.map(|st| st.as_str().to_owned()),
            }),
        };
        (s.instances, Some(runs))
    }
}

/// What a task waits for while one of its rows waits for a share of its limit shared by tasks:
/// that row's wait (its own row's, else the one of its other rows waiting longest).
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub(super) struct TaskWaitingView {
    /// The limit shared by tasks it waits for (see `GET /api/limits`).
    limit: String,
    /// How many runs may hold it at once; `null`: no config declares it (it waits until one
    /// does).
    size: Option<u32>,
    /// The waiting row has waited since.
    since: DateTime<Utc>,
    /// How many runs hold it now.
    held: u32,
    /// The runs holding it (at most 5 named; `held` counts them all).
    holders: Vec<WaitHolderView>,
    /// The row that waits: the task's own (its name), a shard's (`task[i]`), a broadcast
    /// node's (`task[@node]`) or an instance's (`task/key`, or its shard's `task/key[i]`).
    row: String,
    /// How many of the task's rows wait now (each may wait for its own limit: an instance
    /// may name one of its own).
    rows: u32,
}

impl TaskWaitingView {
    fn of(row: &str, wait: &WaitingView) -> Self {
        Self {
            limit: wait.limit.clone(),
            size: wait.size,
            since: wait.since,
            held: wait.held,
            holders: wait.holders.clone(),
            row: row.to_owned(),
            rows: 1,
        }
    }

    /// Whether the wait of `row` stands for its task in place of this one: the task's own
    /// row's first, else the longest waiting (then the first row by name).
    fn yields_to(&self, task: &str, row: &str, wait: &WaitingView) -> bool {
        let own = |r: &str| r == task;
        match (own(&self.row), own(row)) {
            (true, _) => false,
            (false, true) => true,
            (false, false) => (wait.since, row) < (self.since, self.row.as_str()),
        }
    }
}

/// The waits of every task with a row waiting for its limit, by task.
#[derive(Debug, Default)]
pub(super) struct TaskWaits(HashMap<String, TaskWaitingView>);

impl TaskWaits {
    /// Every waiting row's wait, folded into its task's.
    pub(super) async fn read(engine: &EngineView) -> Result<Self, ApiError> {
        Ok(Self::fold(&Waits::read(engine.store().as_ref()).await?))
    }

    /// `waits` by task: a row's task is [`crate::shard::split_row`]'s.
    pub(super) fn fold(waits: &Waits) -> Self {
        let mut by_task: HashMap<String, TaskWaitingView> = HashMap::new();
        for (row, wait) in waits.rows() {
            let task = crate::shard::split_row(row).0;
            match by_task.get_mut(task) {
                None => {
                    by_task.insert(task.to_owned(), TaskWaitingView::of(row, wait));
                }
                Some(shown) => {
                    let rows = shown.rows + 1;
                    if shown.yields_to(task, row, wait) {
                        *shown = TaskWaitingView::of(row, wait);
                    }
                    shown.rows = rows;
                }
            }
        }
        Self(by_task)
    }

    /// What `task` waits for, if any of its rows waits.
    pub(super) fn of(&self, task: &str) -> Option<&TaskWaitingView> {
        self.0.get(task)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_700_000_000 + s, 0).unwrap()
    }

    fn waits(rows: &[(&str, &str, i64)]) -> TaskWaits {
        let rows = rows
            .iter()
            .map(|(row, limit, since)| ((*row).to_owned(), WaitingView::test(limit, at(*since))));
        TaskWaits::fold(&Waits::of_rows(rows))
    }

    fn shown(w: &TaskWaits, task: &str) -> Option<(String, String, u32)> {
        w.of(task).map(|v| (v.row.clone(), v.limit.clone(), v.rows))
    }

    #[test]
    fn a_task_waits_while_any_of_its_rows_waits_its_own_row_first() {
        let w = waits(&[
            ("sharded[2]", "a", 5),
            ("sharded[1]", "a", 9),
            ("own", "b", 9),
            ("own/k", "c", 1),
            ("fleet/k2", "d", 7),
            ("fleet/k1[3]", "e", 3),
            ("cast[@web-1]", "f", 2),
        ]);
        let row = |r: &str, l: &str, n| Some((r.to_owned(), l.to_owned(), n));
        assert_eq!(shown(&w, "sharded"), row("sharded[2]", "a", 2));
        assert_eq!(shown(&w, "own"), row("own", "b", 2));
        assert_eq!(shown(&w, "fleet"), row("fleet/k1[3]", "e", 2));
        assert_eq!(shown(&w, "cast"), row("cast[@web-1]", "f", 1));
        assert_eq!(shown(&w, "idle"), None);
    }

    #[test]
    fn rows_waiting_since_the_same_time_show_the_first_by_name() {
        let w = waits(&[("t/b", "x", 4), ("t/a", "x", 4), ("t/c", "x", 4)]);
        assert_eq!(w.of("t").map(|v| v.row.as_str()), Some("t/a"));
    }
}
