//! Jitter: each tick of a task (or of an instance) starts at a fixed offset after the tick,
//! within the task's jitter window, so that many rows on one schedule (10,000 tenants on
//! `0 0 * * * *`) do not all start in the same second.
//!
//! **The offset is a pure function of (task, key, tick, window)**, the same on every node and in
//! every version: [`offset`] hashes the task's name, the instance's key (empty for the task's
//! own row and for its shards, which share their tick's offset) and the tick's instant with a
//! fixed hash (FNV-1a 64 over the bytes below, then MurmurHash3's 64-bit finalizer to spread
//! the bits), and takes the hash modulo the window in whole milliseconds:
//!
//! ```text
//! bytes  = task, 0x1f, key, 0x1f, tick as microseconds since 1970 (i64, little-endian)
//! h      = fmix64(fnv1a64(bytes))
//! offset = h mod min(window, next tick - tick) milliseconds
//! ```
//!
//! Never change it: a changed hash moves every pending start, and nodes of two versions would
//! disagree on when a tick is due (nothing would run twice, a tick is still claimed once, but
//! starts would move).
//!
//! **An offset never reaches the next tick.** The window is cut to the gap to the schedule's
//! next tick, so a tick's start is always before the next tick's (no tick is overtaken, none
//! folded by its own jitter), whatever window is set on whatever schedule.
//!
//! **The tick stays the tick.** The run serves the tick (`ctx.scheduled_at()`, the history,
//! skips, backfills, "never at or before a tick already claimed"); only its start moves. The row
//! keeps the start in `next_run_at` (what the claim selects and orders by) and the tick in
//! `next_tick` (NULL when they are equal: no jitter). Lateness (the start-delay metric, the
//! `sla.start_within` deadline, the missed grace and its incidents) counts from the start.
//!
//! This module decides; it reads and writes nothing.

use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};

use crate::schedule::ScheduleSpec;
use crate::store::NextRun;

/// FNV-1a's 64-bit offset basis and prime.
const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0100_0000_01b3;
/// What separates the hashed fields.
const UNIT_SEPARATOR: u8 = 0x1f;

fn fnv1a(hash: u64, bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .fold(hash, |h, b| (h ^ u64::from(*b)).wrapping_mul(FNV_PRIME))
}

/// MurmurHash3's 64-bit finalizer: every input bit moves every output bit.
fn fmix64(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^= h >> 33;
    h
}

/// The stable hash of (task, key, tick) (see the module docs).
pub(crate) fn stable_hash(task: &str, key: &str, tick: DateTime<Utc>) -> u64 {
    let mut h = fnv1a(FNV_OFFSET, task.as_bytes());
    h = fnv1a(h, &[UNIT_SEPARATOR]);
    h = fnv1a(h, key.as_bytes());
    h = fnv1a(h, &[UNIT_SEPARATOR]);
    h = fnv1a(h, &tick.timestamp_micros().to_le_bytes());
    fmix64(h)
}

/// The offset of `tick` of `task`'s instance `key` (`""`: the task's own row) in a window of
/// `window` (whole milliseconds; below one millisecond, none): from zero to just under the
/// window.
pub fn offset(task: &str, key: &str, tick: DateTime<Utc>, window: Duration) -> Duration {
    let window_ms = u64::try_from(window.as_millis()).unwrap_or(u64::MAX);
    if window_ms == 0 {
        return Duration::ZERO;
    }
    Duration::from_millis(stable_hash(task, key, tick) % window_ms)
}

/// The task and key a row's offset is hashed with: an instance's row `task/key` gives its task
/// and key; a task's own row, its shards' rows (`task[i]`) and a broadcast's node rows give the
/// task and no key (a tick's shards start together).
pub(crate) fn identity(row: &str) -> (&str, &str) {
    match crate::instance::split_row(row) {
        Some((task, key)) => (task, key),
        None => (crate::shard::split_row(row).0, ""),
    }
}

/// When `tick` of row `row` starts, on `spec`, with a jitter window of `window`: the tick plus
/// its offset, the window cut to the gap to the schedule's next tick.
pub fn start_of(
    row: &str,
    spec: &ScheduleSpec,
    tick: DateTime<Utc>,
    window: Duration,
) -> DateTime<Utc> {
    if window.is_zero() {
        return tick;
    }
    let gap = spec
        .next_after(tick)
        .and_then(|next| (next - tick).to_std().ok())
        .unwrap_or(window);
    let (task, key) = identity(row);
    let offset = offset(task, key, tick, window.min(gap));
    tick + TimeDelta::from_std(offset).unwrap_or(TimeDelta::zero())
}

/// The next run to leave on row `row` for its next tick `tick` (`None`: the schedule never
/// fires again): the tick itself without jitter, else its start with the tick kept beside it.
pub(crate) fn next_run(
    row: &str,
    spec: &ScheduleSpec,
    tick: Option<DateTime<Utc>>,
    window: Duration,
) -> NextRun {
    match tick {
        Some(tick) => {
            let start = start_of(row, spec, tick, window);
            if start == tick {
                NextRun::Set(Some(tick))
            } else {
                NextRun::Shifted { tick, start }
            }
        }
        None => NextRun::Set(None),
    }
}

/// The jitter window of a row: its own (an instance's, set with
/// [`Schedule::jitter`](crate::Schedule::jitter)), else its task's config entry's, else the
/// task attribute's, else none.
pub(crate) fn window(
    own: Option<Duration>,
    config: Option<Duration>,
    attribute: Option<Duration>,
) -> Duration {
    own.or(config).or(attribute).unwrap_or(Duration::ZERO)
}

#[cfg(test)]
mod tests;
