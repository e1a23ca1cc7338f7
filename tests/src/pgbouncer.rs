//! A private PgBouncer in transaction mode in front of a PostgreSQL server, for tests of the
//! store through a pooler.
//!
//! Debian's `pgbouncer` (1.18: no prepared statements across transactions, no startup
//! parameters but the few it tracks), started on a free 127.0.0.1 port with its own config in a
//! temp dir, as the server user when the tests run as root (PgBouncer refuses root). It has
//! fewer server connections than its clients get, so server connections change hands between
//! clients as they would in production. `scripts/test` installs the package when missing.
//!
//! This module owns only its temp dir and the process it started.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::cluster::{ClusterError, Result, free_port, server_user};

/// Server connections PgBouncer opens per database and user: fewer than a test's clients.
const POOL_SIZE: u32 = 3;

/// A running PgBouncer; dropping it stops the process and removes its dir.
#[derive(Debug)]
pub struct PgBouncer {
    dir: PathBuf,
    port: u16,
    child: Child,
}

impl PgBouncer {
    /// Starts PgBouncer with `pool_mode = transaction` in front of the server on
    /// `127.0.0.1:upstream_port` (trust auth, user `postgres`), and waits until it accepts
    /// connections.
    pub fn start(upstream_port: u16) -> Result<PgBouncer> {
        let binary = find_pgbouncer().ok_or_else(|| ClusterError::Command {
            context: "no pgbouncer binary".into(),
            detail: "install it with `apt-get install pgbouncer` (scripts/test does when it runs \
                     as root)"
                .into(),
        })?;
        let run_as = server_user()?;
        let dir = std::env::temp_dir().join(format!(
            "scheduler-pgbouncer.{}",
            &uuid::Uuid::new_v4().simple().to_string()[..12]
        ));
        let dir = if run_as.is_some() {
            PathBuf::from("/tmp").join(dir.file_name().expect("a name"))
        } else {
            dir
        };
        let io = |context: String| move |source| ClusterError::Io { context, source };
        std::fs::create_dir(&dir).map_err(io(format!("cannot create {}", dir.display())))?;
        let port = free_port()?;
        let d = dir.display();
        std::fs::write(dir.join("userlist.txt"), "\"postgres\" \"\"\n")
            .map_err(io("cannot write userlist.txt".into()))?;
        let ini = format!(
            "[databases]\n\
             * = host=127.0.0.1 port={upstream_port}\n\
             [pgbouncer]\n\
             listen_addr = 127.0.0.1\n\
             listen_port = {port}\n\
             unix_socket_dir =\n\
             auth_type = trust\n\
             auth_file = {d}/userlist.txt\n\
             pool_mode = transaction\n\
             default_pool_size = {POOL_SIZE}\n\
             max_client_conn = 500\n\
             logfile = {d}/pgbouncer.log\n\
             pidfile = {d}/pgbouncer.pid\n\
             admin_users = postgres\n"
        );
        std::fs::write(dir.join("pgbouncer.ini"), ini)
            .map_err(io("cannot write pgbouncer.ini".into()))?;
        if let Some((uid, gid)) = run_as {
            for path in [
                dir.clone(),
                dir.join("userlist.txt"),
                dir.join("pgbouncer.ini"),
            ] {
                std::os::unix::fs::chown(&path, Some(uid), Some(gid))
                    .map_err(io(format!("cannot chown {}", path.display())))?;
            }
        }
        let mut command = Command::new(&binary);
        command
            .arg(dir.join("pgbouncer.ini"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if let Some((uid, gid)) = run_as {
            std::os::unix::process::CommandExt::uid(&mut command, uid);
            std::os::unix::process::CommandExt::gid(&mut command, gid);
        }
        let child = command
            .spawn()
            .map_err(io(format!("cannot run {}", binary.display())))?;
        let mut bouncer = PgBouncer { dir, port, child };
        bouncer.wait_until_listening()?;
        Ok(bouncer)
    }

    fn wait_until_listening(&mut self) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return Ok(());
            }
            let exited = self.child.try_wait().ok().flatten();
            if exited.is_some() || Instant::now() > deadline {
                return Err(ClusterError::Command {
                    context: format!("pgbouncer did not start ({exited:?})"),
                    detail: self.log(),
                });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The port PgBouncer listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// A URL for database `database` as user `postgres` through PgBouncer, with
    /// `pgbouncer=true`.
    pub fn url(&self, database: &str) -> String {
        format!(
            "postgres://postgres@127.0.0.1:{}/{database}?pgbouncer=true",
            self.port
        )
    }

    /// PgBouncer's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("pgbouncer.log")).unwrap_or_default()
    }

    /// The directory holding its config and log.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for PgBouncer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `pgbouncer` on `PATH`, else Debian's `/usr/sbin/pgbouncer`.
fn find_pgbouncer() -> Option<PathBuf> {
    let mut candidates: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join("pgbouncer"))
                .collect()
        })
        .unwrap_or_default();
    candidates.push("/usr/sbin/pgbouncer".into());
    candidates.into_iter().find(|p| p.is_file())
}
