//! What a renewal of a node's locks did to each of them.

use super::LockKey;

/// What [`renew_locks`](crate::store::ClaimStore::renew_locks) did to the locks it was asked
/// to extend. A lock in neither list was taken over: it is no longer this node's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Renewal {
    /// The locks extended.
    pub renewed: Vec<LockKey>,
    /// The locks whose row another transaction held at that moment (PostgreSQL: a statement of
    /// this node's own, stuck or slow, or another's brief write): not extended this time and
    /// not waited for, still this node's. Always empty on SQLite, which has no row locks.
    pub busy: Vec<LockKey>,
}

impl Renewal {
    /// Every lock extended, none busy.
    pub fn renewed(renewed: Vec<LockKey>) -> Self {
        Self {
            renewed,
            busy: Vec::new(),
        }
    }
}
