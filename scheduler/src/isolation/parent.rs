//! The node's side of an isolated run: start the child, read what it writes into the run's log,
//! signal it, reap it and say how it ended.
//!
//! Two threads of this module's own make the guarantees hold whatever the caller's threads do:
//! one long-lived thread forks every child (on Linux a child's parent-death signal fires when
//! the thread that forked it ends, so that thread must live as long as the process), and one
//! small thread per child waits for it to end *without reaping it* (`waitid` with `WNOWAIT`).
//! Only the [`ChildRun`] reaps its child, so a signal it sends can never reach another process
//! that took the pid over: a pid is not reused until its process is reaped.

mod output;
mod process;

use std::ffi::OsString;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tracing::Level;

use super::RunIdentity;
use super::exit::{ChildExit, Signal};
use super::limits::Limits;
use super::wire::{self, Record, Request};
use crate::run_log::RunLogLines;
use crate::{Error, Result};
#[cfg(test)]
use output::read_lines;
use output::{read_events, read_output};
use process::{WaitStatus, kill_group, prepare_child, reap, spawn_on_the_spawner, watch_for_exit};

/// How long, after a child ended, its output is still read: what it wrote before it ended is in
/// its pipes and is read at once; a process it started that still holds its stdout or stderr
/// open cannot keep the run from ending longer than this.
pub const OUTPUT_DRAIN: Duration = Duration::from_secs(2);

/// The target of the log lines a child writes to stdout; stderr's are `stderr`.
const STDOUT_TARGET: &str = "stdout";
const STDERR_TARGET: &str = "stderr";
/// The target of the lines this module adds to a run's log about its child.
const NOTE_TARGET: &str = "scheduler::isolation";

/// What starts an isolated run's child process; see the `isolation` module's docs.
///
/// ```no_run
/// # async fn demo(log: scheduler::run_log::RunLogLines) -> scheduler::Result<()> {
/// use std::time::Duration;
/// use scheduler::testing::isolation::{ChildCommand, ChildExit, RunIdentity};
///
/// let identity = RunIdentity::new("parseUploads", 42, chrono::Utc::now(), "node-a");
/// let mut child = ChildCommand::new(identity)
///     .memory_limit(Some(512 << 20))
///     .spawn(log)
///     .await?;
/// let exit = tokio::select! {
///     exit = child.wait() => exit,
///     _ = tokio::time::sleep(Duration::from_secs(30 * 60)) => {
///         child.stop(Duration::from_secs(10)).await // SIGTERM, then SIGKILL after 10 s
///     }
/// };
/// if let ChildExit::Signalled { signal, .. } = &exit {
///     eprintln!("killed by {signal}");
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct ChildCommand {
    identity: RunIdentity,
    program: Option<PathBuf>,
    limits: Limits,
}

impl ChildCommand {
    /// The child of run `identity`: this binary, without limits.
    pub fn new(identity: RunIdentity) -> Self {
        Self {
            identity,
            program: None,
            limits: Limits::default(),
        }
    }

    /// Runs `program` instead of this binary. It must be an application that calls
    /// [`child_request`](super::child_request) first (any `scheduler::run()` application), and
    /// registers the task. Default: this binary (`/proc/self/exe` on Linux).
    pub fn program(mut self, program: impl Into<PathBuf>) -> Self {
        self.program = Some(program.into());
        self
    }

    /// Caps the child's data (heap and private writable mappings, `RLIMIT_DATA`; enforced on
    /// Linux) at `bytes`; `None`, the default, sets no limit. From the task's
    /// `memory_limit = "..."`.
    pub fn memory_limit(mut self, bytes: Option<u64>) -> Self {
        self.limits.memory = bytes;
        self
    }

    /// Caps the processes and threads of the node's *user* at `processes` when the child (or a
    /// process it started) starts another (`RLIMIT_NPROC`, counted over all of that user's
    /// processes; not enforced with `CAP_SYS_RESOURCE`); `None`, the default, sets no limit.
    /// From the task's `max_processes = N`. Every limit is lowered to the node's own hard limit
    /// when that is lower.
    pub fn max_processes(mut self, processes: Option<u64>) -> Self {
        self.limits.processes = processes;
        self
    }

