//! The embedded SQLite store: one scheduler process keeping its run state in one local file.
//!
//! It owns the database file at its path (the `scheduler_*` tables, created by
//! [`Store::migrate`](super::Store::migrate) from `scheduler/migrations/sqlite/`), the lock file
//! beside it (`<database>.lock`), and the in-process wake-ups that stand in for PostgreSQL's
//! LISTEN/NOTIFY. All of its SQL is in `queries/*.sql` (and, what PostgreSQL runs alike, in
//! `store/queries/`), included at compile time; every value is
//! a bound parameter. It behaves like [`PgStore`](super::PgStore) in everything the
//! [`Store`](super::Store) contract says; the contract suite (`tests/tests/store_contract.rs`)
//! runs every behaviour against both. It never creates directories, and never locks the database
//! file itself (SQLite does, its own way).
//!
//! **One process per file.** [`SqliteStoreBuilder::connect`] takes an exclusive lock on
//! `<database>.lock` (an `flock`, released by the kernel when the process exits or dies, however
//! it dies) and writes the holder's pid, host and start time into it. A second store on the same
//! file, from another process or this one, is refused with a [`StoreError::Setup`] naming the
//! holder. Several nodes need a store they can share over the network: PostgreSQL. An
//! [`operator`](SqliteStoreBuilder::operator) store (the `scheduler` operator commands) takes no
//! lock and works beside the node; the node's change listener sees its commits through SQLite's
//! `PRAGMA data_version`. The lock file
//! is left in place when the store closes (deleting it would let two processes lock two different
//! files of one name); what it says is only the last holder's record.
//!
//! **The clock.** One process owns the file, so there is one clock: the process's
//! ([`Utc::now`](chrono::Utc::now)), taken once per operation (by a write, once its transaction
//! holds the write lock) and used for everything the operation writes and compares, as
//! PostgreSQL's `now()` is. Timestamps are stored as INTEGER unix microseconds (the resolution of
//! `timestamptz`). A wall-clock step moves due times and lock expiries with it, as a step of the
//! database server's clock would on PostgreSQL.
//!
//! **Writers take turns.** SQLite allows one writer at a time. Every write is one transaction
//! begun with `BEGIN IMMEDIATE`, so it holds the write lock from its first statement and never
//! has to upgrade a read lock (the upgrade that deadlocks or fails with `SQLITE_BUSY`). Writers of
//! this process also queue in Rust for their turn before they take a pooled connection, so they
//! wait in order instead of polling in SQLite's busy handler; the `busy_timeout` (5 s by default)
//! covers another program holding the file briefly (a backup, the `sqlite3` shell). Because a
//! claim's transaction excludes every other writer, it needs no `FOR UPDATE SKIP LOCKED`: nothing
//! can interleave between reading the due rows and locking them. Reads run beside the writer
//! (WAL mode) on the rest of the pool.
//!
//! **Durability.** WAL with `synchronous = NORMAL` by default: a committed transaction survives
//! a crash or kill of the process (the OS has the write), but the last transactions before a
//! power loss or kernel crash may be rolled back (never corrupted). Set
//! [`Synchronous::Full`] with [`SqliteStoreBuilder::synchronous`] to make every commit durable
//! across power loss, at the cost of an fsync per commit.
//!
//! **Nothing waits forever.** Every operation, its wait for a writer's turn and for a connection
//! included, finishes within the operation timeout or fails with [`StoreError::Timeout`] (a
//! migration within [`MIGRATION_TIMEOUT`]); a connection whose operation timed out is closed, not
//! reused.
//!
//! **Beyond the contract**, four details differ from PostgreSQL, none of which a caller may rely
//! on: names are ordered bytewise (PostgreSQL uses the database's collation); due tasks, and
//! overdue tasks, due at the same instant are listed in name order (PostgreSQL: any order); a
//! claim that released an expired lock also wakes the listeners (PostgreSQL's claim does not
//! notify); and an outbox event's payload is returned as it was written (PostgreSQL stores
//! `jsonb` and returns its normalized text: keys reordered, whitespace changed).
//!
//! **Why sqlx's SQLite driver.** It resolves next to the sqlx 0.9 the PostgreSQL store uses, shares
//! its pool, its async model and its row decoding (so both stores are written alike), and builds
//! SQLite from source (`sqlite-bundled`), so no system library is needed. `tokio-rusqlite` 0.8
//! does not resolve next to this dependency tree.

