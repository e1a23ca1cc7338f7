//! A private, throwaway PostgreSQL cluster for fault-injection tests.
//!
//! Same rules as `scripts/lib/pg.sh`: initdb into a fresh temp dir, listen on
//! a free 127.0.0.1 port with the unix socket in the temp dir, `fsync=off`,
//! trust auth, superuser `postgres`. PostgreSQL refuses to run as root, so
//! when the tests run as root the server runs as the `postgres` system user
//! (or `SCHEDULER_PG_USER`), and the temp dir belongs to that user.
//!
//! This module owns only its own temp dir and the server it started there;
//! it never touches the suite's shared server.

use std::fmt;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::Duration;

use tokio::process::Command;

mod crash;
mod standby;

/// Seconds `pg_ctl` waits for a start or stop to complete.
const PG_CTL_WAIT_SECS: &str = "60";

/// Attempts at finding a free port before giving up (ports are picked by
/// binding port 0, then released, so another process can take one first).
const PORT_ATTEMPTS: usize = 5;

/// A `scheduler-pg.*` dir with no running server and untouched for this long
/// is a leftover of a killed test process, removed by the next start.
const ABANDONED_DIR_AGE: Duration = Duration::from_secs(60 * 60);

/// Why a [`TempCluster`] could not be started, stopped or restarted.
#[derive(Debug)]
#[non_exhaustive]
pub enum ClusterError {
    /// No directory holding `initdb`, `pg_ctl` and `postgres` was found.
    NotInstalled,
    /// Running as root, with no unprivileged user to run the server as.
    NoServerUser {
        /// The user looked for (`SCHEDULER_PG_USER`, default `postgres`).
        user: String,
    },
    /// A filesystem or process-spawning operation failed.
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A PostgreSQL tool ran and failed.
    Command {
        /// What was being done.
        context: String,
        /// The tool's output and the tail of the server log.
        detail: String,
    },
}

impl fmt::Display for ClusterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClusterError::NotInstalled => write!(
                f,
                "no PostgreSQL server binaries (initdb, pg_ctl, postgres) found; install them with \
                 `apt-get install postgresql` (or set SCHEDULER_PG_BINDIR to their directory)"
            ),
            ClusterError::NoServerUser { user } => write!(
                f,
                "running as root, and PostgreSQL refuses to run as root, but there is no `{user}` \
                 system user to run it as; create one (`useradd --system {user}`), set \
                 SCHEDULER_PG_USER to another unprivileged user, or run the tests as a non-root user"
            ),
            ClusterError::Io { context, source } => write!(f, "{context}: {source}"),
            ClusterError::Command { context, detail } => write!(f, "{context}:\n{detail}"),
        }
    }
}

impl std::error::Error for ClusterError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ClusterError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// Result of [`TempCluster`] operations.
pub type Result<T, E = ClusterError> = std::result::Result<T, E>;

