//! The harness's machinery: node processes ([`Fleet`]), one scenario's world ([`Scenario`]: its
//! database (a private PostgreSQL cluster, or a pg_auto_failover [`Formation`]), a config file,
//! the record files, the timeline), and reading the engine's rows back once the scenario is over.
//!
//! Cleanup is by `Drop`, so it happens on every way out (an error, a panic unwinding, or the
//! orchestrator dropping the scenario's future on Ctrl-C): every node process still alive is
//! SIGKILLed and reaped, then the cluster is stopped and its directory removed. As a last resort
//! for a SIGKILL of the harness itself, every node gets `PR_SET_PDEATHSIG = SIGKILL` (the harness
//! spawns from its single runtime thread) and its own process group (so a terminal's Ctrl-C
//! reaches only the harness, which then cleans up in order).

use std::collections::{BTreeMap, HashMap};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::str::FromStr;
use std::time::Duration;

use chrono::{DateTime, Utc};
use scheduler_tests::TempCluster;
use sqlx::postgres::PgConnectOptions;
use sqlx::{ConnectOptions, Connection, PgConnection, Row};
use tokio::time::Instant;

use crate::formation::{Formation, Timings};
use crate::judge::{self, History, Params, RunRow, Segment, SkipRow, Verdict};
use crate::prng::Rng;
use crate::record::{Record, RecordTail};
use crate::timeline::{EventKind, ExitCause, Timeline, Victim, now_ms};

/// Errors of the harness itself (not findings).
pub type Error = Box<dyn std::error::Error>;
/// Result of harness operations.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Lock lifetime given to every node.
pub const LOCK_LIFETIME: Duration = Duration::from_secs(3);
/// Shutdown timeout given to every node.
pub const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a node may take to exit after SIGTERM: its shutdown timeout + 10 s.
pub const EXIT_DEADLINE: Duration = Duration::from_secs(20);
/// A node is running at least this long before the final stop.
const MIN_UPTIME_BEFORE_STOP: Duration = Duration::from_secs(2);
/// How often the harness looks at the node processes and record files while it waits.
const LOOK_EVERY: Duration = Duration::from_millis(50);
/// The harness's own `application_name`, so killing the scheduler's backends spares it.
pub const HARNESS_APP: &str = "faults-harness";

/// A node's wall clock shifted with libfaketime.
#[derive(Debug, Clone)]
pub struct Skew {
    /// `FAKETIME` value, e.g. `+5m`.
    pub faketime: String,
    /// The same offset in ms (ahead: positive).
    pub offset_ms: i64,
    /// The libfaketime shared object to preload.
    pub library: PathBuf,
}

/// One node of the fleet.
#[derive(Debug, Clone)]
pub struct NodeSpec {
    /// `SCHEDULER_NODE_ID` (kept across restarts).
    pub id: String,
    /// `SCHEDULER_CONFIG`: a file path or a URL.
    pub config: String,
    /// A skewed wall clock.
    pub skew: Option<Skew>,
    /// More environment for this node alone (its admin server's address).
    pub env: Vec<(String, String)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Up,
    Paused,
}

#[derive(Debug)]
struct Proc {
    child: Child,
    pid: u32,
    state: State,
    started: Instant,
}

#[derive(Debug)]
struct Slot {
    spec: NodeSpec,
    proc: Option<Proc>,
    incarnation: u32,
}

/// The node processes of one scenario.
#[derive(Debug)]
pub struct Fleet {
    bin: PathBuf,
    db_url: String,
    /// More environment for every node (the formation's `PGUSER`).
    extra_env: Vec<(String, String)>,
    log_dir: PathBuf,
    record_dir: PathBuf,
    slots: Vec<Slot>,
}

fn describe(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(c), _) => format!("exit {c}"),
        (None, Some(s)) => format!("signal {s}"),
        _ => status.to_string(),
    }
}

fn signal(pid: u32, sig: libc::c_int) {
    // SAFETY: kill(2) has no memory-safety preconditions; the pid is our own unreaped child, so
    // it cannot have been reused.
    unsafe {
        libc::kill(pid as libc::pid_t, sig);
    }
}

impl Fleet {
    fn new(bin: PathBuf, db_url: String, log_dir: PathBuf, record_dir: PathBuf) -> Self {
        Self {
            bin,
            db_url,
            extra_env: Vec::new(),
            log_dir,
            record_dir,
            slots: Vec::new(),
        }
    }

