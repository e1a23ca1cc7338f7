//! A pg_auto_failover formation on 127.0.0.1, the real HA engine of the `autofailover`
//! scenarios: a monitor and two Postgres nodes, each run by its own `pg_autoctl run` process (the
//! keeper and the Postgres server it starts), in one temp dir, as the server user when the harness
//! is root (`pg_autoctl` refuses root).
//!
//! It is built the way its documentation says a formation is built (`pg_autoctl create monitor`,
//! `pg_autoctl create postgres` twice, `pg_autoctl run` for each), with trust authentication and
//! no TLS (127.0.0.1 only), and the nodes reach it through the URL `pg_autoctl show uri` prints.
//! Its health-check timings are pg_auto_failover's defaults or shortened for the test
//! ([`Timings`]). The harness reads the formation's state and events from the monitor's tables.
//!
//! This module owns only its temp dir and the processes it started there. `Drop` stops them
//! (SIGINT, then SIGKILL of whatever is left) and removes the dir.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::str::FromStr;
use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::postgres::PgConnectOptions;
use sqlx::{ConnectOptions, Connection, PgConnection, Row};
use tokio::time::Instant;

use crate::harness::{HARNESS_APP, Result};

mod host;
mod timings;

use host::{RunAs, find_installation, free_port, server_user, service_pids, signal};
pub use timings::Timings;

/// The database the nodes create and use.
pub const DBNAME: &str = "app";
/// How long one `pg_autoctl create` may take (initdb, registration, a base backup).
const CREATE_DEADLINE: Duration = Duration::from_secs(180);
/// How long a stopped `pg_autoctl run` may take to stop its Postgres before it is killed.
const STOP_DEADLINE: Duration = Duration::from_secs(15);

/// A `pg_autoctl` service: the monitor or a node.
#[derive(Debug)]
struct Service {
    name: String,
    pgdata: PathBuf,
    port: u16,
    run: Option<Child>,
}

/// A node as the monitor sees it (`pgautofailover.node`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeState {
    /// `node1` or `node2`.
    pub name: String,
    /// Its Postgres port on 127.0.0.1.
    pub port: u16,
    /// The state its keeper last reported.
    pub reported: String,
    /// The state the monitor assigned.
    pub goal: String,
}

impl NodeState {
    /// Whether it takes writes as far as the monitor knows (reported and assigned a writable
    /// state).
    pub fn is_writable(&self) -> bool {
        let writable = |s: &str| matches!(s, "single" | "wait_primary" | "primary");
        writable(&self.reported) && writable(&self.goal)
    }
}

/// One row of the monitor's `pgautofailover.event`.
#[derive(Debug, Clone)]
pub struct Event {
    /// When the monitor wrote it (the database's clock: the same machine as the harness).
    pub at: DateTime<Utc>,
    /// The node it is about.
    pub node: String,
    /// Its reported state then.
    pub reported: String,
    /// Its assigned state then.
    pub goal: String,
    /// The monitor's words.
    pub description: String,
}

/// A running formation: a monitor and two nodes.
#[derive(Debug)]
pub struct Formation {
    root: PathBuf,
    log_dir: PathBuf,
    bindir: PathBuf,
    pg_autoctl: PathBuf,
    run_as: Option<RunAs>,
    user: String,
    monitor: Service,
    nodes: Vec<Service>,
    uri: String,
}