fn io_err(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> ClusterError {
    let context = context.into();
    move |source| ClusterError::Io { context, source }
}

/// A private PostgreSQL cluster that a test may stop, start and restart.
///
/// Dropping it stops the server (immediate shutdown) and removes its dir.
///
/// ```no_run
/// # async fn example() -> Result<(), Box<dyn std::error::Error>> {
/// use scheduler_tests::TempCluster;
///
/// let cluster = TempCluster::start().await?;
/// let pool = sqlx::PgPool::connect(&cluster.url()).await?;
/// cluster.stop().await?;          // the database goes away under the pool
/// cluster.start_again().await?;   // and comes back, same port and data
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct TempCluster {
    root: PathBuf,
    data: PathBuf,
    bindir: PathBuf,
    port: u16,
    /// uid/gid to run the server tools as (Some when we are root).
    run_as: Option<(u32, u32)>,
}

impl TempCluster {
    /// initdb a new cluster in a temp dir and start it on a free 127.0.0.1
    /// port. Takes about a second.
    ///
    /// Errors with [`ClusterError::NotInstalled`] when PostgreSQL's server
    /// binaries are missing; turn it into a test failure with `.expect(..)`.
    pub async fn start() -> Result<TempCluster> {
        Self::start_with(&[]).await
    }

    /// Like [`TempCluster::start`], with extra `postgresql.conf` settings,
    /// e.g. `&[("shared_preload_libraries", "pg_stat_statements")]`.
    ///
    /// # Panics
    ///
    /// In a SQLite-only run, by [`require_postgres`](crate::require_postgres).
    pub async fn start_with(settings: &[(&str, &str)]) -> Result<TempCluster> {
        crate::require_postgres("a PostgreSQL cluster of its own (TempCluster)");
        let bindir = find_server_bindir().ok_or(ClusterError::NotInstalled)?;
        let run_as = server_user()?;

        // As root the server user must reach the dir: stay in /tmp rather than
        // a TMPDIR that may sit under /root. Short paths also keep the unix
        // socket path under its ~107-byte limit.
        let base = if run_as.is_some() {
            PathBuf::from("/tmp")
        } else {
            std::env::temp_dir()
        };
        sweep_abandoned_dirs(&base);
        let root = base.join(format!(
            "scheduler-pg.{}",
            &uuid::Uuid::new_v4().simple().to_string()[..12]
        ));
        std::fs::create_dir(&root).map_err(io_err(format!("cannot create {}", root.display())))?;
        let mut cluster = TempCluster {
            data: root.join("data"),
            root,
            bindir,
            port: 0,
            run_as,
        };
        // From here on, Drop cleans up whatever we made.
        cluster.init(settings).await?;
        Ok(cluster)
    }

    async fn init(&mut self, settings: &[(&str, &str)]) -> Result<()> {
        std::fs::set_permissions(&self.root, std::fs::Permissions::from_mode(0o700))
            .map_err(io_err("cannot chmod the cluster dir"))?;
        if let Some((uid, gid)) = self.run_as {
            std::os::unix::fs::chown(&self.root, Some(uid), Some(gid))
                .map_err(io_err("cannot chown the cluster dir to the server user"))?;
        }

        let data = self.data.to_string_lossy().into_owned();
        self.run(
            "initdb",
            &[
                "-D",
                &data,
                "-U",
                "postgres",
                "--auth=trust",
                "--encoding=UTF8",
                "--locale=C",
                "--no-sync",
            ],
            "initdb failed",
        )
        .await?;

        let mut conf = format!(
            "\n# scheduler TempCluster\n\
             listen_addresses = '127.0.0.1'\n\
             unix_socket_directories = '{}'\n\
             fsync = off\n\
             synchronous_commit = off\n\
             full_page_writes = off\n\
             max_connections = 100\n\
             log_min_messages = warning\n",
            conf_quote(&self.root.to_string_lossy())
        );
        for (name, value) in settings {
            conf.push_str(&format!("{name} = '{}'\n", conf_quote(value)));
        }
        self.append_conf(&conf)?;

        let mut last_error = None;
        for _ in 0..PORT_ATTEMPTS {
            self.port = free_port()?;
            self.append_conf(&format!("port = {}\n", self.port))?;
            match self.pg_ctl_start().await {
                Ok(()) => return Ok(()),
                Err(e) => last_error = Some(e),
            }
        }
        Err(last_error.expect("at least one attempt"))
    }

    /// A URL for the `postgres` database as superuser `postgres` over TCP.
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// The TCP port the server listens on (kept across restarts).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The cluster's data directory.
    pub fn data_dir(&self) -> &Path {
        &self.data
    }

    /// The server's log so far (for failure messages).
    pub fn server_log(&self) -> String {
        std::fs::read_to_string(self.root.join("server.log")).unwrap_or_default()
    }

    /// Writes `contents` to `name` in the cluster's own dir (mode 0600, owned by the server
    /// user), for files the server reads: TLS certificates and keys, a CA bundle.
    pub fn write_file(&self, name: &str, contents: &[u8]) -> Result<PathBuf> {
        use std::io::Write;
        let path = self.root.join(name);
        let context = format!("cannot write {}", path.display());
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&path)
            .map_err(io_err(context.clone()))?;
        file.write_all(contents).map_err(io_err(context))?;
        if let Some((uid, gid)) = self.run_as {
            std::os::unix::fs::chown(&path, Some(uid), Some(gid))
                .map_err(io_err(format!("cannot chown {}", path.display())))?;
        }
        Ok(path)
    }

    /// Stops the server, appends `settings` to `postgresql.conf`, replaces `pg_hba.conf` with
    /// `hba` when given, and starts it again (same port, same data): for settings a test needs
    /// in force before its first connection, such as `ssl = on` or a `hostssl`-only hba.
    pub async fn reconfigure(&self, settings: &[(&str, &str)], hba: Option<&str>) -> Result<()> {
        self.stop().await?;
        let mut conf = String::new();
        for (name, value) in settings {
            conf.push_str(&format!("{name} = '{}'\n", conf_quote(value)));
        }
        self.append_conf(&conf)?;
        if let Some(hba) = hba {
            let path = self.data.join("pg_hba.conf");
            std::fs::write(&path, hba)
                .map_err(io_err(format!("cannot write {}", path.display())))?;
        }
        self.start_again().await
    }

    /// Stop the server with a fast shutdown: open connections are killed,
    /// in-flight transactions roll back. Waits until it is down.
    pub async fn stop(&self) -> Result<()> {
        let data = self.data.to_string_lossy().into_owned();
        self.run(
            "pg_ctl",
            &[
                "-D",
                &data,
                "-m",
                "fast",
                "-w",
                "-t",
                PG_CTL_WAIT_SECS,
                "stop",
            ],
            "pg_ctl stop failed",
        )
        .await
        .map(drop)
    }

    /// Start the server again after [`TempCluster::stop`]: same port, same
    /// data. Waits until it accepts connections.
    pub async fn start_again(&self) -> Result<()> {
        self.pg_ctl_start().await
    }

    /// [`TempCluster::stop`] then [`TempCluster::start_again`].
    pub async fn restart(&self) -> Result<()> {
        self.stop().await?;
        self.start_again().await
    }

    async fn pg_ctl_start(&self) -> Result<()> {
        let data = self.data.to_string_lossy().into_owned();
        let log = self.root.join("server.log").to_string_lossy().into_owned();
        self.run(
            "pg_ctl",
            &[
                "-D",
                &data,
                "-l",
                &log,
                "-w",
                "-t",
                PG_CTL_WAIT_SECS,
                "start",
            ],
            "pg_ctl start failed",
        )
        .await
        .map(drop)
    }

    /// Run a server tool (as the server user when root), failing with its
    /// output and the server log's tail.
    async fn run(&self, tool: &str, args: &[&str], context: &str) -> Result<Output> {
        let mut cmd = Command::new(self.bindir.join(tool));
        cmd.args(args)
            .current_dir(&self.root)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some((uid, gid)) = self.run_as {
            // std drops supplementary groups when switching from root.
            cmd.uid(uid).gid(gid);
        }
        let output = cmd
            .output()
            .await
            .map_err(io_err(format!("cannot run {tool}")))?;
        if output.status.success() {
            return Ok(output);
        }
        let log = self.server_log();
        let tail: Vec<&str> = log.lines().rev().take(15).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        Err(ClusterError::Command {
            context: format!("{context} ({})", output.status),
            detail: format!(
                "{}{}--- server log (tail) ---\n{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr),
                tail.join("\n")
            ),
        })
    }

    fn append_conf(&self, text: &str) -> Result<()> {
        self.append_to("postgresql.conf", text)
    }

    /// Appends `text` to the file `name` of the data dir.
    fn append_to(&self, name: &str, text: &str) -> Result<()> {
        use std::io::Write;
        // The file belongs to the server user; root may append to it anyway,
        // and a non-root user is that user.
        let path = self.data.join(name);
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .and_then(|mut f| f.write_all(text.as_bytes()))
            .map_err(io_err(format!("cannot write {}", path.display())))
    }
}