mod builder;
mod listener;
mod lockfile;
mod migrate;
mod operations;
mod row;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use sqlx::SqlitePool;
use sqlx::sqlite::SqliteConnectOptions;

use super::StoreError;
pub use builder::{SqliteStoreBuilder, Synchronous, from_url};
use lockfile::ProcessLock;

/// Default size of the connection pool: one writer at a time (SQLite's rule) and readers beside it.
pub const DEFAULT_MAX_CONNECTIONS: u32 = 4;
/// Default wait for SQLite's write lock held by another program (`busy_timeout`).
pub const DEFAULT_BUSY_TIMEOUT: Duration = Duration::from_secs(5);
/// Default limit of one operation, its waits included.
pub const DEFAULT_OPERATION_TIMEOUT: Duration = Duration::from_secs(10);
/// Limit of [`Store::migrate`](super::Store::migrate): a migration may rewrite a large table.
pub const MIGRATION_TIMEOUT: Duration = Duration::from_secs(600);

/// The SQLite implementation of [`Store`](super::Store). Clones share the pool and the lock file;
/// the lock is released when the last clone is dropped.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    pool: SqlitePool,
    /// How the pool's connections are opened; the change listener opens its own so.
    options: SqliteConnectOptions,
    path: PathBuf,
    lock_path: PathBuf,
    /// Built with [`SqliteStoreBuilder::operator`]: no lock file, no migration, no node.
    operator: bool,
    description: String,
    op_timeout: Duration,
    /// Where operations take "now" from (the system clock but in tests).
    clock: crate::clock::Clock,
    /// Writers of this process take turns here before they take a connection.
    writer: tokio::sync::Mutex<()>,
    /// Audit entries this store has written (counted inside their transaction): the change
    /// listener's way to tell another process's operator action from this one's.
    own_audits: std::sync::atomic::AtomicU64,
    /// Bumped after a commit that released a lock, applied a config, queued a manual run or
    /// ended a pause, and by [`Store::notify`](super::Store::notify); listeners watch it.
    changes: tokio::sync::watch::Sender<u64>,
    /// Bumped after a commit that recorded a request to cancel a run; listeners watch it.
    cancels: tokio::sync::watch::Sender<u64>,
    /// Declared last, so it is dropped after the pool: the file is given up when the store is.
    /// None in operator mode.
    _holder: Option<ProcessLock>,
}

impl SqliteStore {
    /// A builder for a store on the database file at `path`.
    pub fn builder(path: impl Into<PathBuf>) -> SqliteStoreBuilder {
        SqliteStoreBuilder::new(path)
    }

    /// The pool (for the application's own queries against run history).
    pub fn pool(&self) -> &SqlitePool {
        &self.inner.pool
    }

    /// The database file (absolute).
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// The lock file that keeps other nodes off the database (held by this store unless it is
    /// an [`operator`](SqliteStoreBuilder::operator) store).
    pub fn lock_path(&self) -> &Path {
        &self.inner.lock_path
    }

    /// Whether this store was built with [`SqliteStoreBuilder::operator`].
    pub fn is_operator(&self) -> bool {
        self.inner.operator
    }
}

/// Classifies a driver error for callers above the store.
fn classify(operation: &'static str, error: sqlx::Error) -> StoreError {
    use sqlx::Error as E;
    let transient = match &error {
        E::Io(_) | E::PoolTimedOut | E::PoolClosed | E::WorkerCrashed | E::BeginFailed => {
            Some(false)
        }
        E::Database(db) => {
            // SQLite's extended result code; its low byte is the primary code.
            let code: i32 = db.code().and_then(|c| c.parse().ok()).unwrap_or(0);
            match code & 0xff {
                // SQLITE_BUSY, SQLITE_LOCKED: another writer holds the lock.
                5 | 6 => Some(true),
                // SQLITE_NOMEM, SQLITE_READONLY, SQLITE_INTERRUPT, SQLITE_IOERR, SQLITE_FULL,
                // SQLITE_CANTOPEN, SQLITE_PROTOCOL: the file or the machine is in trouble.
                7 | 8 | 9 | 10 | 13 | 14 | 15 => Some(false),
                // Constraints, type mismatches, a corrupt file, not a database, SQL errors.
                _ => None,
            }
        }
        _ => None,
    };
    StoreError::classified(operation, Box::new(error), transient)
}