impl Formation {
    /// Builds and starts a formation with `timings`, its files and logs under `log_dir`.
    /// Takes about half a minute. `progress` hears what it is doing.
    pub async fn start(
        timings: &Timings,
        log_dir: &Path,
        progress: &mut dyn FnMut(String),
    ) -> Result<Formation> {
        let (bindir, pg_autoctl) = find_installation()?;
        let (run_as, user) = server_user()?;
        std::fs::create_dir_all(log_dir)?;
        // The server user must reach the dir (so /tmp, not a TMPDIR under /root); short paths
        // keep the Unix socket paths under their limit.
        let base = if run_as.is_some() {
            PathBuf::from("/tmp")
        } else {
            std::env::temp_dir()
        };
        let root = base.join(format!(
            "scheduler-paf.{}-{}",
            std::process::id(),
            Utc::now().timestamp_millis() % 1_000_000
        ));
        std::fs::create_dir(&root)?;
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o700))?;
        for d in ["xdg/config", "xdg/data", "xdg/run"] {
            std::fs::create_dir_all(root.join(d))?;
        }
        if let Some(u) = &run_as {
            for d in ["", "xdg", "xdg/config", "xdg/data", "xdg/run"] {
                std::os::unix::fs::chown(root.join(d), Some(u.uid), Some(u.gid))?;
            }
        }
        std::fs::set_permissions(root.join("xdg/run"), std::fs::Permissions::from_mode(0o700))?;
        let service = |name: &str| -> Result<Service> {
            Ok(Service {
                name: name.to_owned(),
                pgdata: root.join(name),
                port: free_port()?,
                run: None,
            })
        };
        let mut f = Formation {
            monitor: service("monitor")?,
            nodes: vec![service("node1")?, service("node2")?],
            root: root.clone(),
            log_dir: log_dir.to_owned(),
            bindir,
            pg_autoctl,
            run_as,
            user,
            uri: String::new(),
        };

        progress(format!(
            "pg_auto_failover: creating the monitor on 127.0.0.1:{} ({})",
            f.monitor.port,
            root.display()
        ));
        let pg_ctl = f.bindir.join("pg_ctl").to_string_lossy().into_owned();
        let monitor_pgdata = f.monitor.pgdata.to_string_lossy().into_owned();
        let monitor_port = f.monitor.port.to_string();
        f.pg_autoctl_ok(
            "monitor-create",
            &[
                "create",
                "monitor",
                "--pgdata",
                &monitor_pgdata,
                "--pgport",
                &monitor_port,
                "--pgctl",
                &pg_ctl,
                "--hostname",
                "127.0.0.1",
                "--auth",
                "trust",
                "--no-ssl",
            ],
        )
        .await?;
        f.pg_autoctl_ok(
            "monitor-config",
            &[
                "config",
                "set",
                "--pgdata",
                &monitor_pgdata,
                "postgresql.listen_addresses",
                "127.0.0.1",
            ],
        )
        .await?;
        f.spawn_run(None)?;
        let mut monitor = f.wait_for_monitor().await?;
        for (name, value) in timings.monitor_settings() {
            // Names and values are this module's constants; ALTER SYSTEM takes no parameters.
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "ALTER SYSTEM SET pgautofailover.{name} = {value}"
            )))
            .execute(&mut monitor)
            .await?;
        }
        sqlx::query("SELECT pg_reload_conf()")
            .execute(&mut monitor)
            .await?;
        monitor.close().await?;

        let monitor_url = format!(
            "postgres://autoctl_node@127.0.0.1:{}/pg_auto_failover?sslmode=disable",
            f.monitor.port
        );
        for i in 0..f.nodes.len() {
            let (name, pgdata, port) = {
                let n = &f.nodes[i];
                (
                    n.name.clone(),
                    n.pgdata.to_string_lossy().into_owned(),
                    n.port.to_string(),
                )
            };
            progress(format!(
                "pg_auto_failover: creating {name} on 127.0.0.1:{port}"
            ));
            let create = f.pg_autoctl(
                &format!("{name}-create"),
                &[
                    "create",
                    "postgres",
                    "--pgdata",
                    &pgdata,
                    "--pgport",
                    &port,
                    "--pgctl",
                    &pg_ctl,
                    "--hostname",
                    "127.0.0.1",
                    "--listen",
                    "127.0.0.1",
                    "--name",
                    &name,
                    "--auth",
                    "trust",
                    "--no-ssl",
                    "--monitor",
                    &monitor_url,
                    "--dbname",
                    DBNAME,
                ],
            )?;
            // A standby is built with pg_basebackup, which waits for a checkpoint of the
            // primary, spread over minutes by default: ask the first node for one meanwhile.
            f.wait_nudging(create, &format!("{name}-create")).await?;
            if let Some(s) = timings.network_partition_timeout_s {
                f.pg_autoctl_ok(
                    &format!("{name}-config"),
                    &[
                        "config",
                        "set",
                        "--pgdata",
                        &pgdata,
                        "timeout.network_partition_timeout",
                        &s.to_string(),
                    ],
                )
                .await?;
            }
            f.spawn_run(Some(i))?;
        }
        progress("pg_auto_failover: waiting for a primary and a secondary".to_owned());
        f.wait_healthy(Duration::from_secs(120)).await?;
        let out = f
            .pg_autoctl_ok(
                "show-uri",
                &[
                    "show",
                    "uri",
                    "--formation",
                    "default",
                    "--pgdata",
                    &monitor_pgdata,
                ],
            )
            .await?;
        f.uri = out
            .lines()
            .map(str::trim)
            .find(|l| l.starts_with("postgres://") || l.starts_with("postgresql://"))
            .ok_or_else(|| format!("`pg_autoctl show uri` printed no URL: {out}"))?
            .to_owned();
        progress(format!("pg_auto_failover: formation up, {}", f.uri));
        Ok(f)
    }

    /// The URL `pg_autoctl show uri --formation default` printed (no user in it: the nodes get
    /// [`Formation::user`] as `PGUSER`, as a deployment adds its credentials).
    pub fn uri(&self) -> &str {
        &self.uri
    }

    /// The formation's superuser (the user `pg_autoctl` runs as).
    pub fn user(&self) -> &str {
        &self.user
    }

    /// A URL of one node's database, for the harness.
    pub fn node_url(&self, port: u16) -> String {
        format!("postgres://{}@127.0.0.1:{port}/{DBNAME}", self.user)
    }

    /// A `pg_autoctl` command as the server user, with its own config and state dirs.
    fn command(&self, args: &[&str], log: &str) -> Result<std::process::Command> {
        let log_path = self.log_dir.join(format!("{log}.log"));
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)?;
        let mut cmd = std::process::Command::new(&self.pg_autoctl);
        let path = std::env::var_os("PATH").unwrap_or_default();
        let path = std::env::join_paths(
            std::iter::once(self.bindir.clone()).chain(std::env::split_paths(&path)),
        )?;
        cmd.args(args)
            .current_dir(&self.root)
            .env("PATH", path)
            .env("XDG_CONFIG_HOME", self.root.join("xdg/config"))
            .env("XDG_DATA_HOME", self.root.join("xdg/data"))
            .env("XDG_RUNTIME_DIR", self.root.join("xdg/run"))
            .env("HOME", &self.root)
            .env_remove("PGDATA")
            .env_remove("PG_CONFIG")
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out);
        if let Some(u) = &self.run_as {
            // std drops supplementary groups when switching from root.
            cmd.uid(u.uid).gid(u.gid);
        }
        // SAFETY: only async-signal-safe calls (setpgid, prctl) between fork and exec. The own
        // process group lets a crash take the keeper and its Postgres at once; the parent-death
        // signal stops the supervisor if the harness is killed.
        unsafe {
            cmd.pre_exec(|| {
                libc::setpgid(0, 0);
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
                Ok(())
            });
        }
        Ok(cmd)
    }

    /// Starts a `pg_autoctl` command that ends on its own; its output goes to `<log>.log`.
    fn pg_autoctl(&self, log: &str, args: &[&str]) -> Result<tokio::process::Child> {
        let cmd = self.command(args, log)?;
        Ok(tokio::process::Command::from(cmd).spawn()?)
    }

    /// Runs a `pg_autoctl` command to its end; returns its output (stdout and stderr), or fails
    /// with its tail.
    async fn pg_autoctl_ok(&self, log: &str, args: &[&str]) -> Result<String> {
        let log_path = self.log_dir.join(format!("{log}.log"));
        let before = std::fs::metadata(&log_path).map(|m| m.len()).unwrap_or(0);
        let mut child = self.pg_autoctl(log, args)?;
        let status = tokio::time::timeout(CREATE_DEADLINE, child.wait())
            .await
            .map_err(|_| format!("`pg_autoctl {}` took over 180 s", args.join(" ")))??;
        let text = std::fs::read(&log_path).unwrap_or_default();
        let out = String::from_utf8_lossy(&text[(before as usize).min(text.len())..]).into_owned();
        if status.success() {
            Ok(out)
        } else {
            Err(format!(
                "`pg_autoctl {}` failed ({status}):\n{}",
                args.join(" "),
                tail(&out, 20)
            )
            .into())
        }
    }

    /// Waits for a `pg_autoctl create postgres`, asking the first node for a CHECKPOINT every
    /// second meanwhile (a standby's base backup waits for one).
    async fn wait_nudging(&self, mut child: tokio::process::Child, log: &str) -> Result<()> {
        let until = Instant::now() + CREATE_DEADLINE;
        let first = self.node_url(self.nodes[0].port);
        loop {
            if let Some(status) = child.try_wait()? {
                if status.success() {
                    return Ok(());
                }
                let text = std::fs::read_to_string(self.log_dir.join(format!("{log}.log")))
                    .unwrap_or_default();
                return Err(format!(
                    "`pg_autoctl create postgres` failed ({status}):\n{}",
                    tail(&text, 20)
                )
                .into());
            }
            if Instant::now() > until {
                let _ = child.start_kill();
                return Err("`pg_autoctl create postgres` took over 180 s".into());
            }
            if let Ok(mut c) = connect(&first).await {
                let _ = sqlx::query("CHECKPOINT").execute(&mut c).await;
                let _ = c.close().await;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }

    /// Starts `pg_autoctl run` for the monitor (`None`) or node `i`.
    fn spawn_run(&mut self, node: Option<usize>) -> Result<u32> {
        let (name, pgdata) = {
            let s = self.service(node);
            (s.name.clone(), s.pgdata.to_string_lossy().into_owned())
        };
        let mut cmd = self.command(&["run", "--pgdata", &pgdata], &name)?;
        let child = cmd.spawn()?;
        let pid = child.id();
        self.service_mut(node).run = Some(child);
        Ok(pid)
    }

    fn service(&self, node: Option<usize>) -> &Service {
        node.map_or(&self.monitor, |i| &self.nodes[i])
    }

    fn service_mut(&mut self, node: Option<usize>) -> &mut Service {
        match node {
            None => &mut self.monitor,
            Some(i) => &mut self.nodes[i],
        }
    }

    async fn monitor_conn(&self) -> Result<PgConnection> {
        connect(&format!(
            "postgres://{}@127.0.0.1:{}/pg_auto_failover",
            self.user, self.monitor.port
        ))
        .await
    }

    async fn wait_for_monitor(&self) -> Result<PgConnection> {
        let until = Instant::now() + Duration::from_secs(60);
        loop {
            match self.monitor_conn().await {
                Ok(c) => return Ok(c),
                Err(e) if Instant::now() > until => {
                    return Err(format!("the monitor did not come up within 60 s: {e}").into());
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(250)).await,
            }
        }
    }

    /// The nodes as the monitor sees them, by node id.
    pub async fn nodes(&self) -> Result<Vec<NodeState>> {
        let mut c = self.monitor_conn().await?;
        let rows = sqlx::query(
            "SELECT nodename, nodeport, reportedstate::text AS reported, goalstate::text AS goal \
             FROM pgautofailover.node ORDER BY nodeid",
        )
        .fetch_all(&mut c)
        .await?;
        c.close().await?;
        rows.into_iter()
            .map(|r| {
                Ok(NodeState {
                    name: r.try_get("nodename")?,
                    port: u16::try_from(r.try_get::<i32, _>("nodeport")?)?,
                    reported: r.try_get("reported")?,
                    goal: r.try_get("goal")?,
                })
            })
            .collect()
    }

    /// The monitor's events after `since`, oldest first.
    pub async fn events_since(&self, since: DateTime<Utc>) -> Result<Vec<Event>> {
        let mut c = self.monitor_conn().await?;
        let rows = sqlx::query(
            "SELECT eventtime, nodename, reportedstate::text AS reported, \
             goalstate::text AS goal, coalesce(description, '') AS description \
             FROM pgautofailover.event WHERE eventtime > $1 ORDER BY eventid",
        )
        .bind(since)
        .fetch_all(&mut c)
        .await?;
        c.close().await?;
        rows.into_iter()
            .map(|r| {
                Ok(Event {
                    at: r.try_get("eventtime")?,
                    node: r.try_get("nodename")?,
                    reported: r.try_get("reported")?,
                    goal: r.try_get("goal")?,
                    description: r.try_get("description")?,
                })
            })
            .collect()
    }

    /// Waits (at most `timeout`) until the monitor shows what `pred` wants; returns that view.
    pub async fn wait_until(
        &self,
        what: &str,
        timeout: Duration,
        mut pred: impl FnMut(&[NodeState]) -> bool,
    ) -> Result<Vec<NodeState>> {
        let until = Instant::now() + timeout;
        let mut last;
        loop {
            match self.nodes().await {
                Ok(nodes) if pred(&nodes) => return Ok(nodes),
                Ok(nodes) => last = describe(&nodes),
                Err(e) => last = format!("(the monitor: {e})"),
            }
            if Instant::now() > until {
                return Err(format!(
                    "pg_auto_failover: {what} not reached within {} s; last seen: {last}",
                    timeout.as_secs()
                )
                .into());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits for one primary and one secondary, both settled.
    pub async fn wait_healthy(&self, timeout: Duration) -> Result<Vec<NodeState>> {
        self.wait_until("a primary and a secondary", timeout, |nodes| {
            let settled = |s: &str| nodes.iter().any(|n| n.reported == s && n.goal == s);
            nodes.len() == 2 && settled("primary") && settled("secondary")
        })
        .await
    }

    /// The index of the node the monitor has as the writable one.
    pub async fn primary(&self) -> Result<Option<usize>> {
        let nodes = self.nodes().await?;
        Ok(nodes
            .iter()
            .find(|n| n.is_writable())
            .and_then(|n| self.nodes.iter().position(|s| s.name == n.name)))
    }

    /// The name and port of node `i`.
    pub fn node(&self, i: usize) -> (&str, u16) {
        (&self.nodes[i].name, self.nodes[i].port)
    }

    /// `pg_autoctl perform failover` (it waits until the new primary is in place); returns its
    /// output.
    pub async fn perform_failover(&self) -> Result<String> {
        let pgdata = self.monitor.pgdata.to_string_lossy().into_owned();
        self.pg_autoctl_ok(
            "perform-failover",
            &[
                "perform",
                "failover",
                "--formation",
                "default",
                "--pgdata",
                &pgdata,
            ],
        )
        .await
    }

    /// kill -9 of node `i`'s keeper and server: every process of its `pg_autoctl run` (the
    /// supervisor, the keeper, the Postgres server) and every child of its Postgres server, in
    /// one pass. Returns how many processes were killed.
    pub fn crash(&mut self, i: usize) -> usize {
        let s = &mut self.nodes[i];
        let group = s.run.as_ref().map(Child::id);
        let pids = service_pids(group, &s.pgdata);
        for &pid in &pids {
            signal(pid, libc::SIGKILL);
        }
        if let Some(mut c) = s.run.take() {
            let _ = c.wait();
        }
        pids.len()
    }

    /// Stops a service: SIGINT to its `pg_autoctl run` (a fast shutdown of its Postgres), then
    /// SIGKILL of whatever is left after [`STOP_DEADLINE`].
    fn stop_service(s: &mut Service) {
        let group = s.run.as_ref().map(Child::id);
        if let Some(c) = s.run.as_mut() {
            signal(c.id(), libc::SIGINT);
            let until = std::time::Instant::now() + STOP_DEADLINE;
            while std::time::Instant::now() < until {
                if matches!(c.try_wait(), Ok(Some(_))) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        for pid in service_pids(group, &s.pgdata) {
            signal(pid, libc::SIGKILL);
        }
        if let Some(mut c) = s.run.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Formation {
    fn drop(&mut self) {
        for s in &mut self.nodes {
            Self::stop_service(s);
        }
        Self::stop_service(&mut self.monitor);
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// One line per node: `node1 127.0.0.1:p primary/primary`.
pub fn describe(nodes: &[NodeState]) -> String {
    nodes
        .iter()
        .map(|n| format!("{} :{} {}/{}", n.name, n.port, n.reported, n.goal))
        .collect::<Vec<_>>()
        .join(", ")
}

async fn connect(url: &str) -> Result<PgConnection> {
    let opts = PgConnectOptions::from_str(url)?.application_name(HARNESS_APP);
    Ok(tokio::time::timeout(Duration::from_secs(3), opts.connect())
        .await
        .map_err(|_| "connecting took over 3 s")??)
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
