//! Operator actions against a store, shared by the command line, the admin API and the
//! dashboard: run a task now, pause it, resume it, cancel a running run, snooze its alerts,
//! backfill a range of its past ticks (and cancel the backfill). Each is written to the audit trail with who
//! asked and from where, and takes effect cluster-wide (nodes are woken at once).
//!
//! ```no_run
//! # async fn demo(store: &dyn scheduler::store::Store) -> scheduler::Result<()> {
//! use scheduler::testing::operate::{self, Actor};
//!
//! let who = Actor::new("alice", "cli@ops-host");
//! operate::trigger(store, "syncAdvertiserReport", &who).await?;
//! operate::pause(store, "syncAdvertiserReport", &who, "upstream API is down", None).await?;
//! operate::resume(store, "syncAdvertiserReport", &who).await?;
//! operate::cancel(store, 4711, &who).await?;
//! # Ok(()) }
//! ```

use chrono::{DateTime, Utc};

use crate::Result;
use crate::backfill::{BackfillPlan, BackfillRefusal, BackfillRequest, RunCap, plan_ticks};
use crate::schedule::ScheduleSpec;
#[cfg(any(feature = "admin", feature = "cli"))]
use crate::store::Snooze;
use crate::store::{
    AuditEntry, BackfillCancel, BackfillCreate, CancelRequest, NewBackfill, Pause, ResumePlan,
    RunRequest, SkipReason, Store, TaskState,
};

/// Who asks, and from where (for the audit trail).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Actor {
    /// A person or a token's name.
    pub name: String,
    /// Where from (`cli@host`, a peer address).
    pub source: String,
}

impl Actor {
    /// `name` acting from `source`.
    pub fn new(name: impl Into<String>, source: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            source: source.into(),
        }
    }
}

/// Asks for one run of `task` now, through the same locking as any run (it waits for a running
/// one to end). Refused for a paused task.
pub async fn trigger(store: &dyn Store, task: &str, actor: &Actor) -> Result<RunRequest> {
    trigger_with(store, task, None, actor).await
}

/// Asks for one run of `row` now (a task's own row, or an instance's `task/key`, see
/// [`crate::instance::row_name`]), with `args` (JSON text, checked as an instance's are:
/// [`check_override`]) in place of the row's own arguments for that run only, recorded with
/// it; `None`: its own. Audited with the arguments' secrets hidden. Refused for a paused row.
pub async fn trigger_with(
    store: &dyn Store,
    row: &str,
    args: Option<&str>,
    actor: &Actor,
) -> Result<RunRequest> {
    let mut detail = "run now".to_owned();
    if let Some(args) = args {
        detail.push_str(" with args ");
        detail.push_str(&crate::redact::redact_args_text(args));
    }
    let audit = audit_of(actor, "trigger", row, &detail);
    Ok(store.request_run(row, &actor.name, args, &audit).await?)
}

/// A manual run's arguments as given (JSON text), checked as an instance's are: JSON, at most
/// [`Schedule::MAX_ARGS_BYTES`](crate::Schedule::MAX_ARGS_BYTES); returned compact. The `Err`
/// says why, for a person (it never quotes the text).
///
/// ```
/// use scheduler::testing::operate::check_override;
///
/// assert_eq!(check_override(r#"{ "tenant": 42 }"#).unwrap(), r#"{"tenant":42}"#);
/// assert!(check_override("{tenant").unwrap_err().contains("not JSON"));
/// let big = format!("\"{}\"", "x".repeat(70_000));
/// assert!(check_override(&big).unwrap_err().contains("the most is 65536"));
/// ```
pub fn check_override(text: &str) -> std::result::Result<String, String> {
    crate::instance::check_args_text(text).map_err(|e| e.to_string())
}

/// The audit entry of `action` on `row` by `actor`: an instance's row (`task/key`) is recorded
/// under its task, its key leading the detail.
fn audit_of(actor: &Actor, action: &str, row: &str, detail: &str) -> AuditEntry {
    let (task, detail) = match crate::instance::split_row(row) {
        Some((task, key)) if detail.is_empty() => (task, format!("instance {key}")),
        Some((task, key)) => (task, format!("instance {key}: {detail}")),
        None => (row, detail.to_owned()),
    };
    AuditEntry::new(&actor.name, action, task, detail, &actor.source)
}

/// Why a pause request is refused before it reaches the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum PauseRefusal {
    /// The reason is empty (or only spaces): a pause must say why.
    NoReason,
    /// `until` is not after now: the pause would end at once.
    UntilPast,
}

