//! How an isolated run's child process ended, as the node saw it: the handler's own verdict when
//! it could give one, else what happened to the process.

use std::fmt;

/// How an isolated run's child process ended; see [`ChildRun::wait`](super::ChildRun::wait).
///
/// When the handler returned or panicked, the child says so before it exits, and that verdict
/// stands even if the process is killed in the instant after. Otherwise the process's own end
/// is reported: running out of its memory limit, a signal, or an exit code.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ChildExit {
    /// The handler returned `Ok`.
    Succeeded,
    /// The handler returned an error: its text, with its causes (`error: cause: cause`).
    Failed {
        /// The error's text.
        error: String,
    },
    /// The handler panicked.
    Panicked {
        /// The panic's message.
        message: String,
    },
    /// The child could not start the handler (no task of that name in the binary, a request it
    /// could not read); the handler did not run.
    NotStarted {
        /// Why.
        reason: String,
    },
    /// An allocation failed: the process ran out of memory (its limit, when it has one) and
    /// aborted.
    OutOfMemory {
        /// The process's memory limit in bytes, if it had one.
        limit: Option<u64>,
        /// What the process said, e.g. `memory allocation of 1073741824 bytes failed`.
        detail: String,
    },
    /// The process was ended by a signal before the handler returned: it crashed (SIGSEGV,
    /// SIGBUS, SIGILL, SIGFPE), aborted (SIGABRT), or was killed (SIGKILL, SIGTERM).
    Signalled {
        /// The signal.
        signal: Signal,
        /// Whether the node had sent this signal to the process (to stop it).
        sent_by_node: bool,
        /// Whether the process dumped core.
        core_dumped: bool,
    },
    /// The process exited before the handler returned (it called `std::process::exit`, or
    /// `main` returned before `scheduler::run()`).
    Exited {
        /// The exit code.
        code: i32,
    },
}

impl ChildExit {
    /// Whether the handler returned `Ok`.
    pub fn is_success(&self) -> bool {
        matches!(self, ChildExit::Succeeded)
    }
}

impl fmt::Display for ChildExit {
    /// What happened, in the words a run's record uses.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ChildExit::Succeeded => f.write_str("the handler returned Ok"),
            ChildExit::Failed { error } => write!(f, "the handler returned an error: {error}"),
            ChildExit::Panicked { message } => write!(f, "the handler panicked: {message}"),
            ChildExit::NotStarted { reason } => {
                write!(f, "the handler's process could not start it: {reason}")
            }
            ChildExit::OutOfMemory { limit, detail } => {
                f.write_str("the handler's process ran out of memory")?;
                if let Some(limit) = limit {
                    write!(f, " (its limit is {})", format_bytes(*limit))?;
                }
                write!(f, ": {detail}")
            }
            ChildExit::Signalled {
                signal,
                sent_by_node,
                core_dumped,
            } => {
                write!(f, "the handler's process was killed by {signal}")?;
                if let Some(meaning) = signal.meaning() {
                    write!(f, " ({meaning})")?;
                }
                if *sent_by_node {
                    f.write_str(", sent by the node to stop it")?;
                }
                if *core_dumped {
                    f.write_str("; core dumped")?;
                }
                Ok(())
            }
            ChildExit::Exited { code } => write!(
                f,
                "the handler's process exited with code {code} before the handler returned"
            ),
        }
    }
}

/// `512 MiB`, `1.5 GiB`, `1.86 GiB`, `100 bytes`: a size as a person reads it (to two decimals).
fn format_bytes(bytes: u64) -> String {
    const UNITS: [(&str, u64); 4] = [
        ("TiB", 1 << 40),
        ("GiB", 1 << 30),
        ("MiB", 1 << 20),
        ("KiB", 1 << 10),
    ];
    for (unit, size) in UNITS {
        if bytes >= size {
            let value = format!("{:.2}", bytes as f64 / size as f64);
            let value = value.trim_end_matches('0').trim_end_matches('.');
            return format!("{value} {unit}");
        }
    }
    format!("{bytes} bytes")
}

