//! The parallel arrays a claim's statements bind (one array per column, one element per row):
//! the locks it releases, the runs it starts, the ticks it skips.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::super::columns::{RequeueColumns, millis};
use crate::store::claim::NextColumns;
use crate::store::claim_loop::{LockRelease, TaskSkip};
use crate::store::{ClaimPlan, NextRun};

/// Parallel arrays for release_locks.
#[derive(Default)]
pub(super) struct Release {
    pub(super) names: Vec<String>,
    pub(super) tokens: Vec<Uuid>,
    pub(super) run_ids: Vec<Option<i64>>,
    pub(super) statuses: Vec<Option<&'static str>>,
    pub(super) errors: Vec<Option<String>>,
    pub(super) failures: Vec<&'static str>,
    pub(super) requeue: RequeueColumns,
}

impl Release {
    pub(super) fn push(&mut self, r: &LockRelease) {
        self.names.push(r.lock.key.task_name.clone());
        self.tokens.push(r.lock.key.token);
        self.run_ids.push(r.ended_run());
        self.statuses
            .push(r.run_end.as_ref().map(|e| e.status.as_str()));
        self.errors
            .push(r.run_end.as_ref().and_then(|e| e.error.clone()));
        self.failures.push(r.failures.as_str());
        self.requeue.push(r.requeue.as_ref());
    }

    pub(super) fn bind<'q>(
        &'q self,
        q: sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments>,
    ) -> sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments> {
        q.bind(&self.names)
            .bind(&self.tokens)
            .bind(&self.run_ids)
            .bind(&self.statuses)
            .bind(&self.errors)
            .bind(&self.failures)
            .bind(&self.requeue.kind)
            .bind(&self.requeue.tick)
            .bind(&self.requeue.attempt)
            .bind(&self.requeue.at)
            .bind(&self.requeue.by)
    }
}

/// Parallel arrays for claim_apply.
#[derive(Default)]
pub(super) struct Plan {
    pub(super) names: Vec<String>,
    pub(super) tokens: Vec<Uuid>,
    pub(super) scheduled: Vec<DateTime<Utc>>,
    pub(super) set_next: Vec<bool>,
    pub(super) next: Vec<Option<DateTime<Utc>>>,
    pub(super) recovery: Vec<&'static str>,
    pub(super) lock_ms: Vec<i64>,
    pub(super) trigger: Vec<&'static str>,
    pub(super) attempt: Vec<i32>,
    pub(super) triggered_by: Vec<Option<String>>,
    pub(super) clear_retry: Vec<bool>,
    pub(super) tasks: Vec<String>,
    pub(super) shard_index: Vec<i32>,
    pub(super) shard_total: Vec<i32>,
    pub(super) args_override: Vec<Option<String>>,
    pub(super) next_tick: Vec<Option<DateTime<Utc>>>,
    pub(super) starts_at: Vec<DateTime<Utc>>,
    pub(super) limit: Vec<Option<String>>,
}

impl Plan {
    /// Adds the run of row `name` (with the arguments a manual run overrides, if any), holding
    /// `limit`; returns the token of the lock it takes.
    pub(super) fn push(
        &mut self,
        name: String,
        p: ClaimPlan,
        shard: crate::Shard,
        args_override: Option<String>,
        limit: Option<String>,
    ) -> Uuid {
        let token = Uuid::new_v4();
        self.args_override.push(args_override);
        self.limit.push(limit);
        self.tasks.push(crate::shard::split_row(&name).0.to_owned());
        self.shard_index
            .push(i32::try_from(shard.index).unwrap_or(i32::MAX));
        self.shard_total
            .push(i32::try_from(shard.total).unwrap_or(i32::MAX));
        self.names.push(name);
        self.tokens.push(token);
        self.scheduled.push(p.scheduled_at);
        self.starts_at.push(p.starts_at);
        let (set, (next, tick)) = next_columns(p.next_run_at);
        self.set_next.push(set);
        self.next.push(next);
        self.next_tick.push(tick);
        self.recovery.push(p.recovery.as_str());
        self.lock_ms.push(millis(p.lock_lifetime));
        self.trigger.push(p.trigger.as_str());
        self.attempt.push(p.attempt);
        self.triggered_by.push(p.triggered_by);
        self.clear_retry.push(p.clear_retry);
        token
    }

    pub(super) fn bind<'q>(
        &'q self,
        q: sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments>,
    ) -> sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments> {
        q.bind(&self.names)
            .bind(&self.tokens)
            .bind(&self.scheduled)
            .bind(&self.set_next)
            .bind(&self.next)
            .bind(&self.recovery)
            .bind(&self.lock_ms)
            .bind(&self.trigger)
            .bind(&self.attempt)
            .bind(&self.triggered_by)
            .bind(&self.clear_retry)
            .bind(&self.tasks)
            .bind(&self.shard_index)
            .bind(&self.shard_total)
            .bind(&self.args_override)
            .bind(&self.next_tick)
            .bind(&self.starts_at)
            .bind(&self.limit)
    }
}

/// A lock a claim takes: its task's row, when the row's previous run ended, its open missed
/// incident, when its run is due to start, and an instance's arguments, own tags and zone.
pub(super) type Claimed = (
    String,
    [Option<DateTime<Utc>>; 3],
    Option<String>,
    crate::store::InstanceTags,
    String,
);

/// Parallel arrays for claim_skip.
#[derive(Default)]
pub(super) struct Skip {
    pub(super) names: Vec<String>,
    pub(super) set_next: Vec<bool>,
    pub(super) next: Vec<Option<DateTime<Utc>>>,
    pub(super) clear_retry: Vec<bool>,
    pub(super) clear_pause: Vec<bool>,
    pub(super) clear_manual: Vec<bool>,
    pub(super) next_tick: Vec<Option<DateTime<Utc>>>,
}

/// Whether a next run is set, and the columns it sets (`next_run_at`, `next_tick`).
fn next_columns(next: NextRun) -> (bool, NextColumns) {
    match next.columns() {
        Some(columns) => (true, columns),
        None => (false, (None, None)),
    }
}

impl Skip {
    pub(super) fn push(&mut self, skip: &TaskSkip) {
        self.names.push(skip.name.clone());
        let (set, (next, tick)) = next_columns(skip.next_run_at);
        self.set_next.push(set);
        self.next.push(next);
        self.next_tick.push(tick);
        self.clear_retry.push(skip.clear_retry);
        self.clear_pause.push(skip.clear_pause);
        self.clear_manual.push(skip.clear_manual);
    }
}