    /// Adds a node (not started).
    pub fn add(&mut self, spec: NodeSpec) -> usize {
        self.slots.push(Slot {
            spec,
            proc: None,
            incarnation: 0,
        });
        self.slots.len() - 1
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Whether the fleet has no nodes.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// The node's id.
    pub fn id(&self, i: usize) -> &str {
        &self.slots[i].spec.id
    }

    /// The node's current process id, if it runs.
    pub fn pid(&self, i: usize) -> Option<u32> {
        self.slots[i].proc.as_ref().map(|p| p.pid)
    }

    /// Nodes running and not paused.
    pub fn up(&self) -> Vec<usize> {
        (0..self.slots.len())
            .filter(|i| {
                self.slots[*i]
                    .proc
                    .as_ref()
                    .is_some_and(|p| p.state == State::Up)
            })
            .collect()
    }

    /// Nodes with no process (never started, killed, exited).
    pub fn down(&self) -> Vec<usize> {
        (0..self.slots.len())
            .filter(|i| self.slots[*i].proc.is_none())
            .collect()
    }

    /// How long the most recently started running node has been running.
    pub fn youngest_uptime(&self) -> Option<Duration> {
        self.slots
            .iter()
            .filter_map(|s| s.proc.as_ref().map(|p| p.started.elapsed()))
            .min()
    }

    /// The node index running `pid`.
    pub fn by_pid(&self, pid: u32) -> Option<usize> {
        self.slots
            .iter()
            .position(|s| s.proc.as_ref().is_some_and(|p| p.pid == pid))
    }

    /// Starts node `i` (a new process; its record file is named after the new pid).
    pub fn start(&mut self, i: usize, tl: &mut Timeline) -> Result<u32> {
        let slot = &mut self.slots[i];
        assert!(slot.proc.is_none(), "node {} already runs", slot.spec.id);
        slot.incarnation += 1;
        let log_path = self.log_dir.join(format!("{}.log", slot.spec.id));
        let mut log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)?;
        use std::io::Write;
        writeln!(
            log,
            "=== faults: starting {} (incarnation {}) at {}",
            slot.spec.id,
            slot.incarnation,
            Utc::now().to_rfc3339()
        )?;
        let mut cmd = Command::new(&self.bin);
        for (key, _) in std::env::vars_os() {
            let k = key.to_string_lossy();
            if k.starts_with("SCHEDULER_") || k == "DATABASE_URL" || k.starts_with("FAKETIME") {
                cmd.env_remove(&key);
            }
        }
        cmd.env("SCHEDULER_DATABASE_URL", &self.db_url)
            .env("SCHEDULER_NODE_ID", &slot.spec.id)
            .env("SCHEDULER_CONFIG", &slot.spec.config)
            .env("SCHEDULER_CONFIG_POLL_INTERVAL", "1s")
            .env("SCHEDULER_LOCK_LIFETIME", "3s")
            .env("SCHEDULER_POLL_INTERVAL", "1s")
            .env("SCHEDULER_SHUTDOWN_TIMEOUT", "10s")
            .env("FAULT_RECORD_DIR", &self.record_dir)
            .env("RUST_LOG", "warn")
            .envs(self.extra_env.iter().map(|(k, v)| (k, v)))
            .envs(slot.spec.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        if let Some(skew) = &slot.spec.skew {
            cmd.env("LD_PRELOAD", &skew.library)
                .env("FAKETIME", &skew.faketime)
                // Only the wall clock is skewed; the engine's timers keep real monotonic time.
                .env("FAKETIME_DONT_FAKE_MONOTONIC", "1");
        }
        // SAFETY: only async-signal-safe calls (setpgid, prctl, getppid, _exit) between fork and
        // exec.
        unsafe {
            cmd.pre_exec(|| {
                libc::setpgid(0, 0);
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                if libc::getppid() == 1 {
                    libc::_exit(99);
                }
                Ok(())
            });
        }
        let child = cmd
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", self.bin.display()))?;
        let pid = child.id();
        slot.proc = Some(Proc {
            child,
            pid,
            state: State::Up,
            started: Instant::now(),
        });
        tl.push(EventKind::NodeStarted {
            node: slot.spec.id.clone(),
            pid,
        });
        Ok(pid)
    }

    /// SIGKILLs node `i` and reaps it.
    pub fn kill(&mut self, i: usize, tl: &mut Timeline) {
        // One that already died on its own is recorded as such, not as killed.
        self.reap_unexpected(tl);
        let slot = &mut self.slots[i];
        let Some(mut p) = slot.proc.take() else {
            return;
        };
        signal(p.pid, libc::SIGKILL);
        let node = slot.spec.id.clone();
        tl.push(EventKind::NodeKilled {
            node: node.clone(),
            pid: p.pid,
        });
        let status = p
            .child
            .wait()
            .map(describe)
            .unwrap_or_else(|e| e.to_string());
        tl.push(EventKind::NodeExited {
            node,
            pid: p.pid,
            status,
            success: false,
            cause: ExitCause::Killed,
        });
    }

    /// SIGSTOPs node `i`.
    pub fn pause(&mut self, i: usize, tl: &mut Timeline) {
        let slot = &mut self.slots[i];
        if let Some(p) = slot.proc.as_mut().filter(|p| p.state == State::Up) {
            signal(p.pid, libc::SIGSTOP);
            p.state = State::Paused;
            tl.push(EventKind::NodePaused {
                node: slot.spec.id.clone(),
                pid: p.pid,
            });
        }
    }

    /// SIGCONTs node `i`.
    pub fn resume(&mut self, i: usize, tl: &mut Timeline) {
        let slot = &mut self.slots[i];
        if let Some(p) = slot.proc.as_mut().filter(|p| p.state == State::Paused) {
            signal(p.pid, libc::SIGCONT);
            p.state = State::Up;
            tl.push(EventKind::NodeResumed {
                node: slot.spec.id.clone(),
                pid: p.pid,
            });
        }
    }

    /// Looks for nodes that exited without being asked to, and records them.
    pub fn reap_unexpected(&mut self, tl: &mut Timeline) {
        for slot in &mut self.slots {
            let Some(p) = slot.proc.as_mut() else {
                continue;
            };
            if let Ok(Some(status)) = p.child.try_wait() {
                tl.push(EventKind::NodeExited {
                    node: slot.spec.id.clone(),
                    pid: p.pid,
                    status: describe(status),
                    success: status.success(),
                    cause: ExitCause::OnItsOwn,
                });
                eprintln!(
                    "[faults] node {} (pid {}) exited on its own: {}",
                    slot.spec.id,
                    p.pid,
                    describe(status)
                );
                slot.proc = None;
            }
        }
    }

    /// SIGTERMs the given nodes together and waits for each to exit (at most
    /// [`EXIT_DEADLINE`]; then SIGKILL). Returns (node, exit status, seconds) per node.
    pub async fn terminate(
        &mut self,
        nodes: &[usize],
        tl: &mut Timeline,
    ) -> Vec<(String, String, f64)> {
        let mut waiting = Vec::new();
        for &i in nodes {
            let slot = &mut self.slots[i];
            let Some(p) = slot.proc.as_mut() else {
                continue;
            };
            if p.state == State::Paused {
                signal(p.pid, libc::SIGCONT);
                p.state = State::Up;
                tl.push(EventKind::NodeResumed {
                    node: slot.spec.id.clone(),
                    pid: p.pid,
                });
            }
            signal(p.pid, libc::SIGTERM);
            let t = tl.push(EventKind::NodeTerminated {
                node: slot.spec.id.clone(),
                pid: p.pid,
            });
            waiting.push((i, t, Instant::now()));
        }
        let mut out = Vec::new();
        while !waiting.is_empty() {
            let mut still = Vec::new();
            for (i, t_ms, sent) in waiting {
                let slot = &mut self.slots[i];
                let p = slot.proc.as_mut().expect("waiting on a running node");
                let exited = p.child.try_wait().ok().flatten();
                let late = sent.elapsed() >= EXIT_DEADLINE;
                if exited.is_none() && !late {
                    still.push((i, t_ms, sent));
                    continue;
                }
                let (status, forced) = match exited {
                    Some(s) => (s, false),
                    None => {
                        signal(p.pid, libc::SIGKILL);
                        match p.child.wait() {
                            Ok(s) => (s, true),
                            Err(_) => (ExitStatus::from_raw(9), true),
                        }
                    }
                };
                let after_ms = now_ms() - t_ms;
                tl.push(EventKind::NodeExited {
                    node: slot.spec.id.clone(),
                    pid: p.pid,
                    status: describe(status),
                    success: status.success(),
                    cause: ExitCause::Terminated { after_ms, forced },
                });
                out.push((
                    slot.spec.id.clone(),
                    describe(status),
                    after_ms as f64 / 1000.0,
                ));
                slot.proc = None;
            }
            waiting = still;
            if !waiting.is_empty() {
                tokio::time::sleep(LOOK_EVERY).await;
            }
        }
        out
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        for slot in &mut self.slots {
            if let Some(mut p) = slot.proc.take() {
                signal(p.pid, libc::SIGKILL);
                let _ = p.child.wait();
            }
        }
    }
}

/// What the orchestrator passes to every scenario.
#[derive(Debug, Clone)]
pub struct Options {
    /// Length of the randomized scenarios.
    pub minutes: f64,
    /// This scenario's seed.
    pub seed: u64,
    /// Where scenario directories go.
    pub out_dir: PathBuf,
    /// The `fault_node` executable.
    pub node_bin: PathBuf,
}

/// One finished scenario: the verdict and what the report says about it.
#[derive(Debug)]
pub struct Outcome {
    /// Scenario name.
    pub name: String,
    /// Its seed.
    pub seed: u64,
    /// How long it ran (s).
    pub secs: f64,
    /// What the judge found.
    pub verdict: Verdict,
    /// Remarks: what was injected, what was measured.
    pub notes: Vec<String>,
    /// The scenario directory (records, logs, timeline).
    pub dir: PathBuf,
    /// Run rows by status.
    pub run_statuses: BTreeMap<String, i64>,
}

/// One scenario's world.
///
/// Field order is drop order: the node processes go before the database they use.
pub struct Scenario {
    /// Scenario name.
    pub name: &'static str,
    /// The node processes.
    pub fleet: Fleet,
    /// The database the nodes use.
    pub database: Database,
    /// What the harness did.
    pub timeline: Timeline,
    /// The nodes' records, read as they grow.
    pub tail: RecordTail,
    /// This scenario's randomness.
    pub rng: Rng,
    /// Schedules configured over time.
    pub schedules: Vec<Segment>,
    /// Clock offsets of skewed nodes.
    pub offsets: HashMap<String, i64>,
    /// Remarks for the report.
    pub notes: Vec<String>,
    /// The scenario directory.
    pub dir: PathBuf,
    /// The config file nodes on a file source read.
    pub config_path: PathBuf,
    /// Judge tolerances.
    pub params: Params,
    seed: u64,
    began: Instant,
    last_config: BTreeMap<String, Option<String>>,
}

/// The database of a scenario.
#[derive(Debug)]
pub enum Database {
    /// A private cluster the scenario may stop, start and restart.
    Cluster(TempCluster),
    /// A pg_auto_failover formation; the nodes use the URL `pg_autoctl show uri` prints.
    Formation(Formation),
}

/// A config entry: (task, cron); written enabled in UTC.
pub type Entry<'a> = (&'a str, &'a str);

/// The config document for `entries` (all enabled, UTC).
pub fn config_json(entries: &[Entry<'_>]) -> String {
    let tasks: Vec<serde_json::Value> = entries
        .iter()
        .map(|(name, cron)| {
            serde_json::json!({"name": name, "enabled": true, "cron": cron, "timezone": "UTC"})
        })
        .collect();
    serde_json::to_string_pretty(&serde_json::json!({ "tasks": tasks })).expect("json") + "\n"
}

/// Writes `bytes` to `path` through a temp file renamed over it.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

/// The quick tasks `f.tick.00` .. `f.tick.{n-1}`.
pub fn tick_names(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("f.tick.{i:02}")).collect()
}

impl Scenario {
    /// Creates the scenario directory and starts a private cluster.
    pub async fn new(name: &'static str, opts: &Options) -> Result<Self> {
        let dir = Self::make_dir(name, opts)?;
        let cluster = TempCluster::start()
            .await
            .map_err(|e| format!("cannot start a private PostgreSQL cluster: {e}"))?;
        eprintln!(
            "[faults] {name}: PostgreSQL on 127.0.0.1:{}, files in {}",
            cluster.port(),
            dir.display()
        );
        let url = cluster.url();
        Ok(Self::with_database(
            name,
            opts,
            dir,
            Database::Cluster(cluster),
            url,
        ))
    }

