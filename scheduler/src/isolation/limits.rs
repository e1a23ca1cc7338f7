//! The resource limits of an isolated run's child process (`setrlimit`), from the task's
//! attribute: its memory, the processes of its user, its CPU time, the size of the files it
//! writes. Each is checked against its range in [`crate::bounds`] before the child starts, and
//! set between fork and exec, so the handler and everything it starts live under it.

use std::io;
use std::time::Duration;

use crate::bounds::{self, OutOfRange};

/// The limits of one child; `None` sets none (the node's own limit is inherited).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Limits {
    /// `RLIMIT_DATA`, bytes.
    pub(crate) memory: Option<u64>,
    /// `RLIMIT_NPROC`: processes and threads of the user.
    pub(crate) processes: Option<u64>,
    /// `RLIMIT_CPU`, seconds (a part of a second counts as a whole one).
    pub(crate) cpu: Option<Duration>,
    /// `RLIMIT_FSIZE`, bytes.
    pub(crate) file_size: Option<u64>,
}

/// One `setrlimit` call, computed before the fork.
#[derive(Debug, Clone, Copy)]
struct Rlimit {
    resource: ResourceId,
    soft: u64,
    hard: u64,
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
type ResourceId = libc::__rlimit_resource_t;
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
type ResourceId = libc::c_int;

/// The most limits a child gets: one of each kind.
const KINDS: usize = 4;

/// The limits to set, ready for [`Prepared::apply`] in the forked child.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Prepared {
    limits: [Option<Rlimit>; KINDS],
}

impl Limits {
    /// Checks every limit against its range, naming the task's option when one is outside it.
    pub(crate) fn check(&self) -> Result<(), OutOfRange> {
        if let Some(bytes) = self.memory {
            bounds::MEMORY_LIMIT.check("memory_limit", bytes)?;
        }
        if let Some(processes) = self.processes {
            bounds::MAX_PROCESSES.check("max_processes", processes)?;
        }
        if let Some(cpu) = self.cpu {
            bounds::CPU_LIMIT.check("cpu_limit", cpu)?;
        }
        if let Some(bytes) = self.file_size {
            bounds::MAX_FILE_SIZE.check("max_file_size", bytes)?;
        }
        Ok(())
    }

    /// The `setrlimit` calls these limits take.
    ///
    /// The CPU limit's hard limit is one second above its soft one: at the soft limit the
    /// kernel sends SIGXCPU, which ends the process and names the cause; a process that catches
    /// it is killed (SIGKILL) a second later. The others are hard limits.
    ///
    /// A limit above this process's own hard limit is lowered to it: a process cannot raise its
    /// hard limits (without `CAP_SYS_RESOURCE`), and a child never gets more than its node has.
    pub(crate) fn prepare(&self) -> Prepared {
        let cpu_secs = self
            .cpu
            .map(|cpu| cpu.as_secs() + u64::from(cpu.subsec_nanos() > 0));
        let rlimits = [
            self.memory.map(|n| Rlimit {
                resource: libc::RLIMIT_DATA,
                soft: n,
                hard: n,
            }),
            self.processes.map(|n| Rlimit {
                resource: libc::RLIMIT_NPROC,
                soft: n,
                hard: n,
            }),
            cpu_secs.map(|n| Rlimit {
                resource: libc::RLIMIT_CPU,
                soft: n,
                hard: n.saturating_add(1),
            }),
            self.file_size.map(|n| Rlimit {
                resource: libc::RLIMIT_FSIZE,
                soft: n,
                hard: n,
            }),
        ];
        Prepared {
            limits: rlimits.map(|limit| limit.map(Rlimit::within_own)),
        }
    }
}

impl Rlimit {
    /// This limit, lowered to this process's own hard limit of the same resource.
    fn within_own(self) -> Self {
        // SAFETY: getrlimit fills in a plain struct.
        let mut own = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        if unsafe { libc::getrlimit(self.resource, &mut own) } != 0 {
            return self;
        }
        #[allow(clippy::useless_conversion)] // `rlim_t` is not `u64` everywhere
        let own_hard = u64::try_from(own.rlim_max).unwrap_or(u64::MAX);
        Self {
            soft: self.soft.min(own_hard),
            hard: self.hard.min(own_hard),
            ..self
        }
    }
}

impl Prepared {
    /// Sets the limits on this process. Called between fork and exec: it only calls
    /// `setrlimit` on values computed before the fork, and allocates nothing.
    pub(crate) fn apply(&self) -> io::Result<()> {
        for limit in self.limits.iter().flatten() {
            let value = libc::rlimit {
                rlim_cur: libc::rlim_t::try_from(limit.soft).unwrap_or(libc::RLIM_INFINITY),
                rlim_max: libc::rlim_t::try_from(limit.hard).unwrap_or(libc::RLIM_INFINITY),
            };
            // SAFETY: setrlimit on this process with a plain struct; async-signal-safe.
            if unsafe { libc::setrlimit(limit.resource, &value) } != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_outside_their_range_are_refused_by_option_name() {
        let limits = |limits: Limits| limits.check().map_err(|e| e.to_string());
        assert!(limits(Limits::default()).is_ok());
        let e = limits(Limits {
            processes: Some(3),
            ..Limits::default()
        })
        .unwrap_err();
        assert!(e.starts_with("`max_processes`: 3 is out of range"), "{e}");
        let e = limits(Limits {
            cpu: Some(Duration::ZERO),
            ..Limits::default()
        })
        .unwrap_err();
        assert!(e.starts_with("`cpu_limit`: "), "{e}");
        let e = limits(Limits {
            file_size: Some(u64::MAX),
            ..Limits::default()
        })
        .unwrap_err();
        assert!(e.starts_with("`max_file_size`: "), "{e}");
        let e = limits(Limits {
            memory: Some(1 << 20),
            ..Limits::default()
        })
        .unwrap_err();
        assert!(e.starts_with("`memory_limit`: "), "{e}");
    }

    #[test]
    fn a_part_of_a_second_of_cpu_counts_as_a_whole_one_and_sigxcpu_comes_first() {
        let prepared = Limits {
            cpu: Some(Duration::from_millis(1500)),
            file_size: Some(4096),
            ..Limits::default()
        }
        .prepare();
        let set: Vec<_> = prepared.limits.iter().flatten().collect();
        assert_eq!(set.len(), 2);
        assert_eq!(
            (set[0].resource, set[0].soft, set[0].hard),
            (libc::RLIMIT_CPU, 2, 3)
        );
        assert_eq!(
            (set[1].resource, set[1].soft, set[1].hard),
            (libc::RLIMIT_FSIZE, 4096, 4096)
        );
    }

    #[test]
    fn a_limit_above_the_nodes_own_hard_limit_is_lowered_to_it() {
        let mut own = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit fills in a plain struct.
        assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NPROC, &mut own) }, 0);
        #[allow(clippy::useless_conversion)]
        let own = u64::try_from(own.rlim_max).unwrap_or(u64::MAX);
        let prepared = Limits {
            processes: Some(bounds::MAX_PROCESSES.max),
            ..Limits::default()
        }
        .prepare();
        let set: Vec<_> = prepared.limits.iter().flatten().collect();
        let expected = own.min(bounds::MAX_PROCESSES.max);
        assert_eq!((set[0].soft, set[0].hard), (expected, expected));
    }
}
