//! What the machine provides the formation: pg_auto_failover's installation, the unprivileged
//! user it runs as, free ports, and the processes of a service.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use crate::harness::Result;

/// The unprivileged user the formation runs as when the harness is root.
#[derive(Debug, Clone)]
pub(super) struct RunAs {
    pub(super) uid: u32,
    pub(super) gid: u32,
}

/// The directory of the PostgreSQL binaries pg_auto_failover's extension is installed for
/// (Debian: `/usr/lib/postgresql/NN/bin` next to `postgresql-NN-auto-failover`), and the
/// `pg_autoctl` executable.
pub(super) fn find_installation() -> Result<(PathBuf, PathBuf)> {
    let mut bindirs: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let major: u32 = e.file_name().to_str()?.parse().ok()?;
            let control = format!("/usr/share/postgresql/{major}/extension/pgautofailover.control");
            Path::new(&control)
                .is_file()
                .then(|| (major, e.path().join("bin")))
        })
        .collect();
    bindirs.sort_by_key(|(major, _)| std::cmp::Reverse(*major));
    let pg_autoctl = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .chain([PathBuf::from("/usr/bin")])
        .map(|d| d.join("pg_autoctl"))
        .find(|p| p.is_file());
    match (bindirs.into_iter().next(), pg_autoctl) {
        (Some((_, bindir)), Some(pg_autoctl)) if bindir.join("pg_ctl").is_file() => {
            Ok((bindir, pg_autoctl))
        }
        _ => Err(
            "pg_auto_failover is not installed (no pg_autoctl, or no pgautofailover \
                  extension for an installed PostgreSQL): install Debian's \
                  `postgresql-NN-auto-failover` for your PostgreSQL major version NN \
                  (`scripts/faults` does when it runs as root)"
                .into(),
        ),
    }
}

/// When root: the server user (`SCHEDULER_PG_USER`, default `postgres`) and its name.
pub(super) fn server_user() -> Result<(Option<RunAs>, String)> {
    // SAFETY: geteuid(2) cannot fail and has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        let name = std::env::var("USER")
            .ok()
            .or_else(|| {
                let out = std::process::Command::new("id").arg("-un").output().ok()?;
                Some(String::from_utf8_lossy(&out.stdout).trim().to_owned())
            })
            .ok_or("cannot tell this user's name (for the formation's superuser)")?;
        return Ok((None, name));
    }
    let user = std::env::var("SCHEDULER_PG_USER").unwrap_or_else(|_| "postgres".to_owned());
    let id = |flag: &str| -> Option<u32> {
        let out = std::process::Command::new("id")
            .args([flag, &user])
            .stderr(Stdio::null())
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().parse().ok())?
    };
    match (id("-u"), id("-g")) {
        (Some(uid), Some(gid)) if uid != 0 => Ok((Some(RunAs { uid, gid }), user)),
        _ => Err(format!(
            "running as root, and pg_autoctl refuses root, but there is no unprivileged `{user}` \
             user to run it as (set SCHEDULER_PG_USER)"
        )
        .into()),
    }
}

/// A TCP port on 127.0.0.1 that was free a moment ago.
pub(super) fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind(("127.0.0.1", 0))?
        .local_addr()?
        .port())
}

pub(super) fn signal(pid: u32, sig: libc::c_int) {
    // SAFETY: kill(2) has no memory-safety preconditions.
    unsafe {
        libc::kill(pid as libc::pid_t, sig);
    }
}

/// The processes of a service: those in the `pg_autoctl run` process group (the supervisor, its
/// keeper or listener, the Postgres it started) and the Postgres server's children, which run in
/// process groups of their own.
pub(super) fn service_pids(group: Option<u32>, pgdata: &Path) -> Vec<u32> {
    // A stale postmaster.pid (after a crash) may name a pid reused since: only a process
    // whose command line names this data directory is its server.
    let postmaster = std::fs::read_to_string(pgdata.join("postmaster.pid"))
        .ok()
        .and_then(|s| s.lines().next().and_then(|l| l.trim().parse::<u32>().ok()))
        .filter(|p| *p > 1)
        .filter(|p| {
            std::fs::read(format!("/proc/{p}/cmdline")).is_ok_and(|c| {
                let dir = pgdata.to_string_lossy();
                String::from_utf8_lossy(&c).contains(dir.as_ref())
            })
        });
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // pid (comm) state ppid pgrp ...: comm may hold spaces, so read after the last ')'.
        let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let (Some(ppid), Some(pgrp)) = (
            fields.get(1).and_then(|f| f.parse::<u32>().ok()),
            fields.get(2).and_then(|f| f.parse::<u32>().ok()),
        ) else {
            continue;
        };
        let in_group = group.is_some_and(|g| g == pgrp);
        let server = postmaster.is_some_and(|p| p == pid || p == ppid);
        if in_group || server {
            pids.push(pid);
        }
    }
    pids
}
