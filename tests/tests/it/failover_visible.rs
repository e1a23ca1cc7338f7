//! A failover the operator can see, on real servers on 127.0.0.1: a primary with a real
//! streaming standby (`pg_basebackup -R`) promoted with `pg_ctl promote`, the node following it
//! through a URL that lists both. The move is logged, raised as `database.failed_over` (judged
//! by what a real webhook receiver got), counted on `/metrics`, and `/api/nodes` names the new
//! server. At start the node says how its database replicates, judged by its own log: a
//! warning for an asynchronous standby unless the operator accepts it, none for a synchronous
//! one or a single server.

use crate::common;

mod on_postgres {
    use std::sync::{Arc, Mutex, Once};
    use std::time::Duration;

    use scheduler::store::PgStore;
    use scheduler::{Scheduler, SchedulerBuilder, TaskContext, TaskRegistry, task};
    use scheduler_tests::TempCluster;

    use super::common::*;

    const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

    #[task(name = "failover_visible.tick")]
    async fn tick(ctx: TaskContext) {
        let rec = recorder(&ctx);
        let _run = rec.enter(&ctx);
        rec.finished(&ctx);
    }

    // ---- the node's own log ---------------------------------------------------------------

    static LOG: Mutex<Vec<u8>> = Mutex::new(Vec::new());

    struct LogWriter;

    impl std::io::Write for LogWriter {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            LOG.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// `scheduler_tests::init_tracing`, plus the capture of the scheduler's `INFO` and higher
    /// lines into [`LOG`] (whatever `RUST_LOG` says).
    fn init_tracing() {
        use tracing_subscriber::prelude::*;
        static INIT: Once = Once::new();
        INIT.call_once(|| {
            let filter = tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
            let shown = tracing_subscriber::fmt::layer()
                .with_test_writer()
                .with_filter(filter);
            let captured = tracing_subscriber::fmt::layer()
                .with_writer(|| LogWriter)
                .with_ansi(false)
                .with_filter(tracing_subscriber::EnvFilter::new("scheduler=info"));
            tracing_subscriber::registry()
                .with(shown)
                .with(captured)
                .try_init()
                .expect("no other subscriber in this test binary");
        });
    }

    /// The captured lines that contain every one of `needles`.
    fn logged(needles: &[&str]) -> Vec<String> {
        String::from_utf8_lossy(&LOG.lock().unwrap())
            .lines()
            .filter(|l| needles.iter().all(|n| l.contains(n)))
            .map(str::to_owned)
            .collect()
    }

    // ---- a webhook receiver ---------------------------------------------------------------

    /// The bodies a receiver got, parsed.
    #[derive(Default)]
    struct Received {
        bodies: Mutex<Vec<serde_json::Value>>,
    }

    impl Received {
        fn of(&self, kind: &str) -> Vec<serde_json::Value> {
            self.bodies
                .lock()
                .unwrap()
                .iter()
                .filter(|b| b["type"] == kind)
                .cloned()
                .collect()
        }
    }

