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
//! - **Spread:** the shards of a tick go evenly over the live nodes registering the task. Within
//!   [`SPREAD_GRACE`] of the tick each node takes its own share in its first claim pass:
//!   `floor(N / L)` of N shards on L nodes, one more for the first `N mod L` nodes by node id
//!   ([`ShardFacts::my_share`]); then it leaves the task out of its claims until the grace ends
//!   (or the task's next tick, if sooner), so its claims do not keep the tick's rows from the
//!   nodes still to take theirs. Past the grace, what is left (the share of a node that is
//!   busy, or dead and not yet known to be) goes out an even share of it per claim pass. A
//!   node alone takes them all. See [`may_take`].
//!
//! **Instances.** An instance of a sharded task (`task/key`, see `crate::instance`) has N rows
//! too: its own (shard 0) and `task/key[i]`, written, paused, resumed and removed with it. Its
//! shards group under its own row ([`group_row`]), not its task's: the overlap and spread rules
//! apply to the instance's shards among themselves (its runs told apart from the task's and
//! the other instances' by the key they record), and [`split_row`] gives its task and the
//! shard's index. An instance of a broadcast task has its own row (pinned to no node, never
//! run) and a row per node, `task/key[@node]`, written by its upsert for the nodes registering
//! the task then and by a later node's own reconcile; the nodes alive at its ticks are
//! recorded per instance (the record's key is its row, `task/key`).
//!
//! # Broadcast tasks (`shards = "nodes"`)
//!
//! A broadcast task runs each tick once on every node alive at the tick: work that is per node
//! (clear a local cache, rotate local files, report the node's own state). Its runs reuse the
//! shard rows' machinery with one difference: a row is pinned to a node instead of taken by
//! whoever is free.
//!
//! **Storage.** Each node that registers the task has its own row, `name[@node-id]`
//! ([`node_row`], [`row_node`]), created by that node's reconcile (at start, and when a document
//! makes the task a broadcast); its `node_pin` column names the node, and only that node's
//! claim selects it. The row carries its node's schedule, lock, renewal, retry, timeout, cancel
//! and fencing token exactly as a shard row does. The task's own row (`name`) is pinned to no
//! node (`node_pin = ''`): it holds the task's config, pause and manual-run requests and is
//! never claimed. Runs are recorded under the task's name with the node's `shard_index` and
//! `shard_total`. Fixed shards would not fit: their rows are free for any node (spread, and a
//! dead node's shard taken over), while a broadcast run is the node's own work.
//!
//! **Who runs a tick.** The nodes *alive at the tick* are decided once, by the first claim of
//! that tick (any node's), and recorded in the store (`scheduler_broadcast_ticks`): every node
//! registering the task that has not stopped, whose last heartbeat is within the live window
//! the engine uses everywhere (three heartbeat intervals), that registered at or before the tick
//! and whose row existed before it. They are sorted by node id; a node's position is its
//! [`Shard::index`], their number [`Shard::total`] (both read with
//! [`TaskContext::shard`](crate::TaskContext::shard);
//! [`TaskContext::is_broadcast`](crate::TaskContext::is_broadcast) says the run is a
//! broadcast's). Every later claim of the tick reads the same record, so all runs of a tick
//! agree on `total` and no two share an `index`. The rules that follow:
//!
//! - Each node in the record runs the tick once, through its own row: never twice (the row's
//!   lock and schedule, as for any task) and never on another node (the row is pinned).
//! - A node that joins after the tick, or that was not in the record for another reason,
//!   does not run it: its claim moves its row past the tick. (A node that registers within the
//!   claim-ahead lead before a tick, a few milliseconds, may start with the tick after.)
//! - A node counted at the tick that dies before it starts its run leaves that index without
//!   a run; a node killed mid-run has its run recorded `lost` when its lock expires (by any
//!   node's claim, as any lost run) and it is **not run again, anywhere**: the work was that
//!   node's (`recovery` is `never` for broadcast runs whatever the task says). A node that
//!   comes back under the same id starts again with the first tick after it registered.
//! - Overlap, misfire, retries, timeout and cancel apply per node: a node does not start tick
//!   T+1 while its own run of T goes on (its row is locked); other nodes are not held up.
//! - Pause and resume cover every node's row; a manual run asks each node's row for one run.
//! - Missed-run detection does not watch the rows of a broadcast task (a dead node's row is
//!   overdue by design); the silent-node alert covers a node that stopped running them.
//!
//! On SQLite (one node in practice) the record holds that one node: one run per tick, 0 of 1.