impl Drop for TempCluster {
    fn drop(&mut self) {
        let pid_file = self.data.join("postmaster.pid");
        if pid_file.exists() {
            let mut cmd = std::process::Command::new(self.bindir.join("pg_ctl"));
            cmd.arg("-D")
                .arg(&self.data)
                .args(["-m", "immediate", "-w", "-t", "30", "stop"])
                .current_dir(&self.root)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            if let Some((uid, gid)) = self.run_as {
                std::os::unix::process::CommandExt::uid(&mut cmd, uid);
                std::os::unix::process::CommandExt::gid(&mut cmd, gid);
            }
            let stopped = cmd.status().is_ok_and(|s| s.success());
            if !stopped {
                kill_postmaster(&pid_file);
            }
        }
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// Last resort when pg_ctl could not stop the server: SIGKILL the
/// postmaster named in postmaster.pid (its children exit when it dies).
fn kill_postmaster(pid_file: &Path) {
    let pid = std::fs::read_to_string(pid_file)
        .ok()
        .and_then(|s| s.lines().next().and_then(|l| l.trim().parse::<i32>().ok()));
    if let Some(pid) = pid.filter(|p| *p > 1) {
        // SAFETY: kill(2) has no memory-safety preconditions.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Remove `scheduler-pg.*` dirs left by killed test processes (Drop never
/// ran): no `postmaster.pid` (the server is down) and untouched for
/// [`ABANDONED_DIR_AGE`], so a live cluster, or one a test stopped a moment
/// ago, is never removed. Best effort.
fn sweep_abandoned_dirs(base: &Path) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let ours = entry
            .file_name()
            .to_str()
            .is_some_and(|n| n.starts_with("scheduler-pg."));
        let idle = entry
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age > ABANDONED_DIR_AGE);
        if ours && idle && !path.join("data").join("postmaster.pid").exists() {
            let _ = std::fs::remove_dir_all(&path);
        }
    }
}

/// Escape a value for a single-quoted postgresql.conf string.
fn conf_quote(value: &str) -> String {
    value.replace('\\', "\\\\").replace('\'', "''")
}

/// A TCP port on 127.0.0.1 that was free a moment ago.
pub(crate) fn free_port() -> Result<u16> {
    let listener = std::net::TcpListener::bind(("127.0.0.1", 0))
        .map_err(io_err("cannot bind 127.0.0.1:0 to find a free port"))?;
    let port = listener
        .local_addr()
        .map_err(io_err("cannot read the bound port"))?
        .port();
    Ok(port)
}

/// When root: the (uid, gid) of the unprivileged user to run the server as.
pub(crate) fn server_user() -> Result<Option<(u32, u32)>> {
    // SAFETY: geteuid(2) cannot fail and has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Ok(None);
    }
    let user = std::env::var("SCHEDULER_PG_USER").unwrap_or_else(|_| "postgres".to_owned());
    let id = |flag: &str| -> Option<u32> {
        let out = std::process::Command::new("id")
            .args([flag, &user])
            .stderr(Stdio::null())
            .output()
            .ok()?;
        if !out.status.success() {
            return None;
        }
        String::from_utf8_lossy(&out.stdout).trim().parse().ok()
    };
    match (id("-u"), id("-g")) {
        (Some(uid), Some(gid)) if uid != 0 => Ok(Some((uid, gid))),
        _ => Err(ClusterError::NoServerUser { user }),
    }
}

