//! Limits shared by tasks: a named limit lets at most N runs holding it run at once, across the
//! nodes (`limits: {warehouse-db: 2}` in the config document; a task names one with
//! `#[task(limit = "warehouse-db")]` or its entry's `limit`; an instance runs under its
//! task's, unless it names its own with `Schedule::limit`). See `docs/shared-limits.md`.
//!
//! **Holders are locks.** A run holds its limit while its row holds the lock its claim took: the
//! claim writes the limit on the row (`limit_held`) with the lock, so a limit's holders are the
//! locked rows holding it. Nothing is counted apart from the locks, so nothing can leak: a
//! crashed holder's share comes back when its lock is released (by the expired-lock rescue), a
//! finished run's when its outcome is written.
//!
//! **Claims take turns per limit.** Inside the claim transaction the store locks the rows of
//! the limits the due runs would take (in name order, so claims never deadlock), then counts
//! their holders; [`admit`] decides which runs start. A run that must wait is left as it was:
//! its row unlocked, its tick due at its own time (so its lateness shows), marked waiting
//! (`limit_waiting_since`, shown by the admin API and the dashboard). The next claim offers it
//! again, and the task's misfire rule decides it as for any late tick: `once` runs it late
//! (folding the ticks after it), `skip` records it skipped once it is later than its misfire
//! grace. A waiting tick is never dropped without a record, and a task never overlaps itself
//! (it has one lock).
//!
//! **A limit nobody declared.** The config refuses an entry naming a limit its `limits` does
//! not declare (`check-config` shows it; the task keeps its last valid state). A row whose
//! limit has no size in the store (an instance naming one) waits, marked waiting, and the
//! admin API lists the limit as undeclared: it never runs unlimited.

use std::collections::HashMap;

/// The longest limit name.
pub(crate) const MAX_NAME_LEN: usize = 64;

/// What is wrong with `name` as a limit's name, if anything: 1 to [`MAX_NAME_LEN`] ASCII
/// letters, digits, `_`, `.`, `:` and `-` (the `#[task]` attribute checks the same).
pub(crate) fn name_problem(name: &str) -> Option<String> {
    if name.is_empty() {
        Some("a limit's name is empty".to_owned())
    } else if name.len() > MAX_NAME_LEN {
        Some(format!(
            "a limit's name is at most {MAX_NAME_LEN} characters"
        ))
    } else if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '-'))
    {
        Some(format!(
            "limit `{}`: a limit's name holds only ASCII letters, digits, `_`, `.`, `:` and `-`",
            crate::bounds::printable(name)
        ))
    } else {
        None
    }
}

/// A limit as a claim finds it, its row locked: its size (`None`: not declared) and how many
/// locked rows hold it now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(not(any(feature = "postgres", feature = "sqlite")), allow(dead_code))]
pub(crate) struct Room {
    /// The declared size; `None`: no limit of this name is declared.
    pub(crate) size: Option<u32>,
    /// Runs holding it now.
    pub(crate) holders: u32,
}

/// Which of `wanted` (each run's limit, in the order the claim would start them) may start:
/// a run without a limit always; a run with one while its limit's holders, with the runs
/// admitted before it, are fewer than its size. An undeclared limit admits nothing.
#[cfg_attr(not(any(feature = "postgres", feature = "sqlite")), allow(dead_code))]
pub(crate) fn admit(wanted: &[Option<&str>], rooms: &HashMap<String, Room>) -> Vec<bool> {
    let mut taken: HashMap<&str, u32> = HashMap::new();
    wanted
        .iter()
        .map(|limit| {
            let Some(limit) = limit else {
                return true;
            };
            let room = rooms.get(*limit).copied().unwrap_or_default();
            let taken = taken.entry(limit).or_default();
            let free = room.size.unwrap_or(0).saturating_sub(room.holders);
            if *taken < free {
                *taken += 1;
                true
            } else {
                false
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rooms(of: &[(&str, Option<u32>, u32)]) -> HashMap<String, Room> {
        of.iter()
            .map(|(name, size, holders)| {
                (
                    (*name).to_owned(),
                    Room {
                        size: *size,
                        holders: *holders,
                    },
                )
            })
            .collect()
    }

    #[test]
    fn runs_start_up_to_the_room_left_in_claim_order() {
        let rooms = rooms(&[("db", Some(2), 1), ("api", Some(3), 0)]);
        let wanted = [Some("db"), None, Some("db"), Some("api"), Some("db")];
        assert_eq!(admit(&wanted, &rooms), [true, true, false, true, false]);
    }

    #[test]
    fn a_full_limit_admits_nothing_and_an_undeclared_one_neither() {
        let rooms = rooms(&[("db", Some(2), 2), ("over", Some(1), 3)]);
        let wanted = [Some("db"), Some("over"), Some("nobody"), None];
        assert_eq!(admit(&wanted, &rooms), [false, false, false, true]);
    }

    #[test]
    fn names_are_checked() {
        assert_eq!(name_problem("warehouse-db"), None);
        assert_eq!(name_problem("a.b:c_d-1"), None);
        assert!(name_problem("").is_some());
        assert!(name_problem("a b").unwrap().contains("only ASCII"));
        assert!(
            name_problem(&"x".repeat(65))
                .unwrap()
                .contains("at most 64")
        );
    }
}