    /// Caps the child's CPU time at `limit`, counted in whole seconds (`RLIMIT_CPU`): past it
    /// the child is killed by SIGXCPU. `None`, the default, sets no limit. From the task's
    /// `cpu_limit = "..."`.
    pub fn cpu_limit(mut self, limit: Option<Duration>) -> Self {
        self.limits.cpu = limit;
        self
    }

    /// Caps the size of the files the child writes at `bytes` (`RLIMIT_FSIZE`): writing past it
    /// kills it by SIGXFSZ. `None`, the default, sets no limit. From the task's
    /// `max_file_size = "..."`.
    pub fn max_file_size(mut self, bytes: Option<u64>) -> Self {
        self.limits.file_size = bytes;
        self
    }

    /// Starts the child; its output becomes lines of `log`. Returns once the child runs this
    /// binary (its handler starts a little later: see [`ChildRun::handler_started_at`]).
    ///
    /// The child's environment is the node's without the node's secrets (see
    /// [`crate::vars::SECRETS`]), with the run's request added.
    ///
    /// Fails when a limit is outside its range ([`Error::InvalidSetting`] naming the option), or
    /// when the process cannot be started (the program is missing, the memory limit is too
    /// small for it to start, the system or the user is out of processes); the handler did not
    /// run then.
    pub async fn spawn(self, log: RunLogLines) -> Result<ChildRun> {
        let task = self.identity.task_name.clone();
        self.limits.check().map_err(|error| Error::InvalidSetting {
            name: format!("{}` of task `{task}", error.field).into(),
            message: error.problem,
        })?;
        // The name `ps` shows: the node's own for this binary.
        let (program, arg0) = match &self.program {
            Some(program) => (program.clone(), program.clone().into_os_string()),
            None => (
                this_binary(),
                std::env::args_os()
                    .next()
                    .unwrap_or_else(|| this_binary().into()),
            ),
        };
        self.start(program.clone(), arg0, log)
            .await
            .map_err(|error| {
                Error::Io(io::Error::new(
                    error.kind(),
                    format!(
                        "cannot start the process of isolated task `{task}` ({}): {error}",
                        program.display()
                    ),
                ))
            })
    }

    async fn start(
        self,
        program: PathBuf,
        arg0: OsString,
        log: RunLogLines,
    ) -> io::Result<ChildRun> {
        let (node_end, child_end) = std::os::unix::net::UnixStream::pair()?;
        let identity = self.identity;
        let request = Request {
            v: wire::VERSION,
            task: identity.task_name.clone(),
            run_id: identity.run_id,
            scheduled_at: identity.scheduled_at,
            attempt: identity.attempt,
            trigger: identity.trigger.as_str().to_owned(),
            node_id: identity.node_id.clone(),
            fencing_token: identity.fencing_token,
            shard: Some([identity.shard.index, identity.shard.total]),
            args: identity.args.clone(),
            parent_pid: std::process::id(),
            events_fd: child_end.as_raw_fd(),
        };
        let request = serde_json::to_string(&request).map_err(io::Error::other)?;

        let mut command = std::process::Command::new(&program);
        command
            .arg0(arg0)
            .env(wire::REQUEST_VAR, request)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // Its own process group: the node's signals reach what the handler starts too, and a
            // terminal's Ctrl-C reaches the node alone, which stops its children itself.
            .process_group(0);
        super::environment::keep_secrets_home(&mut command);
        let prepare = prepare_child(child_end.as_raw_fd(), self.limits.prepare());
        // SAFETY: `prepare` only makes async-signal-safe calls (prctl, getppid, setrlimit,
        // fcntl) on values computed before the fork, and allocates nothing.
        unsafe { command.pre_exec(prepare) };

        let mut child = spawn_on_the_spawner(command, child_end.into()).await?;
        let pid = child.id();
        let (exited_tx, exited) = oneshot::channel();
        if let Err(error) = watch_for_exit(pid, exited_tx) {
            let _ = kill_group(pid, libc::SIGKILL);
            reap(pid);
            return Err(error);
        }
        let mut run = ChildRun {
            pid,
            memory_limit: self.limits.memory,
            exited,
            status: None,
            exit: None,
            sent: Vec::new(),
            observed: Arc::new(Mutex::new(Observed::default())),
            readers: Vec::new(),
            drain_deadline: None,
            log,
        };
        // From here on the run owns the child: an error below kills and reaps it on drop.
        let stdout = tokio::process::ChildStdout::from_std(child.stdout.take().expect("piped"))?;
        let stderr = tokio::process::ChildStderr::from_std(child.stderr.take().expect("piped"))?;
        node_end.set_nonblocking(true)?;
        let events = tokio::net::UnixStream::from_std(node_end)?;
        run.readers.push(tokio::spawn(read_output(
            stdout,
            Level::INFO,
            STDOUT_TARGET,
            run.log.clone(),
            None,
        )));
        run.readers.push(tokio::spawn(read_output(
            stderr,
            Level::WARN,
            STDERR_TARGET,
            run.log.clone(),
            Some(Arc::clone(&run.observed)),
        )));
        run.readers.push(tokio::spawn(read_events(
            events,
            run.log.clone(),
            Arc::clone(&run.observed),
        )));
        Ok(run)
    }
}