    /// Creates the scenario directory and starts a pg_auto_failover formation with `timings`
    /// (its logs in `formation/`); the nodes get the URL it prints and its superuser as
    /// `PGUSER`.
    pub async fn on_formation(
        name: &'static str,
        opts: &Options,
        timings: &Timings,
    ) -> Result<Self> {
        let dir = Self::make_dir(name, opts)?;
        eprintln!("[faults] {name}: files in {}", dir.display());
        let formation = Formation::start(timings, &dir.join("formation"), &mut |what| {
            eprintln!("[faults] {name}: {what}")
        })
        .await?;
        let url = formation.uri().to_owned();
        let user = formation.user().to_owned();
        let mut sc = Self::with_database(name, opts, dir, Database::Formation(formation), url);
        sc.fleet.extra_env.push(("PGUSER".into(), user));
        Ok(sc)
    }

    fn make_dir(name: &str, opts: &Options) -> Result<PathBuf> {
        let dir = opts.out_dir.join(format!("{name}-{}", opts.seed));
        if dir.exists() {
            std::fs::remove_dir_all(&dir)?;
        }
        std::fs::create_dir_all(dir.join("records"))?;
        std::fs::create_dir_all(dir.join("logs"))?;
        Ok(dir)
    }

    fn with_database(
        name: &'static str,
        opts: &Options,
        dir: PathBuf,
        database: Database,
        db_url: String,
    ) -> Self {
        let record_dir = dir.join("records");
        let fleet = Fleet::new(
            opts.node_bin.clone(),
            db_url,
            dir.join("logs"),
            record_dir.clone(),
        );
        Self {
            name,
            fleet,
            database,
            timeline: Timeline::default(),
            tail: RecordTail::new(record_dir),
            rng: Rng::new(opts.seed),
            schedules: Vec::new(),
            offsets: HashMap::new(),
            notes: Vec::new(),
            config_path: dir.join("tasks.json"),
            dir,
            params: Params {
                lock_lifetime_ms: LOCK_LIFETIME.as_millis() as i64,
                ..Params::default()
            },
            seed: opts.seed,
            began: Instant::now(),
            last_config: BTreeMap::new(),
        }
    }

