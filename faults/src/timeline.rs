//! The harness's own account of what it did and when, on its own clock (unix ms): which node
//! processes it started, paused, killed or asked to stop, how each one exited, and which faults
//! it injected. The judge reads it next to the nodes' records.

use serde::{Deserialize, Serialize};

/// One thing the harness did or saw.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// Unix milliseconds on the harness's clock.
    pub t_ms: i64,
    /// What happened.
    #[serde(flatten)]
    pub kind: EventKind,
}

/// How a node process ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "cause", rename_all = "snake_case")]
pub enum ExitCause {
    /// Nobody asked it to: a crash or a bug.
    OnItsOwn,
    /// The harness sent SIGKILL.
    Killed,
    /// The harness sent SIGTERM `after_ms` before it exited; `forced` if it had to be killed
    /// because it did not exit in time.
    Terminated {
        /// Milliseconds from SIGTERM to exit.
        after_ms: i64,
        /// Killed after the deadline.
        forced: bool,
    },
}

/// The node process a fault hit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Victim {
    /// Node id.
    pub node: String,
    /// Process id.
    pub pid: u32,
}

/// What the harness did or saw.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum EventKind {
    /// A node process was spawned.
    NodeStarted {
        /// Node id.
        node: String,
        /// Process id.
        pid: u32,
    },
    /// SIGKILL sent.
    NodeKilled {
        /// Node id.
        node: String,
        /// Process id.
        pid: u32,
    },
    /// SIGSTOP sent.
    NodePaused {
        /// Node id.
        node: String,
        /// Process id.
        pid: u32,
    },
    /// SIGCONT sent.
    NodeResumed {
        /// Node id.
        node: String,
        /// Process id.
        pid: u32,
    },
    /// SIGTERM sent (graceful drain begins: the node claims nothing new).
    NodeTerminated {
        /// Node id.
        node: String,
        /// Process id.
        pid: u32,
    },
    /// The process exited.
    NodeExited {
        /// Node id.
        node: String,
        /// Process id.
        pid: u32,
        /// `exit 0`, `exit 101`, `signal 9`.
        status: String,
        /// Exit code 0.
        success: bool,
        /// Why it exited.
        #[serde(flatten)]
        cause: ExitCause,
    },
    /// A fault during which (and for a lock lifetime + 2 s after `until_ms`) the engine may
    /// collapse ticks: of every task, or with `node`, only of the tasks that node held.
    Fault {
        /// What was done.
        what: String,
        /// When it ended (equal to `t_ms` for an instant fault).
        until_ms: i64,
        /// The node killed or paused (`None`: a fault every task feels, like a database outage).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        node: Option<Victim>,
    },
    /// A remark for the report (config written, phase began).
    Note {
        /// The remark.
        what: String,
    },
    /// The harness began stopping every node at the end of the scenario.
    StoppingAll,
}

/// The timeline of one scenario.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Timeline {
    /// Events in the order they happened.
    pub events: Vec<Event>,
}

impl Timeline {
    /// Appends an event stamped now.
    pub fn push(&mut self, kind: EventKind) -> i64 {
        let t_ms = now_ms();
        self.events.push(Event { t_ms, kind });
        t_ms
    }

    /// Appends an event with an explicit time.
    pub fn push_at(&mut self, t_ms: i64, kind: EventKind) {
        self.events.push(Event { t_ms, kind });
    }
}

/// Unix milliseconds now.
pub fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}
