//! [`SqliteStoreBuilder`]: a store's settings, each with its documented default, read from a
//! `sqlite://` URL or set one by one, and `connect`, which resolves the database's path, takes
//! the file's lock and opens the pool.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};

use super::lockfile::{self, ProcessLock};
use super::{
    DEFAULT_BUSY_TIMEOUT, DEFAULT_MAX_CONNECTIONS, DEFAULT_OPERATION_TIMEOUT, Inner, SqliteStore,
};
use crate::store::{StoreError, StoreResult};

/// What a commit survives (SQLite's `synchronous` setting, in WAL mode).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Synchronous {
    /// `NORMAL`: a commit survives a crash of the process; the last commits before a power loss
    /// or OS crash may be rolled back. The default.
    #[default]
    Normal,
    /// `FULL`: every commit is synced to disk before it returns, and survives power loss.
    Full,
}

impl Synchronous {
    fn to_sqlx(self) -> SqliteSynchronous {
        match self {
            Synchronous::Normal => SqliteSynchronous::Normal,
            Synchronous::Full => SqliteSynchronous::Full,
        }
    }
}

/// Builds a [`SqliteStore`]; every setting has a documented default.
///
/// ```
/// use std::time::Duration;
/// use scheduler::store::sqlite::{SqliteStoreBuilder, Synchronous};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), scheduler::store::StoreError> {
/// # let dir = std::env::temp_dir().join(format!("scheduler-doc-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir).unwrap();
/// # let url = format!("sqlite://{}/scheduler.db", dir.display());
/// let store = SqliteStoreBuilder::from_url(&url)? // e.g. "sqlite://scheduler.db"
///     .synchronous(Synchronous::Full)
///     .operation_timeout(Duration::from_secs(5))
///     .connect()?;
/// assert!(store.path().ends_with("scheduler.db"));
/// # drop(store); std::fs::remove_dir_all(&dir).unwrap();
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct SqliteStoreBuilder {
    pub(super) path: PathBuf,
    pub(super) synchronous: Synchronous,
    pub(super) busy_timeout: Duration,
    pub(super) operation_timeout: Duration,
    pub(super) max_connections: u32,
    pub(super) operator: bool,
    pub(super) clock: crate::clock::Clock,
}