    /// The private cluster (scenarios that stop and start their database).
    pub fn cluster(&self) -> Result<&TempCluster> {
        match &self.database {
            Database::Cluster(c) => Ok(c),
            Database::Formation(_) => {
                Err("this scenario runs on a formation, not a cluster".into())
            }
        }
    }

    /// The pg_auto_failover formation.
    pub fn formation(&mut self) -> Result<&mut Formation> {
        match &mut self.database {
            Database::Formation(f) => Ok(f),
            Database::Cluster(_) => Err("this scenario runs on a private cluster".into()),
        }
    }

    /// Adds a node reading the scenario's config file.
    pub fn add_file_node(&mut self, id: &str, skew: Option<Skew>) -> usize {
        if let Some(s) = &skew {
            self.offsets.insert(id.to_owned(), s.offset_ms);
        }
        self.fleet.add(NodeSpec {
            id: id.to_owned(),
            config: self.config_path.to_string_lossy().into_owned(),
            skew,
            env: Vec::new(),
        })
    }

    /// Starts every node that is not running.
    pub fn start_all(&mut self) -> Result<()> {
        for i in self.fleet.down() {
            self.fleet.start(i, &mut self.timeline)?;
        }
        Ok(())
    }

    /// Records that from now on `entries` is the schedule (tasks listed before and missing now
    /// are disabled).
    pub fn note_schedule(&mut self, at_ms: i64, entries: &[(String, Option<String>)]) {
        let mut next: BTreeMap<String, Option<String>> =
            self.last_config.keys().map(|k| (k.clone(), None)).collect();
        for (task, cron) in entries {
            next.insert(task.clone(), cron.clone());
        }
        for (task, cron) in &next {
            if self.last_config.get(task) != Some(cron) {
                self.schedules.push(Segment {
                    task: task.clone(),
                    from_ms: at_ms,
                    cron: cron.clone(),
                });
            }
        }
        self.last_config = next;
    }

