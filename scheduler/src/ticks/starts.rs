//! Where each listed run's tick was due to start: a scheduled run's tick shifted by its row's
//! jitter window, as the claim shifted it (see [`jitter`](super::jitter)), what its lateness
//! counts from. The admin API's runs (a task's detail, the run history, one run) and the command
//! line's `runs` show it as `starts_at`.
//!
//! This module places; it reads nothing. Its callers read the rows (the admin API through the
//! engine, with the windows in force on the node; the command line from the store, with the
//! windows as last reconciled) and hand them over.

use std::collections::HashMap;
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::schedule::ScheduleSpec;
use crate::store::{RunRecord, Trigger};

/// What places the ticks of the runs of some tasks at their starts: each task's schedule and
/// jitter window, and each instance's schedule and window (its own, else its task's).
#[derive(Default)]
pub(crate) struct RunStarts {
    tasks: HashMap<String, TaskStarts>,
}

/// One task's rows, as [`RunStarts`] places them.
struct TaskStarts {
    /// The task's own schedule (none: it cannot be read here).
    own: Option<ScheduleSpec>,
    /// The task's window.
    window: Duration,
    /// Each instance's schedule and window, by key (none: gone, or unreadable here).
    instances: HashMap<String, Option<(ScheduleSpec, Duration)>>,
}

impl RunStarts {
    /// Places the runs of `task`: its own schedule `own` (none: unreadable) and its window.
    pub(crate) fn task(&mut self, task: &str, own: Option<ScheduleSpec>, window: Duration) {
        self.tasks.insert(
            task.to_owned(),
            TaskStarts {
                own,
                window,
                instances: HashMap::new(),
            },
        );
    }

    /// Whether `task`'s rows are known (given by [`task`](Self::task)).
    pub(crate) fn knows(&self, task: &str) -> bool {
        self.tasks.contains_key(task)
    }

    /// Whether instance `key` of `task` has been given (by [`instance`](Self::instance)).
    pub(crate) fn knows_instance(&self, task: &str, key: &str) -> bool {
        self.tasks
            .get(task)
            .is_some_and(|t| t.instances.contains_key(key))
    }

    /// Places the runs of instance `key` of `task` (given first by [`task`](Self::task)): its
    /// schedule and its own window (none: its task's); `None`: it is gone or unreadable here.
    pub(crate) fn instance(
        &mut self,
        task: &str,
        key: &str,
        row: Option<(ScheduleSpec, Option<Duration>)>,
    ) {
        let Some(starts) = self.tasks.get_mut(task) else {
            return;
        };
        let window = starts.window;
        starts.instances.insert(
            key.to_owned(),
            row.map(|(spec, own)| (spec, own.unwrap_or(window))),
        );
    }

    /// When `run`'s tick was due to start: a scheduled run's tick shifted by its row's window;
    /// none for any other run, or a row it cannot place.
    pub(crate) fn start(&self, run: &RunRecord) -> Option<DateTime<Utc>> {
        if run.trigger != Trigger::Schedule {
            return None;
        }
        let task = self.tasks.get(&run.task_name)?;
        let tick = run.scheduled_at;
        match &run.instance_key {
            None => {
                let spec = task.own.as_ref()?;
                Some(super::jitter::start_of(
                    &run.task_name,
                    spec,
                    tick,
                    task.window,
                ))
            }
            Some(key) => {
                let (spec, window) = task.instances.get(key)?.as_ref()?;
                let row = crate::instance::row_name(&run.task_name, key);
                Some(super::jitter::start_of(&row, spec, tick, *window))
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests;
