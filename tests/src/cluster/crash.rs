//! A crash of a [`TempCluster`]'s server: every one of its processes killed at once, as when
//! its machine or container dies (no shutdown, no checkpoint, no goodbye to its clients).

use std::time::Duration;

use super::{ClusterError, Result, TempCluster, io_err};

/// How long [`TempCluster::crash`] waits for the killed processes to be gone.
const GONE_WAIT: Duration = Duration::from_secs(10);

impl TempCluster {
    /// Kills the server hard: SIGKILL to the postmaster and to every process it started, at
    /// once. Its clients' connections break (the kernel closes their sockets); nothing is
    /// written on the way down. Waits until the processes are gone, then removes
    /// `postmaster.pid` (nothing is left to stop), so the cluster is only good for dropping.
    pub async fn crash(&self) -> Result<()> {
        let pid_file = self.data.join("postmaster.pid");
        let text = std::fs::read_to_string(&pid_file)
            .map_err(io_err(format!("cannot read {}", pid_file.display())))?;
        let postmaster: i32 = text
            .lines()
            .next()
            .and_then(|l| l.trim().parse().ok())
            .filter(|p| *p > 1)
            .ok_or_else(|| ClusterError::Command {
                context: "cannot crash the server".to_owned(),
                detail: format!("{} names no process", pid_file.display()),
            })?;
        // The children first, while they are still the postmaster's (then reparented).
        let mut victims = children_of(postmaster);
        victims.insert(0, postmaster);
        for pid in &victims {
            // SAFETY: kill(2) of a process of our own throwaway server.
            unsafe {
                libc::kill(*pid, libc::SIGKILL);
            }
        }
        let deadline = tokio::time::Instant::now() + GONE_WAIT;
        while victims.iter().any(|pid| alive(*pid)) {
            if tokio::time::Instant::now() > deadline {
                return Err(ClusterError::Command {
                    context: "the killed server's processes are still there".to_owned(),
                    detail: format!("after {GONE_WAIT:?}: {victims:?}"),
                });
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        std::fs::remove_file(&pid_file)
            .map_err(io_err(format!("cannot remove {}", pid_file.display())))
    }
}

/// The processes whose parent is `parent` (from `/proc/<pid>/stat`).
fn children_of(parent: i32) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| stat(*pid).is_some_and(|(_, ppid)| ppid == parent))
        .collect()
}

/// Whether `pid` runs (a zombie, dead and not yet reaped, does not).
fn alive(pid: i32) -> bool {
    stat(pid).is_some_and(|(state, _)| state != 'Z' && state != 'X')
}

/// A process's state letter and parent, from `/proc/<pid>/stat` (its name, in parentheses, may
/// hold spaces: the fields after the last `)` are read).
fn stat(pid: i32) -> Option<(char, i32)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let mut fields = text.get(text.rfind(')')? + 1..)?.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    Some((state, ppid))
}