impl SqliteStoreBuilder {
    /// A store on the database file at `path` (created if missing; its directory must exist).
    /// A relative path is taken from the current directory when the store connects.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            synchronous: Synchronous::default(),
            busy_timeout: DEFAULT_BUSY_TIMEOUT,
            operation_timeout: DEFAULT_OPERATION_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            operator: false,
            clock: crate::clock::Clock::System,
        }
    }

    /// A builder for the file named by a `sqlite://PATH` URL; see [`from_url`].
    pub fn from_url(url: &str) -> StoreResult<Self> {
        from_url(url)
    }

    /// What a commit survives. Default [`Synchronous::Normal`] (a process crash).
    pub fn synchronous(mut self, synchronous: Synchronous) -> Self {
        self.synchronous = synchronous;
        self
    }

    /// The longest a statement waits for SQLite's write lock while another program holds it.
    /// Default 5 s; then the operation fails with [`StoreError::Conflict`].
    pub fn busy_timeout(mut self, timeout: Duration) -> Self {
        self.busy_timeout = timeout;
        self
    }

    /// The longest one operation may take, its waits for a writer's turn and a connection
    /// included. Default 10 s; then it fails with [`StoreError::Timeout`].
    pub fn operation_timeout(mut self, timeout: Duration) -> Self {
        self.operation_timeout = timeout;
        self
    }

    /// Connections in the pool. Default 4; at least 1 (writers use one at a time).
    pub fn max_connections(mut self, n: u32) -> Self {
        self.max_connections = n;
        self
    }

    /// Operator mode: a store for reading and steering the database beside the node that owns
    /// it, as the `scheduler` operator commands do (`status`, `trigger`, `pause`, ...).
    ///
    /// It does not take the lock file (SQLite lets several processes share one WAL file; the
    /// lock only keeps a second *node* off it), never creates the file, and refuses
    /// [`Store::migrate`](crate::store::Store::migrate) and
    /// [`NodeStore::register_node`](crate::store::NodeStore::register_node) with a
    /// [`StoreError::Setup`]. A write waits up to the
    /// [`busy_timeout`](Self::busy_timeout) for the node's write lock. The node sees what it
    /// commits (a manual run, a pause, a resume) within about a quarter of a second: its change
    /// listener watches SQLite's `PRAGMA data_version`, which changes when another connection
    /// commits.
    ///
    /// ```
    /// use scheduler::store::sqlite::SqliteStoreBuilder;
    /// use scheduler::store::{HistoryStore, Store};
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), scheduler::store::StoreError> {
    /// # let dir = std::env::temp_dir().join(format!("scheduler-doc-op-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir).unwrap();
    /// let path = dir.join("jobs.db");
    /// let node_store = SqliteStoreBuilder::new(&path).connect()?;
    /// node_store.migrate().await?;
    /// // A second node is refused, an operator is not.
    /// assert!(SqliteStoreBuilder::new(&path).connect().is_err());
    /// let operator = SqliteStoreBuilder::new(&path).operator().connect()?;
    /// assert!(operator.task_states(None).await?.is_empty());
    /// assert!(operator.migrate().await.is_err());
    /// # drop((node_store, operator)); std::fs::remove_dir_all(&dir).unwrap();
    /// # Ok(()) }
    /// ```
    pub fn operator(mut self) -> Self {
        self.operator = true;
        self
    }

    /// Not public API: the store takes "now" from `clock` (see `scheduler::testing::clock`).
    #[doc(hidden)]
    pub fn test_clock(mut self, clock: crate::clock::TestClock) -> Self {
        self.clock = crate::clock::Clock::Test(clock);
        self
    }

    /// Validates the settings, takes the lock file (refused when another store holds it) and
    /// creates the pool, inside a Tokio runtime (the pool's upkeep runs on it).
    ///
    /// Synchronous, like [`PgStoreBuilder::connect_lazy`](crate::store::postgres::PgStoreBuilder::connect_lazy),
    /// so a composition root builds either store the same way: taking the lock is a quick local
    /// file operation, and a refusal surfaces here, before the node starts anything. The database
    /// file itself is opened (and created) by the first operation, normally
    /// [`Store::migrate`](crate::store::Store::migrate).
    pub fn connect(self) -> StoreResult<SqliteStore> {
        if tokio::runtime::Handle::try_current().is_err() {
            return Err(StoreError::setup(
                "the SQLite store must be created inside a Tokio runtime (in `#[tokio::main]`)",
            ));
        }
        if self.max_connections < 1 {
            return Err(StoreError::setup("max_connections must be at least 1"));
        }
        for (name, d) in [
            ("busy_timeout", self.busy_timeout),
            ("operation_timeout", self.operation_timeout),
        ] {
            if d < Duration::from_millis(10) {
                return Err(StoreError::setup(format!("{name} must be at least 10ms")));
            }
        }
        let path = absolute_database_path(&self.path)?;
        let holder = if self.operator {
            if !path.is_file() {
                return Err(StoreError::setup(format!(
                    "no SQLite database at `{}` (an operator store never creates one)",
                    path.display()
                )));
            }
            None
        } else {
            Some(ProcessLock::acquire(&path)?)
        };
        let options = SqliteConnectOptions::new()
            .filename(&path)
            .create_if_missing(!self.operator)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(self.synchronous.to_sqlx())
            .busy_timeout(self.busy_timeout);
        let pool = SqlitePoolOptions::new()
            .max_connections(self.max_connections)
            // The operation's own deadline bounds the wait; this only backs it up.
            .acquire_timeout(self.operation_timeout)
            .idle_timeout(Some(Duration::from_secs(600)))
            .test_before_acquire(false)
            .connect_lazy_with(options.clone());
        let (changes, _) = tokio::sync::watch::channel(0u64);
        let (cancels, _) = tokio::sync::watch::channel(0u64);
        Ok(SqliteStore {
            inner: Arc::new(Inner {
                pool,
                options,
                description: format!("sqlite {}", path.display()),
                lock_path: lockfile::lock_path(&path),
                path,
                operator: self.operator,
                own_audits: std::sync::atomic::AtomicU64::new(0),
                op_timeout: self.operation_timeout,
                clock: self.clock,
                writer: tokio::sync::Mutex::new(()),
                changes,
                cancels,
                _holder: holder,
            }),
        })
    }
}

