//! Ticks: the instants a task's schedule fires, and what becomes of each.
//!
//! A [schedule](crate::schedule) says when a task fires; this module says what that means for
//! its runs. It is pure: a schedule, the task's row or runs as the store read them, and an
//! instant go in; a decision or a record comes out. It reads and writes nothing. The engine's
//! claim rules, the runner and the missed-run checks, the reconciler, the operator actions and
//! the admin API all call it, and the store applies what it decides.
//!
//! | question | where |
//! |---|---|
//! | what is due for a task now, and what a claim does about it (pause end, manual run, tick, retry) | `due` |
//! | how late a tick may be: the misfire grace and the missed grace | `grace` |
//! | how ticks are counted and folded into skip records, within what caps | `count` |
//! | what became of each expected tick (the dashboard's strip) | `strip` |
//! | when each tick starts, at its jitter offset | `jitter` |
//! | when a listed run's tick was due to start (the admin API's and `scheduler runs`' `starts_at`) | `starts` |
//!
//! # Words
//!
//! - A **tick** is one instant the schedule fires; the run that serves it records it as its
//!   `scheduled_at`.
//! - A tick is **due** from its instant until a run is claimed for it (or it is skipped).
//! - A tick is **skipped** when it gets no run of its own, recorded with its reason: it was due
//!   while the task's previous run still ran (`overlap`), no node ran it in time (`misfire`), the
//!   task was paused or disabled, a retry gave way to it, its calendar blocked it (`calendar`:
//!   recorded by the claim of the next tick the calendar allows, from the tick the previous
//!   scheduled run served)...
//! - Ticks are **folded** into a late run (`misfire = "once"`, the default): the run serves the
//!   first of them, and its end records the others as skipped, tied to the run.
//! - A task has **missed** a tick when the tick has not started by its missed grace: an incident
//!   (`task.missed`), open until a run serves the task again.
//!
//! # Two graces, two questions
//!
//! | | misfire grace | missed grace |
//! |---|---|---|
//! | asks | may a late tick still run? | when is a tick not started yet an incident? |
//! | applies to | tasks with `misfire = "skip"` | every task |
//! | decides | behaviour: the tick runs, or it and every other due tick is skipped | alerting: `task.missed`, the dashboard's `missed`, `scheduler status`'s `overdue` |
//! | is | half the interval to the next tick, 1 s to 60 s (Quartz's threshold) | half the interval, 5 s to 15 min, or the node's `missed_grace` |
//!
//! They are not one rule. The misfire grace is short because a `skip` task's work only makes
//! sense at its time (a good-morning message an hour late is worse than none); the missed grace
//! is long enough that ordinary claim latency raises no alert, and an operator may set it
//! (`SCHEDULER_MISSED_GRACE`). One rule would have `skip` tasks run up to 15 minutes late, or
//! alert on every few seconds of delay. The misfire grace is never the longer of the two (see
//! `grace`'s tests), so a `skip` task never runs a tick late enough to count as missed.

mod count;
mod due;
mod grace;
pub(crate) mod jitter;
#[cfg(any(feature = "admin", feature = "cli"))]
pub(crate) mod starts;
#[cfg(feature = "admin")]
pub(crate) mod strip;

pub(crate) use count::{
    MAX_COUNTED_TICKS, RUN_COUNTED_TICKS, calendar_skips, claim_tick_cap, skipped_ticks,
    ticks_between, ticks_while_disabled,
};
pub(crate) use due::{decide_due, plan_without_schedule};
pub(crate) use grace::{misfire_grace, missed_by, missed_grace};
