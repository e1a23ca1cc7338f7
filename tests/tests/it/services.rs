//! No service of a node stops silently: a panic in any background service (injected through the
//! `test-hooks` feature's `SCHEDULER_TEST_PANIC`) either restarts that service, the node's
//! one-second task running on as its handler's own record shows, or stops the node with status
//! 70 and the reason on standard error; while a service is down, `/readyz` answers 503 naming
//! it.
//!
//! Real node processes (`handler_node`) on a PostgreSQL schema of their own, with their admin
//! server on 127.0.0.1.

use crate::common;

mod on_postgres {
    use std::path::PathBuf;
    use std::process::{Child, Command, ExitStatus, Stdio};
    use std::time::{Duration, Instant};

    use scheduler::testing::store::{RunQuery, RunStatus};
    use scheduler_tests::handler_records::{self, Kind};

    use super::common::*;

    const TICK: &str = "misbehave.tick";

    /// A `handler_node` running the one-second task, its admin server on `admin`, with
    /// `SCHEDULER_TEST_PANIC=panic`; killed if the test leaves it running.
    struct Node {
        child: Child,
        admin: String,
        dir: PathBuf,
    }

    impl Node {
        fn start(db: &TestDb, panic: &str) -> Node {
            let dir =
                std::env::temp_dir().join(format!("scheduler-services-{}", uuid::Uuid::new_v4()));
            std::fs::create_dir_all(dir.join("records")).unwrap();
            std::fs::write(
                dir.join("tasks.json"),
                serde_json::json!({"tasks": [
                    {"name": TICK, "enabled": true, "cron": "* * * * * *", "timezone": "UTC"}
                ]})
                .to_string(),
            )
            .unwrap();
            // A webhook channel, so that the node runs its delivery service (nothing listens
            // there: deliveries fail and are retried, which is not what is tested).
            std::fs::write(
                dir.join("channels.toml"),
                "[[channels]]\nname = \"hook\"\nkind = \"webhook\"\n\
                 url = \"http://127.0.0.1:9/hook\"\n\
                 secret = \"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\"\n",
            )
            .unwrap();
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            let admin = format!("127.0.0.1:{port}");
            let child = Command::new(env!("CARGO_BIN_EXE_handler_node"))
                .env("DATABASE_URL", &db.pg().url)
                .env("SCHEDULER_SCHEMA", &db.pg().schema)
                .env("SCHEDULER_NODE_ID", "services-node")
                .env("SCHEDULER_CONFIG", dir.join("tasks.json"))
                .env("SCHEDULER_CONFIG_POLL_INTERVAL", "1s")
                .env("SCHEDULER_POLL_INTERVAL", "500ms")
                .env("SCHEDULER_LOCK_LIFETIME", "2s")
                .env("SCHEDULER_SHUTDOWN_TIMEOUT", "1s")
                .env("SCHEDULER_ADMIN_ADDR", &admin)
                .env("SCHEDULER_CHANNELS_FILE", dir.join("channels.toml"))
                .env("SCHEDULER_TEST_PANIC", panic)
                .env("HANDLER_RECORDS", dir.join("records"))
                .env("RUST_LOG", "error")
                .env("RUST_BACKTRACE", "0")
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(dir.join("stderr")).unwrap())
                .spawn()
                .expect("start a handler_node");
            Node { child, admin, dir }
        }

        /// What the node wrote on standard error.
        fn stderr(&self) -> String {
            std::fs::read_to_string(self.dir.join("stderr")).unwrap_or_default()
        }

        /// How many runs of the one-second task its handler started, by its own record.
        fn starts(&self) -> usize {
            handler_records::read_dir(&self.dir.join("records"))
                .iter()
                .filter(|r| r.kind == Kind::Start && r.task == TICK)
                .count()
        }

        async fn get(&self, path: &str) -> Option<(u16, String)> {
            let response = reqwest::get(format!("http://{}{path}", self.admin))
                .await
                .ok()?;
            let status = response.status().as_u16();
            Some((status, response.text().await.ok()?))
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

        fn running(&mut self) -> bool {
            self.child.try_wait().unwrap().is_none()
        }
    }

    impl Drop for Node {
        fn drop(&mut self) {
            let _ = self.child.kill();
            let _ = self.child.wait();
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }

    /// The node counted `service`'s panic in its own metrics.
    async fn panics_counted(node: &Node, service: &str) -> bool {
        let line = format!("scheduler_service_panics_total{{service=\"{service}\"}} 1");
        node.get("/metrics")
            .await
            .is_some_and(|(status, body)| status == 200 && body.contains(&line))
    }

    /// A service that panics once runs again: the node counts the panic, keeps running, its
    /// one-second task keeps starting (three more starts after the panic was counted, by the
    /// handler's own record), and `/readyz` is 200 again naming the service `running`.
    async fn restarts_after_one_panic(service: &'static str) {
        let db = TestDb::postgres(&format!("svc_{service}")).await;
        let mut node = Node::start(&db, &format!("{service}:1"));
        wait_until(
            Duration::from_secs(60),
            &format!("the node counts a panic of its {service} service"),
            || panics_counted(&node, service),
        )
        .await;
        let before = node.starts();
        wait_until(
            Duration::from_secs(60),
            &format!("{TICK} keeps starting after the {service} service panicked"),
            || {
                let starts = node.starts();
                async move { starts >= before + 3 }
            },
        )
        .await;
        assert!(
            node.running(),
            "{service}: the node exited: {}",
            node.stderr()
        );
        wait_until(
            Duration::from_secs(30),
            &format!("/readyz is 200 with the {service} service running again"),
            || async {
                node.get("/readyz").await.is_some_and(|(status, body)| {
                    let shown = format!("\"name\":\"{service}\",\"state\":\"running\"");
                    // `startup` is done once the store is prepared: no longer listed.
                    status == 200 && (service == "startup" || body.contains(&shown))
                })
            },
        )
        .await;
        assert!(
            node.stderr()
                .contains(&format!("injected panic in the {service} service")),
            "{service}: {}",
            node.stderr()
        );
        drop(node);
        db.cleanup().await;
    }