/// A builder for the database named by a `sqlite://PATH` URL.
///
/// Everything after `sqlite://` is the path, percent-decoded: `sqlite://scheduler.db` and
/// `sqlite://./data/x.db` are relative to the current directory, `sqlite:///var/lib/x.db` is
/// absolute. One query option is understood, `synchronous=normal|full` (see [`Synchronous`]);
/// any other option, another scheme, an in-memory database or a URL without a path is refused
/// with a [`StoreError::Setup`] saying what to write instead.
///
/// ```
/// use scheduler::store::sqlite::from_url;
///
/// assert!(from_url("sqlite://scheduler.db").is_ok());
/// assert!(from_url("sqlite:///var/lib/scheduler/jobs.db?synchronous=full").is_ok());
/// assert!(from_url("sqlite://jobs.db?mode=ro").is_err());
/// assert!(from_url("postgres://app@db/app").is_err());
/// ```
pub fn from_url(url: &str) -> StoreResult<SqliteStoreBuilder> {
    const SCHEME: &str = "sqlite://";
    const FORM: &str =
        "write `sqlite://PATH`, e.g. `sqlite://scheduler.db` or `sqlite:///var/lib/scheduler.db`";
    let shown = crate::redact::redact_url(url);
    let rest = match url.get(..SCHEME.len()) {
        Some(head) if head.eq_ignore_ascii_case(SCHEME) => &url[SCHEME.len()..],
        _ if url
            .get(..7)
            .is_some_and(|head| head.eq_ignore_ascii_case("sqlite:")) =>
        {
            return Err(StoreError::setup(format!(
                "`{shown}` is not a SQLite URL the scheduler understands: {FORM}"
            )));
        }
        _ => {
            return Err(StoreError::setup(format!(
                "`{shown}` is not a SQLite URL: {FORM} (or `postgres://...` for PostgreSQL)"
            )));
        }
    };
    if rest.contains('#') {
        return Err(StoreError::setup(format!(
            "`{shown}`: a SQLite URL has no `#` fragment; {FORM} (percent-encode a `#` in the file name as `%23`)"
        )));
    }
    let (raw_path, query) = match rest.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (rest, None),
    };
    let path = percent_encoding::percent_decode_str(raw_path)
        .decode_utf8()
        .map_err(|_| {
            StoreError::setup(format!(
                "`{shown}`: the path is not valid UTF-8 once percent-decoded"
            ))
        })?
        .into_owned();
    if path.is_empty() {
        return Err(StoreError::setup(format!(
            "`{shown}` names no database file: {FORM}"
        )));
    }
    if path == ":memory:" {
        return Err(StoreError::setup(format!(
            "`{shown}`: an in-memory database would lose every schedule and run record when the process exits; name a file: {FORM}"
        )));
    }
    let mut builder = SqliteStoreBuilder::new(path);
    for pair in query.into_iter().flat_map(|q| q.split('&')) {
        if pair.is_empty() {
            continue;
        }
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        match key {
            "synchronous" => {
                builder.synchronous = match value.to_ascii_lowercase().as_str() {
                    "normal" => Synchronous::Normal,
                    "full" => Synchronous::Full,
                    _ => {
                        return Err(StoreError::setup(format!(
                            "`{shown}`: `synchronous` must be `normal` or `full`, not `{value}`"
                        )));
                    }
                }
            }
            _ => {
                return Err(StoreError::setup(format!(
                    "`{shown}`: unknown option `{key}`; the SQLite store understands only `synchronous=normal|full`"
                )));
            }
        }
    }
    Ok(builder)
}

/// The database path made absolute (relative to the current directory), its directory resolved.
/// A directory that does not exist is a setup error naming it: the store creates the file, never
/// directories (a typo in a path should not grow a tree somewhere unexpected).
pub(super) fn absolute_database_path(path: &Path) -> StoreResult<PathBuf> {
    let Some(file_name) = path.file_name() else {
        return Err(StoreError::setup(format!(
            "`{}` does not name a database file",
            path.display()
        )));
    };
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let dir = std::fs::canonicalize(dir).map_err(|e| {
        let why = if e.kind() == std::io::ErrorKind::NotFound {
            "does not exist; create it first".to_owned()
        } else {
            format!("cannot be used: {e}")
        };
        StoreError::setup(format!(
            "the directory `{}` of the SQLite database `{}` {why}",
            dir.display(),
            path.display()
        ))
    })?;
    if !dir.is_dir() {
        return Err(StoreError::setup(format!(
            "`{}` (the directory of the SQLite database `{}`) is not a directory",
            dir.display(),
            path.display()
        )));
    }
    let path = dir.join(file_name);
    if path.is_dir() {
        return Err(StoreError::setup(format!(
            "`{}` is a directory, not a database file",
            path.display()
        )));
    }
    // An existing file is named by its real path, so two symbolic links to one database share
    // one lock file.
    Ok(std::fs::canonicalize(&path).unwrap_or(path))
}
