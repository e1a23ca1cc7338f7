//! The task registry: every `#[task]` in every crate linked into the binary, collected at start-up.
//!
//! Tasks are submitted at link time through [`inventory`]; nothing here keeps a hand-written list.
//! This module owns the descriptor type the macro emits, the duplicate-name check, and the shape
//! of a task's settings once the node's defaults fill what its attribute leaves out
//! (`TaskSettings`, resolved by the engine's settings). It knows nothing about schedules,
//! config or the database.

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use crate::TaskContext;
use crate::policy::{Isolation, Misfire, Recovery};

/// One task's settings as a node applies them: each option its attribute sets
/// ([`TaskOptions`]), else the node's default for all tasks (the `SchedulerBuilder::default_*`
/// settings and the node's lock lifetime). Resolved by the engine's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TaskSettings {
    /// How long one run may take (none: no timeout).
    pub timeout: Option<Duration>,
    /// Retries after a failed attempt.
    pub retries: u32,
    /// The wait before a retry.
    pub backoff: Duration,
    /// What to do with ticks nobody ran in time.
    pub misfire: Misfire,
    /// What to do with a run whose outcome is unknown.
    pub recovery: Recovery,
    /// The lifetime of its runs' locks.
    pub lock_lifetime: Duration,
}

/// The error a handler returns, boxed so any error type fits (anyhow, thiserror types, io).
pub type TaskError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// The boxed future a handler produces.
pub type TaskFuture = Pin<Box<dyn Future<Output = Result<(), TaskError>> + Send + 'static>>;

