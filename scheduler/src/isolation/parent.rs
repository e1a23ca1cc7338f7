//! The node's side of an isolated run: start the child, read what it writes into the run's log,
//! signal it, reap it and say how it ended.
//!
//! Two threads of this module's own make the guarantees hold whatever the caller's threads do:
//! one long-lived thread forks every child (on Linux a child's parent-death signal fires when
//! the thread that forked it ends, so that thread must live as long as the process), and one
//! small thread per child waits for it to end *without reaping it* (`waitid` with `WNOWAIT`).
//! Only the [`ChildRun`] reaps its child, so a signal it sends can never reach another process
//! that took the pid over: a pid is not reused until its process is reaped.

use std::ffi::OsString;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tracing::Level;

use super::RunIdentity;
use super::exit::{ChildExit, Signal};
use super::limits::{Limits, Prepared};
use super::wire::{self, Record, Request};
use crate::run_log::RunLogLines;
use crate::{Error, Result};

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

/// What the child does between fork and exec: die with the node (Linux), take its limits, keep
/// the event socket open across exec.
///
/// The memory limit is `RLIMIT_DATA`, not `RLIMIT_AS`: since Linux 4.7 it counts the heap and
/// every private writable mapping (what a leak grows), but not address space only reserved. An
/// idle child of a test binary on two cores maps 172 MiB of address space (mostly glibc's
/// per-thread malloc arenas, reserved and unused) and 4.7 MiB of data: an address-space limit
/// would have to grow with the machine's core count, and could stop a child from starting at all.
fn prepare_child(
    events_fd: i32,
    limits: Prepared,
) -> impl FnMut() -> io::Result<()> + Send + Sync + 'static {
    #[cfg(target_os = "linux")]
    let parent = libc::pid_t::try_from(std::process::id()).unwrap_or(libc::pid_t::MAX);
    move || {
        // SAFETY (for each call below): async-signal-safe system calls on plain values, in the
        // forked child before exec.
        #[cfg(target_os = "linux")]
        unsafe {
            if libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            ) != 0
            {
                return Err(io::Error::last_os_error());
            }
            // The node died before the line above: nobody would kill this child.
            if libc::getppid() != parent {
                return Err(io::Error::from_raw_os_error(libc::ESRCH));
            }
        }
        limits.apply()?;
        let flags = unsafe { libc::fcntl(events_fd, libc::F_GETFD) };
        if flags < 0
            || unsafe { libc::fcntl(events_fd, libc::F_SETFD, flags & !libc::FD_CLOEXEC) } < 0
        {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

/// A fork to be done on the spawner thread.
struct SpawnJob {
    command: std::process::Command,
    /// The child's end of the event socket, closed in the node once the child has it.
    child_end: OwnedFd,
    reply: oneshot::Sender<io::Result<std::process::Child>>,
}

/// The thread that forks every child, started on first use, living as long as the process.
static SPAWNER: Mutex<Option<std::sync::mpsc::Sender<SpawnJob>>> = Mutex::new(None);

async fn spawn_on_the_spawner(
    command: std::process::Command,
    child_end: OwnedFd,
) -> io::Result<std::process::Child> {
    let (reply, answer) = oneshot::channel();
    let job = SpawnJob {
        command,
        child_end,
        reply,
    };
    {
        let mut spawner = SPAWNER.lock().unwrap_or_else(|e| e.into_inner());
        if spawner.is_none() {
            let (jobs, queue) = std::sync::mpsc::channel::<SpawnJob>();
            std::thread::Builder::new()
                .name("scheduler-isolation-spawner".into())
                .spawn(move || {
                    for mut job in queue {
                        let spawned = job.command.spawn();
                        drop(job.child_end);
                        if let Err(Ok(mut orphan)) = job.reply.send(spawned) {
                            // Nobody waits for this child any more: end it at once.
                            let _ = kill_group(orphan.id(), libc::SIGKILL);
                            let _ = orphan.wait();
                        }
                    }
                })?;
            *spawner = Some(jobs);
        }
        let spawner = spawner.as_ref().expect("started above");
        spawner
            .send(job)
            .map_err(|_| io::Error::other("the spawner thread is gone"))?;
    }
    answer
        .await
        .map_err(|_| io::Error::other("the spawner thread is gone"))?
}

/// Starts the thread that tells `exited` when child `pid` has ended, without reaping it; if
/// nobody listens any more by then, the thread reaps it.
fn watch_for_exit(pid: u32, exited: oneshot::Sender<()>) -> io::Result<()> {
    std::thread::Builder::new()
        .name("scheduler-isolation-wait".into())
        .stack_size(64 * 1024)
        .spawn(move || {
            let id = libc::id_t::from(pid);
            loop {
                // SAFETY: `info` is a plain C struct that waitid fills in.
                let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
                let waited = unsafe {
                    libc::waitid(libc::P_PID, id, &mut info, libc::WEXITED | libc::WNOWAIT)
                };
                if waited == 0 || io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
                    break;
                }
            }
            if exited.send(()).is_err() {
                reap(pid);
            }
        })?;
    Ok(())
}

/// How a reaped process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WaitStatus {
    Exited(i32),
    Signalled {
        signal: i32,
        core_dumped: bool,
    },
    /// Someone else in this process reaped it (a `waitpid(-1)` elsewhere).
    Unknown,
}

