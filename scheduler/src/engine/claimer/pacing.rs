//! The claim loop as a service: a pass, and how long the loop pauses after it (at once after a
//! full batch, briefly after a full fair share, growing and jittered while due rows are held by
//! another transaction, otherwise until the next wake time or the poll interval).

use std::time::Duration;

use super::{ClaimLoop, ClaimPass};
use crate::engine::service::backoff;
use crate::engine::service::{Service, Woke};
use crate::store::StoreError;

/// First pause when something was due but nothing could be claimed (another transaction held
/// the rows); doubles up to [`CONTENDED_RETRY_MAX`].
const CONTENDED_RETRY: Duration = Duration::from_millis(20);

pub(super) const CONTENDED_RETRY_MAX: Duration = Duration::from_secs(1);

/// The shortest pause before claiming again the shards the spread rule held back.
const SPREAD_WAKE_MIN: Duration = Duration::from_millis(1);

/// How long to wait for a batch of handler slots to free up after filling all of them.
const REFILL_WAIT: Duration = Duration::from_millis(5);

/// The longest pause after a claim that took a full share.
const FAIR_PAUSE_MAX: Duration = Duration::from_millis(100);

impl Service for ClaimLoop {
    type Pass = ClaimPass;
    type Error = StoreError;

    fn events(&self) -> Option<&crate::events::EventBus> {
        Some(&self.shared.events)
    }

    fn what(&self) -> &'static str {
        "claiming (running handlers go on)"
    }

    async fn run_once(&mut self) -> Result<ClaimPass, StoreError> {
        let known_due = std::mem::take(&mut self.known_due);
        let pass = self.claim_once(known_due).await?;
        if pass.filled {
            // Every free slot was taken and more is probably due: let a batch of slots free up
            // (briefly) so the next claim is one transaction for many tasks, not one per
            // finished handler, and claim again without asking for the wake time first.
            let batch = (self.shared.settings.max_concurrent / 2).max(1);
            self.shared.slots.freed(batch, REFILL_WAIT).await;
            self.known_due = true;
        } else if pass.more {
            // More of a large tick is due: claimed next, without asking for the wake time.
            self.known_due = true;
        }
        Ok(pass)
    }

    fn pause_after(&mut self, pass: ClaimPass) -> Option<Duration> {
        let poll = self.shared.settings.poll_interval;
        self.due_at_end = false;
        if pass.filled || pass.share_held {
            return Some(Duration::ZERO);
        }
        // Took its share of a tick's leftover shards (past the spread grace) and more are left:
        // as after a full fair share, the other nodes' claims go first.
        let took_leftovers = pass.claimed > 0 && pass.spread_wait == Some(Duration::ZERO);
        if pass.capped || took_leftovers {
            // Took a full share: the other nodes' claims go first, then this one claims again
            // at once (more is probably due).
            self.due_at_end = true;
            return Some(jitter(pass.took.min(FAIR_PAUSE_MAX)));
        }
        if pass.contended {
            self.contended += 1;
            let pause = jitter(contended_pause(self.contended));
            // Shards held back for the spread grace: claim again when it ends at the latest,
            // so what is left then goes out at once, not after a long contended pause.
            return Some(match pass.spread_wait {
                Some(wait) => pause.min(wait.max(SPREAD_WAKE_MIN)),
                None => pause,
            });
        }
        self.contended = 0;
        Some(if pass.claimed > 0 || pass.rescued > 0 {
            Duration::ZERO
        } else if pass.late {
            crate::engine::runtime::LATE_START.min(poll)
        } else if pass.saturated {
            poll
        } else {
            match pass.wake_in {
                Some(w) if w < poll => {
                    self.due_at_end = true;
                    w
                }
                _ => poll,
            }
        })
    }

    fn pause_after_failure(&mut self, failures: u32) -> Duration {
        // Watching expired locks starts over once the store answers again.
        self.takeover.reset();
        backoff(failures - 1)
    }

    fn woke(&mut self, by: Woke) {
        // Slept until a due time the store gave: claim at once, without asking again. On a
        // test's clock only once it has come that far: the pause ran on Tokio's clock, which a
        // frozen test clock does not follow (a flowing one does, as the system clock).
        self.known_due = by == Woke::Timer
            && self.due_at_end
            && match self.shared.settings.clock.test_now() {
                None => true,
                Some(now) => self.claim_from.is_some_and(|from| now >= from),
            };
    }
}

/// The pause (before jitter) after the `streak`-th claim pass in a row that found due rows
/// locked by another transaction: [`CONTENDED_RETRY`], doubled per pass, at most
/// [`CONTENDED_RETRY_MAX`].
pub(super) fn contended_pause(streak: u32) -> Duration {
    (CONTENDED_RETRY * 2u32.saturating_pow(streak.clamp(1, 10) - 1)).min(CONTENDED_RETRY_MAX)
}

/// `d` scaled by a random factor in [0.5, 1.5), so contending nodes drift apart.
pub(super) fn jitter(d: Duration) -> Duration {
    d.mul_f64(0.5 + crate::engine::service::random_fraction())
}