use std::fmt;
use std::time::Duration;

/// The most shards a task may have.
pub const MAX_SHARDS: u32 = 1_000;

/// How long after a tick the spread rule hands out even shares (`may_take`): long enough for
/// every live node's claim to have seen the tick (a node with free slots claims within a few
/// milliseconds of its tick), short enough that the shards of a node that is alive but busy (no
/// free slot) or dead but not yet known to be (its heartbeat not yet stale) do not wait long.
/// Past it, what is left goes out an even share of it per claim pass.
pub const SPREAD_GRACE: Duration = Duration::from_secs(2);

/// How many runs a task's tick has: the `shards` of the attribute and the config document.
///
/// ```
/// use scheduler::config::ShardCount;
///
/// assert_eq!("nodes".parse::<ShardCount>(), Ok(ShardCount::Nodes));
/// assert_eq!("8".parse::<ShardCount>(), Ok(ShardCount::Fixed(8)));
/// assert!("all".parse::<ShardCount>().is_err());
/// assert_eq!(ShardCount::Nodes.to_string(), "nodes");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ShardCount {
    /// `shards = 8`: this many shards, each run by whichever live node is free.
    Fixed(u32),
    /// `shards = "nodes"`: a broadcast, one run on each node alive at the tick.
    Nodes,
}

impl fmt::Display for ShardCount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ShardCount::Fixed(n) => write!(f, "{n}"),
            ShardCount::Nodes => f.write_str("nodes"),
        }
    }
}

/// A `shards` value that is neither `nodes` nor a count from 1 to `MAX_SHARDS` (1,000).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "`shards` must be a count from 1 to {MAX_SHARDS} or `nodes` (one run on each live node), not `{0}`"
)]
pub struct InvalidShardCount(pub String);

impl std::str::FromStr for ShardCount {
    type Err = InvalidShardCount;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "nodes" => Ok(ShardCount::Nodes),
            n => match n.parse::<u32>() {
                Ok(n) if (1..=MAX_SHARDS).contains(&n) => Ok(ShardCount::Fixed(n)),
                _ => Err(InvalidShardCount(s.to_owned())),
            },
        }
    }
}

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
/// use scheduler::testing::shard::{row_name, split_row};
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

/// The store row of broadcast task `task` on node `node` (see the module docs).
///
/// ```
/// use scheduler::testing::shard::{node_row, row_node, split_row};
///
/// assert_eq!(node_row("warmCaches", "web-1"), "warmCaches[@web-1]");
/// assert_eq!(row_node("warmCaches[@web-1]"), Some("web-1"));
/// assert_eq!(split_row("warmCaches[@web-1]"), ("warmCaches", 0));
/// assert_eq!(row_node("warmCaches[2]"), None);
/// ```
pub fn node_row(task: &str, node: &str) -> String {
    format!("{task}[@{node}]")
}

/// The node a broadcast task's row (`task[@node]`, [`node_row`]) is pinned to; `None` for any
/// other row.
pub fn row_node(row: &str) -> Option<&str> {
    let open = row.find("[@")?;
    let node = row[open + 2..].strip_suffix(']')?;
    (open > 0 && !node.is_empty()).then_some(node)
}

/// Whether a store row is its task's own row (not a shard's `name[i]` nor a broadcast node's
/// `name[@node]`): what lists of tasks show.
///
/// ```
/// use scheduler::testing::shard::is_task_row;
///
/// assert!(is_task_row("report"));
/// assert!(!is_task_row("report[2]"));
/// assert!(!is_task_row("report[@web-1]"));
/// ```
pub fn is_task_row(row: &str) -> bool {
    split_row(row).0 == row
}

/// The task and shard index of a store row ([`row_name`]'s inverse); a name that is not a
/// shard row is its own task's shard 0. A broadcast task's node row ([`node_row`]) is its
/// task's, with index 0 (its index is decided per tick), and so is an instance's row (`task/key`,
/// see `crate::instance`); an instance's shard row `task/key[i]` is its task's shard `i`.
///
/// ```
/// use scheduler::testing::shard::split_row;
///
/// assert_eq!(split_row("report/tenant-42"), ("report", 0));
/// assert_eq!(split_row("report/tenant-42[2]"), ("report", 2));
/// ```
pub fn split_row(row: &str) -> (&str, u32) {
    let (group, index) = split_group(row);
    match crate::instance::split_row(group) {
        Some((task, _)) => (task, index),
        None => (group, index),
    }
}

