//! Per-task policies (placeholder until the macro branch lands its full version).

use std::fmt;

/// What to do with ticks missed while no node could run the task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Misfire {
    /// Run once for all of them.
    #[default]
    Once,
    /// Wait for the next tick.
    Skip,
}

/// What to do with a run whose outcome is unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Recovery {
    /// Run the tick again.
    #[default]
    Rerun,
    /// Record it lost and never run it again.
    Never,
}

impl Recovery {
    /// The stored value.
    pub fn as_str(self) -> &'static str {
        match self {
            Recovery::Rerun => "rerun",
            Recovery::Never => "never",
        }
    }
}

impl fmt::Display for Recovery {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Recovery {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "rerun" => Ok(Recovery::Rerun),
            "never" => Ok(Recovery::Never),
            other => Err(format!("unknown recovery `{other}`; write `rerun` or `never`")),
        }
    }
}
