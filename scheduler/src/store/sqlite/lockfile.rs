//! The one-process rule: an exclusive lock on `<database>.lock`, held for the store's lifetime.
//!
//! The lock is `File::try_lock` (`flock` on Unix, `LockFileEx` on Windows): it belongs to the open
//! file, so a second store in the same process is refused too, and the kernel releases it when
//! the holder exits or is killed, so a crash never leaves a stale lock to clean up. Rust opens
//! files close-on-exec, so a task's child process does not inherit it. The file's content is
//! only a record for the refusal message (pid, host, start time); the lock is what counts. The
//! database file itself is never locked this way: SQLite locks it its own way, and an `flock` on
//! it could interfere. The lock file is never deleted (deleting it would let a newcomer lock a
//! fresh file of the same name while the holder still locks the old one).
//!
//! The rule is about nodes, not connections: SQLite itself lets several processes share one WAL
//! file safely. A store built with [`operator`](super::SqliteStoreBuilder::operator) (the
//! `scheduler` operator commands) does not take this lock, so it works beside the node.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use chrono::{SecondsFormat, Utc};

use crate::store::{StoreError, StoreResult};

/// The held lock; dropping it releases the lock.
#[derive(Debug)]
pub(super) struct ProcessLock {
    _file: File,
}

impl ProcessLock {
    /// Takes the lock of `database` (an absolute path), or says who holds it.
    pub(super) fn acquire(database: &Path) -> StoreResult<Self> {
        let path = lock_path(database);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| {
                StoreError::setup(format!(
                    "cannot open the lock file `{}` of the SQLite database: {e}",
                    path.display()
                ))
            })?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                return Err(StoreError::setup(refusal(database, &path, &file)));
            }
            Err(TryLockError::Error(e)) => {
                return Err(StoreError::setup(format!(
                    "cannot lock `{}` (the SQLite store needs a file system with file locks): {e}",
                    path.display()
                )));
            }
        }
        record_holder(&file).map_err(|e| {
            StoreError::setup(format!(
                "cannot write the lock file `{}`: {e}",
                path.display()
            ))
        })?;
        Ok(Self { _file: file })
    }
}

/// `<database>.lock`, beside the database.
pub(super) fn lock_path(database: &Path) -> PathBuf {
    let mut name = database.as_os_str().to_owned();
    name.push(".lock");
    PathBuf::from(name)
}

fn record_holder(mut file: &File) -> std::io::Result<()> {
    let record = format!(
        "pid={}\nhost={}\nstarted={}\n",
        std::process::id(),
        this_host(),
        Utc::now().to_rfc3339_opts(SecondsFormat::Secs, true)
    );
    file.set_len(0)?;
    file.seek(SeekFrom::Start(0))?;
    file.write_all(record.as_bytes())?;
    file.flush()
}

fn this_host() -> String {
    gethostname::gethostname().to_string_lossy().into_owned()
}

/// The holder's record, as far as it can be read (it may be mid-write, or from a foreign tool).
#[derive(Debug, Default, PartialEq, Eq)]
struct Holder {
    pid: Option<String>,
    host: Option<String>,
    started: Option<String>,
}

impl Holder {
    fn parse(text: &str) -> Self {
        let mut holder = Holder::default();
        for line in text.lines() {
            let Some((key, value)) = line.split_once('=') else {
                continue;
            };
            let value = Some(value.trim().to_owned()).filter(|v| !v.is_empty());
            match key.trim() {
                "pid" => holder.pid = value,
                "host" => holder.host = value,
                "started" => holder.started = value,
                _ => {}
            }
        }
        holder
    }
}

fn refusal(database: &Path, lock: &Path, mut file: &File) -> String {
    let mut text = String::new();
    // Reading is not blocked by the holder's lock; a failure only leaves the holder unnamed.
    let _ = file.read_to_string(&mut text);
    let holder = Holder::parse(&text);
    let Some(pid) = &holder.pid else {
        return format!(
            "the SQLite database `{}` is in use by another scheduler store (a process that has \
             not recorded itself yet; lock file `{}`). A SQLite store belongs to one process: stop \
             that one first (its lock is released when it exits), or use PostgreSQL \
             (`postgres://...`) to run several nodes on one store",
            database.display(),
            lock.display()
        );
    };
    let host = holder.host.as_deref().unwrap_or("an unknown host");
    let started = holder.started.as_deref().unwrap_or("at an unknown time");
    let who = format!("pid {pid} on {host}, started {started}");
    if *pid == std::process::id().to_string() && host == this_host() {
        format!(
            "the SQLite database `{}` is already open in this process ({who}; lock file `{}`): \
             share that store (clones share it) instead of opening a second one. A SQLite store \
             belongs to one process; use PostgreSQL (`postgres://...`) to run several nodes on \
             one store",
            database.display(),
            lock.display()
        )
    } else {
        format!(
            "the SQLite database `{}` is in use by another scheduler process ({who}; lock file \
             `{}`). A SQLite store belongs to one process: stop that one first (its lock is \
             released when it exits), or use PostgreSQL (`postgres://...`) to run several nodes \
             on one store",
            database.display(),
            lock.display()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_record_reads_back() {
        let holder = Holder::parse("pid=42\nhost=box\nstarted=2026-01-01T00:00:00Z\n");
        assert_eq!(holder.pid.as_deref(), Some("42"));
        assert_eq!(holder.host.as_deref(), Some("box"));
        assert_eq!(holder.started.as_deref(), Some("2026-01-01T00:00:00Z"));
        assert_eq!(Holder::parse(""), Holder::default());
    }

    #[test]
    fn the_lock_file_sits_beside_the_database() {
        assert_eq!(
            lock_path(Path::new("/var/lib/jobs.db")),
            Path::new("/var/lib/jobs.db.lock")
        );
    }

    #[test]
    fn a_holder_that_recorded_nothing_is_still_refused_clearly() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("x.db");
        let lock = lock_path(&db);
        let held = File::create(&lock).unwrap();
        held.try_lock().unwrap();
        let message = ProcessLock::acquire(&db).unwrap_err().to_string();
        assert!(message.contains("has not recorded itself"), "{message}");
        assert!(message.contains("postgres://"), "{message}");
    }
}