    /// Every restartable service, one node each: a panic is caught and the service runs again.
    /// (`startup` is the store preparation at start; `runner` is a run's own bookkeeping,
    /// checked in its own test below.)
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_service_that_panics_once_runs_again_and_the_task_keeps_running() {
        let services = [
            "claimer",
            "heartbeat",
            "pruner",
            "listener",
            "config",
            "sla",
            "incidents",
            "cancels",
            "reporter",
            "database",
            "delivery",
            "startup",
        ];
        let mut all = tokio::task::JoinSet::new();
        for service in services {
            all.spawn(restarts_after_one_panic(service));
        }
        while let Some(done) = all.join_next().await {
            done.expect("a service's case");
        }
    }

    /// The services that hold the runs' locks cannot be restarted: a panic stops the node with
    /// status 70 and says why on standard error.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_completer_or_the_lock_renewal_panicking_stops_the_node_with_status_70() {
        for service in ["completer", "renewer"] {
            let db = TestDb::postgres(&format!("svc_{service}")).await;
            let mut node = Node::start(&db, &format!("{service}:1"));
            let status = node.exited_within(Duration::from_secs(60)).await;
            assert_eq!(
                status.and_then(|s| s.code()),
                Some(scheduler::testing::engine::FAIL_STOP_EXIT_CODE),
                "{service}: {}",
                node.stderr()
            );
            let stderr = node.stderr();
            assert!(
                stderr.contains(&format!(
                    "FAIL-STOP: the {service} service of this node panicked"
                )) && stderr.contains("injected panic"),
                "{service}: {stderr}"
            );
            drop(node);
            db.cleanup().await;
        }
    }

    /// A service that panics on every pass is shown down while it is restarted: `/readyz` 503
    /// naming it, `/api/nodes` with its state, and the node's row in the store (what other
    /// nodes' `/api/nodes` read); after five panics in a row the node stops with status 70.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_service_that_keeps_panicking_is_named_by_readyz_then_stops_the_node() {
        let db = TestDb::postgres("svc_always").await;
        let mut node = Node::start(&db, "sla:always");
        wait_until(
            Duration::from_secs(60),
            "/readyz says the sla service is restarting",
            || async {
                node.get("/readyz").await.is_some_and(|(status, body)| {
                    status == 503 && body.contains("the sla service is restarting after a panic")
                })
            },
        )
        .await;
        let (status, nodes) = node.get("/api/nodes").await.expect("/api/nodes answers");
        assert_eq!(status, 200, "{nodes}");
        assert!(
            nodes.contains("\"name\":\"sla\",\"state\":\"restarting\""),
            "{nodes}"
        );
        wait_until(
            Duration::from_secs(60),
            "the node's row says its sla service is down",
            || async {
                db.api()
                    .nodes()
                    .await
                    .unwrap()
                    .iter()
                    .any(|n| n.node_id == "services-node" && n.services_down == ["sla"])
            },
        )
        .await;
        let status = node.exited_within(Duration::from_secs(60)).await;
        assert_eq!(
            status.and_then(|s| s.code()),
            Some(scheduler::testing::engine::FAIL_STOP_EXIT_CODE),
            "{}",
            node.stderr()
        );
        assert!(
            node.stderr()
                .contains("FAIL-STOP: the sla service of this node panicked 5 times in a row"),
            "{}",
            node.stderr()
        );
        drop(node);
        db.cleanup().await;
    }

    /// A panic in a run's own bookkeeping (after its handler returned) ends that run `failed`
    /// with the panic's message and releases its lock: the task runs on, its later runs succeed.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_panic_in_a_runs_bookkeeping_fails_that_run_and_the_task_runs_on() {
        let db = TestDb::postgres("svc_runner").await;
        let node = Node::start(&db, "runner:1");
        wait_until(
            Duration::from_secs(60),
            "a failed run, then a succeeded one",
            || async {
                let runs = db
                    .api()
                    .runs(&RunQuery::latest(50).task(TICK))
                    .await
                    .unwrap();
                runs.iter().any(|r| r.status == RunStatus::Failed)
                    && runs.iter().any(|r| r.status == RunStatus::Succeeded)
            },
        )
        .await;
        let runs = db
            .api()
            .runs(&RunQuery::latest(50).task(TICK))
            .await
            .unwrap();
        let failed: Vec<_> = runs
            .iter()
            .filter(|r| r.status == RunStatus::Failed)
            .collect();
        assert_eq!(failed.len(), 1, "{runs:#?}");
        let error = failed[0].error.as_deref().unwrap_or_default();
        assert!(
            error.contains("internal error in the scheduler") && error.contains("injected panic"),
            "{error}"
        );
        assert!(panics_counted(&node, "runner").await);
        drop(node);
        db.cleanup().await;
    }
}
