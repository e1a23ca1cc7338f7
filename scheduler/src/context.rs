//! What a running handler sees: which run it is, a cancellation signal, and shared application state.
//!
//! The context never exposes the lock: renewing it is the watchdog's job (see [`crate::engine`]).

use std::any::type_name;
use std::fmt;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use tokio_util::sync::CancellationToken;

mod args;
mod state;

pub use args::ArgsError;
use args::RunInstance;
pub use state::MissingState;
pub(crate) use state::StateMap;

/// A handler stopped before finishing its work because it was asked to (the node is shutting
/// down, or the run's lock could not be kept).
///
/// Return it (or any error) after [`TaskContext::cancelled`] fires: the run is recorded
/// `interrupted` and its tick is handed to another node at once. Return `Ok(())` only when the
/// work is done: the run is then `succeeded`, whether or not it was asked to stop.
#[derive(Debug, Clone, thiserror::Error)]
#[error("interrupted before finishing: {reason}")]
pub struct Interrupted {
    reason: String,
}

impl Interrupted {
    /// An interruption, saying what was left undone.
    pub fn new(reason: impl Into<String>) -> Self {
        Self {
            reason: reason.into(),
        }
    }
}

/// Everything a task handler knows about the run it serves.
///
/// ```
/// use std::time::Duration;
/// use scheduler::TaskContext;
///
/// async fn handler(ctx: TaskContext) -> anyhow::Result<()> {
///     tracing::info!(task = ctx.task_name(), tick = %ctx.scheduled_at(), "working");
///     for page in 0..3 {
///         ctx.check_cancelled()?; // asked to stop: not done, hand the tick over
///         tokio::select! {
///             _ = ctx.cancelled() => return Err(ctx.interrupted().into()),
///             _ = tokio::time::sleep(Duration::from_millis(1)) => {} // fetch the page
///         }
///     }
///     Ok(()) // done: `succeeded`
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
    /// The run's fencing token (0 outside a scheduler).
    fencing_token: u64,
    /// Which shard of the tick this run serves (0 of 1 unless the task is sharded).
    shard: crate::Shard,
    /// A broadcast task's run (`shards = "nodes"`): this node's own of its tick.
    broadcast: bool,
    /// The handler runs in a child process of its own (`isolation = "process"`).
    isolated: bool,
    /// The instance the run serves, if it is an instance's.
    instance: Option<Arc<RunInstance>>,
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
            fencing_token: 0,
            shard: crate::Shard::WHOLE,
            broadcast: false,
            isolated: false,
            instance: None,
        }
    }

    /// Sets the run's shard (from its claim).
    pub(crate) fn with_shard(mut self, shard: crate::Shard) -> Self {
        self.shard = shard;
        self
    }

    /// Marks the run as a broadcast task's (from its claim).
    pub(crate) fn with_broadcast(mut self, broadcast: bool) -> Self {
        self.broadcast = broadcast;
        self
    }

    /// Marks the run as instance `key`'s, with its arguments as JSON text (from its claim).
    pub(crate) fn with_instance(mut self, key: &str, args: Option<String>) -> Self {
        self.instance = Some(Arc::new(RunInstance::keyed(key, args)));
        self
    }

    /// The run of the row `row` (a task's own, a shard's, or an instance's `task/key`) with the
    /// arguments its claim gave it (an instance's own, or a manual run's override).
    pub(crate) fn with_row_args(mut self, row: &str, args: Option<String>) -> Self {
        if let Some(instance) = RunInstance::of_row(row, args) {
            self.instance = Some(Arc::new(instance));
        }
        self
    }

    /// Sets the run's fencing token (from its claim).
    pub(crate) fn with_fencing_token(mut self, token: u64) -> Self {
        self.fencing_token = token;
        self
    }

    /// The context of a handler in a child process of its own: no shared state.
    pub(crate) fn isolated(
        task_name: Arc<str>,
        run_id: i64,
        scheduled_at: DateTime<Utc>,
        node_id: Arc<str>,
        cancel: CancellationToken,
    ) -> Self {
        Self {
            isolated: true,
            ..Self::new(
                task_name,
                run_id,
                scheduled_at,
                node_id,
                cancel,
                StateMap::default(),
            )
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

    /// A context outside any scheduler serving instance `key` of `task_name` with `args`, for
    /// unit tests of a handler that reads [`key`](Self::key) and [`args`](Self::args).
    pub fn standalone_instance(task_name: &str, key: &str, args: serde_json::Value) -> Self {
        Self::standalone(task_name).with_instance(key, Some(args.to_string()))
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

    /// The run's fencing token: a number that rises with every run of this task, whichever
    /// node runs it. The task's lock is what keeps two runs apart, but a lock can be lost while
    /// its handler is still on its way (the node paused by the system, a network partition,
    /// a write already in flight); guard a write to an outside system with the token, and the
    /// system can refuse a write from any run older than the newest it has seen.
    ///
    /// The token counts the task's claims in the database (each claim on any node takes the
    /// next number, so a run taken over after its node vanished has a larger token than the run
    /// it replaced); it is 1 or more in a run, and 0 in a [`standalone`](Self::standalone)
    /// context. Tokens of different tasks are unrelated.
    ///
    /// ```
    /// # use scheduler::TaskContext;
    /// /// The application's own record of what the task last wrote, and with which token: in
    /// /// SQL, `UPDATE report SET body = $1, fence = $2 WHERE id = $3 AND fence <= $2`.
    /// struct Report {
    ///     body: String,
    ///     fence: u64,
    /// }
    ///
    /// /// Writes unless a newer run of the task has written already (then this run is stale).
    /// fn guarded_write(report: &mut Report, body: &str, ctx: &TaskContext) -> bool {
    ///     if ctx.fencing_token() < report.fence {
    ///         return false;
    ///     }
    ///     report.body = body.to_owned();
    ///     report.fence = ctx.fencing_token();
    ///     true
    /// }
    ///
    /// let mut report = Report { body: String::new(), fence: 0 };
    /// assert!(guarded_write(&mut report, "monday", &TaskContext::standalone("report")));
    /// ```
    pub fn fencing_token(&self) -> u64 {
        self.fencing_token
    }

    /// Which shard of its tick this run serves: `index` of `total`. A task with `shards = N`
    /// runs N handlers per tick, shard 0 to N-1, each on its own (see [`Shard`](crate::Shard)); an
    /// ordinary task's run, and a [`standalone`](Self::standalone) context, is shard 0 of 1.
    ///
    /// ```
    /// # use scheduler::{Shard, TaskContext};
    /// let Shard { index, total } = TaskContext::standalone("t").shard();
    /// let mine: Vec<u32> = (0..10).filter(|id| id % total == index).collect();
    /// assert_eq!(mine.len(), 10, "a whole task takes everything");
    /// ```
    pub fn shard(&self) -> crate::Shard {
        self.shard
    }

    /// Whether this run is a broadcast task's (`shards = "nodes"`): the run of its tick on this
    /// node, one of [`shard`](Self::shard)`().total` runs, one on each node alive at the tick
    /// (`index` is this node's position among them). A broadcast run is never run on another
    /// node, even when this one dies mid-run (see [`Shard`](crate::Shard)).
    ///
    /// ```
    /// # use scheduler::TaskContext;
    /// assert!(!TaskContext::standalone("t").is_broadcast());
    /// ```
    pub fn is_broadcast(&self) -> bool {
        self.broadcast
    }

    /// The key of the instance this run serves (see [`Schedules`](crate::Schedules)); `None`
    /// for a run of the task's own schedule.
    ///
    /// ```
    /// use scheduler::TaskContext;
    /// use serde_json::json;
    ///
    /// assert_eq!(TaskContext::standalone("report").key(), None);
    /// let ctx = TaskContext::standalone_instance("report", "tenant-42", json!({"tenant": 42}));
    /// assert_eq!(ctx.key(), Some("tenant-42"));
    /// ```
    pub fn key(&self) -> Option<&str> {
        self.instance.as_deref().and_then(RunInstance::key)
    }

    /// The arguments of the instance this run serves, decoded as `T` (through serde, from the
    /// JSON they were given as; a run without arguments decodes JSON `null`, so `Option<T>` and
    /// `()` read it). A manual run asked with arguments (`scheduler trigger TASK --args JSON`,
    /// the admin API's `{"args": ...}`) reads those instead, for that run only, in an
    /// instance's run or the task's own. Arguments that do not decode are an [`ArgsError`]
    /// saying why (with the values of secret-looking fields hidden): return it with `?` and the
    /// run is recorded failed with that reason (and retried as the task says).
    ///
    /// ```
    /// use scheduler::{TaskContext, task};
    /// use serde::Deserialize;
    /// use serde_json::json;
    ///
    /// #[derive(Debug, Deserialize)]
    /// struct Tenant {
    ///     tenant: u64,
    /// }
    ///
    /// #[task(name = "syncTenantReport")]
    /// async fn sync_tenant_report(ctx: TaskContext) -> Result<(), scheduler::ArgsError> {
    ///     let Tenant { tenant } = ctx.args()?;
    ///     assert_eq!(tenant, 42);
    ///     Ok(())
    /// }
    ///
    /// let ctx = TaskContext::standalone_instance("syncTenantReport", "tenant-42", json!({"tenant": 42}));
    /// assert_eq!(ctx.args::<Tenant>().unwrap().tenant, 42);
    /// let bad = TaskContext::standalone_instance("syncTenantReport", "t", json!({"tenant": "x"}));
    /// assert!(bad.args::<Tenant>().unwrap_err().to_string().contains("invalid type"));
    /// ```
    pub fn args<T: serde::de::DeserializeOwned>(&self) -> Result<T, ArgsError> {
        RunInstance::decode(self.instance.as_deref(), &self.task_name)
    }

    /// The id of the node running this handler.
    pub fn node_id(&self) -> &str {
        &self.node_id
    }

    /// Whether the handler has been asked to stop (graceful shutdown, or the run's lock was lost).
    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// Completes when the handler is asked to stop: the node is shutting down (it then has the
    /// shutdown timeout to finish), the run's lock could not be kept (a short grace before
    /// its lock could expire), the run passed its timeout, or an operator cancelled it
    /// (`scheduler cancel`, the admin API, the dashboard: 10 s to finish). A handler that cannot
    /// finish in time returns [`interrupted`](Self::interrupted) (any error does): the run is
    /// recorded `interrupted` and its tick runs again elsewhere (`cancelled`, and not run again,
    /// after an operator's cancel). One that ignores the request is stopped at the end of the
    /// grace: it is never polled again.
    ///
    /// Stopping works at `.await` points: a handler that blocks its thread (long CPU work or
    /// blocking I/O without `spawn_blocking`) cannot be stopped until it yields, so keep such
    /// work in `tokio::task::spawn_blocking` and check [`is_cancelled`](Self::is_cancelled)
    /// between chunks.
    pub async fn cancelled(&self) {
        self.cancel.cancelled().await
    }

    /// The error to return when the handler stops early because it was asked to: recorded as
    /// `interrupted`, and the tick is handed over.
    pub fn interrupted(&self) -> Interrupted {
        Interrupted::new(format!(
            "run {} of `{}` was asked to stop",
            self.run_id, self.task_name
        ))
    }

    /// `Err(interrupted)` if the handler has been asked to stop, for loops that work in steps:
    /// `ctx.check_cancelled()?;` between steps.
    ///
    /// ```
    /// # let ctx = scheduler::TaskContext::standalone("demo");
    /// assert!(ctx.check_cancelled().is_ok());
    /// ```
    pub fn check_cancelled(&self) -> Result<(), Interrupted> {
        if self.is_cancelled() {
            Err(self.interrupted())
        } else {
            Ok(())
        }
    }

    /// The shared value of type `T` registered with
    /// [`SchedulerBuilder::state`](crate::SchedulerBuilder::state).
    ///
    /// A task that runs with `isolation = "process"` has no shared state: its handler runs in a
    /// child process that does not share the node's memory, and this returns an error saying so.
    /// Build what such a handler needs inside the handler.
    ///
    /// ```
    /// # use scheduler::TaskContext;
    /// let ctx = TaskContext::standalone("demo");
    /// let err = ctx.state::<String>().unwrap_err();
    /// assert!(err.to_string().contains("`alloc::string::String`"));
    /// ```
    pub fn state<T: Send + Sync + 'static>(&self) -> Result<&T, MissingState> {
        self.state.get::<T>().ok_or_else(|| MissingState {
            type_name: type_name::<T>(),
            isolated_task: self.isolated.then(|| Arc::clone(&self.task_name)),
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
            .field("isolated", &self.isolated)
            .finish_non_exhaustive()
    }
}
