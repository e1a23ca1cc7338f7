//! When a node should look next: the earliest due time of its own tasks and the earliest lock
//! expiry (next_wake.sql), and the node's task names as claims and next_wake search them.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use sqlx::Row;

use crate::store::postgres::PgStore;
use crate::store::{StoreResult, WakeInfo};

/// The earliest due times of each kind next_wake reads (see next_wake.sql).
const WAKE_CANDIDATES: i64 = 32;

/// A node's task names, searched by next_wake and claims: sorted (the engine passes them so),
/// searched in place; otherwise hashed once.
pub(super) enum Names<'a> {
    Sorted(&'a [String]),
    Hashed(HashSet<&'a str>),
}

impl<'a> Names<'a> {
    pub(super) fn new(names: &'a [String]) -> Self {
        if names.is_sorted() {
            Names::Sorted(names)
        } else {
            Names::Hashed(names.iter().map(String::as_str).collect())
        }
    }

    pub(super) fn contains(&self, name: &str) -> bool {
        match self {
            Names::Sorted(names) => names.binary_search_by(|n| n.as_str().cmp(name)).is_ok(),
            Names::Hashed(names) => names.contains(name),
        }
    }
}

/// What next_wake's candidates say.
#[derive(Default)]
struct Wake {
    db_now: Option<DateTime<Utc>>,
    /// The earliest due time among this node's candidates.
    due_at: Option<DateTime<Utc>>,
    expiry_at: Option<DateTime<Utc>>,
    /// Per kind of due time: candidates read, and how many of them are this node's.
    kinds: HashMap<String, (i64, i64)>,
}

impl Wake {
    fn offer(&mut self, kind: &str, registered: bool, at: Option<DateTime<Utc>>) {
        let (read, mine) = self.kinds.entry(kind.to_owned()).or_default();
        *read += 1;
        if registered {
            *mine += 1;
            self.due_at = self.due_at.into_iter().chain(at).min();
        }
    }

    /// Whether some kind filled its page with other binaries' tasks only (this node's earliest
    /// of that kind lies beyond the page, if it has one).
    fn strangers_first(&self) -> bool {
        self.kinds
            .values()
            .any(|(read, mine)| *read >= WAKE_CANDIDATES && *mine == 0)
    }
}

pub(super) async fn next_wake(
    store: &PgStore,
    node_id: &str,
    tasks: &[String],
) -> StoreResult<WakeInfo> {
    let wake = timed!(store, "next_wake", |conn| {
        let rows = sqlx::query(query!("next_wake"))
            .bind(WAKE_CANDIDATES)
            .bind(node_id)
            .fetch_all(conn)
            .await?;
        let mine = Names::new(tasks);
        let mut wake = Wake::default();
        for row in &rows {
            let kind: &str = row.try_get("kind")?;
            let at: Option<DateTime<Utc>> = row.try_get("at")?;
            match kind {
                "expiry" => {
                    wake.expiry_at = at;
                    wake.db_now = row.try_get("db_now")?;
                }
                kind => {
                    let name: &str = row.try_get("name")?;
                    wake.offer(kind, mine.contains(crate::shard::split_row(name).0), at);
                }
            }
        }
        // The expiry row is always there (a scalar subquery's).
        let db_now = wake.db_now.ok_or(sqlx::Error::RowNotFound)?;
        Ok((wake, db_now))
    })?;
    let (wake, db_now) = wake;
    let mut due_at = wake.due_at;
    if wake.strangers_first() {
        // A kind's earliest candidates are all another binary's tasks: this node's own
        // earliest may come after them.
        due_at = timed!(store, "next_wake", |conn| {
            sqlx::query_scalar(query!("next_wake_named"))
                .bind(tasks)
                .bind(node_id)
                .fetch_one(conn)
                .await
        })?;
    }
    Ok(WakeInfo {
        db_now,
        due_at,
        expiry_at: wake.expiry_at,
    })
}