    /// A webhook receiver on a free port of 127.0.0.1 answering 200 at `/hook`.
    async fn receiver() -> (String, Arc<Received>) {
        let got = Arc::new(Received::default());
        let sink = Arc::clone(&got);
        let app = axum::Router::new().route(
            "/hook",
            axum::routing::post(move |body: String| {
                let sink = Arc::clone(&sink);
                async move {
                    let json = serde_json::from_str(&body).unwrap_or(serde_json::Value::Null);
                    sink.bodies.lock().unwrap().push(json);
                    axum::http::StatusCode::OK
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        (url, got)
    }

    // ---- nodes ----------------------------------------------------------------------------

    /// A node on `url` running the one-second task, with test-sized intervals.
    fn node(url: &str, id: &str, rec: &Arc<Recorder>) -> SchedulerBuilder {
        init_tracing();
        let store = PgStore::builder(url).schema("jobs").connect_lazy().unwrap();
        Scheduler::builder()
            .store(Arc::new(store))
            .node_id(id)
            .registry(
                TaskRegistry::collect()
                    .unwrap()
                    .retain(|n| n == "failover_visible.tick"),
            )
            .lock_lifetime(Duration::from_secs(3))
            .poll_interval(Duration::from_secs(1))
            .heartbeat_interval(Duration::from_secs(1))
            .shutdown_timeout(Duration::from_secs(5))
            .config_document(doc(vec![entry("failover_visible.tick", "* * * * * *")]))
            .state(Arc::clone(rec))
    }

    /// `GET http://{admin}{path}` as text.
    async fn get(admin: std::net::SocketAddr, path: &str) -> String {
        let response = reqwest::get(format!("http://{admin}{path}")).await.unwrap();
        assert_eq!(response.status().as_u16(), 200, "{path}");
        response.text().await.unwrap()
    }

    /// The database server `/api/nodes` shows for node `id`.
    async fn shown_server(admin: std::net::SocketAddr, id: &str) -> Option<String> {
        let nodes: serde_json::Value =
            serde_json::from_str(&get(admin, "/api/nodes").await).unwrap();
        nodes["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["node_id"] == id)
            .and_then(|n| n["database_server"].as_str().map(str::to_owned))
    }

    /// Waits until `primary` streams to a standby (its `pg_stat_replication` shows one).
    async fn wait_for_streaming(primary: &TempCluster) {
        let pool = sqlx::PgPool::connect(&primary.url()).await.unwrap();
        wait_until(Duration::from_secs(60), "the standby streams", || async {
            sqlx::query_scalar::<_, i64>(
                "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'",
            )
            .fetch_one(&pool)
            .await
            .unwrap()
                > 0
        })
        .await;
        pool.close().await;
    }

    // ---- failover visible -----------------------------------------------------------------

    /// The primary stops and the standby, listed first, is promoted. The node follows, and
    /// says so: a warning line and a `database.failed_over` event with the new server and its
    /// timeline (2: the promoted standby's), which a real webhook receiver gets; the counter
    /// reads 1 on `/metrics` with the new server in `scheduler_database_server_info`; and
    /// `/api/nodes` names the new server for the node. The task goes on running (its handler's
    /// own record).
    #[tokio::test]
    async fn a_promotion_is_logged_raised_counted_and_shown() {
        let primary = TempCluster::start().await.expect("start a primary");
        let standby = primary.start_standby().await.expect("start a standby");
        let (p, s) = (primary.port(), standby.port());
        let (old, new) = (format!("127.0.0.1:{p}"), format!("127.0.0.1:{s}"));
        let url = format!(
            "postgres://postgres@127.0.0.1:{s},127.0.0.1:{p}/postgres?target_session_attrs=read-write&connect_timeout=2"
        );
        let (hook, got) = receiver().await;
        let rec = Arc::new(Recorder::default());
        let scheduler = node(&url, "fv-moves", &rec)
            .webhook(scheduler::webhook::WebhookSettings::new(&hook, SECRET).unwrap())
            .admin_addr("127.0.0.1:0".parse().unwrap())
            .build()
            .unwrap();
        let admin = scheduler.admin_addr().unwrap();
        let running = start(scheduler);
        let finished = || rec.finishes.lock().unwrap().len();
        wait_until(Duration::from_secs(60), "two ticks ran", || async {
            finished() >= 2
        })
        .await;
        wait_until(
            Duration::from_secs(30),
            "/api/nodes names the primary",
            || async { shown_server(admin, "fv-moves").await.as_deref() == Some(old.as_str()) },
        )
        .await;
        let metrics = get(admin, "/metrics").await;
        assert!(
            metrics.contains(&format!(
                "scheduler_database_server_info{{server=\"{old}\"}} 1"
            )),
            "{metrics}"
        );
        assert!(
            !metrics.contains("scheduler_database_failovers_total 1"),
            "no failover yet: {metrics}"
        );
        assert!(got.of("database.failed_over").is_empty());

        primary.stop().await.expect("stop the primary");
        standby.promote().await.expect("promote the standby");

        wait_until(
            Duration::from_secs(60),
            "the webhook receiver got database.failed_over",
            || async { !got.of("database.failed_over").is_empty() },
        )
        .await;
        let raised = got.of("database.failed_over");
        assert_eq!(raised.len(), 1, "{raised:?}");
        let data = &raised[0]["data"];
        assert_eq!(data["server"], new.as_str(), "{data}");
        assert_eq!(data["previous"], old.as_str(), "{data}");
        assert_eq!(data["timeline"], 2, "{data}");
        assert_eq!(data["node"], "fv-moves", "{data}");

        let line = format!("database failed over: now {new}, timeline 2");
        let lines = logged(&[&line, "WARN"]);
        assert_eq!(lines.len(), 1, "{lines:?}");

        let metrics = get(admin, "/metrics").await;
        assert!(
            metrics.contains("scheduler_database_failovers_total 1"),
            "{metrics}"
        );
        assert!(
            metrics.contains(&format!(
                "scheduler_database_server_info{{server=\"{new}\"}} 1"
            )),
            "{metrics}"
        );
        assert!(
            !metrics.contains(&old),
            "the former server is gone: {metrics}"
        );
        wait_until(
            Duration::from_secs(30),
            "/api/nodes names the new primary",
            || async { shown_server(admin, "fv-moves").await.as_deref() == Some(new.as_str()) },
        )
        .await;
        let before = finished();
        wait_until(
            Duration::from_secs(60),
            "ticks ran on the new primary",
            || async { finished() >= before + 2 },
        )
        .await;
        assert!(
            !get(admin, "/api/nodes").await.contains("postgres@"),
            "no credentials in /api/nodes"
        );
        running.stop().await;
    }

    // ---- the replication mode at start ----------------------------------------------------

    /// Behind a front door that moves to the promoted standby (a VIP, HAProxy, a Kubernetes
    /// `-rw` Service), the address stays the same: the failover is seen by the new timeline,
    /// and raised and counted all the same.
    #[tokio::test]
    async fn a_failover_behind_a_front_door_is_seen_by_its_timeline() {
        let primary = TempCluster::start().await.expect("start a primary");
        let standby = primary.start_standby().await.expect("start a standby");
        let at = |port: u16| std::net::SocketAddr::from(([127, 0, 0, 1], port));
        let door = scheduler_tests::front_door::FrontDoor::open(at(primary.port()))
            .await
            .expect("open the front door");
        let address = door.addr().to_string();
        let url = format!("postgres://postgres@{address}/postgres");
        let (hook, got) = receiver().await;
        let rec = Arc::new(Recorder::default());
        let scheduler = node(&url, "fv-door", &rec)
            .webhook(scheduler::webhook::WebhookSettings::new(&hook, SECRET).unwrap())
            .admin_addr("127.0.0.1:0".parse().unwrap())
            .build()
            .unwrap();
        let admin = scheduler.admin_addr().unwrap();
        let running = start(scheduler);
        let finished = || rec.finishes.lock().unwrap().len();
        wait_until(Duration::from_secs(60), "two ticks ran", || async {
            finished() >= 2
        })
        .await;
        assert!(got.of("database.failed_over").is_empty());

        primary.stop().await.expect("stop the primary");
        standby.promote().await.expect("promote the standby");
        door.point_at(at(standby.port()));

        wait_until(
            Duration::from_secs(60),
            "the webhook receiver got database.failed_over",
            || async { !got.of("database.failed_over").is_empty() },
        )
        .await;
        let raised = got.of("database.failed_over");
        assert_eq!(raised.len(), 1, "{raised:?}");
        let data = &raised[0]["data"];
        assert_eq!(data["server"], address.as_str(), "{data}");
        assert_eq!(data["timeline"], 2, "{data}");
        let metrics = get(admin, "/metrics").await;
        assert!(
            metrics.contains("scheduler_database_failovers_total 1"),
            "{metrics}"
        );
        let before = finished();
        wait_until(
            Duration::from_secs(60),
            "ticks ran on the new primary",
            || async { finished() >= before + 2 },
        )
        .await;
        running.stop().await;
    }

    /// Waits for node `id`'s start-up line about replication; its lines about it.
    async fn replication_lines(id: &str) -> Vec<String> {
        let node = format!("node=\"{id}\"");
        wait_until(
            Duration::from_secs(60),
            "the node said how its database replicates",
            || async { !logged(&["database replication", &node]).is_empty() },
        )
        .await;
        logged(&["database replication", &node])
    }

    /// A standby the primary waits for at each commit (`synchronous_standby_names = '*'`,
    /// `synchronous_commit = on`): an info line saying replication is synchronous, no warning.
    #[tokio::test]
    async fn a_synchronous_standby_is_stated_without_a_warning() {
        let primary = TempCluster::start_with(&[
            ("synchronous_commit", "on"),
            ("synchronous_standby_names", "*"),
        ])
        .await
        .expect("start a primary");
        let _standby = primary.start_standby().await.expect("start a standby");
        wait_for_streaming(&primary).await;
        let rec = Arc::new(Recorder::default());
        let running = start(node(&primary.url(), "fv-sync", &rec).build().unwrap());
        let lines = replication_lines("fv-sync").await;
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(lines[0].contains("INFO"), "{lines:?}");
        assert!(lines[0].contains("is synchronous"), "{lines:?}");
        running.stop().await;
    }

    /// A standby streaming asynchronously (`synchronous_standby_names` empty), reached through
    /// the primary's own URL: the warning names the risk (ticks may run twice) and the setting
    /// that accepts it; with the setting, an info line and no warning.
    #[tokio::test]
    async fn an_asynchronous_standby_is_a_warning_unless_accepted() {
        let primary = TempCluster::start().await.expect("start a primary");
        let standby = primary.start_standby().await.expect("start a standby");
        wait_for_streaming(&primary).await;
        let rec = Arc::new(Recorder::default());

        let running = start(node(&primary.url(), "fv-async", &rec).build().unwrap());
        let lines = replication_lines("fv-async").await;
        assert_eq!(lines.len(), 1, "{lines:?}");
        let warning = &lines[0];
        assert!(warning.contains("WARN"), "{warning}");
        assert!(warning.contains("is asynchronous"), "{warning}");
        assert!(
            warning.contains("synchronous_standby_names is empty"),
            "{warning}"
        );
        assert!(warning.contains("may run twice"), "{warning}");
        assert!(
            warning.contains("SCHEDULER_ACCEPT_ASYNC_REPLICATION=true"),
            "{warning}"
        );
        running.stop().await;

        // Accepted, through a URL listing both servers.
        let url = format!(
            "postgres://postgres@127.0.0.1:{},127.0.0.1:{}/postgres",
            standby.port(),
            primary.port()
        );
        let running = start(
            node(&url, "fv-accepted", &rec)
                .accept_async_replication(true)
                .build()
                .unwrap(),
        );
        let lines = replication_lines("fv-accepted").await;
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(lines[0].contains("INFO"), "{lines:?}");
        assert!(lines[0].contains("accepted"), "{lines:?}");
        assert!(lines[0].contains("hosts=2"), "{lines:?}");
        running.stop().await;

        // The same through the environment variable.
        let env = [
            ("SCHEDULER_DATABASE_URL", url.as_str()),
            ("SCHEDULER_ACCEPT_ASYNC_REPLICATION", "true"),
        ];
        let lookup = |name: &str| {
            env.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
        };
        let error = SchedulerBuilder::from_lookup(|name: &str| {
            (name == "SCHEDULER_ACCEPT_ASYNC_REPLICATION").then(|| "sure".to_owned())
        })
        .unwrap_err()
        .to_string();
        assert!(
            error.contains("SCHEDULER_ACCEPT_ASYNC_REPLICATION") && error.contains("true"),
            "{error}"
        );
        let running = start(
            SchedulerBuilder::from_lookup(lookup)
                .unwrap()
                .node_id("fv-accepted-env")
                .registry(TaskRegistry::collect().unwrap().retain(|_| false))
                .shutdown_timeout(Duration::from_secs(5))
                .build()
                .unwrap(),
        );
        let lines = replication_lines("fv-accepted-env").await;
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(
            lines[0].contains("INFO") && lines[0].contains("accepted"),
            "{lines:?}"
        );
        running.stop().await;
    }

    /// One server, no standby, one host: an info line, no warning.
    #[tokio::test]
    async fn a_single_server_is_stated_without_a_warning() {
        let server = TempCluster::start().await.expect("start a server");
        let rec = Arc::new(Recorder::default());
        let running = start(node(&server.url(), "fv-single", &rec).build().unwrap());
        let lines = replication_lines("fv-single").await;
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(lines[0].contains("INFO"), "{lines:?}");
        assert!(lines[0].contains("none"), "{lines:?}");
        running.stop().await;
    }
}