/// A Unix signal that ended a process, named (`SIGSEGV`) when it is a common one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Signal(i32);

/// The signals a process is commonly ended by: number, name and meaning.
#[cfg(unix)]
const SIGNALS: &[(i32, &str, &str)] = &[
    (libc::SIGHUP, "SIGHUP", "hangup"),
    (libc::SIGINT, "SIGINT", "interrupt"),
    (libc::SIGQUIT, "SIGQUIT", "quit"),
    (libc::SIGILL, "SIGILL", "illegal instruction"),
    (libc::SIGTRAP, "SIGTRAP", "trace trap"),
    (libc::SIGABRT, "SIGABRT", "aborted"),
    (libc::SIGBUS, "SIGBUS", "bus error"),
    (libc::SIGFPE, "SIGFPE", "arithmetic error"),
    (libc::SIGKILL, "SIGKILL", "killed"),
    (libc::SIGUSR1, "SIGUSR1", "user signal 1"),
    (libc::SIGSEGV, "SIGSEGV", "segmentation fault"),
    (libc::SIGUSR2, "SIGUSR2", "user signal 2"),
    (libc::SIGPIPE, "SIGPIPE", "broken pipe"),
    (libc::SIGALRM, "SIGALRM", "alarm clock"),
    (libc::SIGTERM, "SIGTERM", "terminated"),
    (libc::SIGXCPU, "SIGXCPU", "CPU time limit exceeded"),
    (libc::SIGXFSZ, "SIGXFSZ", "file size limit exceeded"),
    (libc::SIGSYS, "SIGSYS", "bad system call"),
];
#[cfg(not(unix))]
const SIGNALS: &[(i32, &str, &str)] = &[];

impl Signal {
    /// The signal numbered `number` on this system.
    pub const fn new(number: i32) -> Self {
        Self(number)
    }

    /// Its number on this system.
    pub const fn number(self) -> i32 {
        self.0
    }

    /// Its name, e.g. `SIGSEGV`, for the common signals.
    pub fn name(self) -> Option<&'static str> {
        SIGNALS.iter().find(|s| s.0 == self.0).map(|s| s.1)
    }

    /// What it means, e.g. `segmentation fault`, for the common signals.
    pub fn meaning(self) -> Option<&'static str> {
        SIGNALS.iter().find(|s| s.0 == self.0).map(|s| s.2)
    }
}

impl fmt::Display for Signal {
    /// `SIGSEGV`, or `signal 42` for one without a common name.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(name) => f.write_str(name),
            None => write!(f, "signal {}", self.0),
        }
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn signals_are_named_and_explained() {
        let segv = Signal::new(libc::SIGSEGV);
        assert_eq!(segv.to_string(), "SIGSEGV");
        assert_eq!(segv.meaning(), Some("segmentation fault"));
        assert_eq!(Signal::new(63).to_string(), "signal 63");
        let exit = ChildExit::Signalled {
            signal: Signal::new(libc::SIGKILL),
            sent_by_node: true,
            core_dumped: false,
        };
        assert_eq!(
            exit.to_string(),
            "the handler's process was killed by SIGKILL (killed), sent by the node to stop it"
        );
    }

    #[test]
    fn limits_read_as_sizes() {
        assert_eq!(format_bytes(512 << 20), "512 MiB");
        assert_eq!(format_bytes(3 << 29), "1.5 GiB");
        assert_eq!(format_bytes(2_000_000_000), "1.86 GiB");
        assert_eq!(format_bytes(100), "100 bytes");
        let exit = ChildExit::OutOfMemory {
            limit: Some(64 << 20),
            detail: "memory allocation of 1024 bytes failed".into(),
        };
        assert_eq!(
            exit.to_string(),
            "the handler's process ran out of memory (its limit is 64 MiB): memory allocation of 1024 bytes failed"
        );
    }
}
