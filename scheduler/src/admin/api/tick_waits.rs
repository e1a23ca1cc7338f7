//! The rows waiting for a limit shared by tasks ([`crate::limits`]), as the strips show them: a
//! waiting row's due tick, and the ticks that came after it meanwhile, are `waiting` (not
//! `missed`), each naming the limit, its size and its holders.
//!
//! Read once per request for every strip it draws (the limits with their holders and waiting
//! rows: a fixed number of reads, whatever the number of tasks or instances), never per task
//! or per instance.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use serde::Serialize;
use utoipa::ToSchema;

use crate::admin::error::ApiError;
use crate::store::{Store, TaskState};

/// Holders named per waiting tick at most (`held` counts them all).
const HOLDERS_SHOWN: usize = 5;

/// What a waiting tick waits for: a share of its limit.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub(crate) struct WaitingView {
    /// The limit shared by tasks it waits for (see `GET /api/limits`).
    pub(super) limit: String,
    /// How many runs may hold it at once; `null`: no config declares it (it waits until one
    /// does).
    pub(super) size: Option<u32>,
    /// Its row has waited since.
    pub(super) since: DateTime<Utc>,
    /// How many runs hold it now.
    pub(super) held: u32,
    /// The runs holding it (at most 5 named; `held` counts them all).
    pub(super) holders: Vec<WaitHolderView>,
}

/// A run holding the limit a tick waits for.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub(crate) struct WaitHolderView {
    /// The row holding it (`task`, `task[i]` or `task/key`).
    row: String,
    /// The node running it.
    node: String,
    /// The run (none until it is recorded running).
    #[serde(skip_serializing_if = "Option::is_none")]
    run_id: Option<i64>,
}

/// The rows waiting now for a share of their limit, by row name.
#[derive(Debug, Default)]
pub(super) struct Waits {
    by_row: HashMap<String, (Option<DateTime<Utc>>, WaitingView)>,
}

impl Waits {
    /// Every row waiting now, with its limit and the limit's holders.
    pub(super) async fn read(store: &dyn Store) -> Result<Self, ApiError> {
        let mut by_row = HashMap::new();
        for limit in store.limits().await? {
            let holders: Vec<WaitHolderView> = limit
                .holders
                .iter()
                .take(HOLDERS_SHOWN)
                .map(|h| WaitHolderView {
                    row: h.row.clone(),
                    node: h.node.clone(),
                    run_id: h.run_id,
                })
                .collect();
            for waiter in limit.waiting {
                let view = WaitingView {
                    limit: limit.name.clone(),
                    size: limit.size,
                    since: waiter.since,
                    held: limit.holders.len() as u32,
                    holders: holders.clone(),
                };
                by_row.insert(waiter.row, (waiter.due_at, view));
            }
        }
        Ok(Waits { by_row })
    }

    /// The tick `state`'s row waits to run (its due tick), if it waits for its limit.
    pub(super) fn tick(&self, state: &TaskState) -> Option<DateTime<Utc>> {
        let (due_at, _) = self.by_row.get(&state.name)?;
        state.next_tick.or(*due_at)
    }

    /// What `row` waits for, if it waits.
    pub(super) fn view(&self, row: &str) -> Option<&WaitingView> {
        self.by_row.get(row).map(|(_, view)| view)
    }

    /// Every waiting row with what it waits for, in no order.
    pub(super) fn rows(&self) -> impl Iterator<Item = (&str, &WaitingView)> {
        self.by_row
            .iter()
            .map(|(row, (_, view))| (row.as_str(), view))
    }

    /// The waits of `rows`, each without its due tick.
    #[cfg(test)]
    pub(super) fn of_rows(rows: impl IntoIterator<Item = (String, WaitingView)>) -> Self {
        let by_row = rows
            .into_iter()
            .map(|(row, view)| (row, (None, view)))
            .collect();
        Waits { by_row }
    }
}

#[cfg(test)]
impl WaitingView {
    /// A wait for `limit` (size 1, held by one unnamed run) since `since`.
    pub(super) fn test(limit: &str, since: DateTime<Utc>) -> Self {
        Self {
            limit: limit.to_owned(),
            size: Some(1),
            since,
            held: 1,
            holders: Vec::new(),
        }
    }
}