/// Reaps the ended child `pid`.
fn reap(pid: u32) -> WaitStatus {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return WaitStatus::Unknown;
    };
    let mut status = 0;
    loop {
        // SAFETY: waits for our own child; `status` is a plain int it fills in.
        let reaped = unsafe { libc::waitpid(pid, &mut status, 0) };
        if reaped == pid {
            break;
        }
        if reaped < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
            continue;
        }
        return WaitStatus::Unknown;
    }
    if libc::WIFEXITED(status) {
        WaitStatus::Exited(libc::WEXITSTATUS(status))
    } else if libc::WIFSIGNALED(status) {
        WaitStatus::Signalled {
            signal: libc::WTERMSIG(status),
            core_dumped: libc::WCOREDUMP(status),
        }
    } else {
        WaitStatus::Unknown
    }
}

/// Sends `signal` to the process group led by `pid`. Only for a child not reaped yet.
fn kill_group(pid: u32, signal: i32) -> io::Result<()> {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return Ok(());
    };
    // SAFETY: signals the group of our own child, which is not reaped, so its pid is still its.
    if unsafe { libc::kill(-pid, signal) } == 0 {
        return Ok(());
    }
    let error = io::Error::last_os_error();
    if error.raw_os_error() == Some(libc::ESRCH) {
        Ok(()) // already gone
    } else {
        Err(error)
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

/// Reads a child's stdout or stderr into the log, one line per line (cut at
/// [`wire::MAX_TEXT_BYTES`]), to its end; the log's own bounds decide what is kept, and the
/// pipe is read to its end either way so the child never blocks on it. On stderr
/// (`observed` given) it also looks for Rust's allocation-failure message.
async fn read_output(
    stream: impl AsyncRead + Unpin,
    level: Level,
    target: &'static str,
    log: RunLogLines,
    observed: Option<Arc<Mutex<Observed>>>,
) {
    read_lines(stream, wire::MAX_TEXT_BYTES, |line, cut| {
        let mut text = String::from_utf8_lossy(line).into_owned();
        if cut {
            text.push_str(&format!(
                " [line cut at {} KiB]",
                wire::MAX_TEXT_BYTES / 1024
            ));
        }
        if let Some(observed) = &observed
            && text.starts_with("memory allocation of ")
            && text.ends_with(" bytes failed")
        {
            observed
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .allocation_failure = Some(text.clone());
        }
        log.push(Utc::now(), level, target, &text);
    })
    .await;
}

/// Reads the child's event socket: its start, its `tracing` events (into the log) and how its
/// handler ended.
async fn read_events(
    stream: impl AsyncRead + Unpin,
    log: RunLogLines,
    observed: Arc<Mutex<Observed>>,
) {
    read_lines(stream, wire::MAX_RECORD_BYTES, |line, cut| {
        let record = if cut {
            None
        } else {
            serde_json::from_slice::<Record>(line).ok()
        };
        match record {
            Some(Record::Log {
                at,
                level,
                target,
                text,
            }) => {
                let level = level.parse().unwrap_or(Level::INFO);
                log.push(at, level, &target, &text);
            }
            Some(Record::Started { at }) => {
                observed
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .started_at = Some(at);
            }
            Some(end) => {
                let mut observed = observed.lock().unwrap_or_else(|e| e.into_inner());
                if observed.end.is_none() {
                    observed.end = Some(end);
                }
            }
            None => log.push(
                Utc::now(),
                Level::WARN,
                NOTE_TARGET,
                &format!(
                    "the handler's process sent an event this node cannot read ({} bytes)",
                    line.len()
                ),
            ),
        }
    })
    .await;
}

/// Calls `on_line(line, cut)` for every line of `stream` (without its `\n` or `\r\n`), the
/// last one even without a newline; a line longer than `max` is passed cut to `max` bytes
/// (`cut` true) and the rest of it skipped. Ends at the stream's end or on a read error.
async fn read_lines(
    stream: impl AsyncRead + Unpin,
    max: usize,
    mut on_line: impl FnMut(&[u8], bool),
) {
    let mut reader = BufReader::with_capacity(16 * 1024, stream);
    let mut line = Vec::new();
    let mut skipping = false;
    loop {
        let chunk = match reader.fill_buf().await {
            Ok([]) | Err(_) => break,
            Ok(chunk) => chunk,
        };
        let (piece, ends_line, used) = match chunk.iter().position(|b| *b == b'\n') {
            Some(at) => (&chunk[..at], true, at + 1),
            None => (chunk, false, chunk.len()),
        };
        if !skipping {
            let room = max - line.len();
            if piece.len() > room {
                line.extend_from_slice(&piece[..room]);
                on_line(trim_cr(&line), true);
                line.clear();
                skipping = true;
            } else {
                line.extend_from_slice(piece);
            }
        }
        reader.consume(used);
        if ends_line {
            if !skipping {
                on_line(trim_cr(&line), false);
            }
            line.clear();
            skipping = false;
        }
    }
    if !line.is_empty() && !skipping {
        on_line(trim_cr(&line), false);
    }
}

fn trim_cr(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\r").unwrap_or(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn lines_of(input: &[u8], max: usize) -> Vec<(String, bool)> {
        let mut lines = Vec::new();
        read_lines(input, max, |line, cut| {
            lines.push((String::from_utf8_lossy(line).into_owned(), cut))
        })
        .await;
        lines
    }

    #[tokio::test]
    async fn lines_are_split_and_bounded() {
        assert_eq!(
            lines_of(b"a\r\nbb\n\nlast", 8).await,
            [("a", false), ("bb", false), ("", false), ("last", false)]
                .map(|(l, c)| (l.to_owned(), c))
        );
        assert_eq!(
            lines_of(b"0123456789abc\nnext\n0123456789", 4).await,
            [("0123", true), ("next", false), ("0123", true)].map(|(l, c)| (l.to_owned(), c))
        );
        assert!(lines_of(b"", 4).await.is_empty());
    }
}