/// Per-task policy options given in the attribute, such as
/// `#[task(name = "...", timeout = "30m", retries = 3)]`.
///
/// Every field is `None` unless the attribute sets it; an unset policy takes the default that the
/// [`SchedulerBuilder`](crate::SchedulerBuilder) or the environment gives for all tasks, and an
/// unset [`isolation`](Self::isolation) runs the handler in the node's process. Values are
/// validated at compile time by [`#[task]`](macro@crate::task), whose documentation lists every
/// option.
///
/// ```
/// use std::time::Duration;
/// use scheduler::registry::TaskOptions;
/// use scheduler::{task, Isolation, Misfire, Recovery, TaskRegistry};
///
/// #[task(name = "sendPayouts", timeout = "30m", retries = 3, misfire = "skip", recovery = "never")]
/// async fn send_payouts() -> anyhow::Result<()> {
///     Ok(())
/// }
///
/// #[task(name = "parseUploads", isolation = "process", memory_limit = "512MiB")]
/// async fn parse_uploads() -> anyhow::Result<()> {
///     Ok(())
/// }
///
/// let registry = TaskRegistry::collect().unwrap();
/// let options = registry.get("sendPayouts").unwrap().options;
/// assert_eq!(options.timeout, Some(Duration::from_secs(30 * 60)));
/// assert_eq!(options.retries, Some(3));
/// assert_eq!(options.misfire, Some(Misfire::Skip));
/// assert_eq!(options.recovery, Some(Recovery::Never));
/// // Left out: the scheduler's default applies.
/// assert_eq!(options.backoff, None);
/// assert_eq!(options.lock_lifetime, None);
/// assert_eq!(options.isolation, None); // in the node's process
///
/// let isolated = registry.get("parseUploads").unwrap().options;
/// assert_eq!(isolated.isolation, Some(Isolation::Process));
/// assert_eq!(isolated.memory_limit, Some(512 * 1024 * 1024));
///
/// // The attribute expands to this constant.
/// const SEND_PAYOUTS: TaskOptions = TaskOptions::DEFAULT
///     .timeout(Duration::from_secs(1800))
///     .retries(3)
///     .misfire(Misfire::Skip)
///     .recovery(Recovery::Never);
/// assert_eq!(options, SEND_PAYOUTS);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct TaskOptions {
    /// `timeout = "30m"`: how long one run may take before it is cancelled and counted as
    /// failed. `None`: the default timeout for all tasks applies.
    pub timeout: Option<Duration>,
    /// `retries = 3`: how many times a failed run is retried for the same tick, on top of the
    /// first attempt (`0` means never retry). `None`: the default for all tasks applies.
    pub retries: Option<u32>,
    /// `backoff = "30s"`: how long to wait after a failed attempt before the next retry. `None`:
    /// the default for all tasks applies.
    pub backoff: Option<Duration>,
    /// `misfire = "once"` or `"skip"`: what to do with ticks missed while no node could run the
    /// task; see [`Misfire`]. `None`: the default for all tasks applies ([`Misfire::Once`] unless
    /// configured otherwise).
    pub misfire: Option<Misfire>,
    /// `lock_lifetime = "2m"`: how long a run's lock outlives its node's last renewal, i.e. how
    /// soon a run whose node went silent is taken for lost. `None`: the scheduler's lock lifetime
    /// applies.
    pub lock_lifetime: Option<Duration>,
    /// `recovery = "rerun"` or `"never"`: what to do with a run whose outcome is unknown because
    /// its node crashed or lost its lock mid-run; see [`Recovery`]. `None`: the default for all
    /// tasks applies ([`Recovery::Rerun`] unless configured otherwise).
    pub recovery: Option<Recovery>,
    /// `isolation = "process"` or `"in-process"`: where the handler runs; see [`Isolation`].
    /// `None`: in the node's process ([`Isolation::InProcess`]).
    pub isolation: Option<Isolation>,
    /// `memory_limit = "512MiB"` (only with `isolation = "process"`): the most memory, in bytes,
    /// the task's child process may allocate (its heap and private writable mappings, thread
    /// stacks included); past it, allocations fail and the run is recorded as out of memory.
    /// Enforced on Linux (`RLIMIT_DATA`). `None`: no limit.
    pub memory_limit: Option<u64>,
    /// `max_processes = 64` (only with `isolation = "process"`): the most processes and threads
    /// the node's *user* may have when the task's process (or one it started) starts another
    /// (`RLIMIT_NPROC`, which counts all of that user's, not only the task's; not enforced with
    /// `CAP_SYS_RESOURCE`; never above the node's own). `None`: no limit.
    pub max_processes: Option<u64>,
    /// `cpu_limit = "10m"` (only with `isolation = "process"`): the CPU time the task's process
    /// may use, whole seconds (`RLIMIT_CPU`); past it the process is killed by SIGXCPU. `None`:
    /// no limit.
    pub cpu_limit: Option<Duration>,
    /// `max_file_size = "1GiB"` (only with `isolation = "process"`): the largest file, in bytes,
    /// the task's process may write (`RLIMIT_FSIZE`); past it the process is killed by SIGXFSZ.
    /// `None`: no limit.
    pub max_file_size: Option<u64>,
    /// `shards = 8`: how many runs each tick is split into, each claimed, locked, retried and
    /// recorded on its own and spread over the live nodes; the handler reads its shard with
    /// [`TaskContext::shard`](crate::TaskContext::shard). From 1 to
    /// 1,000; the config document's `shards` overrides it.
    /// `shards = "nodes"` ([`ShardCount::Nodes`](crate::config::ShardCount::Nodes)): a broadcast,
    /// one run on each node alive at the tick. `None`: 1 (not sharded). See [`Shard`](crate::Shard).
    pub shards: Option<crate::config::ShardCount>,
    /// `jitter = "30s"`: each tick starts at a fixed offset within this window after it, the
    /// offset given by the task, an instance's key and the tick (the same on every node), so
    /// that many tasks or instances on one schedule do not start in the same second. The config
    /// document's `jitter` overrides it; an instance's own
    /// ([`Schedule::jitter`](crate::Schedule::jitter)) overrides both. `None`: none.
    pub jitter: Option<Duration>,
    /// `limit = "warehouse-db"`: the limit shared with other tasks its runs hold (see
    /// `crate::limits`): at most the limit's size (the config document's `limits`) of the
    /// runs naming it run at once across the nodes. The config entry's `limit` overrides it.
    /// `None`: no limit.
    pub limit: Option<&'static str>,
}

impl TaskOptions {
    /// The options of a task that sets none: every field `None`.
    pub const DEFAULT: TaskOptions = TaskOptions {
        timeout: None,
        retries: None,
        backoff: None,
        misfire: None,
        lock_lifetime: None,
        recovery: None,
        isolation: None,
        memory_limit: None,
        max_processes: None,
        cpu_limit: None,
        max_file_size: None,
        shards: None,
        jitter: None,
        limit: None,
    };

