//! Process isolation: a task with `#[task(isolation = "process")]` runs each run's handler in a
//! child process of the same binary, so that nothing the handler does (a segfault, an abort, a
//! panic, a leak, an endless loop) can take its node down.
//!
//! This module owns both ends of that child process and the protocol between them:
//!
//! - **the child** ([`child_request`], [`run_child`]): the binary re-executed with the run's
//!   identity ([`RunIdentity`]) in its environment. `scheduler::run()` (and
//!   [`Scheduler::run_until`](crate::Scheduler::run_until)) first ask [`child_request`]; in a
//!   child it returns the request, and [`run_child`] runs that one handler (found by name in the
//!   binary's registry) with a [`TaskContext`](crate::TaskContext) whose
//!   [`cancelled`](crate::TaskContext::cancelled) fires on SIGTERM, then exits. A child never
//!   touches the database, the config or the admin server, and starts none of the node's
//!   services. Its `tracing` events go to the node over a socket of its own.
//! - **the node's side** ([`ChildCommand`], [`ChildRun`]): starts the child (stdin null; stdout,
//!   stderr and the event socket read into the run's log through
//!   [`RunLogLines`](crate::run_log::RunLogLines), bounded like an in-process run's log), asks it
//!   to stop (SIGTERM), stops it by force (SIGKILL), and waits for it: [`ChildExit`] says how it
//!   ended, with the detail to record (the handler's error or panic message, the exit code, the
//!   signal's name, running out of its memory limit).
//!
//! It decides nothing about the run: which ending means which status is the engine's rule
//! (`engine::outcome`), and when to stop a child is the engine's too. It may use the registry,
//! the context, the run log and the store's types; nothing here uses the engine.
//!
//! # What holds
//!
//! - **No orphans.** The child is its own process group's leader; the signals go to the whole
//!   group, so processes the handler started are stopped with it. When the child ends, however
//!   it ends (its handler returned, failed, panicked, timed out, was cancelled or its node
//!   drains), the node kills the group (SIGKILL) before it reaps the child, so what the handler
//!   started and left behind ends with the run; a process that left the group (`setsid`, a
//!   double fork into a group of its own) is not followed. Dropping a [`ChildRun`] kills the
//!   group, and the child is reaped however it ends. On Linux the child is killed
//!   (`PR_SET_PDEATHSIG`) when its node dies, even by SIGKILL; the fork is done by a thread that
//!   lives as long as the process, since Linux sends that signal when the *thread* that forked
//!   the child ends. On other Unix systems a child outlives a node killed by SIGKILL until its
//!   handler returns. Processes the handler started and left behind outlive a node that was
//!   killed by SIGKILL.
//! - **The same binary.** On Linux the child is `/proc/self/exe`, the very file the node runs,
//!   even if it was replaced on disk by a deploy since the node started; elsewhere it is
//!   [`std::env::current_exe`].
//! - **A memory limit** ([`ChildCommand::memory_limit`], from `memory_limit = "..."`) caps the
//!   child's data: its heap and private writable mappings (`RLIMIT_DATA`, Linux 4.7 and later),
//!   what a leak grows; address space only reserved (allocator arenas) does not count, thread
//!   stacks do (2 MiB per thread of a tokio runtime). Past it an allocation fails; Rust's
//!   allocation-failure handler writes `memory allocation of N bytes failed` to stderr and
//!   aborts, which the node recognises as [`ChildExit::OutOfMemory`]. A failed allocation in
//!   code that does not report it so (C libraries) is recorded as what the process did (a
//!   signal or an exit code). The limit is not resident memory: pages allocated but never
//!   touched count too.
//!
//! - **No secrets of the node.** The child's environment is the node's without the variables
//!   that hold its secrets ([`crate::vars::SECRETS`]: the database URLs, the admin and viewer
//!   tokens, the webhook's URL and secret, the config source's token and headers, the OTLP
//!   headers) and those a channels file named with `env:` (SMTP passwords, bot secrets). The
//!   child needs none of them: it never opens the store. `docs/isolation.md` says what it gets.
//! - **Optional limits** beside the memory limit: [`ChildCommand::max_processes`]
//!   (`RLIMIT_NPROC`, counted over the node's user), [`ChildCommand::cpu_limit`] (`RLIMIT_CPU`,
//!   SIGXCPU past it) and [`ChildCommand::max_file_size`] (`RLIMIT_FSIZE`, SIGXFSZ past it).
//!
//! Process isolation needs Unix; on other systems starting a child fails with a clear error.

mod child;
#[cfg(unix)]
mod environment;
mod exit;
#[cfg(unix)]
mod limits;
#[cfg(unix)]
mod parent;
mod wire;

use chrono::{DateTime, Utc};

use crate::store::Trigger;

pub(crate) use child::serve_if_child;
pub use child::{ChildRequest, child_request, run_child};
pub use exit::ChildExit;
#[cfg(unix)]
pub use parent::{ChildCommand, ChildRun};

/// Which run a child process serves: what its [`TaskContext`](crate::TaskContext) shows and its
/// log lines are kept under.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RunIdentity {
    /// The task's name, as registered by `#[task(name = "...")]`.
    pub task_name: String,
    /// The run's id in `scheduler_runs`.
    pub run_id: i64,
    /// The schedule tick the run serves.
    pub scheduled_at: DateTime<Utc>,
    /// Its attempt at the tick (1 for the first).
    pub attempt: i32,
    /// What started it.
    pub trigger: Trigger,
    /// The node that runs it (the child's parent).
    pub node_id: String,
    /// Its fencing token ([`TaskContext::fencing_token`](crate::TaskContext::fencing_token)).
    pub fencing_token: u64,
    /// Its shard ([`TaskContext::shard`](crate::TaskContext::shard)).
    pub shard: crate::Shard,
    /// An instance's arguments as JSON text ([`TaskContext::args`](crate::TaskContext::args));
    /// its key is in `task_name`, the instance's row (`task/key`).
    pub args: Option<String>,
}

impl RunIdentity {
    /// Run `run_id` of `task_name` for tick `scheduled_at` on node `node_id`: the first attempt,
    /// started by the schedule.
    pub fn new(
        task_name: impl Into<String>,
        run_id: i64,
        scheduled_at: DateTime<Utc>,
        node_id: impl Into<String>,
    ) -> Self {
        Self {
            task_name: task_name.into(),
            run_id,
            scheduled_at,
            attempt: 1,
            trigger: Trigger::Schedule,
            node_id: node_id.into(),
            fencing_token: 0,
            shard: crate::Shard::WHOLE,
            args: None,
        }
    }

    /// Sets the run's shard.
    pub fn shard(mut self, shard: crate::Shard) -> Self {
        self.shard = shard;
        self
    }

    /// Sets the run's fencing token.
    pub fn fencing_token(mut self, token: u64) -> Self {
        self.fencing_token = token;
        self
    }

    /// Sets the attempt at the tick.
    pub fn attempt(mut self, attempt: i32) -> Self {
        self.attempt = attempt;
        self
    }

    /// Sets what started the run.
    pub fn trigger(mut self, trigger: Trigger) -> Self {
        self.trigger = trigger;
        self
    }

    /// Sets an instance's arguments (JSON text).
    pub fn args(mut self, args: Option<String>) -> Self {
        self.args = args;
        self
    }
}
