//! The database fails over under two node processes (`handler_node`): a primary with a
//! synchronous standby (`pg_basebackup -R`, `synchronous_standby_names`), the primary killed
//! (SIGKILL of all its processes) and the standby promoted (`pg_ctl promote`), reached once
//! through a TCP front door that moves to the new primary (a VIP, HAProxy, a Kubernetes `-rw`
//! Service) and once through a multi-host URL with the standby listed first
//! (`target_session_attrs=read-write`). Then a primary demoted while it stays up, read-only,
//! with the front door moved for new connections only, or listed first in the URL.
//!
//! Judged by the handlers' own record (`scheduler_tests::handler_records`): no tick started
//! twice, no two runs of a task at once, fencing tokens rising, the every-second task back
//! after the promotion, a manual trigger (`trigger`, the application's own command) sent after
//! the failover run, both nodes alive and beating on the new primary. The figures (promotion to
//! the first tick, trigger to its start) are printed, not judged.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use chrono::{DateTime, Utc};
use scheduler_tests::TempCluster;
use scheduler_tests::front_door::FrontDoor;
use scheduler_tests::handler_records::{self, Kind, Record, now_nanos};

scheduler_tests::postgres_tests! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    through_a_front_door_the_nodes_follow_a_killed_primary,
    through_a_host_list_the_nodes_follow_a_killed_primary,
    a_demoted_primary_left_up_read_only_behind_a_front_door_is_left,
    a_demoted_primary_left_up_read_only_listed_first_is_left,
}

/// Every second, 300 ms of work.
const EVERY_SECOND: &str = "misbehave.steady";
/// Yearly: each run is one the test triggers.
const MANUAL: &str = "misbehave.tick";
/// Generous bound of every wait (no figure is judged by time).
const WAIT: Duration = Duration::from_secs(60);
/// The nodes.
const NODES: [&str; 2] = ["a", "b"];

/// How the nodes reach the primary.
#[derive(Clone, Copy, Debug)]
enum Route {
    /// One address, a front door moved to the new primary after the failover.
    FrontDoor,
    /// A multi-host URL with `target_session_attrs=read-write`.
    HostList,
}

