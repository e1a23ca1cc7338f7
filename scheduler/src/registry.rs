//! The task registry: every `#[task]` in every crate linked into the binary, collected at start-up.
//!
//! Tasks are submitted at link time through [`inventory`]; nothing here keeps a hand-written list.
//! This module owns the descriptor type the macro emits and the duplicate-name check. It knows
//! nothing about schedules, config or the database.

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use crate::TaskContext;

/// The error a handler returns, boxed so any error type fits (anyhow, thiserror types, io).
pub type TaskError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// The boxed future a handler produces.
pub type TaskFuture = Pin<Box<dyn Future<Output = Result<(), TaskError>> + Send + 'static>>;

/// Per-task options given in the attribute. Every field has a default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct TaskOptions {
    /// Reserved for a per-run timeout (`timeout = "30m"`); `None` means no limit.
    pub timeout: Option<Duration>,
    /// What to do with a run whose outcome is unknown; `None`: the builder's default.
    pub recovery: Option<crate::policy::Recovery>,
}

impl TaskOptions {
    /// The options of a task that sets none.
    pub const DEFAULT: TaskOptions = TaskOptions {
        timeout: None,
        recovery: None,
    };
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

    /// The task registered under `name`.
    pub fn get(&self, name: &str) -> Option<&'static TaskDescriptor> {
        self.tasks.get(name).copied()
    }

    /// Whether a task is registered under `name`.
    pub fn contains(&self, name: &str) -> bool {
        self.tasks.contains_key(name)
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