/// The row that stands for a shard row's group and its index: the rows whose shards make one
/// tick together (the overlap and spread rules' unit). A task's shard `task[i]` and node row
/// `task[@node]` group under `task`; an instance's shard `task/key[i]` under its own row
/// `task/key`, not under its task.
///
/// ```
/// use scheduler::testing::shard::group_row;
///
/// assert_eq!(group_row("report[3]"), "report");
/// assert_eq!(group_row("report[@web-1]"), "report");
/// assert_eq!(group_row("report/tenant-42[2]"), "report/tenant-42");
/// assert_eq!(group_row("report/tenant-42"), "report/tenant-42");
/// assert_eq!(group_row("report"), "report");
/// ```
pub fn group_row(row: &str) -> &str {
    split_group(row).0
}

/// [`group_row`] and the row's shard index (0 for a group's own row and for a node row).
fn split_group(row: &str) -> (&str, u32) {
    if row_node(row).is_some()
        && let Some(open) = row.find("[@")
    {
        return (&row[..open], 0);
    }
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

/// A broadcast run's shard: `node`'s position among the nodes recorded alive at the tick
/// (sorted by id, whatever order they come in), of how many they are; `None` when `node` is not
/// among them (it does not run the tick).
///
/// ```
/// use scheduler::Shard;
/// use scheduler::testing::shard::broadcast_shard;
///
/// let alive = ["web-2".to_owned(), "web-1".to_owned(), "web-3".to_owned()];
/// assert_eq!(broadcast_shard(&alive, "web-2"), Some(Shard { index: 1, total: 3 }));
/// assert_eq!(broadcast_shard(&alive, "web-4"), None, "joined after the tick");
/// ```
pub fn broadcast_shard(alive: &[String], node: &str) -> Option<Shard> {
    let mut sorted: Vec<&str> = alive.iter().map(String::as_str).collect();
    sorted.sort_unstable();
    sorted.dedup();
    let index = sorted.iter().position(|n| *n == node)?;
    Some(Shard {
        index: u32::try_from(index).ok()?,
        total: u32::try_from(sorted.len()).ok()?,
    })
}

/// What the store knows about the other shards of a due shard's tick, read in the claim's
/// transaction, and what the claim knows of the task ([`total`](Self::total)) and the tick
/// ([`tick_age`](Self::tick_age)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct ShardFacts {
    /// A shard of an earlier tick is running, waits for a retry, or is still to be claimed:
    /// this shard's tick waits (the overlap rule).
    pub behind: bool,
    /// Runs of this tick of the task by the claiming node (any shard, any status).
    pub mine: u32,
    /// How many other live nodes register the task (0: this node is alone).
    pub others: u32,
    /// How many of those sort before the claiming node by node id: its place among the live
    /// nodes, which decides whether its share is one above the even share
    /// ([`my_share`](Self::my_share)).
    pub rank: u32,
    /// How many of the tick's shards have a run (by any node): `total - started` are left.
    pub started: u32,
    /// How many shards the tick has (the task's `shards`).
    pub total: u32,
    /// How long ago the tick was, by the store's clock (zero for a tick claimed ahead).
    pub tick_age: Duration,
}

impl ShardFacts {
    /// The live nodes registering the task, the claiming node included.
    fn live(&self) -> u32 {
        self.others.saturating_add(1)
    }

    /// The even share of the tick: `total / live`, rounded down.
    pub fn even_share(&self) -> u32 {
        self.total / self.live()
    }

    /// The claiming node's share of the tick within [`SPREAD_GRACE`]: the even share, and one
    /// more if the node is among the first `total mod live` live nodes by node id
    /// ([`rank`](Self::rank)). Every node works its share out from the same facts, so with
    /// every node free the shares add up to the tick's shards, `ceil(N / L)` or `floor(N / L)`
    /// per node, each taken in one claim pass, with no node waiting for another's turn.
    ///
    /// ```
    /// use scheduler::testing::shard::ShardFacts;
    ///
    /// let mut facts = ShardFacts::default();
    /// facts.total = 20;
    /// facts.others = 5;
    /// let shares: Vec<u32> = (0..6)
    ///     .map(|rank| {
    ///         facts.rank = rank;
    ///         facts.my_share()
    ///     })
    ///     .collect();
    /// assert_eq!(shares, [4, 4, 3, 3, 3, 3], "20 on 6 nodes");
    /// ```
    pub fn my_share(&self) -> u32 {
        let live = self.live();
        self.total / live + u32::from(self.rank < self.total % live)
    }