#[cfg(test)]
mod tests {
    use super::builder::absolute_database_path;
    use super::*;

    fn parsed(url: &str) -> SqliteStoreBuilder {
        from_url(url).unwrap_or_else(|e| panic!("{url}: {e}"))
    }

    fn refused(url: &str) -> String {
        match from_url(url) {
            Err(StoreError::Setup { message }) => message,
            Err(e) => panic!("{url}: not a setup error: {e}"),
            Ok(b) => panic!("{url}: accepted as {b:?}"),
        }
    }

    #[test]
    fn urls_name_relative_and_absolute_files() {
        assert_eq!(
            parsed("sqlite://scheduler.db").path,
            Path::new("scheduler.db")
        );
        assert_eq!(
            parsed("sqlite://./data/x.db").path,
            Path::new("./data/x.db")
        );
        assert_eq!(
            parsed("sqlite:///var/lib/x.db").path,
            Path::new("/var/lib/x.db")
        );
        assert_eq!(parsed("SQLite://a.db").path, Path::new("a.db"));
        assert_eq!(
            parsed("sqlite:///tmp/my%20jobs.db").path,
            Path::new("/tmp/my jobs.db")
        );
    }

    #[test]
    fn the_synchronous_option_is_understood() {
        assert_eq!(parsed("sqlite://a.db").synchronous, Synchronous::Normal);
        assert_eq!(
            parsed("sqlite://a.db?synchronous=full").synchronous,
            Synchronous::Full
        );
        assert_eq!(
            parsed("sqlite://a.db?synchronous=NORMAL").synchronous,
            Synchronous::Normal
        );
        let e = refused("sqlite://a.db?synchronous=off");
        assert!(e.contains("`normal` or `full`"), "{e}");
    }

    #[test]
    fn other_schemes_options_and_forms_are_refused_with_what_to_write() {
        let e = refused("postgres://app:hunter2@db/app");
        assert!(e.contains("not a SQLite URL"), "{e}");
        assert!(e.contains("sqlite://PATH"), "{e}");
        assert!(!e.contains("hunter2"), "{e}");
        let e = refused("sqlite:scheduler.db");
        assert!(e.contains("sqlite://PATH"), "{e}");
        let e = refused("sqlite://a.db?mode=ro");
        assert!(e.contains("unknown option `mode`"), "{e}");
        let e = refused("sqlite://");
        assert!(e.contains("names no database file"), "{e}");
        let e = refused("sqlite://:memory:");
        assert!(e.contains("in-memory"), "{e}");
        let e = refused("sqlite://a.db#x");
        assert!(e.contains("fragment"), "{e}");
        let e = refused("scheduler.db");
        assert!(e.contains("not a SQLite URL"), "{e}");
    }

