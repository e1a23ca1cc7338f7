//! Fail-stop: when a handler cannot be stopped and its lock can no longer be kept, the process
//! exits rather than let another node start the same task while the handler still runs.
//!
//! A handler is stopped at its next `.await` (its poll gate closes). One that blocks its thread
//! (CPU work or blocking I/O without an `.await`) cannot be stopped until it yields. Its lock is
//! renewed as long as this node reaches the database and runs (the watchdog runs on the engine's
//! own runtime, whatever the handlers do), so the task cannot overlap itself. When the lock
//! truly cannot be kept — the database is out of reach past the lock's stop deadline, another
//! node released the lock, or the node finished shutting down with the handler still blocking —
//! the only way to keep "a task never overlaps itself" is to end the handler's thread, and a
//! thread cannot be killed from outside: the process exits at once with
//! [`FAIL_STOP_EXIT_CODE`], before the lock can expire (another node takes a lock over only after
//! it has watched it expired for the takeover wait). A supervisor (systemd, Kubernetes) restarts
//! the node; the run is then `lost` and runs again per its task's `recovery`.
//!
//! The runner decides when (`runner::hard_stop`): a handler stopped by force that is still inside
//! a poll at its lock's fail-stop deadline ([`Lease::fail_stop_at`](super::watchdog::Lease)),
//! which moves on with every renewal that succeeds; or still inside one shortly after its lock
//! was found taken over. A node that stopped renews nothing: an application that goes on after
//! `run_until` returned with such a handler still blocking is stopped at that deadline too.
//!
//! A background service that panics and cannot be restarted (see `super::health`) stops the
//! process the same way, with [`exit_service`].
//!
//! Tasks that may block for long should run isolated in a child process, which can be killed.

/// The exit status of a process that stopped itself because a handler could not be stopped
/// before its lock could expire (`EX_SOFTWARE`).
pub const FAIL_STOP_EXIT_CODE: i32 = 70;

/// Exits the process at once: a handler of `task` (run `run_id`) cannot be stopped and its lock
/// can no longer be kept (`why`).
///
/// Nothing else runs: no destructor, no flush that might wait for a lock the blocked handler
/// holds. The reason goes to standard error with one `write`, and to the log.
pub(crate) fn exit_now(task: &str, run_id: i64, why: &str) -> ! {
    let line = format!(
        "scheduler: FAIL-STOP: the handler of task {task} (run {run_id}) blocks its thread and \
         cannot be stopped, and {why}; exiting (status {FAIL_STOP_EXIT_CODE}) so that no other \
         node runs the task while it still runs. Run such a task with isolation = \"process\", \
         or make it reach an .await (tokio::task::spawn_blocking, ctx.is_cancelled()).\n"
    );
    tracing::error!(task, run_id, "{}", line.trim_end());
    write_stderr(line.as_bytes());
    exit(FAIL_STOP_EXIT_CODE)
}

/// Exits the process at once: the background service `service` cannot go on (`why`: it
/// panicked and cannot be restarted safely, or it panicked too often in a row; see
/// `super::health`). Its supervisor restarts the node, whose runs are then recovered as after a
/// crash.
pub(crate) fn exit_service(service: &str, why: &str) -> ! {
    let line = format!(
        "scheduler: FAIL-STOP: the {service} service of this node {why}; exiting (status \
         {FAIL_STOP_EXIT_CODE}) rather than run on without it. Its supervisor restarts the \
         node; runs it held are recovered as after a crash.\n"
    );
    tracing::error!(service, "{}", line.trim_end());
    write_stderr(line.as_bytes());
    exit(FAIL_STOP_EXIT_CODE)
}

#[cfg(unix)]
fn write_stderr(bytes: &[u8]) {
    // SAFETY: write(2) of a valid buffer to fd 2; the result does not matter.
    unsafe {
        libc::write(2, bytes.as_ptr().cast(), bytes.len());
    }
}

#[cfg(not(unix))]
fn write_stderr(bytes: &[u8]) {
    use std::io::Write;
    let _ = std::io::stderr().write_all(bytes);
}

#[cfg(unix)]
fn exit(code: i32) -> ! {
    // SAFETY: _exit(2) ends the process without running anything else.
    unsafe { libc::_exit(code) }
}

#[cfg(not(unix))]
fn exit(_code: i32) -> ! {
    std::process::abort()
}
