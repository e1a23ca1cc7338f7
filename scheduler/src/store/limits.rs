//! Limits shared by tasks (`crate::limits`) as the store keeps them: each declared limit's size
//! (`scheduler_limits`, written from the config by [`save_limits`]), and what holds and waits
//! for each ([`limits`], for the admin API and the dashboard). The claim's own steps are the
//! backends' (`operations/claim.rs`).

use chrono::{DateTime, Utc};
use serde::Serialize;

#[cfg(any(feature = "postgres", feature = "sqlite"))]
use crate::store::StoreResult;
#[cfg(any(feature = "postgres", feature = "sqlite"))]
use crate::store::dialect::{Dialect, Now, Sql};
#[cfg(any(feature = "postgres", feature = "sqlite"))]
use crate::store::row::ReadRow;

/// A limit shared by tasks: its size, who holds it and who waits for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct LimitState {
    /// The limit's name.
    pub name: String,
    /// Its declared size; `None`: rows name it but no config declares it (they wait).
    pub size: Option<u32>,
    /// The runs holding it now (their rows' locks).
    pub holders: Vec<LimitHolder>,
    /// The rows whose due tick waits for a share of it.
    pub waiting: Vec<LimitWaiter>,
}

/// A run holding a share of a limit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct LimitHolder {
    /// The row holding it: a task's name, a shard's (`task[i]`) or an instance's (`task/key`).
    pub row: String,
    /// The node holding the lock.
    pub node: String,
    /// The run under the lock, if one is recorded running.
    pub run_id: Option<i64>,
    /// When that run started.
    pub started_at: Option<DateTime<Utc>>,
}

/// A row whose due tick waits for a share of a limit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct LimitWaiter {
    /// The row: a task's name, a shard's or an instance's.
    pub row: String,
    /// Waiting since.
    pub since: DateTime<Utc>,
    /// The tick it waits to run (its nominal time: the lateness shows).
    pub due_at: Option<DateTime<Utc>>,
}

/// Writes each limit's size (`(name, size)`, sizes already checked), creating the limits not
/// stored yet; a limit the list leaves out is kept as it was (rows may still name it). Returns
/// the names whose size was written.
#[cfg(any(feature = "postgres", feature = "sqlite"))]
pub(crate) async fn save_limits(
    store: &impl Dialect,
    limits: &[(String, u32)],
) -> StoreResult<Vec<String>> {
    let mut changed = Vec::new();
    for (name, size) in limits {
        let sql = statement!("limit_save");
        let params = params![name, i64::from(*size), Now];
        if store.execute("save_limits", sql, &params).await? > 0 {
            changed.push(name.clone());
        }
    }
    Ok(changed)
}

/// Every limit stored or named by a row, by name, with its holders and the rows waiting for it.
#[cfg(any(feature = "postgres", feature = "sqlite"))]
pub(crate) async fn limits(store: &impl Dialect) -> StoreResult<Vec<LimitState>> {
    let sizes = store
        .fetch_all(
            "limits",
            Sql::shared(shared_query!("limits_list")),
            &[],
            |row| Ok((row.text("name")?, row.int("size")?)),
        )
        .await?;
    let holders = store
        .fetch_all(
            "limits",
            Sql::shared(shared_query!("limit_holders_list")),
            &[],
            |row| {
                Ok((
                    row.text("limit_name")?,
                    LimitHolder {
                        row: row.text("name")?,
                        node: row.text("lock_owner")?,
                        run_id: row.int_opt("run_id")?,
                        started_at: row.time_opt("started_at")?,
                    },
                ))
            },
        )
        .await?;
    let waiting = store
        .fetch_all(
            "limits",
            Sql::shared(shared_query!("limit_waiters_list")),
            &[],
            |row| {
                Ok((
                    row.text_opt("limit_name")?,
                    LimitWaiter {
                        row: row.text("name")?,
                        since: row.time("limit_waiting_since")?,
                        due_at: row.time_opt("next_run_at")?,
                    },
                ))
            },
        )
        .await?;
    let mut all: std::collections::BTreeMap<String, LimitState> = sizes
        .into_iter()
        .map(|(name, size)| {
            let state = LimitState {
                name: name.clone(),
                size: u32::try_from(size).ok(),
                holders: Vec::new(),
                waiting: Vec::new(),
            };
            (name, state)
        })
        .collect();
    let entry = |all: &mut std::collections::BTreeMap<String, LimitState>, name: String| {
        all.entry(name.clone())
            .or_insert_with(|| LimitState {
                name,
                size: None,
                holders: Vec::new(),
                waiting: Vec::new(),
            })
            .clone()
    };
    for (name, holder) in holders {
        let mut state = entry(&mut all, name.clone());
        state.holders.push(holder);
        all.insert(name, state);
    }
    for (name, waiter) in waiting {
        let Some(name) = name else { continue };
        let mut state = entry(&mut all, name.clone());
        state.waiting.push(waiter);
        all.insert(name, state);
    }
    Ok(all.into_values().collect())
}
