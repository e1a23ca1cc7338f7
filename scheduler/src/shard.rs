//! Sharded tasks: one tick of a task with `shards = N` is N runs, each claimed, locked, renewed,
//! retried and recorded on its own, spread over the live nodes.
//!
//! **Storage.** A task with N shards has N rows in the store: shard 0 is the task's own row
//! (its name), shard `i >= 1` the row `name[i]` ([`row_name`]; task names cannot contain `[`,
//! so a row name always tells its task and index, [`split_row`]). Each row carries its own
//! lock, schedule, retry and fencing token, so everything the engine does for a task it does
//! for each shard: renewal, timeout, cancel, retries, takeover after a crash and `recovery`.
//! Runs are recorded under the task's name with their `shard_index` and `shard_total`.
//!
//! **One rule for endings, misfires, pause and cancel: each shard is a task of its own.** A
//! shard's run ends, fails, retries, times out, is cancelled, is lost and is rerun (or not,
//! with `recovery = "never"`) exactly as an ordinary task's run would; a shard's missed ticks
//! follow the task's misfire policy on that shard's row. The tick is done when every shard's
//! run of it has ended. Two rules are the task's, not the shard's:
//!
//! - **Overlap:** no shard starts tick T+1 while a shard of an earlier tick is running, waits
//!   for a retry, or has not been claimed yet ([`ShardFacts::behind`]).
//! - **Spread:** see [`may_take`].

use std::fmt;
use std::time::Duration;

/// The most shards a task may have.
pub const MAX_SHARDS: u32 = 1_000;

/// How long after a tick a node may take more than its even share of the tick's shards: long
/// enough for every live node's claim to have seen the tick (a node with free slots claims
/// within a few milliseconds of its tick), short enough that shards do not wait long for a node
/// that is alive but busy (no free slot) or dead but not yet known to be (its heartbeat not yet
/// stale).
pub const SPREAD_GRACE: Duration = Duration::from_secs(2);

/// Which shard of a task a run serves, read in a handler with
/// [`TaskContext::shard`](crate::TaskContext::shard).
///
/// ```
/// use scheduler::{Shard, TaskContext, task};
///
/// #[task(name = "reindexProducts", shards = 8)]
/// async fn reindex_products(ctx: TaskContext) {
///     let Shard { index, total } = ctx.shard();
///     // Each of the 8 runs of a tick takes the products whose id % total == index.
///     assert!(index < total);
/// }
///
/// // An ordinary task is shard 0 of 1.
/// assert_eq!(TaskContext::standalone("t").shard(), Shard { index: 0, total: 1 });
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Shard {
    /// This run's shard, `0..total`.
    pub index: u32,
    /// How many shards the task's tick has (1: not sharded).
    pub total: u32,
}

impl Shard {
    /// The only shard of an ordinary task: 0 of 1.
    pub const WHOLE: Shard = Shard { index: 0, total: 1 };
}

impl Default for Shard {
    fn default() -> Self {
        Self::WHOLE
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.total)
    }
}

/// The store row of `task`'s shard `index`: the task's own name for shard 0, `task[index]`
/// otherwise.
///
/// ```
/// use scheduler::shard::{row_name, split_row};
///
/// assert_eq!(row_name("report", 0), "report");
/// assert_eq!(row_name("report", 3), "report[3]");
/// assert_eq!(split_row("report[3]"), ("report", 3));
/// assert_eq!(split_row("report"), ("report", 0));
/// ```
pub fn row_name(task: &str, index: u32) -> String {
    if index == 0 {
        task.to_owned()
    } else {
        format!("{task}[{index}]")
    }
}

/// The task and shard index of a store row ([`row_name`]'s inverse); a name that is not a
/// shard row is its own task's shard 0.
pub fn split_row(row: &str) -> (&str, u32) {
    if let Some(open) = row.rfind('[')
        && let Some(digits) = row[open + 1..].strip_suffix(']')
        && let Ok(index) = digits.parse::<u32>()
        && index > 0
        && !row[..open].is_empty()
    {
        return (&row[..open], index);
    }
    (row, 0)
}

/// What the store knows about the other shards of a due shard's tick, read in the claim's
/// transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct ShardFacts {
    /// A shard of an earlier tick is running, waits for a retry, or is still to be claimed:
    /// this shard's tick waits (the overlap rule).
    pub behind: bool,
    /// Runs of this tick of the task by the claiming node (any shard, any status).
    pub mine: u32,
    /// The fewest runs of this tick by any other live node registering the task (`None`: no
    /// other live node registers it).
    pub fewest_other: Option<u32>,
    /// How long ago the tick was, by the store's clock (zero for a tick claimed ahead).
    pub tick_age: Duration,
}

/// The spread rule: may a node that holds `facts.mine + taken` runs of a tick (`taken` in the
/// claim under way) take one more shard of it?
///
/// **Rule.** Within [`SPREAD_GRACE`] of the tick, a node takes a shard only while no other live
/// node registering the task has run fewer of the tick's shards than it (`mine <= fewest
/// other`): every node takes its first shard before any takes a second, its second before any
/// takes a third, and so on, so N shards on L nodes end up `ceil(N/L)` or `floor(N/L)` per node
/// when every node has free slots. Past the grace, any node takes what is left: a node that is
/// alive but has no free slot (or is dead and not yet known to be) does not hold the tick up.
/// A node alone takes every shard at once.
///
/// ```
/// use std::time::Duration;
/// use scheduler::shard::{may_take, ShardFacts};
///
/// let mut facts = ShardFacts::default();
/// facts.fewest_other = Some(0);
/// assert!(may_take(&facts, 0), "the first shard");
/// assert!(!may_take(&facts, 1), "no second while another node has none");
/// facts.tick_age = Duration::from_secs(5);
/// assert!(may_take(&facts, 1), "past the grace, what is left goes to whoever is free");
/// ```
pub fn may_take(facts: &ShardFacts, taken: u32) -> bool {
    if facts.behind {
        return false;
    }
    match facts.fewest_other {
        None => true,
        Some(_) if facts.tick_age >= SPREAD_GRACE => true,
        Some(fewest) => facts.mine.saturating_add(taken) <= fewest,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_names_round_trip() {
        for (task, index) in [("a", 0), ("a", 1), ("x.y:z-1", 999), ("a[1]", 2)] {
            assert_eq!(split_row(&row_name(task, index)), (task, index));
        }
        assert_eq!(
            split_row("a[0]"),
            ("a[0]", 0),
            "shard 0 is the task's own row"
        );
        assert_eq!(split_row("a[x]"), ("a[x]", 0));
        assert_eq!(split_row("[3]"), ("[3]", 0));
    }

    #[test]
    fn shards_spread_one_round_at_a_time() {
        // 3 nodes, 8 shards, every node free: simulate rounds of claims.
        let mut held = [0u32; 3];
        let mut left = 8;
        while left > 0 {
            for node in 0..3 {
                let facts = ShardFacts {
                    behind: false,
                    mine: held[node],
                    fewest_other: (0..3).filter(|n| *n != node).map(|n| held[n]).min(),
                    tick_age: Duration::ZERO,
                };
                let mut taken = 0;
                while left > 0 && may_take(&facts, taken) {
                    taken += 1;
                    left -= 1;
                }
                held[node] += taken;
            }
        }
        let mut sorted = held;
        sorted.sort();
        assert_eq!(sorted, [2, 3, 3]);
    }

    #[test]
    fn an_overlapping_tick_waits() {
        let facts = ShardFacts {
            behind: true,
            ..ShardFacts::default()
        };
        assert!(!may_take(&facts, 0));
    }
}
