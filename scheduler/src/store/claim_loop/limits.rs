//! The claim's step for limits shared by tasks (`crate::limits`): of the runs planned, those
//! naming a limit start only within its room, counted on the limit's locked row; the others
//! are left, their rows marked waiting.

use std::collections::HashMap;

use super::ClaimSteps;
use crate::store::{ClaimOutcome, ClaimPlan, DueTask, SkipReason, SkipRecord};

/// The misfire skips of a tick that waited for its limit, recorded as skipped for the limit
/// (`limit`): it was late because the limit had no room.
pub(super) fn name_the_limit(skips: &mut [SkipRecord]) {
    for skip in skips {
        if skip.reason == SkipReason::Misfire {
            skip.reason = SkipReason::Limit;
        }
    }
}

/// Keeps the planned runs their limits have room for ([`crate::limits::admit`], in plan
/// order); the others are left for a later claim (`outcome.left`, `outcome.limit_waiting`),
/// their rows marked waiting. Runs without a limit are kept as planned, and a claim with none
/// naming a limit takes no limit's lock.
pub(super) async fn limit<S: ClaimSteps>(
    steps: &mut S,
    runs: Vec<(DueTask, ClaimPlan)>,
    outcome: &mut ClaimOutcome,
) -> Result<Vec<(DueTask, ClaimPlan)>, S::Error> {
    let mut names: Vec<String> = runs.iter().filter_map(|(t, _)| t.limit.clone()).collect();
    if names.is_empty() {
        return Ok(runs);
    }
    names.sort();
    names.dedup();
    let rooms: HashMap<String, crate::limits::Room> =
        steps.limit_rooms(&names).await?.into_iter().collect();
    let wanted: Vec<Option<&str>> = runs.iter().map(|(t, _)| t.limit.as_deref()).collect();
    let admitted = crate::limits::admit(&wanted, &rooms);
    drop(wanted);
    let mut kept = Vec::with_capacity(runs.len());
    let mut waiting = Vec::new();
    for ((task, plan), admitted) in runs.into_iter().zip(admitted) {
        match (&task.limit, admitted) {
            (Some(limit), false) => {
                waiting.push(task.name.clone());
                outcome
                    .limit_waiting
                    .push((task.name.clone(), limit.clone()));
                outcome.left.push(task.name);
            }
            _ => kept.push((task, plan)),
        }
    }
    if !waiting.is_empty() {
        steps.mark_waiting(&waiting).await?;
    }
    Ok(kept)
}