    /// Writes the config file (atomically) and notes the schedule. Returns the write time.
    pub fn write_config(&mut self, entries: &[Entry<'_>]) -> Result<i64> {
        write_atomically(&self.config_path, config_json(entries).as_bytes())?;
        let t = now_ms();
        let sched: Vec<(String, Option<String>)> = entries
            .iter()
            .map(|(n, c)| ((*n).to_owned(), Some((*c).to_owned())))
            .collect();
        self.note_schedule(t, &sched);
        Ok(t)
    }

    /// Looks at the nodes and record files once.
    pub fn look(&mut self) {
        self.fleet.reap_unexpected(&mut self.timeline);
        self.tail.poll();
    }

    /// Waits `d`, watching the nodes and reading records meanwhile.
    pub async fn idle(&mut self, d: Duration) {
        let until = Instant::now() + d;
        self.idle_until(until).await;
    }

    /// Waits until `until`, watching the nodes and reading records meanwhile.
    pub async fn idle_until(&mut self, until: Instant) {
        loop {
            self.look();
            let now = Instant::now();
            if now >= until {
                return;
            }
            tokio::time::sleep((until - now).min(LOOK_EVERY)).await;
        }
    }

    /// Waits until 20-130 ms after the next whole second: just after a tick, while that
    /// second's quick runs are in flight.
    pub async fn idle_until_just_after_a_tick(&mut self) {
        let strike = (now_ms() / 1000 + 1) * 1000 + self.rng.range(20, 131) as i64;
        self.idle(Duration::from_millis((strike - now_ms()).max(0) as u64))
            .await;
    }

    /// SIGKILLs node `victim` and records it as a fault of that node. Returns its pid.
    pub fn sigkill(&mut self, victim: usize) -> u32 {
        let t = now_ms();
        let node = self.fleet.id(victim).to_owned();
        let pid = self.fleet.pid(victim).unwrap_or_default();
        self.fleet.kill(victim, &mut self.timeline);
        self.node_fault(format!("SIGKILL {node}"), t, t, Victim { node, pid });
        pid
    }

    /// Waits until the wall clock reads `at` (harness clock).
    pub async fn idle_until_wall(&mut self, at: DateTime<Utc>) {
        let left = (at - Utc::now()).to_std().unwrap_or(Duration::ZERO);
        self.idle(left).await;
    }

    /// Waits (at most `timeout`) for the first record read from now on that satisfies `pred`.
    pub async fn wait_record(
        &mut self,
        timeout: Duration,
        mut pred: impl FnMut(&Record) -> bool,
    ) -> Option<Record> {
        let mut seen = self.tail.records().len();
        let until = Instant::now() + timeout;
        loop {
            self.look();
            if let Some(r) = self.tail.records()[seen..].iter().find(|r| pred(r)) {
                return Some(r.clone());
            }
            seen = self.tail.records().len();
            if Instant::now() >= until {
                return None;
            }
            tokio::time::sleep(LOOK_EVERY).await;
        }
    }

    /// Marks a fault window every task feels (database outages, config changes).
    pub fn fault(&mut self, what: impl Into<String>, from_ms: i64, until_ms: i64) {
        self.timeline.push_at(
            from_ms,
            EventKind::Fault {
                what: what.into(),
                until_ms,
                node: None,
            },
        );
    }

    /// Marks a fault window that only the tasks `victim` held feel (SIGKILL, SIGSTOP).
    pub fn node_fault(
        &mut self,
        what: impl Into<String>,
        from_ms: i64,
        until_ms: i64,
        victim: Victim,
    ) {
        self.timeline.push_at(
            from_ms,
            EventKind::Fault {
                what: what.into(),
                until_ms,
                node: Some(victim),
            },
        );
    }

    /// Nodes with a run in flight according to their records (a start in the last 10 s and no
    /// end yet).
    pub fn nodes_mid_run(&self) -> Vec<usize> {
        let recent = now_ms() - 10_000;
        let mut open: HashMap<(u32, i64), bool> = HashMap::new();
        for r in self.tail.records().iter().filter(|r| r.t_ms >= recent) {
            match r.ev {
                crate::record::Ev::Start => {
                    open.entry((r.pid, r.run_id)).or_insert(true);
                }
                crate::record::Ev::End => {
                    open.insert((r.pid, r.run_id), false);
                }
                crate::record::Ev::Beat => {}
            }
        }
        let mut nodes: Vec<usize> = open
            .into_iter()
            .filter(|(_, o)| *o)
            .filter_map(|((pid, _), _)| self.fleet.by_pid(pid))
            .filter(|i| self.fleet.up().contains(i))
            .collect();
        nodes.sort_unstable();
        nodes.dedup();
        nodes
    }

    /// A note in the timeline and on the console.
    pub fn note(&mut self, what: impl Into<String>) {
        let what = what.into();
        eprintln!("[faults] {}: {what}", self.name);
        self.timeline.push(EventKind::Note { what });
    }

    /// A fresh connection to the database, as the harness (on a formation: to the node the
    /// monitor has as the primary).
    pub async fn connect(&self) -> Result<PgConnection> {
        let url = match &self.database {
            Database::Cluster(c) => c.url(),
            Database::Formation(f) => {
                let i = f
                    .primary()
                    .await?
                    .ok_or("the formation has no primary to read the rows from")?;
                f.node_url(f.node(i).1)
            }
        };
        let opts = PgConnectOptions::from_str(&url)?.application_name(HARNESS_APP);
        Ok(opts.connect().await?)
    }

    /// Stops every node (SIGTERM, then SIGKILL after the deadline), reads the rows and the
    /// records, and judges.
    pub async fn finish(mut self) -> Result<Outcome> {
        // A process SIGTERMed before it has installed its signal handler dies of the signal;
        // that says nothing about the engine, so give a node just started time to come up.
        if let Some(age) = self.fleet.youngest_uptime()
            && age < MIN_UPTIME_BEFORE_STOP
        {
            self.idle(MIN_UPTIME_BEFORE_STOP - age).await;
        }
        self.look();
        self.timeline.push(EventKind::StoppingAll);
        let all: Vec<usize> = (0..self.fleet.len()).collect();
        let exits = self.fleet.terminate(&all, &mut self.timeline).await;
        for (node, status, secs) in &exits {
            if status != "exit 0" || *secs > 12.0 {
                self.notes
                    .push(format!("final stop: {node} {status} after {secs:.1} s"));
            }
        }
        self.tail.poll();
        let (runs, skips, run_statuses) = read_rows(&self).await?;
        if skips.is_some() {
            self.notes
                .push("scheduler_skips exists and was read".into());
        }
        if !self.tail.bad_lines.is_empty() || self.tail.torn_tails() > 0 {
            self.notes.push(format!(
                "record lines that did not parse: {}, torn last lines: {}",
                self.tail.bad_lines.len(),
                self.tail.torn_tails()
            ));
        }
        let verdict = judge::judge(&History {
            records: self.tail.records(),
            runs: &runs,
            skips: skips.as_deref(),
            timeline: &self.timeline.events,
            schedules: &self.schedules,
            clock_offsets_ms: &self.offsets,
            params: self.params,
        })?;
        std::fs::write(
            self.dir.join("timeline.json"),
            serde_json::to_string_pretty(&self.timeline)?,
        )?;
        let schedules: Vec<String> = self
            .schedules
            .iter()
            .map(|s| format!("{} {} {:?}", s.from_ms, s.task, s.cron))
            .collect();
        std::fs::write(self.dir.join("schedules.txt"), schedules.join("\n") + "\n")?;
        Ok(Outcome {
            name: self.name.to_owned(),
            seed: self.seed,
            secs: self.began.elapsed().as_secs_f64(),
            verdict,
            notes: std::mem::take(&mut self.notes),
            dir: self.dir.clone(),
            run_statuses,
        })
    }
}

type Rows = (Vec<RunRow>, Option<Vec<SkipRow>>, BTreeMap<String, i64>);

async fn read_rows(sc: &Scenario) -> Result<Rows> {
    let mut conn = sc.connect().await?;
    let runs = sqlx::query(
        "SELECT id, task_name, scheduled_at, status, node_id, ticks_collapsed FROM scheduler_runs ORDER BY id",
    )
    .fetch_all(&mut conn)
    .await?
    .into_iter()
    .map(|r| {
        Ok(RunRow {
            id: r.try_get("id")?,
            task: r.try_get("task_name")?,
            scheduled_at: r.try_get("scheduled_at")?,
            status: r.try_get("status")?,
            node: r.try_get("node_id")?,
            ticks_collapsed: i64::from(r.try_get::<i32, _>("ticks_collapsed")?),
        })
    })
    .collect::<Result<Vec<_>, sqlx::Error>>()?;
    let mut statuses = BTreeMap::new();
    for r in &runs {
        *statuses.entry(r.status.clone()).or_insert(0) += 1;
    }
    let has_skips: Option<String> =
        sqlx::query_scalar("SELECT to_regclass('scheduler_skips')::text")
            .fetch_one(&mut conn)
            .await?;
    let skips = match has_skips {
        None => None,
        Some(_) => Some(
            sqlx::query("SELECT task_name, first_tick, last_tick FROM scheduler_skips")
                .fetch_all(&mut conn)
                .await
                .map_err(|e| format!("scheduler_skips exists but cannot be read: {e}"))?
                .into_iter()
                .map(|r| {
                    Ok(SkipRow {
                        task: r.try_get("task_name")?,
                        first_tick: r.try_get("first_tick")?,
                        last_tick: r.try_get("last_tick")?,
                    })
                })
                .collect::<Result<Vec<_>, sqlx::Error>>()?,
        ),
    };
    conn.close().await?;
    Ok((runs, skips, statuses))
}

/// Terminates the scheduler's backends. Returns how many were terminated and by which rule.
pub async fn terminate_backends(sc: &Scenario) -> Result<(i64, &'static str)> {
    let mut conn = sc.connect().await?;
    let n: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
         WHERE application_name = 'scheduler' AND pid <> pg_backend_pid()) t",
    )
    .fetch_one(&mut conn)
    .await?;
    if n > 0 {
        conn.close().await?;
        return Ok((n, "application_name = 'scheduler'"));
    }
    // The engine names no application: every client backend but ours.
    let n: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
         WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()) t",
    )
    .fetch_one(&mut conn)
    .await?;
    conn.close().await?;
    Ok((n, "every client backend but the harness's"))
}