    #[tokio::test]
    async fn a_missing_directory_is_named_not_created() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope");
        let error = SqliteStoreBuilder::new(missing.join("x.db"))
            .connect()
            .unwrap_err();
        let StoreError::Setup { message } = &error else {
            panic!("not a setup error: {error}");
        };
        assert!(
            message.contains(&missing.display().to_string()),
            "{message}"
        );
        assert!(message.contains("does not exist"), "{message}");
        assert!(!missing.exists());
    }

    #[test]
    fn outside_a_runtime_the_store_is_refused_not_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let error = SqliteStoreBuilder::new(dir.path().join("x.db"))
            .connect()
            .unwrap_err()
            .to_string();
        assert!(error.contains("inside a Tokio runtime"), "{error}");
    }

    #[tokio::test]
    async fn describe_names_the_absolute_path() {
        use crate::store::Store;
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStoreBuilder::new(dir.path().join("s.db"))
            .connect()
            .unwrap();
        let expected = std::fs::canonicalize(dir.path()).unwrap().join("s.db");
        assert_eq!(store.describe(), format!("sqlite {}", expected.display()));
        assert_eq!(store.path(), expected);
    }

    #[test]
    fn a_relative_path_is_taken_from_the_current_directory() {
        let cwd = std::env::current_dir().unwrap().canonicalize().unwrap();
        assert_eq!(
            absolute_database_path(Path::new("x.db")).unwrap(),
            cwd.join("x.db")
        );
        assert_eq!(
            absolute_database_path(Path::new("./x.db")).unwrap(),
            cwd.join("x.db")
        );
        let e = absolute_database_path(Path::new("no-such-dir/x.db")).unwrap_err();
        assert!(e.to_string().contains("`no-such-dir`"), "{e}");
    }

    /// Another program holding SQLite's write lock: a write waits `busy_timeout`, then fails as
    /// a conflict; an operation timeout shorter than that fails it as a timeout. Both transient.
    #[tokio::test]
    async fn a_held_write_lock_is_a_conflict_or_a_timeout() {
        use crate::store::{ConfigStore, NodeInfo, NodeStore, Store};
        use sqlx::{Connection, Executor};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("busy.db");
        let node = NodeInfo::new("n", "h", 1, "v", vec![]);
        {
            let store = SqliteStoreBuilder::new(&path).connect().unwrap();
            store.migrate().await.unwrap();
        }
        let mut other =
            sqlx::SqliteConnection::connect_with(&SqliteConnectOptions::new().filename(&path))
                .await
                .unwrap();
        other.execute("BEGIN IMMEDIATE").await.unwrap();

        let store = SqliteStoreBuilder::new(&path)
            .busy_timeout(Duration::from_millis(50))
            .connect()
            .unwrap();
        let error = store.register_node(&node).await.unwrap_err();
        assert!(matches!(error, StoreError::Conflict { .. }), "{error:?}");
        assert!(error.is_transient());
        drop(store);

        let store = SqliteStoreBuilder::new(&path)
            .operation_timeout(Duration::from_millis(100))
            .connect()
            .unwrap();
        let error = store.register_node(&node).await.unwrap_err();
        assert!(
            matches!(
                error,
                StoreError::Timeout {
                    operation: "register_node",
                    ..
                }
            ),
            "{error:?}"
        );
        // Reads do not wait for the writer (WAL).
        assert!(store.load_tasks().await.unwrap().1.is_empty());

        other.execute("ROLLBACK").await.unwrap();
        // Once the writer is gone the write goes through; with the default timeout, as 100 ms
        // was too little for a busy machine (CI, building in parallel).
        drop(store);
        let store = SqliteStoreBuilder::new(&path).connect().unwrap();
        store.register_node(&node).await.unwrap();
    }

    #[tokio::test]
    async fn a_second_store_on_the_same_file_is_refused_naming_the_holder() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("jobs.db");
        let first = SqliteStoreBuilder::new(&path).connect().unwrap();
        let error = SqliteStoreBuilder::new(&path).connect().unwrap_err();
        let StoreError::Setup { message } = &error else {
            panic!("not a setup error: {error}");
        };
        let pid = std::process::id().to_string();
        let host = gethostname::gethostname().to_string_lossy().into_owned();
        assert!(message.contains(&format!("pid {pid}")), "{message}");
        assert!(message.contains(&host), "{message}");
        assert!(message.contains("started 20"), "{message}");
        assert!(message.contains("postgres://"), "{message}");
        assert!(message.contains("jobs.db"), "{message}");
        assert!(
            message.contains("already open in this process"),
            "{message}"
        );
        // A clone shares the lock; only dropping the last one gives the file up.
        let clone = first.clone();
        drop(first);
        assert!(SqliteStoreBuilder::new(&path).connect().is_err());
        drop(clone);
        let again = SqliteStoreBuilder::new(&path).connect().unwrap();
        assert_eq!(
            again.lock_path(),
            dir.path().canonicalize().unwrap().join("jobs.db.lock")
        );
    }
}
