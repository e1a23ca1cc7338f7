//! What a running handler sees: which run it is, a cancellation signal, and shared application state.
//!
//! The context never exposes the lock: renewing it is the watchdog's job (see [`crate::engine`]).

use std::any::{Any, TypeId, type_name};
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use tokio_util::sync::CancellationToken;

/// Typed application state shared with every handler (database pools, HTTP clients, ...).
///
/// Filled through [`SchedulerBuilder::state`](crate::SchedulerBuilder::state) and read with
/// [`TaskContext::state`].
#[derive(Clone, Default)]
pub(crate) struct StateMap {
    values: Arc<HashMap<TypeId, Arc<dyn Any + Send + Sync>>>,
}

impl StateMap {
    pub(crate) fn insert<T: Send + Sync + 'static>(&mut self, value: T) {
        Arc::make_mut(&mut self.values).insert(TypeId::of::<T>(), Arc::new(value));
    }

    fn get<T: Send + Sync + 'static>(&self) -> Option<&T> {
        self.values.get(&TypeId::of::<T>())?.downcast_ref::<T>()
    }
}

impl fmt::Debug for StateMap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StateMap")
            .field("len", &self.values.len())
            .finish()
    }
}

/// The state a handler asked for was never registered with the scheduler.
#[derive(Debug, Clone, thiserror::Error)]
#[error(
    "no shared state of type `{type_name}` was registered; add it with `Scheduler::builder().state(value)`"
)]
pub struct MissingState {
    type_name: &'static str,
}

/// Everything a task handler knows about the run it serves.
///
/// ```
/// use scheduler::TaskContext;
///
/// # #[derive(Debug)] struct Db;
/// async fn handler(ctx: TaskContext) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
///     tracing::info!(task = ctx.task_name(), tick = %ctx.scheduled_at(), "working");
///     tokio::select! {
///         _ = ctx.cancelled() => return Ok(()), // shutting down or the lock was lost: stop early
///         _ = tokio::time::sleep(std::time::Duration::from_millis(1)) => {}
///     }
///     Ok(())
/// }
/// # tokio::runtime::Runtime::new().unwrap().block_on(handler(TaskContext::standalone("demo"))).unwrap();
/// ```
#[derive(Clone)]
pub struct TaskContext {
    task_name: Arc<str>,
    run_id: i64,
    scheduled_at: DateTime<Utc>,
    node_id: Arc<str>,
    cancel: CancellationToken,
    state: StateMap,
}

impl TaskContext {
    pub(crate) fn new(
        task_name: Arc<str>,
        run_id: i64,
        scheduled_at: DateTime<Utc>,
        node_id: Arc<str>,
        cancel: CancellationToken,
        state: StateMap,
    ) -> Self {
        Self {
            task_name,
            run_id,
            scheduled_at,
            node_id,
            cancel,
            state,
        }
    }

    /// A context outside any scheduler, for unit tests of a handler or a manual run.
    ///
    /// Its run id is 0, its tick is now, it is never cancelled and it holds no state.
    pub fn standalone(task_name: &str) -> Self {
        Self::new(
            Arc::from(task_name),
            0,
            Utc::now(),
            Arc::from("standalone"),
            CancellationToken::new(),
            StateMap::default(),
        )
    }

    /// The task's configured name, e.g. `syncAdvertiserReport`.
    pub fn task_name(&self) -> &str {
        &self.task_name
    }

    /// The id of this run's row in `scheduler_runs`.
    pub fn run_id(&self) -> i64 {
        self.run_id
    }

    /// The schedule tick this run serves (not when it started).
    pub fn scheduled_at(&self) -> DateTime<Utc> {
        self.scheduled_at
    }

    /// The id of the node running this handler.
    pub fn node_id(&self) -> &str {
        &self.node_id
    }

    /// Whether the handler has been asked to stop (graceful shutdown, or the run's lock was lost).
    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// Completes when the handler is asked to stop. A handler that checks it can finish cleanly;
    /// one that ignores it is stopped after the grace period anyway, at its next `.await`.
    ///
    /// Stopping works at `.await` points: a handler that blocks its thread (long CPU work or
    /// blocking I/O without `spawn_blocking`) cannot be stopped in time when its lock is lost,
    /// so keep such work in `tokio::task::spawn_blocking` and check
    /// [`is_cancelled`](Self::is_cancelled) between chunks.
    pub async fn cancelled(&self) {
        self.cancel.cancelled().await
    }

    /// The shared value of type `T` registered with
    /// [`SchedulerBuilder::state`](crate::SchedulerBuilder::state).
    ///
    /// ```
    /// # use scheduler::TaskContext;
    /// let ctx = TaskContext::standalone("demo");
    /// let err = ctx.state::<String>().unwrap_err();
    /// assert!(err.to_string().contains("`alloc::string::String`"));
    /// ```
    pub fn state<T: Send + Sync + 'static>(&self) -> Result<&T, MissingState> {
        self.state.get::<T>().ok_or(MissingState {
            type_name: type_name::<T>(),
        })
    }

    /// A child of this run's cancellation token, to hand to code that takes one.
    pub fn cancellation_token(&self) -> CancellationToken {
        self.cancel.child_token()
    }

    #[cfg(test)]
    pub(crate) fn with_state(mut self, state: StateMap) -> Self {
        self.state = state;
        self
    }
}

impl fmt::Debug for TaskContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TaskContext")
            .field("task_name", &self.task_name)
            .field("run_id", &self.run_id)
            .field("scheduled_at", &self.scheduled_at)
            .field("node_id", &self.node_id)
            .field("cancelled", &self.is_cancelled())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_is_found_by_type() {
        let mut state = StateMap::default();
        state.insert(42_u32);
        let ctx = TaskContext::standalone("demo").with_state(state);
        assert_eq!(ctx.state::<u32>().unwrap(), &42);
        assert!(ctx.state::<String>().is_err());
    }
}