/// Checks a pause request as every operator surface must (command line, admin API): a reason
/// that is not blank, and an end, if any, after `now`.
///
/// ```
/// use chrono::{TimeDelta, Utc};
/// use scheduler::testing::operate::{PauseRefusal, check_pause};
///
/// let now = Utc::now();
/// assert_eq!(check_pause("upstream down", Some(now + TimeDelta::hours(1)), now), Ok(()));
/// assert_eq!(check_pause("  ", None, now), Err(PauseRefusal::NoReason));
/// assert_eq!(check_pause("why", Some(now), now), Err(PauseRefusal::UntilPast));
/// ```
pub fn check_pause(
    reason: &str,
    until: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> std::result::Result<(), PauseRefusal> {
    if reason.trim().is_empty() {
        return Err(PauseRefusal::NoReason);
    }
    if until.is_some_and(|until| until <= now) {
        return Err(PauseRefusal::UntilPast);
    }
    Ok(())
}

/// Pauses `task` (a task's row, or an instance's `task/key`: that instance alone) cluster-wide
/// until resumed or `until`; false if there is no such row. Ticks
/// due while paused are recorded as skipped (`paused`) when the pause ends. Callers check the
/// request with [`check_pause`] first.
pub async fn pause(
    store: &dyn Store,
    task: &str,
    actor: &Actor,
    reason: &str,
    until: Option<DateTime<Utc>>,
) -> Result<bool> {
    let detail = match until {
        Some(until) => format!("{reason} (until {})", until.to_rfc3339()),
        None => reason.to_owned(),
    };
    let audit = audit_of(actor, "pause", task, &detail);
    let pause = Pause::new(Utc::now(), &actor.name, reason, until);
    Ok(store.pause_task(task, &pause, &audit).await?)
}

/// Ends `task`'s pause (a task's row, or an instance's `task/key`): the ticks due meanwhile are
/// recorded as skipped (`paused`), the next run is the first tick from now, starting at its
/// offset in the row's jitter window ([`resume_plan`]). Returns the pause that ended (`None`: it
/// was not paused).
pub async fn resume(store: &dyn Store, task: &str, actor: &Actor) -> Result<Option<Pause>> {
    let audit = audit_of(actor, "resume", task, "");
    Ok(store.resume_task(task, &audit, &resume_plan).await?)
}

/// Why a snooze request is refused before it reaches the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SnoozeRefusal {
    /// The reason is empty (or only spaces): a snooze must say why.
    NoReason,
    /// The reason is longer than [`MAX_REASON`] characters.
    ReasonTooLong,
    /// `until` is not after now: the snooze would end at once.
    UntilPast,
}

/// The longest reason a pause or a snooze may give, in characters.
pub const MAX_REASON: usize = 500;

/// Checks a snooze request as every operator surface must (command line, admin API,
/// dashboard): a reason that is not blank nor too long, and an end after `now`.
///
/// ```
/// use chrono::{TimeDelta, Utc};
/// use scheduler::testing::operate::{SnoozeRefusal, check_snooze};
///
/// let now = Utc::now();
/// assert_eq!(check_snooze("planned maintenance", now + TimeDelta::hours(2), now), Ok(()));
/// assert_eq!(check_snooze(" ", now + TimeDelta::hours(2), now), Err(SnoozeRefusal::NoReason));
/// assert_eq!(check_snooze("why", now, now), Err(SnoozeRefusal::UntilPast));
/// ```
pub fn check_snooze(
    reason: &str,
    until: DateTime<Utc>,
    now: DateTime<Utc>,
) -> std::result::Result<(), SnoozeRefusal> {
    if reason.trim().is_empty() {
        return Err(SnoozeRefusal::NoReason);
    }
    if reason.trim().chars().count() > MAX_REASON {
        return Err(SnoozeRefusal::ReasonTooLong);
    }
    if until <= now {
        return Err(SnoozeRefusal::UntilPast);
    }
    Ok(())
}

/// Snoozes `task`'s alerts until `until`: the task keeps running (unlike a pause), its alerts
/// are still folded into its incidents, but none is sent (nor reminded) until then. Replaces a
/// snooze in force; false if there is no such task. Audited. Callers check the request with
/// [`check_snooze`] first.
#[cfg(any(feature = "admin", feature = "cli"))]
pub async fn snooze(
    store: &dyn Store,
    task: &str,
    actor: &Actor,
    reason: &str,
    until: DateTime<Utc>,
) -> Result<bool> {
    let reason = reason.trim();
    let detail = format!("{reason} (until {})", until.to_rfc3339());
    let audit = AuditEntry::new(&actor.name, "snooze", task, detail, &actor.source);
    let snooze = Snooze::new(task, until, reason, &actor.name);
    Ok(store.snooze_task(&snooze, &audit).await?)
}