/// A `handler_node` process, killed (SIGKILL) if the test leaves it running.
struct Node {
    id: &'static str,
    child: Child,
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The test's files (config, records, node logs) and nodes.
struct Scene {
    dir: PathBuf,
    url: String,
    nodes: Vec<Node>,
}

impl Scene {
    fn new(tag: &str, url: String) -> Self {
        let dir = std::env::temp_dir().join(format!("scheduler-{tag}-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(dir.join("records")).unwrap();
        let task = |name: &str, cron: &str| serde_json::json!({"name": name, "enabled": true, "cron": cron, "timezone": "UTC"});
        let tasks = [task(EVERY_SECOND, "* * * * * *"), task(MANUAL, "0 0 1 1 *")];
        std::fs::write(
            dir.join("tasks.json"),
            serde_json::json!({ "tasks": tasks }).to_string(),
        )
        .unwrap();
        Scene {
            dir,
            url,
            nodes: Vec::new(),
        }
    }

    /// Starts the nodes, with the scheduler's defaults but for the config file, and their
    /// output in `<id>.log`.
    fn start_nodes(&mut self) {
        for id in NODES {
            let log = std::fs::File::create(self.dir.join(format!("{id}.log"))).unwrap();
            let child = Command::new(env!("CARGO_BIN_EXE_handler_node"))
                .env("DATABASE_URL", &self.url)
                .env("SCHEDULER_NODE_ID", id)
                .env("SCHEDULER_CONFIG", self.dir.join("tasks.json"))
                .env("HANDLER_RECORDS", self.dir.join("records"))
                .env("RUST_LOG", "info")
                .env_remove("SCHEDULER_DATABASE_URL")
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .spawn()
                .expect("start a handler_node");
            self.nodes.push(Node { id, child });
        }
    }

    fn records(&self) -> Vec<Record> {
        handler_records::read_dir(&self.dir.join("records"))
    }

    /// Starts of `task` after `at` (nanoseconds since the epoch).
    fn starts_after(&self, task: &str, at: u128) -> Vec<Record> {
        self.records()
            .into_iter()
            .filter(|r| r.kind == Kind::Start && r.task == task && r.at_nanos > at)
            .collect()
    }

    /// Waits for `n` starts of `task` after `at`; returns the first.
    async fn wait_for_starts(&self, task: &str, at: u128, n: usize, what: &str) -> Record {
        let mut first = None;
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let starts = self.starts_after(task, at);
            if first.is_none() {
                first = starts.iter().min_by_key(|r| r.at_nanos).cloned();
            }
            if starts.len() >= n {
                return first.expect("at least one start");
            }
            if tokio::time::Instant::now() > deadline {
                self.fail(&format!("timed out after {WAIT:?} waiting for {what}"));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Panics with `why`, the nodes' exit statuses and the tail of their logs.
    fn fail(&self, why: &str) -> ! {
        let mut detail = String::new();
        for id in NODES {
            let log =
                std::fs::read_to_string(self.dir.join(format!("{id}.log"))).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(25).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            detail.push_str(&format!("--- node {id} (tail) ---\n{}\n", tail.join("\n")));
        }
        panic!("{why}\n{detail}");
    }

    /// Panics unless every node process still runs.
    fn assert_alive(&mut self) {
        let mut dead = Vec::new();
        for node in &mut self.nodes {
            if let Some(status) = node.child.try_wait().unwrap() {
                dead.push(format!("node {} exited: {status}", node.id));
            }
        }
        if !dead.is_empty() {
            self.fail(&dead.join("; "));
        }
    }

    /// Runs `trigger MANUAL` (the application's own command, over the nodes' URL); returns when
    /// it was sent (nanoseconds since the epoch) and how long the command took.
    async fn trigger(&self) -> (u128, Duration) {
        let sent = now_nanos();
        let began = std::time::Instant::now();
        let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_handler_node"))
            .args(["trigger", MANUAL, "--actor", "failover-test"])
            .args(["--database-url", &self.url])
            .env_remove("DATABASE_URL")
            .env_remove("SCHEDULER_DATABASE_URL")
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .output()
            .await
            .expect("run the trigger command");
        let took = began.elapsed();
        if !out.status.success() {
            self.fail(&format!(
                "the trigger command failed ({}): {}{}",
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        (sent, took)
    }

    /// Stops every node (SIGTERM) and waits for it to exit.
    async fn stop_nodes(&mut self) {
        for node in &self.nodes {
            let pid = libc::pid_t::try_from(node.child.id()).unwrap();
            // SAFETY: a plain kill(2) of our own child.
            unsafe { libc::kill(pid, libc::SIGTERM) };
        }
        for node in &mut self.nodes {
            let deadline = tokio::time::Instant::now() + WAIT;
            while node.child.try_wait().unwrap().is_none() {
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "node {} did not stop",
                    node.id
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }

    /// Panics, with the records, if a run overlapped another of its task, a tick started
    /// twice or a fencing token did not rise.
    fn assert_nothing_twice(&self) {
        let records = self.records();
        let overlaps = handler_records::overlaps(&records);
        assert!(
            overlaps.is_empty(),
            "{} runs overlapped another run of their task: {overlaps:#?}",
            overlaps.len()
        );
        let twice = handler_records::ticks_started_twice(&records);
        assert!(twice.is_empty(), "ticks started twice: {twice:?}");
        let stale = handler_records::fences_out_of_order(&records);
        assert!(stale.is_empty(), "fencing tokens out of order: {stale:#?}");
    }
}

impl Drop for Scene {
    /// Stops the nodes; removes the files, unless the test failed (then says where they are).
    fn drop(&mut self) {
        self.nodes.clear();
        if std::thread::panicking() {
            eprintln!(
                "the nodes' logs and records are kept in {}",
                self.dir.display()
            );
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

fn addr(cluster: &TempCluster) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], cluster.port()))
}

/// A URL over `hosts` with `params`.
fn url(hosts: &str, params: &str) -> String {
    format!("postgres://postgres@{hosts}/postgres?{params}")
}

/// Waits until every node has beaten on `server` after `since`: it runs and works there.
async fn wait_for_heartbeats(scene: &Scene, server: &TempCluster, since: DateTime<Utc>) {
    let pool = sqlx::PgPool::connect(&server.url()).await.unwrap();
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let beating: Vec<String> = sqlx::query_scalar(
            "SELECT node_id FROM scheduler_nodes WHERE heartbeat_at > $1 AND stopped_at IS NULL",
        )
        .bind(since)
        .fetch_all(&pool)
        .await
        .unwrap_or_default();
        if NODES.iter().all(|id| beating.iter().any(|b| b == id)) {
            break;
        }
        if tokio::time::Instant::now() > deadline {
            scene.fail(&format!(
                "timed out after {WAIT:?}: only {beating:?} beat on the new primary"
            ));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    pool.close().await;
}

/// Milliseconds from `from` to `to` (nanoseconds since the epoch).
fn ms(from: u128, to: u128) -> f64 {
    (to.saturating_sub(from)) as f64 / 1e6
}

/// The scenario of the hidden check: two nodes on a primary with a synchronous standby; the
/// primary killed, the standby promoted; the every-second task back, a trigger sent after the
/// failover run, nothing twice, both nodes alive.
async fn a_killed_primary_is_followed(route: Route, tag: &str) {
    scheduler_tests::init_tracing();
    let primary = TempCluster::start().await.expect("start a primary");
    let standby = primary
        .start_synchronous_standby()
        .await
        .expect("start a synchronous standby");
    let door = FrontDoor::open(addr(&primary)).await.unwrap();
    let nodes_url = match route {
        Route::FrontDoor => url(&door.addr().to_string(), "connect_timeout=2"),
        Route::HostList => url(
            &format!("{},{}", addr(&standby), addr(&primary)),
            "target_session_attrs=read-write&connect_timeout=2",
        ),
    };
    let mut scene = Scene::new(tag, nodes_url);
    scene.start_nodes();
    scene
        .wait_for_starts(EVERY_SECOND, 0, 3, "three ticks before the failover")
        .await;

    primary.crash().await.expect("kill the primary");
    let killed = now_nanos();
    standby.promote().await.expect("promote the standby");
    let promoted = now_nanos();
    let promoted_at = Utc::now();
    if let Route::FrontDoor = route {
        door.point_at(addr(&standby));
    }
    let first = scene
        .wait_for_starts(EVERY_SECOND, promoted, 1, "a tick after the promotion")
        .await;
    let (sent, took) = scene.trigger().await;
    let manual = scene
        .wait_for_starts(MANUAL, sent, 1, "the triggered run")
        .await;
    scene
        .wait_for_starts(EVERY_SECOND, promoted, 3, "three ticks after the promotion")
        .await;
    wait_for_heartbeats(&scene, &standby, promoted_at).await;
    scene.assert_alive();
    eprintln!(
        "failover ({route:?}): promotion took {:.0} ms after the kill; first tick {:.0} ms after \
         the promotion (node {}); trigger ran {:.0} ms after it was sent (command took {took:?})",
        ms(killed, promoted),
        ms(promoted, first.at_nanos),
        first.node,
        ms(sent, manual.at_nanos),
    );
    scene.stop_nodes().await;
    scene.assert_nothing_twice();
}

async fn through_a_front_door_the_nodes_follow_a_killed_primary() {
    a_killed_primary_is_followed(Route::FrontDoor, "failover-door").await;
}

async fn through_a_host_list_the_nodes_follow_a_killed_primary() {
    a_killed_primary_is_followed(Route::HostList, "failover-hosts").await;
}

/// The primary is demoted while it stays up and takes connections: read-only for every
/// session (existing sessions get 25006 at their next write), and its synchronous standby
/// promoted. Behind a front door moved for new connections only, or listed first in a host
/// list, the nodes must leave it for the new primary: ticks go on, nothing twice, a trigger
/// sent to the new primary runs, and no connection of theirs is left on the former one (a
/// listener left there would hear nothing the new primary is told).
async fn a_demoted_primary_is_left(route: Route, tag: &str) {
    scheduler_tests::init_tracing();
    let former = TempCluster::start().await.expect("start a primary");
    let next = former
        .start_synchronous_standby()
        .await
        .expect("start a synchronous standby");
    let door = FrontDoor::open(addr(&former)).await.unwrap();
    let nodes_url = match route {
        Route::FrontDoor => url(&door.addr().to_string(), "connect_timeout=2"),
        Route::HostList => url(
            &format!("{},{}", addr(&former), addr(&next)),
            "target_session_attrs=read-write&connect_timeout=2",
        ),
    };
    let mut scene = Scene::new(tag, nodes_url);
    scene.start_nodes();
    scene
        .wait_for_starts(EVERY_SECOND, 0, 3, "three ticks before the demotion")
        .await;

    let admin = sqlx::PgPool::connect(&format!("{}?application_name=failover-test", former.url()))
        .await
        .unwrap();
    sqlx::query("ALTER SYSTEM SET default_transaction_read_only = on")
        .execute(&admin)
        .await
        .unwrap();
    sqlx::query("SELECT pg_reload_conf()")
        .execute(&admin)
        .await
        .unwrap();
    let demoted = now_nanos();
    next.promote().await.expect("promote the standby");
    let promoted = now_nanos();
    let promoted_at = Utc::now();
    if let Route::FrontDoor = route {
        door.point_at(addr(&next));
    }
    let first = scene
        .wait_for_starts(EVERY_SECOND, promoted, 1, "a tick after the promotion")
        .await;
    let (sent, took) = scene.trigger().await;
    let manual = scene
        .wait_for_starts(MANUAL, sent, 1, "the triggered run")
        .await;
    scene
        .wait_for_starts(EVERY_SECOND, promoted, 3, "three ticks after the promotion")
        .await;
    wait_for_heartbeats(&scene, &next, promoted_at).await;
    eprintln!(
        "demoted primary ({route:?}): promotion took {:.0} ms after the demotion; first tick \
         {:.0} ms after the promotion (node {}); trigger ran {:.0} ms after it was sent \
         (command took {took:?})",
        ms(demoted, promoted),
        ms(promoted, first.at_nanos),
        first.node,
        ms(sent, manual.at_nanos),
    );
    let left = connections_left(&admin).await;
    scene.assert_alive();
    scene.stop_nodes().await;
    scene.assert_nothing_twice();
    admin.close().await;
    assert!(
        left.is_empty(),
        "after {WAIT:?} the nodes still hold connections to the demoted primary \
         (application_name, state, last query): {left:?}"
    );
}

/// The nodes' connections (`application_name` `scheduler...`) still open on `former`, polled
/// until there are none, for at most [`WAIT`]: empty when they all left.
async fn connections_left(former: &sqlx::PgPool) -> Vec<(String, String, String)> {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let left: Vec<(String, String, String)> = sqlx::query_as(
            "SELECT application_name, coalesce(state, ''), coalesce(query, '') \
             FROM pg_stat_activity WHERE application_name LIKE 'scheduler%'",
        )
        .fetch_all(former)
        .await
        .unwrap();
        if left.is_empty() || tokio::time::Instant::now() > deadline {
            return left;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn a_demoted_primary_left_up_read_only_behind_a_front_door_is_left() {
    a_demoted_primary_is_left(Route::FrontDoor, "demoted-door").await;
}

async fn a_demoted_primary_left_up_read_only_listed_first_is_left() {
    a_demoted_primary_is_left(Route::HostList, "demoted-hosts").await;
}
