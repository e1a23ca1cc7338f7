//! The engine. (Stub.)

use crate::{Result, TaskRegistry};

/// A configured scheduler node.
#[derive(Debug)]
pub struct Scheduler {
    registry: TaskRegistry,
    state: crate::context::StateMap,
}

/// Builds a [`Scheduler`].
#[derive(Debug, Default)]
pub struct SchedulerBuilder {
    state: crate::context::StateMap,
}

impl Scheduler {
    /// A builder with every setting at its default.
    pub fn builder() -> SchedulerBuilder {
        SchedulerBuilder::default()
    }
}

impl SchedulerBuilder {
    /// Shares `value` with every handler, read with [`TaskContext::state`](crate::TaskContext::state).
    pub fn state<T: Send + Sync + 'static>(mut self, value: T) -> Self {
        self.state.insert(value);
        self
    }

    /// Validates the settings and builds the scheduler.
    pub fn build(self) -> Result<Scheduler> {
        Ok(Scheduler {
            registry: TaskRegistry::collect()?,
            state: self.state,
        })
    }
}

/// Runs the scheduler with settings from the environment until SIGTERM or SIGINT.
pub async fn run() -> Result<()> {
    let s = Scheduler::builder().build()?;
    let _ = (&s.registry, &s.state);
    Ok(())
}