/// The directory holding initdb, pg_ctl and postgres: `SCHEDULER_PG_BINDIR`,
/// `pg_config --bindir`, the highest `/usr/lib/postgresql/*/bin`, other
/// common layouts, then `PATH`.
fn find_server_bindir() -> Option<PathBuf> {
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(dir) = std::env::var_os("SCHEDULER_PG_BINDIR") {
        candidates.push(dir.into());
    }
    if let Ok(out) = std::process::Command::new("pg_config")
        .arg("--bindir")
        .stderr(Stdio::null())
        .output()
        && out.status.success()
    {
        candidates.push(String::from_utf8_lossy(&out.stdout).trim().into());
    }
    for parent in ["/usr/lib/postgresql", "/usr"] {
        let mut versioned: Vec<(u32, PathBuf)> = std::fs::read_dir(parent)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|entry| {
                let name = entry.file_name().to_string_lossy().into_owned();
                let version = if parent == "/usr" {
                    name.strip_prefix("pgsql-")?.to_owned()
                } else {
                    name
                };
                let major = version.split('.').next()?.parse().ok()?;
                Some((major, entry.path().join("bin")))
            })
            .collect();
        versioned.sort_by_key(|(major, _)| std::cmp::Reverse(*major));
        candidates.extend(versioned.into_iter().map(|(_, dir)| dir));
    }
    candidates.push("/usr/local/pgsql/bin".into());
    if let Some(path) = std::env::var_os("PATH") {
        candidates.extend(std::env::split_paths(&path));
    }
    candidates.into_iter().find(|dir| {
        ["initdb", "pg_ctl", "postgres"]
            .iter()
            .all(|t| dir.join(t).is_file())
    })
}

#[cfg(test)]
mod unit {
    use super::conf_quote;

    #[test]
    fn conf_values_are_quoted() {
        assert_eq!(conf_quote("it's"), "it''s");
        assert_eq!(conf_quote(r"a\b"), r"a\\b");
    }
}