    /// Sets [`timeout`](Self::timeout). Used by the macro; set options in the attribute.
    pub const fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Sets [`retries`](Self::retries). Used by the macro; set options in the attribute.
    pub const fn retries(mut self, retries: u32) -> Self {
        self.retries = Some(retries);
        self
    }

    /// Sets [`backoff`](Self::backoff). Used by the macro; set options in the attribute.
    pub const fn backoff(mut self, backoff: Duration) -> Self {
        self.backoff = Some(backoff);
        self
    }

    /// Sets [`misfire`](Self::misfire). Used by the macro; set options in the attribute.
    pub const fn misfire(mut self, misfire: Misfire) -> Self {
        self.misfire = Some(misfire);
        self
    }

    /// Sets [`lock_lifetime`](Self::lock_lifetime). Used by the macro; set options in the
    /// attribute.
    pub const fn lock_lifetime(mut self, lock_lifetime: Duration) -> Self {
        self.lock_lifetime = Some(lock_lifetime);
        self
    }

    /// Sets [`recovery`](Self::recovery). Used by the macro; set options in the attribute.
    pub const fn recovery(mut self, recovery: Recovery) -> Self {
        self.recovery = Some(recovery);
        self
    }

    /// Sets [`isolation`](Self::isolation). Used by the macro; set options in the attribute.
    pub const fn isolation(mut self, isolation: Isolation) -> Self {
        self.isolation = Some(isolation);
        self
    }

    /// Sets [`memory_limit`](Self::memory_limit), in bytes. Used by the macro; set options in
    /// the attribute, which accepts it only with `isolation = "process"`.
    pub const fn memory_limit(mut self, bytes: u64) -> Self {
        self.memory_limit = Some(bytes);
        self
    }
}

impl TaskOptions {
    /// Sets [`max_processes`](Self::max_processes). Used by the macro; set options in the
    /// attribute, which accepts it only with `isolation = "process"`.
    pub const fn max_processes(mut self, processes: u64) -> Self {
        self.max_processes = Some(processes);
        self
    }

    /// Sets [`cpu_limit`](Self::cpu_limit). Used by the macro; set options in the attribute,
    /// which accepts it only with `isolation = "process"`.
    pub const fn cpu_limit(mut self, limit: Duration) -> Self {
        self.cpu_limit = Some(limit);
        self
    }

    /// Sets [`max_file_size`](Self::max_file_size), in bytes. Used by the macro; set options in
    /// the attribute, which accepts it only with `isolation = "process"`.
    pub const fn max_file_size(mut self, bytes: u64) -> Self {
        self.max_file_size = Some(bytes);
        self
    }

    /// Sets [`shards`](Self::shards). Used by the macro; set options in the attribute.
    pub const fn shards(mut self, shards: u32) -> Self {
        self.shards = Some(crate::shard::ShardCount::Fixed(shards));
        self
    }

    /// Sets [`jitter`](Self::jitter). Used by the macro; set options in the attribute.
    pub const fn jitter(mut self, window: Duration) -> Self {
        self.jitter = Some(window);
        self
    }

    /// Sets [`limit`](Self::limit). Used by the macro; set options in the attribute.
    pub const fn limit(mut self, name: &'static str) -> Self {
        self.limit = Some(name);
        self
    }

    /// Sets [`shards`](Self::shards) to `"nodes"` (a broadcast). Used by the macro; set options
    /// in the attribute.
    pub const fn broadcast(mut self) -> Self {
        self.shards = Some(crate::shard::ShardCount::Nodes);
        self
    }
}

impl Default for TaskOptions {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// What `#[task]` submits for every annotated function.
///
/// Built only by the macro (through `__private`); read through [`TaskRegistry`].
pub struct TaskDescriptor {
    /// The stable task name stored in the database and used in config.
    pub name: &'static str,
    /// Source file of the annotated function.
    pub file: &'static str,
    /// Line of the annotated function.
    pub line: u32,
    /// `module_path!()` where the function lives.
    pub module_path: &'static str,
    /// Options from the attribute.
    pub options: TaskOptions,
    /// Produces the handler's boxed future for one run.
    pub handler: fn(TaskContext) -> TaskFuture,
}

impl TaskDescriptor {
    /// `file:line` of the task's definition.
    pub fn location(&self) -> String {
        format!("{}:{}", self.file, self.line)
    }
}

impl fmt::Debug for TaskDescriptor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TaskDescriptor")
            .field("name", &self.name)
            .field("file", &self.file)
            .field("line", &self.line)
            .field("module_path", &self.module_path)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

inventory::collect!(TaskDescriptor);

/// Converts what a handler returns into the engine's result: `()` or `Result<(), E>`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a supported return type for a #[task] function",
    label = "return `()` or `Result<(), E>` here",
    note = "a #[task] function returns `()` or `Result<(), E>` where `E` converts into `Box<dyn std::error::Error + Send + Sync>`"
)]
pub trait IntoTaskResult {
    /// Performs the conversion.
    fn into_task_result(self) -> Result<(), TaskError>;
}