    /// The most shards one claim pass may take past [`SPREAD_GRACE`]: an even share of what
    /// is left, rounded up (at least one).
    pub fn leftover_share(&self) -> u32 {
        self.total
            .saturating_sub(self.started)
            .div_ceil(self.live())
            .max(1)
    }

    /// Whether a node that holds `facts.mine + taken` runs of the tick has its whole share
    /// ([`my_share`](Self::my_share)) while [`SPREAD_GRACE`] lasts. Such a node has nothing
    /// to claim of the tick until the grace ends, and looking again sooner would only keep the
    /// tick's rows from the nodes still to take their shares (a claim locks the due rows it
    /// reads).
    ///
    /// ```
    /// use scheduler::testing::shard::ShardFacts;
    ///
    /// let mut facts = ShardFacts::default();
    /// facts.total = 100;
    /// facts.others = 9;
    /// assert!(!facts.share_complete(9));
    /// assert!(facts.share_complete(10), "100 on 10 nodes: 10 each");
    /// facts.total = 20;
    /// facts.others = 5;
    /// facts.rank = 1;
    /// assert!(!facts.share_complete(3), "20 on 6: the second node by id has 4");
    /// assert!(facts.share_complete(4));
    /// facts.rank = 2;
    /// assert!(facts.share_complete(3), "the third has 3");
    /// ```
    pub fn share_complete(&self, taken: u32) -> bool {
        self.others > 0
            && !self.behind
            && self.tick_age < SPREAD_GRACE
            && self.mine.saturating_add(taken) >= self.my_share()
    }
}

/// The spread rule: may a node that holds `facts.mine + taken` runs of a tick (`taken` in the
/// claim under way) take one more shard of it?
///
/// **Rule.** With `L` live nodes registering the task (the claiming node included) and `N`
/// shards in the tick:
///
/// - **Within [`SPREAD_GRACE`] of the tick**, a node takes its share ([`ShardFacts::my_share`]:
///   `floor(N / L)`, plus one for the first `N mod L` live nodes by node id) at once, in its
///   first claim pass of the tick, without waiting for the others, and no more. So with every
///   node free, `N` shards on `L` nodes end up `ceil(N/L)` or `floor(N/L)` per node, each
///   node's share started by its first claim pass, no node holds more than one above
///   another's, and with fewer shards than nodes no node takes a second.
/// - **Past the grace**, what is left (the shares of nodes that are alive but have no free
///   slot, or dead and not yet known to be) goes to whoever claims, at most an even share of
///   it per claim pass (`ceil(left / L)`, [`ShardFacts::leftover_share`]), so leftovers spread
///   over the nodes too instead of going to the first to claim.
/// - A node alone (no other live node registers the task) takes every shard at once.
/// - No shard starts while an earlier tick of the task goes on ([`ShardFacts::behind`]).
///
/// ```
/// use std::time::Duration;
/// use scheduler::testing::shard::{may_take, ShardFacts};
///
/// // 20 shards on 4 live nodes, none of which has run any yet.
/// let mut facts = ShardFacts::default();
/// facts.total = 20;
/// facts.others = 3;
/// assert_eq!(facts.even_share(), 5);
/// assert!(may_take(&facts, 4), "its even share at once");
/// assert!(!may_take(&facts, 5), "no sixth: 20 on 4 nodes is 5 each");
///
/// // Past the grace, with 8 shards left: 2 per claim pass.
/// facts.tick_age = Duration::from_secs(5);
/// facts.started = 12;
/// assert!(may_take(&facts, 1));
/// assert!(!may_take(&facts, 2), "an even share of what is left per pass");
///
/// // A node alone takes them all.
/// let mut alone = ShardFacts::default();
/// alone.total = 20;
/// assert!(may_take(&alone, 19));
/// ```
pub fn may_take(facts: &ShardFacts, taken: u32) -> bool {
    if facts.behind {
        return false;
    }
    if facts.others == 0 {
        return true;
    }
    if facts.tick_age >= SPREAD_GRACE {
        return taken < facts.leftover_share();
    }
    facts.mine.saturating_add(taken) < facts.my_share()
}

#[cfg(test)]
mod tests;