/// Lifts `task`'s snooze: its alerts are sent again from now on. Returns the snooze that ended
/// (`None`: none was in force). Audited.
#[cfg(any(feature = "admin", feature = "cli"))]
pub async fn unsnooze(store: &dyn Store, task: &str, actor: &Actor) -> Result<Option<Snooze>> {
    let audit = AuditEntry::new(&actor.name, "unsnooze", task, "", &actor.source);
    Ok(store.unsnooze_task(task, &audit).await?)
}

/// How long a cancelled run's handler has to return after it is asked to stop (through
/// [`TaskContext::cancelled`](crate::TaskContext::cancelled)) before it is stopped by force, as
/// a run past its timeout is (an isolated run's child is killed).
pub const CANCEL_GRACE: std::time::Duration = std::time::Duration::from_secs(10);

/// Asks running run `run_id` to stop, wherever it runs: its node learns of it at once (by
/// notification; at its next lock renewal at the latest), tells the handler through
/// [`TaskContext::cancelled`](crate::TaskContext::cancelled), and stops it by force after
/// [`CANCEL_GRACE`]. The run is recorded `cancelled` with who asked, and its tick is not run
/// again (not handed over, not retried); a handler that returns `Ok` all the same finished its
/// work, and is recorded `succeeded`. Audited. A run that has ended is left alone
/// ([`CancelRequest::Ended`]), as is one that does not exist.
pub async fn cancel(store: &dyn Store, run_id: i64, actor: &Actor) -> Result<CancelRequest> {
    // The audit entry names the task: read it first (the request itself is decided on the row).
    let Some(run) = store.run(run_id).await? else {
        return Ok(CancelRequest::NotFound);
    };
    let audit = AuditEntry::new(
        &actor.name,
        "cancel",
        &run.task_name,
        format!("run {run_id} on {}", run.node_id),
        &actor.source,
    );
    Ok(store.cancel_run(run_id, &actor.name, &audit).await?)
}

/// Backfills `request.task`: plans its ticks in the range (see [`crate::backfill`]) and, unless
/// it is a dry run or there is nothing to run, records the backfill (audited: who, the range,
/// how many runs) for the nodes to run one tick at a time, paced, through the task's lock, with
/// trigger `backfill` and `ctx.scheduled_at()` the backfilled tick. The inner `Err` says why a
/// request is refused (nothing was written).
///
/// ```no_run
/// # async fn demo(store: &dyn scheduler::store::Store) -> scheduler::Result<()> {
/// use scheduler::testing::backfill::BackfillRequest;
/// use scheduler::testing::operate::{self, Actor};
///
/// let who = Actor::new("alice", "cli@ops-host");
/// let from = "2026-03-01T00:00:00Z".parse().unwrap();
/// let to = "2026-03-02T00:00:00Z".parse().unwrap();
/// let request = BackfillRequest::new("syncAdvertiserReport", from, to);
/// let dry = operate::backfill(store, &request.clone().dry_run(true), &who).await?;
/// if let Ok(plan) = dry {
///     println!("{} ticks would run", plan.ticks.len());
///     let done = operate::backfill(store, &request, &who).await?;
///     println!("{done:?}");
/// }
/// # Ok(()) }
/// ```
pub async fn backfill(
    store: &dyn Store,
    request: &BackfillRequest,
    actor: &Actor,
) -> Result<std::result::Result<BackfillPlan, BackfillRefusal>> {
    if request.concurrency != 1 {
        return Ok(Err(BackfillRefusal::Concurrency(request.concurrency)));
    }
    if let Err(refusal) = request.check_ranges() {
        return Ok(Err(refusal));
    }
    let Some(state) = store
        .task_states(Some(&request.task))
        .await?
        .into_iter()
        .find(|s| s.name == request.task)
    else {
        return Ok(Err(BackfillRefusal::UnknownTask(request.task.clone())));
    };
    // The task's calendar applies as it does to the schedule: a tick it blocks is not
    // backfilled (`skip`), or is backfilled at the instant the schedule would have run it
    // (`next_allowed`).
    let spec = ScheduleSpec::parse(&state.cron, &state.timezone)
        .map_err(|e| e.to_string())
        .and_then(|spec| match &state.calendar {
            None => Ok(spec),
            Some(stored) => crate::schedule::calendar::TaskCalendar::from_stored(stored)
                .and_then(|c| c.compile(spec.timezone()))
                .map(|c| spec.with_calendar(c))
                .map_err(|e| e.to_string()),
        });
    let spec = match spec {
        Ok(spec) => spec,
        Err(error) => {
            return Ok(Err(BackfillRefusal::Schedule {
                task: request.task.clone(),
                error,
            }));
        }
    };
    let succeeded = if request.all || request.from > request.to {
        Vec::new()
    } else {
        store
            .succeeded_ticks(&request.task, request.from, request.to)
            .await?
    };
    // Each tick runs on each of the task's shard rows, as the tick itself did (a broadcast
    // counts 1: its tick runs once, on its own row); the cap counts those runs.
    let rows: Vec<String> = (0..state.shards.max(1))
        .map(|index| crate::shard::row_name(&request.task, index))
        .collect();
    let cap = RunCap::new(request.max_runs).per_tick(state.shards);
    let now = Utc::now();
    let (in_range, ticks) = match plan_ticks(
        &spec,
        request.from,
        request.to,
        now,
        &succeeded,
        request.all,
        cap,
    ) {
        Ok(planned) => planned,
        Err(refusal) => return Ok(Err(refusal)),
    };
    let mut plan = BackfillPlan {
        task: request.task.clone(),
        timezone: state.timezone.clone(),
        from: request.from,
        to: request.to,
        ticks_in_range: in_range,
        already_succeeded: in_range - ticks.len(),
        runs: cap.runs(ticks.len()),
        ticks,
        dry_run: request.dry_run,
        id: None,
    };
    if request.dry_run || plan.ticks.is_empty() {
        return Ok(Ok(plan));
    }
    let detail = format!(
        "{} to {}: {} runs of {} ticks ({}), pace {} ms",
        request.from.to_rfc3339(),
        request.to.to_rfc3339(),
        plan.runs,
        plan.ticks.len(),
        if request.all {
            "every tick"
        } else {
            "ticks without a succeeded run"
        },
        request.pace.as_millis()
    );
    let audit = AuditEntry::new(
        &actor.name,
        "backfill",
        &request.task,
        detail,
        &actor.source,
    );
    let record = NewBackfill {
        task_name: request.task.clone(),
        from: request.from,
        to: request.to,
        all_ticks: request.all,
        max_runs: request.max_runs,
        concurrency: request.concurrency,
        pace: request.pace,
        requested_by: actor.name.clone(),
        ticks: plan.ticks.clone(),
        rows,
    };
    match store.create_backfill(&record, &audit).await? {
        BackfillCreate::Created(id) => plan.id = Some(id),
        BackfillCreate::NotFound => {
            return Ok(Err(BackfillRefusal::UnknownTask(request.task.clone())));
        }
        BackfillCreate::Busy(id) => return Ok(Err(BackfillRefusal::Busy(id))),
    }
    Ok(Ok(plan))
}