impl IntoTaskResult for () {
    fn into_task_result(self) -> Result<(), TaskError> {
        Ok(())
    }
}

impl<E: Into<TaskError>> IntoTaskResult for Result<(), E> {
    fn into_task_result(self) -> Result<(), TaskError> {
        self.map_err(Into::into)
    }
}

/// Two or more tasks were registered under the same name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RegistryError {
    /// The same name is used by several functions; every place is listed.
    #[error("task name `{name}` is registered more than once: {}", locations.join(", "))]
    DuplicateName {
        /// The contested name.
        name: String,
        /// `file:line (module)` of every definition using it.
        locations: Vec<String>,
    },
}

/// Every task registered in this binary, by name.
///
/// ```
/// use scheduler::TaskRegistry;
///
/// let registry = TaskRegistry::collect().expect("no duplicate task names");
/// for task in registry.iter() {
///     println!("{} defined at {}", task.name, task.location());
/// }
/// assert!(registry.get("no such task").is_none());
/// ```
#[derive(Debug, Clone, Default)]
pub struct TaskRegistry {
    tasks: BTreeMap<&'static str, &'static TaskDescriptor>,
}

impl TaskRegistry {
    /// Collects every task submitted by `#[task]` anywhere in the binary.
    ///
    /// Fails when two functions share one name, naming both source locations.
    pub fn collect() -> Result<Self, RegistryError> {
        Self::from_descriptors(inventory::iter::<TaskDescriptor>)
    }

    /// Builds a registry from an explicit set of descriptors (tests, or a subset of the binary's
    /// tasks for a node that should run only some of them).
    pub fn from_descriptors(
        descriptors: impl IntoIterator<Item = &'static TaskDescriptor>,
    ) -> Result<Self, RegistryError> {
        let mut by_name: BTreeMap<&'static str, Vec<&'static TaskDescriptor>> = BTreeMap::new();
        for d in descriptors {
            by_name.entry(d.name).or_default().push(d);
        }
        let mut tasks = BTreeMap::new();
        for (name, mut found) in by_name {
            if found.len() > 1 {
                found.sort_by_key(|d| (d.file, d.line));
                return Err(RegistryError::DuplicateName {
                    name: name.to_owned(),
                    locations: found
                        .iter()
                        .map(|d| format!("{} ({})", d.location(), d.module_path))
                        .collect(),
                });
            }
            tasks.insert(name, found[0]);
        }
        Ok(Self { tasks })
    }

    /// Keeps only the tasks whose name satisfies `keep`.
    pub fn retain(mut self, mut keep: impl FnMut(&str) -> bool) -> Self {
        self.tasks.retain(|name, _| keep(name));
        self
    }

    /// The task registered under `name`. A shard's store row (`name[3]`)
    /// is its task's.
    pub fn get(&self, name: &str) -> Option<&'static TaskDescriptor> {
        self.tasks
            .get(name)
            .or_else(|| self.tasks.get(crate::shard::split_row(name).0))
            .copied()
    }

    /// Whether a task is registered under `name` (a shard's row counts as its task's).
    pub fn contains(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    /// All tasks, ordered by name.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &'static TaskDescriptor> + '_ {
        self.tasks.values().copied()
    }

    /// All task names, ordered.
    pub fn names(&self) -> impl ExactSizeIterator<Item = &'static str> + '_ {
        self.tasks.keys().copied()
    }

    /// How many tasks are registered.
    pub fn len(&self) -> usize {
        self.tasks.len()
    }

    /// Whether no task is registered.
    pub fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }
}
