//! Handlers cannot break their node: handlers that block their thread or spin on the CPU, more
//! of them than the node has cores, never make a task overlap itself nor starve the node's other
//! tasks; a handler that cannot be stopped before its lock could expire stops its node first
//! (fail-stop); an at-most-once task stopped by force is never run again, on every path.
//!
//! Real node processes (`handler_node`) on one PostgreSQL schema, judged by what their handlers
//! recorded (`scheduler_tests::handler_records`), not by the run history alone.

use crate::common;

mod on_postgres {
    use std::net::{SocketAddr, ToSocketAddrs};
    use std::path::{Path, PathBuf};
    use std::process::{Child, Command, ExitStatus};
    use std::time::{Duration, Instant};

    use chrono::{DateTime, Utc};
    use scheduler::testing::store::{RunQuery, RunStatus};
    use scheduler_tests::handler_records::{self, Kind, Record};
    use scheduler_tests::proxy::CutProxy;

    use super::common::*;

    /// A `handler_node` process, killed (SIGKILL) if the test leaves it running.
    struct NodeProcess {
        id: String,
        child: Child,
    }

    struct NodeSetup<'a> {
        url: String,
        schema: &'a str,
        config: &'a Path,
        records: &'a Path,
        env: Vec<(&'static str, String)>,
    }