/// This binary: the file the node runs, even if a deploy replaced it on disk since.
fn this_binary() -> PathBuf {
    if cfg!(target_os = "linux") {
        PathBuf::from("/proc/self/exe")
    } else {
        std::env::current_exe()
            .unwrap_or_else(|_| PathBuf::from(std::env::args_os().next().unwrap_or_default()))
    }
}

/// What the readers learnt from the child.
#[derive(Debug, Default)]
struct Observed {
    /// When the handler was entered, by the child's clock.
    started_at: Option<DateTime<Utc>>,
    /// How the handler ended, as the child said (the first such record).
    end: Option<Record>,
    /// Rust's allocation-failure message, if the child wrote it to stderr.
    allocation_failure: Option<String>,
}

/// A running (or ended) isolated run's child process; see the `isolation` module's docs.
///
/// Dropping it kills the child's process group and reaps the child (no orphan, no zombie).
pub struct ChildRun {
    pid: u32,
    memory_limit: Option<u64>,
    /// Fires when the child has ended (it is not reaped yet).
    exited: oneshot::Receiver<()>,
    /// Set once the child is reaped: from then on its pid is not ours to signal.
    status: Option<WaitStatus>,
    exit: Option<ChildExit>,
    /// The signals sent to it.
    sent: Vec<i32>,
    observed: Arc<Mutex<Observed>>,
    readers: Vec<JoinHandle<()>>,
    drain_deadline: Option<tokio::time::Instant>,
    log: RunLogLines,
}

impl std::fmt::Debug for ChildRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChildRun")
            .field("pid", &self.pid)
            .field("memory_limit", &self.memory_limit)
            .field("exit", &self.exit)
            .finish_non_exhaustive()
    }
}

impl ChildRun {
    /// The child's process id (also its process group's id).
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// When the child entered the handler, by its own clock; `None` until it has said so (or
    /// if it never got that far).
    pub fn handler_started_at(&self) -> Option<DateTime<Utc>> {
        self.observed().started_at
    }

    /// Asks the handler to stop: SIGTERM to the child's process group, which fires
    /// [`TaskContext::cancelled`](crate::TaskContext::cancelled) in the child. Does nothing
    /// once the child has been waited for.
    pub fn terminate(&mut self) -> io::Result<()> {
        self.signal(libc::SIGTERM)
    }

    /// Stops the child by force: SIGKILL to its process group. Does nothing once the child has
    /// been waited for.
    pub fn kill(&mut self) -> io::Result<()> {
        self.signal(libc::SIGKILL)
    }

    fn signal(&mut self, signal: i32) -> io::Result<()> {
        if self.status.is_some() {
            return Ok(());
        }
        kill_group(self.pid, signal)?;
        self.sent.push(signal);
        Ok(())
    }