/// Freezes every server process of the scheduler's connections (SIGSTOP) for `span`, then lets
/// them run again: a server that stops answering on connections whose TCP stays up (as a
/// partition that keeps TCP up would). How many were frozen. They run again even if the wait
/// is cut short.
pub async fn freeze_backends(sc: &mut Scenario, span: Duration) -> Result<usize> {
    let mut conn = sc.connect().await?;
    let pids: Vec<i32> = sqlx::query_scalar(
        "SELECT pid FROM pg_stat_activity \
         WHERE application_name = 'scheduler' AND pid <> pg_backend_pid()",
    )
    .fetch_all(&mut conn)
    .await?;
    conn.close().await?;
    let frozen = Frozen(pids);
    for pid in &frozen.0 {
        // SAFETY: kill(2) has no memory-safety preconditions; a backend of our own cluster.
        unsafe { libc::kill(*pid, libc::SIGSTOP) };
    }
    sc.idle(span).await;
    Ok(frozen.0.len())
}

/// Server processes frozen by [`freeze_backends`]: they run again when this is dropped.
struct Frozen(Vec<i32>);

impl Drop for Frozen {
    fn drop(&mut self) {
        for pid in &self.0 {
            // SAFETY: as in `freeze_backends`.
            unsafe { libc::kill(*pid, libc::SIGCONT) };
        }
    }
}