    impl NodeSetup<'_> {
        fn spawn(&self, id: &str) -> NodeProcess {
            let mut command = Command::new(env!("CARGO_BIN_EXE_handler_node"));
            command
                .env("DATABASE_URL", &self.url)
                .env("SCHEDULER_SCHEMA", self.schema)
                .env("SCHEDULER_NODE_ID", id)
                .env("SCHEDULER_CONFIG", self.config)
                .env("SCHEDULER_CONFIG_POLL_INTERVAL", "1s")
                .env("SCHEDULER_POLL_INTERVAL", "500ms")
                .env("SCHEDULER_LOCK_LIFETIME", "2s")
                .env("SCHEDULER_SHUTDOWN_TIMEOUT", "1s")
                .env("HANDLER_RECORDS", self.records)
                .env("RUST_LOG", "error");
            for (k, v) in &self.env {
                command.env(k, v);
            }
            NodeProcess {
                id: id.to_owned(),
                child: command.spawn().expect("start a handler_node"),
            }
        }
    }

    impl NodeProcess {
        /// Asks the node to shut down gracefully (SIGTERM).
        fn terminate(&self) {
            let pid = libc::pid_t::try_from(self.child.id()).unwrap();
            // SAFETY: a plain kill(2) of our own child.
            assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
        }

        /// Waits up to `limit` for the process to exit.
        async fn exited_within(&mut self, limit: Duration) -> Option<ExitStatus> {
            let deadline = Instant::now() + limit;
            loop {
                if let Some(status) = self.child.try_wait().unwrap() {
                    return Some(status);
                }
                if Instant::now() > deadline {
                    return None;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }

    impl Drop for NodeProcess {
        fn drop(&mut self) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }

    /// The test's files: the config and the records directory.
    struct Scene {
        dir: PathBuf,
    }

    impl Scene {
        fn new(tag: &str, entries: &[(&str, &str)]) -> Self {
            let dir =
                std::env::temp_dir().join(format!("scheduler-{tag}-{}", uuid::Uuid::new_v4()));
            std::fs::create_dir_all(dir.join("records")).unwrap();
            let tasks: Vec<_> = entries
                .iter()
                .map(|(name, cron)| {
                    serde_json::json!({"name": name, "enabled": true, "cron": cron, "timezone": "UTC"})
                })
                .collect();
            std::fs::write(
                dir.join("tasks.json"),
                serde_json::json!({ "tasks": tasks }).to_string(),
            )
            .unwrap();
            Scene { dir }
        }

        fn config(&self) -> PathBuf {
            self.dir.join("tasks.json")
        }

        fn records_dir(&self) -> PathBuf {
            self.dir.join("records")
        }

        fn records(&self) -> Vec<Record> {
            handler_records::read_dir(&self.records_dir())
        }

        fn starts(&self, task: &str) -> Vec<Record> {
            self.records()
                .into_iter()
                .filter(|r| r.kind == Kind::Start && r.task == task)
                .collect()
        }

        /// Panics, with the records, if any run overlapped another of its task or a tick
        /// started twice.
        fn assert_no_overlap_nor_tick_twice(&self) {
            let records = self.records();
            let overlaps = handler_records::overlaps(&records);
            assert!(
                overlaps.is_empty(),
                "{} runs overlapped another run of their task: {overlaps:#?}",
                overlaps.len()
            );
            let twice = handler_records::ticks_started_twice(&records);
            assert!(twice.is_empty(), "ticks started twice: {twice:?}");
            assert_fences_rise(&records);
        }
    }

    impl Drop for Scene {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }

    fn setup<'a>(db: &'a TestDb, scene: &'a Scene) -> NodeSetup<'a> {
        let config: &'static Path = Box::leak(scene.config().into_boxed_path());
        let records: &'static Path = Box::leak(scene.records_dir().into_boxed_path());
        NodeSetup {
            url: db.pg().url.clone(),
            schema: &db.pg().schema,
            config,
            records,
            env: Vec::new(),
        }
    }

    /// The host and port of a `postgres://` URL, and the URL with them replaced by `addr`.
    fn through(url: &str, addr: SocketAddr) -> (SocketAddr, String) {
        let rest = url.split_once("://").expect("a URL").1;
        let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
        let authority = &rest[..authority_end];
        let host_port = authority.rsplit_once('@').map_or(authority, |(_, hp)| hp);
        let target = if host_port.contains(':') {
            host_port.to_owned()
        } else {
            format!("{host_port}:5432")
        };
        let target = target
            .to_socket_addrs()
            .expect("the database's address")
            .next()
            .expect("an address");
        let start = url.len() - rest.len() + (authority.len() - host_port.len());
        let end = url.len() - rest.len() + authority_end;
        let proxied = format!("{}{}{}", &url[..start], addr, &url[end..]);
        (target, proxied)
    }

    fn tick_time(record: &Record) -> DateTime<Utc> {
        record.tick.parse().expect("an RFC 3339 tick")
    }

    async fn wait_for_start(scene: &Scene, task: &str) -> Record {
        wait_until(
            Duration::from_secs(60),
            &format!("{task} starts"),
            || async { !scene.starts(task).is_empty() },
        )
        .await;
        scene.starts(task).remove(0)
    }

    async fn run_ended(db: &TestDb, task: &str) -> Vec<scheduler::testing::store::RunRecord> {
        db.api()
            .runs(&RunQuery::latest(100).task(task))
            .await
            .unwrap()
    }

    /// Handlers that block their thread (`std::thread::sleep`) or spin on the CPU for longer
    /// than the lock lifetime, more of them at once than a node has cores, on two nodes beside
    /// a one-second task: no run overlaps another of its task, no tick runs twice, and the
    /// one-second task keeps running about every second.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn handlers_that_block_or_spin_neither_overlap_nor_starve_the_node() {
        let db = TestDb::postgres("blocking").await;
        let every_2s = "*/2 * * * * *";
        let scene = Scene::new(
            "blocking",
            &[
                ("misbehave.block.1", every_2s),
                ("misbehave.block.2", every_2s),
                ("misbehave.block.3", every_2s),
                ("misbehave.block.4", every_2s),
                ("misbehave.spin.1", every_2s),
                ("misbehave.spin.2", every_2s),
                ("misbehave.tick", "* * * * * *"),
            ],
        );
        let mut setup = setup(&db, &scene);
        setup.env.push(("HANDLER_BLOCK_MS", "3000".into()));
        setup.env.push(("HANDLER_SPIN_MS", "3000".into()));
        let mut a = setup.spawn("a");
        let mut b = setup.spawn("b");
        for task in ["misbehave.block.1", "misbehave.spin.1", "misbehave.tick"] {
            wait_for_start(&scene, task).await;
        }
        let observed_from = Utc::now();
        // The scenario: 20 s of misbehaving handlers (several overlaps a second without the
        // engine's protection).
        tokio::time::sleep(Duration::from_secs(20)).await;
        let observed_to = Utc::now();
        a.terminate();
        b.terminate();
        for node in [&mut a, &mut b] {
            assert!(
                node.exited_within(Duration::from_secs(60)).await.is_some(),
                "node {} did not exit after SIGTERM",
                node.id
            );
        }

        scene.assert_no_overlap_nor_tick_twice();
        // Every tick of the one-second task in the window (a margin of 2 s each side) should
        // have run; at least half of them must have, for the node was not starved.
        let from = observed_from + chrono::TimeDelta::seconds(2);
        let to = observed_to - chrono::TimeDelta::seconds(2);
        let mut ran: Vec<DateTime<Utc>> = scene
            .starts("misbehave.tick")
            .iter()
            .map(tick_time)
            .filter(|t| *t >= from && *t < to)
            .collect();
        ran.sort();
        ran.dedup();
        let expected = (to - from).num_seconds();
        assert!(
            i64::try_from(ran.len()).unwrap() * 2 >= expected,
            "the one-second task ran {} of {expected} ticks beside the misbehaving handlers",
            ran.len()
        );
        for task in ["misbehave.block.1", "misbehave.spin.1"] {
            assert!(
                scene.starts(task).len() >= 3,
                "{task} kept running: {:?}",
                scene.starts(task)
            );
        }
        db.cleanup().await;
    }

    /// An at-most-once task whose handler ignores cancellation is stopped by force when its node
    /// shuts down with a short timeout: its outcome is unknown, so the tick is recorded, and
    /// never run again by the other node.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_at_most_once_run_stopped_by_force_at_shutdown_is_never_run_again() {
        at_most_once_stopped_at_shutdown_is_never_run_again("never_shutdown", "misbehave.never")
            .await;
    }

    /// Two nodes; `task` (at most once, ignoring the request to stop) starts on one, which is
    /// stopped (SIGTERM, short shutdown timeout): its run is recorded "not run again", and the
    /// other node never starts the tick.
    async fn at_most_once_stopped_at_shutdown_is_never_run_again(tag: &str, task: &str) {
        let db = TestDb::postgres(tag).await;
        let scene = Scene::new(tag, &[(task, "0 0 1 1 *")]);
        let setup = setup(&db, &scene);
        let mut nodes = [setup.spawn("a"), setup.spawn("b")];
        trigger_all_now(&db, 1).await;
        let started = wait_for_start(&scene, task).await;
        let runner = nodes.iter_mut().find(|n| n.id == started.node).unwrap();
        runner.terminate();
        assert!(
            runner
                .exited_within(Duration::from_secs(60))
                .await
                .is_some(),
            "the node exits after SIGTERM"
        );
        ended_runs(&db, task).await;
        // Well past the moment the other node would have run it again (lock lifetime 2 s).
        tokio::time::sleep(Duration::from_secs(6)).await;
        let runs = run_ended(&db, task).await;
        assert_eq!(
            scene.starts(task).len(),
            1,
            "the at-most-once tick ran again: {:?}",
            scene.starts(task)
        );
        assert_eq!(runs.len(), 1, "{runs:?}");
        let error = runs[0].error.clone().unwrap_or_default();
        assert!(error.contains("not run again"), "{runs:?}");
        db.cleanup().await;
    }

    /// An at-most-once task with retries whose handler ignores cancellation is stopped by force
    /// past its timeout: its outcome is unknown, so it is recorded `timed_out` and not retried.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_at_most_once_run_stopped_by_force_past_its_timeout_is_not_retried() {
        let db = TestDb::postgres("never_timeout").await;
        let scene = Scene::new("never_timeout", &[("misbehave.never_timeout", "0 0 1 1 *")]);
        let setup = setup(&db, &scene);
        let _node = setup.spawn("a");
        trigger_all_now(&db, 1).await;
        wait_for_start(&scene, "misbehave.never_timeout").await;
        wait_until(Duration::from_secs(60), "the run timed out", || async {
            run_ended(&db, "misbehave.never_timeout")
                .await
                .iter()
                .any(|r| r.status == RunStatus::TimedOut)
        })
        .await;
        // The retry would have come after its backoff (1 s, jittered).
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert_eq!(
            scene.starts("misbehave.never_timeout").len(),
            1,
            "retried after a forced stop"
        );
        let runs = run_ended(&db, "misbehave.never_timeout").await;
        assert_eq!(runs.len(), 1, "{runs:?}");
        assert!(
            runs[0]
                .error
                .as_deref()
                .unwrap_or_default()
                .contains("not run again"),
            "{runs:?}"
        );
        db.cleanup().await;
    }

    /// Starts node `a` through a proxy and lets it take `task` (triggered now), then starts node
    /// `b` directly. Returns the proxy, both nodes and the first run's record.
    async fn a_behind_a_proxy_runs(
        db: &TestDb,
        scene: &Scene,
        task: &str,
    ) -> (CutProxy, NodeProcess, NodeProcess, Record) {
        let (target, _) = through(&db.pg().url, "127.0.0.1:1".parse().unwrap());
        let proxy = CutProxy::start(target).await.unwrap();
        let (_, proxied) = through(&db.pg().url, proxy.addr());
        let mut direct = setup(db, scene);
        let mut behind = setup(db, scene);
        behind.url = proxied;
        // Renewals every 400 ms; the handler is told to stop 1.4 s and stopped 1.8 s after the
        // last renewal it sent.
        direct
            .env
            .push(("SCHEDULER_HEARTBEAT_INTERVAL", "500ms".into()));
        let a = behind.spawn("a");
        trigger_all_now(db, 1).await;
        let first = wait_for_start(scene, task).await;
        assert_eq!(first.node, "a");
        let b = direct.spawn("b");
        (proxy, a, b, first)
    }

    /// A handler that blocks its thread and never reaches an `.await` cannot be stopped; when
    /// its node is cut off from the database (the database up for the other node), the node
    /// must stop itself before the lock could expire, so the other node's run of the same tick
    /// never overlaps it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_node_whose_blocked_handler_cannot_keep_its_lock_stops_before_a_takeover() {
        let db = TestDb::postgres("failstop").await;
        let scene = Scene::new("failstop", &[("misbehave.block_forever", "0 0 1 1 *")]);
        let (proxy, mut a, _b, first) =
            a_behind_a_proxy_runs(&db, &scene, "misbehave.block_forever").await;
        proxy.cut();
        let status = a.exited_within(Duration::from_secs(30)).await;
        assert!(
            status.is_some_and(|s| !s.success()),
            "the cut-off node with a blocked handler stops itself (fail-stop): {status:?}"
        );
        wait_until(
            Duration::from_secs(60),
            "the other node runs the tick again",
            || async {
                scene
                    .starts("misbehave.block_forever")
                    .iter()
                    .any(|r| r.node == "b" && r.tick == first.tick)
            },
        )
        .await;
        scene.assert_no_overlap_nor_tick_twice_but_the_takeover(&first);
        drop(proxy);
        db.cleanup().await;
    }

    /// An at-most-once task whose node is cut off from the database is stopped by force before
    /// its lock could expire; whether its node records the outcome when the database is back or
    /// the other node finds the lock expired first, the tick is not run again.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_at_most_once_run_stopped_on_lock_loss_is_never_run_again() {
        let db = TestDb::postgres("never_lockloss").await;
        let scene = Scene::new("never_lockloss", &[("misbehave.never", "0 0 1 1 *")]);
        let (proxy, _a, _b, _first) = a_behind_a_proxy_runs(&db, &scene, "misbehave.never").await;
        proxy.cut();
        // The handler ignores the request to stop, so it beats until the gate closes.
        wait_until(
            Duration::from_secs(30),
            "the handler is stopped",
            || async {
                let last = scene
                    .records()
                    .iter()
                    .filter(|r| r.task == "misbehave.never")
                    .map(|r| r.at_nanos)
                    .max()
                    .unwrap_or(0);
                handler_records::now_nanos().saturating_sub(last) > 500_000_000
            },
        )
        .await;
        // Back at once: its node records the outcome before the other node would take over.
        proxy.heal();
        wait_until(Duration::from_secs(60), "the run recorded", || async {
            run_ended(&db, "misbehave.never")
                .await
                .iter()
                .all(|r| r.status != RunStatus::Running)
        })
        .await;
        tokio::time::sleep(Duration::from_secs(6)).await;
        assert_eq!(
            scene.starts("misbehave.never").len(),
            1,
            "the at-most-once tick ran again"
        );
        db.cleanup().await;
    }

    /// Polls until every run of `task` has ended and at least one has; returns them.
    async fn ended_runs(db: &TestDb, task: &str) -> Vec<scheduler::testing::store::RunRecord> {
        wait_until(
            Duration::from_secs(60),
            &format!("a run of {task} recorded"),
            || async {
                let runs = run_ended(db, task).await;
                !runs.is_empty() && runs.iter().all(|r| r.status != RunStatus::Running)
            },
        )
        .await;
        run_ended(db, task).await
    }

    /// Isolated handlers that crash (SIGSEGV), abort, or leak past their memory limit are
    /// recorded `failed` with what happened to their process, each once (no retries are
    /// configured), a handler's stdout, stderr and `tracing` lines become its run's log, and
    /// the node goes on running its other tasks.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn isolated_handlers_that_crash_abort_or_leak_are_recorded_and_the_node_keeps_running() {
        let db = TestDb::postgres("iso_crash").await;
        let scene = Scene::new(
            "iso_crash",
            &[
                ("misbehave.iso.segfault", "0 0 1 1 *"),
                ("misbehave.iso.abort", "0 0 1 1 *"),
                ("misbehave.iso.leak", "0 0 1 1 *"),
                ("misbehave.iso.log", "0 0 1 1 *"),
                ("misbehave.tick", "* * * * * *"),
            ],
        );
        let mut setup = setup(&db, &scene);
        // The child's `tracing` lines reach the run's log at the levels RUST_LOG enables.
        setup
            .env
            .push(("RUST_LOG", "error,handler_node=info".into()));
        let mut node = setup.spawn("a");
        trigger_all_now(&db, 5).await;

        let segfault = ended_runs(&db, "misbehave.iso.segfault").await;
        assert_eq!(segfault.len(), 1, "{segfault:?}");
        assert_eq!(segfault[0].status, RunStatus::Failed, "{segfault:?}");
        let error = segfault[0].error.clone().unwrap_or_default();
        assert!(error.contains("SIGSEGV"), "{error}");

        let abort = ended_runs(&db, "misbehave.iso.abort").await;
        assert_eq!(abort[0].status, RunStatus::Failed, "{abort:?}");
        let error = abort[0].error.clone().unwrap_or_default();
        assert!(error.contains("SIGABRT"), "{error}");

        let leak = ended_runs(&db, "misbehave.iso.leak").await;
        assert_eq!(leak[0].status, RunStatus::Failed, "{leak:?}");
        let error = leak[0].error.clone().unwrap_or_default();
        assert!(error.contains("ran out of memory"), "{error}");
        assert!(error.contains("128 MiB"), "{error}");

        let log = ended_runs(&db, "misbehave.iso.log").await;
        assert_eq!(log[0].status, RunStatus::Succeeded, "{log:?}");
        let text: String = db
            .api()
            .run_log(log[0].id)
            .await
            .unwrap()
            .iter()
            .map(|c| c.text.clone())
            .collect();
        for line in [
            "isolated line on stdout",
            "isolated line on stderr",
            "isolated line from tracing",
        ] {
            assert!(
                text.contains(line),
                "{line:?} missing from the run's log:\n{text}"
            );
        }

        // Each handler started once: nothing was retried or run twice.
        for task in [
            "misbehave.iso.segfault",
            "misbehave.iso.abort",
            "misbehave.iso.leak",
        ] {
            assert_eq!(scene.starts(task).len(), 1, "{task}");
        }
        // The node lives on and keeps running its other task.
        let before = scene.starts("misbehave.tick").len();
        wait_until(
            Duration::from_secs(30),
            "the one-second task runs on",
            || async { scene.starts("misbehave.tick").len() >= before + 3 },
        )
        .await;
        assert!(
            node.child.try_wait().unwrap().is_none(),
            "the node itself must keep running"
        );
        db.cleanup().await;
    }

    /// An isolated handler that spins on the CPU past its timeout (it never looks at
    /// `ctx.cancelled()`) is killed: recorded `timed_out` with the signal, its process gone
    /// (it writes no more beats), and the node keeps running.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_isolated_handler_spinning_past_its_timeout_is_killed() {
        let db = TestDb::postgres("iso_spin").await;
        let scene = Scene::new("iso_spin", &[("misbehave.iso.spin", "0 0 1 1 *")]);
        let setup = setup(&db, &scene);
        let mut node = setup.spawn("a");
        trigger_all_now(&db, 1).await;
        let runs = ended_runs(&db, "misbehave.iso.spin").await;
        assert_eq!(runs[0].status, RunStatus::TimedOut, "{runs:?}");
        let error = runs[0].error.clone().unwrap_or_default();
        assert!(error.contains("SIGKILL"), "{error}");
        // Its process is gone: no beat after the run was recorded.
        let last_beat = |scene: &Scene| {
            scene
                .records()
                .iter()
                .filter(|r| r.task == "misbehave.iso.spin")
                .map(|r| r.at_nanos)
                .max()
                .unwrap_or(0)
        };
        let seen = last_beat(&scene);
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(last_beat(&scene), seen, "the killed handler still beats");
        assert!(node.child.try_wait().unwrap().is_none(), "the node runs on");
        db.cleanup().await;
    }

    /// An isolated handler that blocks its thread cannot keep its node from stopping it: when
    /// the node is cut off from the database, the node kills the child before its lock could
    /// expire and lives on (no fail-stop needed), and the other node's run of the tick never
    /// overlaps it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_isolated_handler_that_cannot_keep_its_lock_is_killed_not_its_node() {
        let db = TestDb::postgres("iso_lockloss").await;
        let scene = Scene::new("iso_lockloss", &[("misbehave.iso.block", "0 0 1 1 *")]);
        let (proxy, mut a, _b, first) =
            a_behind_a_proxy_runs(&db, &scene, "misbehave.iso.block").await;
        proxy.cut();
        wait_until(
            Duration::from_secs(60),
            "the other node runs the tick again",
            || async {
                scene
                    .starts("misbehave.iso.block")
                    .iter()
                    .any(|r| r.node == "b" && r.tick == first.tick)
            },
        )
        .await;
        scene.assert_no_overlap_nor_tick_twice_but_the_takeover(&first);
        assert!(
            a.exited_within(Duration::from_millis(100)).await.is_none(),
            "the cut-off node kills its isolated handler and lives on"
        );
        drop(proxy);
        db.cleanup().await;
    }

    /// An isolated at-most-once handler that ignores the request to stop is killed when its
    /// node shuts down; the tick is recorded as not run again, and the other node never runs it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_isolated_at_most_once_run_killed_at_shutdown_is_never_run_again() {
        at_most_once_stopped_at_shutdown_is_never_run_again("iso_never", "misbehave.iso.never")
            .await;
    }

    impl Scene {
        /// Like [`Self::assert_no_overlap_nor_tick_twice`], where the one tick `first` served
        /// may have started twice: once on the node that lost it, once on the node that took it
        /// over (recovery = rerun), never at the same time.
        fn assert_no_overlap_nor_tick_twice_but_the_takeover(&self, first: &Record) {
            let records = self.records();
            let overlaps = handler_records::overlaps(&records);
            assert!(
                overlaps.is_empty(),
                "{} runs overlapped another run of their task: {overlaps:#?}",
                overlaps.len()
            );
            let twice: Vec<_> = handler_records::ticks_started_twice(&records)
                .into_iter()
                .filter(|(task, tick, n)| !(*task == first.task && *tick == first.tick && *n == 2))
                .collect();
            assert!(twice.is_empty(), "ticks started twice: {twice:?}");
            // The run that took over has the larger fencing token.
            assert_fences_rise(&records);
        }
    }

    /// Panics, with the pairs, if a run started with a fencing token not larger than the one
    /// of the run of its task that started before it (on any node).
    fn assert_fences_rise(records: &[Record]) {
        let stale = handler_records::fences_out_of_order(records);
        assert!(stale.is_empty(), "fencing tokens out of order: {stale:#?}");
        assert!(
            records.iter().all(|r| r.fence > 0),
            "every run has a fencing token"
        );
    }
}
