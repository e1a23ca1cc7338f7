//! The application state handlers share ([`StateMap`], filled by the builder, read with
//! [`TaskContext::state`](super::TaskContext::state)) and the error a handler is given when the
//! state it asks for is not there ([`MissingState`]).

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

/// Typed application state shared with every handler (database pools, HTTP clients, ...).
///
/// Filled through [`SchedulerBuilder::state`](crate::SchedulerBuilder::state) and read with
/// [`TaskContext::state`](super::TaskContext::state).
#[derive(Clone, Default)]
pub(crate) struct StateMap {
    values: Arc<HashMap<TypeId, Arc<dyn Any + Send + Sync>>>,
}

impl StateMap {
    pub(crate) fn insert<T: Send + Sync + 'static>(&mut self, value: T) {
        Arc::make_mut(&mut self.values).insert(TypeId::of::<T>(), Arc::new(value));
    }

    pub(super) fn get<T: Send + Sync + 'static>(&self) -> Option<&T> {
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

/// The state a handler asked for is not there: it was never registered with the scheduler, or
/// the task runs with `isolation = "process"`, in a child process that holds no shared state.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{}", self.message())]
pub struct MissingState {
    pub(super) type_name: &'static str,
    /// The name of the task, when it runs in a child process of its own.
    pub(super) isolated_task: Option<Arc<str>>,
}

impl MissingState {
    fn message(&self) -> String {
        let type_name = self.type_name;
        match &self.isolated_task {
            None => format!(
                "no shared state of type `{type_name}` was registered; add it with \
                 `Scheduler::builder().state(value)`"
            ),
            Some(task) => format!(
                "shared state (`{type_name}`) is not available to task `{task}`: it runs with \
                 `isolation = \"process\"`, in a child process that does not share the node's \
                 memory; build what the handler needs inside the handler, or run the task \
                 in-process to use shared state"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use chrono::Utc;
    use tokio_util::sync::CancellationToken;

    use super::StateMap;
    use crate::TaskContext;

    #[test]
    fn state_is_found_by_type() {
        let mut state = StateMap::default();
        state.insert(42_u32);
        let ctx = TaskContext::standalone("demo").with_state(state);
        assert_eq!(ctx.state::<u32>().unwrap(), &42);
        assert!(ctx.state::<String>().is_err());
    }

    #[test]
    fn an_isolated_handler_is_told_why_it_has_no_state() {
        let ctx = TaskContext::isolated(
            Arc::from("parseUploads"),
            7,
            Utc::now(),
            Arc::from("node-a"),
            CancellationToken::new(),
        );
        let message = ctx.state::<u32>().unwrap_err().to_string();
        assert!(message.contains("`u32`"), "{message}");
        assert!(message.contains("task `parseUploads`"), "{message}");
        assert!(message.contains("isolation = \"process\""), "{message}");
        let standalone = TaskContext::standalone("demo").state::<u32>().unwrap_err();
        assert!(standalone.to_string().contains("was registered"));
    }
}