/// libfaketime, installing the `faketime` package first when it is missing and this process
/// may (root, apt-get available). Fails with a clear message otherwise.
pub fn faketime_library() -> Result<PathBuf> {
    fn find() -> Option<PathBuf> {
        let mut dirs: Vec<PathBuf> = vec![
            "/usr/lib/x86_64-linux-gnu/faketime".into(),
            "/usr/lib/aarch64-linux-gnu/faketime".into(),
            "/usr/lib/faketime".into(),
            "/usr/lib64/faketime".into(),
            "/usr/local/lib/faketime".into(),
        ];
        if let Ok(entries) = std::fs::read_dir("/usr/lib") {
            dirs.extend(entries.flatten().map(|e| e.path().join("faketime")));
        }
        dirs.into_iter()
            .flat_map(|d| [d.join("libfaketimeMT.so.1"), d.join("libfaketime.so.1")])
            .find(|p| p.is_file())
    }
    if let Some(p) = find() {
        return Ok(p);
    }
    // SAFETY: geteuid(2) cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    let apt = Path::new("/usr/bin/apt-get").is_file();
    if !(root && apt) {
        return Err(
            "the clock scenario needs libfaketime, which is not installed: \
                    run `apt-get install faketime` (as root), then run it again"
                .into(),
        );
    }
    eprintln!(
        "[faults] clock: libfaketime is missing; installing it: apt-get update && apt-get install -y faketime"
    );
    let ok = Command::new("sh")
        .args([
            "-c",
            "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq faketime",
        ])
        .stdin(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    match (ok, find()) {
        (true, Some(p)) => Ok(p),
        _ => Err(
            "the clock scenario needs libfaketime and `apt-get install faketime` failed; \
                  install it by hand and run it again"
                .into(),
        ),
    }
}
