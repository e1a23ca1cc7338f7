/// Where a thread is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum State {
    /// Running, or ready and waiting for a CPU.
    OnCpu,
    /// Asleep in the kernel, stopped, or anything else: not going on by itself.
    Off,
}

/// The calling thread's kernel id (0 where there is none to ask about).
pub(super) fn id() -> i32 {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: gettid(2) has no preconditions and cannot fail.
        unsafe { libc::gettid() }
    }
    #[cfg(not(target_os = "linux"))]
    {
        0
    }
}

/// The state of this process's thread `tid` and the CPU time it has used, in
/// nanoseconds; `None` if the kernel cannot be asked.
pub(super) fn look(tid: i32) -> Option<(State, u64)> {
    #[cfg(target_os = "linux")]
    {
        if tid == 0 {
            return None;
        }
        let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).ok()?;
        let schedstat = std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat")).ok()?;
        Some((parse_state(&stat)?, parse_cpu(&schedstat)?))
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = tid;
        None
    }
}

/// The state field of a `stat` line: the first after the command name, which is in
/// parentheses and may hold spaces and parentheses of its own.
pub(super) fn parse_state(stat: &str) -> Option<State> {
    let after = &stat[stat.rfind(')')? + 1..];
    match after.split_whitespace().next()? {
        "R" => Some(State::OnCpu),
        _ => Some(State::Off),
    }
}

/// The CPU time of a `schedstat` line: its first field, in nanoseconds.
pub(super) fn parse_cpu(schedstat: &str) -> Option<u64> {
    schedstat.split_whitespace().next()?.parse().ok()
}