    /// Waits for the child to end and says how it ended. Once the child has ended, its output
    /// is read to its end (for at most [`OUTPUT_DRAIN`]) first, so the log and the verdict are
    /// complete.
    ///
    /// Cancel-safe: dropping the future (in a `select!`) loses nothing, and it may be called
    /// again, also after it returned (it returns the same exit).
    pub async fn wait(&mut self) -> ChildExit {
        if let Some(exit) = &self.exit {
            return exit.clone();
        }
        if self.status.is_none() {
            // An error means the watcher thread is gone; the child has ended or soon will.
            let _ = (&mut self.exited).await;
            // What the handler started and left behind ends with the run. The child is not
            // reaped yet, so its pid (the group's id) cannot have been taken by another process.
            let _ = kill_group(self.pid, libc::SIGKILL);
            self.status = Some(reap(self.pid));
        }
        self.drain().await;
        let exit = self.decide();
        self.exit = Some(exit.clone());
        exit
    }

    /// Asks the handler to stop (SIGTERM), waits `grace` for it to end, then stops it by force
    /// (SIGKILL), and says how it ended.
    pub async fn stop(&mut self, grace: Duration) -> ChildExit {
        let _ = self.terminate();
        if let Ok(exit) = tokio::time::timeout(grace, self.wait()).await {
            return exit;
        }
        let _ = self.kill();
        self.wait().await
    }

    /// Reads the child's output to its end, waiting at most [`OUTPUT_DRAIN`] after the child
    /// ended.
    async fn drain(&mut self) {
        let deadline = *self
            .drain_deadline
            .get_or_insert_with(|| tokio::time::Instant::now() + OUTPUT_DRAIN);
        while let Some(reader) = self.readers.last_mut() {
            if tokio::time::timeout_at(deadline, reader).await.is_err() {
                for reader in self.readers.drain(..) {
                    reader.abort();
                }
                self.log.push(
                    Utc::now(),
                    Level::WARN,
                    NOTE_TARGET,
                    "output written after the handler's process ended is not kept: a process it \
                     started still holds its stdout or stderr open",
                );
                return;
            }
            self.readers.pop();
        }
    }

    fn observed(&self) -> std::sync::MutexGuard<'_, Observed> {
        self.observed.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The verdict: the handler's own when it gave one, else the process's end.
    fn decide(&self) -> ChildExit {
        let observed = self.observed();
        match &observed.end {
            Some(Record::Succeeded) => return ChildExit::Succeeded,
            Some(Record::Failed { error }) => {
                return ChildExit::Failed {
                    error: error.clone(),
                };
            }
            Some(Record::Panicked { message }) => {
                return ChildExit::Panicked {
                    message: message.clone(),
                };
            }
            Some(Record::NotStarted { reason }) => {
                return ChildExit::NotStarted {
                    reason: reason.clone(),
                };
            }
            Some(Record::Started { .. } | Record::Log { .. }) | None => {}
        }
        match self.status.unwrap_or(WaitStatus::Unknown) {
            WaitStatus::Signalled { signal, .. }
                if signal == libc::SIGABRT && observed.allocation_failure.is_some() =>
            {
                ChildExit::OutOfMemory {
                    limit: self.memory_limit,
                    detail: observed.allocation_failure.clone().unwrap_or_default(),
                }
            }
            WaitStatus::Signalled {
                signal,
                core_dumped,
            } => ChildExit::Signalled {
                signal: Signal::new(signal),
                sent_by_node: self.sent.contains(&signal),
                core_dumped,
            },
            WaitStatus::Exited(code) => ChildExit::Exited { code },
            // Its status was taken by someone else: only its silence is known.
            WaitStatus::Unknown => ChildExit::Exited { code: -1 },
        }
    }
}

impl Drop for ChildRun {
    fn drop(&mut self) {
        for reader in &self.readers {
            reader.abort();
        }
        if self.status.is_some() {
            return;
        }
        let _ = kill_group(self.pid, libc::SIGKILL);
        // Reap it here if it has ended already; otherwise the watcher reaps it when it does.
        self.exited.close();
        if self.exited.try_recv().is_ok() {
            reap(self.pid);
        }
    }
}

#[cfg(test)]
mod tests;