/// Cancels backfill `id` (audited): its ticks not yet claimed never run. Its runs still running
/// go on; cancel each with [`cancel`] if they must stop (their ids are returned).
pub async fn cancel_backfill(store: &dyn Store, id: i64, actor: &Actor) -> Result<BackfillCancel> {
    let Some((record, _)) = store.backfill(id).await? else {
        return Ok(BackfillCancel::NotFound);
    };
    let audit = AuditEntry::new(
        &actor.name,
        "cancel_backfill",
        &record.task_name,
        format!("backfill {id}"),
        &actor.source,
    );
    Ok(store.cancel_backfill(id, &actor.name, &audit).await?)
}

/// What ending a pause writes: the ticks due while paused (recorded), the next run after now:
/// the schedule's next tick, starting at its offset in the row's jitter `window` as a claim or
/// a reconcile writes it (see `crate::ticks::jitter`). A next run still ahead is kept.
pub fn resume_plan(
    state: &TaskState,
    window: std::time::Duration,
    now: DateTime<Utc>,
) -> ResumePlan {
    let Ok(spec) = ScheduleSpec::stored(&state.cron, &state.timezone, state.calendar.as_deref())
    else {
        // A schedule this binary cannot read: leave it to the nodes (they report it).
        return ResumePlan::new(state.next_run_at, Vec::new());
    };
    // The next tick after now, at its start.
    let next_after_now = || {
        crate::ticks::jitter::next_run(&state.name, &spec, spec.next_after(now), window)
            .columns()
            .unwrap_or_default()
    };
    match state.next_run_at {
        Some(next) if next <= now => {
            let (next_run_at, next_tick) = next_after_now();
            ResumePlan {
                next_run_at,
                next_tick,
                // From the tick it was to start (a jittered start comes after its tick).
                skips: crate::ticks::ticks_between(
                    &state.name,
                    &spec,
                    state.next_tick.unwrap_or(next).min(next),
                    now,
                    SkipReason::Paused,
                    crate::ticks::MAX_COUNTED_TICKS,
                ),
            }
        }
        Some(next) => ResumePlan::new(Some(next), Vec::new()),
        None => {
            let (next_run_at, next_tick) = next_after_now();
            ResumePlan::new(next_run_at, Vec::new()).with_tick(next_tick)
        }
    }
}

#[cfg(test)]
mod tests;
