//! The system side of a child: what it does between fork and exec, the long-lived thread that
//! forks every child, the thread per child that waits for it without reaping it, reaping, and
//! signalling its process group.

use std::io;
use std::os::fd::OwnedFd;
use std::sync::Mutex;

use tokio::sync::oneshot;

use crate::isolation::limits::Prepared;

/// What the child does between fork and exec: die with the node (Linux), take its limits, keep
/// the event socket open across exec.
///
/// The memory limit is `RLIMIT_DATA`, not `RLIMIT_AS`: since Linux 4.7 it counts the heap and
/// every private writable mapping (what a leak grows), but not address space only reserved. An
/// idle child of a test binary on two cores maps 172 MiB of address space (mostly glibc's
/// per-thread malloc arenas, reserved and unused) and 4.7 MiB of data: an address-space limit
/// would have to grow with the machine's core count, and could stop a child from starting at all.
pub(super) fn prepare_child(
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

pub(super) async fn spawn_on_the_spawner(
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
pub(super) fn watch_for_exit(pid: u32, exited: oneshot::Sender<()>) -> io::Result<()> {
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
pub(super) enum WaitStatus {
    Exited(i32),
    Signalled {
        signal: i32,
        core_dumped: bool,
    },
    /// Someone else in this process reaped it (a `waitpid(-1)` elsewhere).
    Unknown,
}

/// Reaps the ended child `pid`.
pub(super) fn reap(pid: u32) -> WaitStatus {
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
pub(super) fn kill_group(pid: u32, signal: i32) -> io::Result<()> {
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
