//! The parallel arrays the batch statements bind (one array per column, one element per row)
//! that more than one operation fills: the requeue of a released lock or a finished run, the
//! skip records; and the milliseconds the queries take for a duration.

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::store::{Requeue, SkipRecord};

/// Milliseconds of a duration as the `int8` the queries multiply by `interval '1 millisecond'`.
pub(super) fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// The requeue columns of release_locks and finish_runs.
#[derive(Default)]
pub(super) struct RequeueColumns {
    pub(super) kind: Vec<Option<&'static str>>,
    pub(super) tick: Vec<Option<DateTime<Utc>>>,
    pub(super) attempt: Vec<Option<i32>>,
    pub(super) at: Vec<Option<DateTime<Utc>>>,
    pub(super) by: Vec<Option<String>>,
}

impl RequeueColumns {
    pub(super) fn push(&mut self, requeue: Option<&Requeue>) {
        let (kind, tick, attempt, at, by) = match requeue {
            None => (None, None, None, None, None),
            Some(Requeue::Tick(tick)) => (Some("tick"), Some(*tick), None, None, None),
            Some(Requeue::Retry { tick, attempt, at }) => {
                (Some("retry"), Some(*tick), Some(*attempt), Some(*at), None)
            }
            Some(Requeue::Manual { at, by }) => (Some("manual"), None, None, Some(*at), by.clone()),
            Some(Requeue::Backfill(tick)) => (Some("backfill"), Some(*tick), None, None, None),
        };
        self.kind.push(kind);
        self.tick.push(tick);
        self.attempt.push(attempt);
        self.at.push(at);
        self.by.push(by);
    }
}

/// Parallel arrays for skips_insert.
#[derive(Default)]
pub(super) struct SkipColumns {
    names: Vec<String>,
    reasons: Vec<&'static str>,
    first: Vec<DateTime<Utc>>,
    last: Vec<DateTime<Utc>>,
    ticks: Vec<i64>,
    exact: Vec<bool>,
    run_ids: Vec<Option<i64>>,
}

impl SkipColumns {
    pub(super) fn collect<'a>(skips: impl Iterator<Item = &'a SkipRecord>) -> Self {
        let mut c = Self::default();
        for s in skips {
            c.names.push(s.task_name.clone());
            c.reasons.push(s.reason.as_str());
            c.first.push(s.first_tick);
            c.last.push(s.last_tick);
            c.ticks.push(s.ticks);
            c.exact.push(s.exact);
            c.run_ids.push(s.run_id);
        }
        c
    }

    pub(super) fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// Inserts the records on `conn` (nothing when there are none).
    pub(super) async fn insert(&self, conn: &mut sqlx::PgConnection) -> Result<(), sqlx::Error> {
        if self.is_empty() {
            return Ok(());
        }
        sqlx::query(query!("skips_insert"))
            .bind(&self.names)
            .bind(&self.reasons)
            .bind(&self.first)
            .bind(&self.last)
            .bind(&self.ticks)
            .bind(&self.exact)
            .bind(&self.run_ids)
            .execute(conn)
            .await
            .map(drop)
    }
}
