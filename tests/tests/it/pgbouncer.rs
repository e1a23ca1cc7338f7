//! The scheduler through PgBouncer in transaction mode (`?pgbouncer=true`), against a private
//! cluster: Debian's PgBouncer, started here with fewer server connections than its clients, so
//! server connections change hands between transactions as they do in production. Judged by
//! the handlers' own record of what ran.

use crate::common;

mod on_postgres {
    use std::sync::Arc;
    use std::time::Duration;

    use scheduler::store::{PgStore, Store};
    use scheduler::{Scheduler, TaskContext, TaskRegistry, task};
    use scheduler_tests::{PgBouncer, TempCluster};

    use super::common::*;

    #[task(name = "bouncer.tick")]
    async fn bouncer_tick(ctx: TaskContext) {
        let rec = recorder(&ctx);
        let _run = rec.enter(&ctx);
        tokio::time::sleep(Duration::from_millis(50)).await;
        rec.finished(&ctx);
    }

    #[task(name = "bouncer.change")]
    async fn bouncer_change(ctx: TaskContext) {
        let rec = recorder(&ctx);
        let _run = rec.enter(&ctx);
        rec.finished(&ctx);
    }

    const SCHEMA: &str = "jobs";

    /// A store through `bouncer`, in schema `jobs`, listening over `listen` when given.
    fn bouncer_store(bouncer: &PgBouncer, listen: Option<String>) -> Arc<dyn Store> {
        let mut builder = PgStore::builder(bouncer.url("postgres")).schema(SCHEMA);
        if let Some(url) = listen {
            builder = builder.listen_url(url);
        }
        let store = builder.connect_lazy().unwrap();
        assert!(store.through_pgbouncer());
        Arc::new(store)
    }

    fn registry(name: &'static str) -> TaskRegistry {
        TaskRegistry::collect().unwrap().retain(move |n| n == name)
    }

    async fn start_both() -> (TempCluster, PgBouncer) {
        let cluster = TempCluster::start().await.expect("start a cluster");
        let bouncer = PgBouncer::start(cluster.port()).expect("start pgbouncer");
        (cluster, bouncer)
    }

    /// Without `pgbouncer=true` the pooler refuses sqlx's startup parameters; the error says
    /// what to write.
    #[tokio::test]
    async fn without_the_flag_the_error_says_to_set_it() {
        let (_cluster, bouncer) = start_both().await;
        let url = bouncer.url("postgres").replace("?pgbouncer=true", "");
        let store = PgStore::builder(url).connect_lazy().unwrap();
        let error = store.migrate().await.unwrap_err().to_string();
        assert!(error.contains("pgbouncer=true"), "{error}");
    }

    /// The operator command line connects as the nodes do: through the pooler with
    /// `pgbouncer=true` (it used to connect on its own and send `extra_float_digits`, which
    /// PgBouncer refuses).
    #[tokio::test]
    async fn the_operator_cli_works_through_the_pooler() {
        let (_cluster, bouncer) = start_both().await;
        bouncer_store(&bouncer, None).migrate().await.unwrap();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_test_node"))
            .args(["status", "--database-url", &bouncer.url("postgres")])
            .args(["--schema", SCHEMA])
            .env_remove("DATABASE_URL")
            .env_remove("SCHEDULER_DATABASE_URL")
            .env_remove("SCHEDULER_SCHEMA")
            .output()
            .expect("run the application binary");
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{text}");
        assert!(!text.contains("unsupported startup parameter"), "{text}");
    }

    #[tokio::test]
    async fn ticks_run_exactly_once_through_the_pooler_with_two_nodes() {
        let (cluster, bouncer) = start_both().await;
        let rec = Arc::new(Recorder::default());
        let build = |id: &str| {
            Scheduler::builder()
                .store(bouncer_store(&bouncer, None))
                .node_id(id)
                .registry(registry("bouncer.tick"))
                .lock_lifetime(Duration::from_secs(3))
                .poll_interval(Duration::from_secs(1))
                .heartbeat_interval(Duration::from_secs(1))
                .shutdown_timeout(Duration::from_secs(5))
                .config_document(doc(vec![entry("bouncer.tick", "* * * * * *")]))
                .state(Arc::clone(&rec))
                .build()
                .unwrap()
        };
        // Both start at once: their migrations race under the transaction-level lock.
        let a = start(build("a"));
        let b = start(build("b"));
        wait_until(Duration::from_secs(60), "eight ticks ran", || async {
            rec.finishes.lock().unwrap().len() >= 8
        })
        .await;
        a.stop().await;
        b.stop().await;
        assert_eq!(rec.ticks_started_twice("bouncer.tick"), vec![]);
        // The database's record agrees, and nothing was written to `public`.
        let pool = sqlx::PgPool::connect(&cluster.url()).await.unwrap();
        let (runs, ticks): (i64, i64) = sqlx::query_as(
            "SELECT count(*), count(DISTINCT scheduled_at) FROM jobs.scheduler_runs \
             WHERE task_name = 'bouncer.tick'",
        )
        .fetch_one(&pool)
        .await
        .unwrap();
        assert!(runs >= 8, "{runs}");
        assert_eq!(runs, ticks, "a tick ran twice");
        let in_public: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'",
        )
        .fetch_one(&pool)
        .await
        .unwrap();
        assert_eq!(in_public, 0);
        pool.close().await;
        let log = bouncer.log();
        assert!(!log.contains("prepared statement"), "{log}");
    }

    /// Node `a` applies a config change through the pooler and stops; node `b`, which has no
    /// config of its own, runs the task it enabled: it heard of the change by NOTIFY (over its
    /// direct listen URL, `listen`) or, without one, by its poll interval.
    async fn a_config_change_reaches_another_node(listen: bool) {
        let (cluster, bouncer) = start_both().await;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tasks.json");
        let write = |enabled: bool| {
            let text = format!(
                r#"{{"tasks":[{{"name":"bouncer.change","enabled":{enabled},"cron":"* * * * * *"}}]}}"#
            );
            let tmp = dir.path().join("tasks.tmp");
            std::fs::write(&tmp, text).unwrap();
            std::fs::rename(&tmp, &path).unwrap();
        };
        write(false);
        let rec = Arc::new(Recorder::default());
        // With LISTEN, only a notification can wake `b` within the deadline.
        let poll = if listen { 600 } else { 1 };
        let direct = listen.then(|| format!("{}?application_name=b-listener", cluster.url()));
        let b = start(
            Scheduler::builder()
                .store(bouncer_store(&bouncer, direct))
                .node_id("b")
                .registry(registry("bouncer.change"))
                .poll_interval(Duration::from_secs(poll))
                .heartbeat_interval(Duration::from_secs(1))
                .shutdown_timeout(Duration::from_secs(5))
                .state(Arc::clone(&rec))
                .build()
                .unwrap(),
        );
        let a = start(
            Scheduler::builder()
                .store(bouncer_store(&bouncer, None))
                .node_id("a")
                .registry(registry("bouncer.change"))
                .config(path.to_str().unwrap())
                .config_poll_interval(Duration::from_millis(200))
                .poll_interval(Duration::from_secs(600))
                .heartbeat_interval(Duration::from_secs(1))
                .shutdown_timeout(Duration::from_secs(5))
                .state(Arc::clone(&rec))
                .build()
                .unwrap(),
        );
        let pool = sqlx::PgPool::connect(&cluster.url()).await.unwrap();
        let enabled = || async {
            sqlx::query_scalar::<_, bool>(
                "SELECT enabled FROM jobs.scheduler_tasks WHERE name = 'bouncer.change'",
            )
            .fetch_optional(&pool)
            .await
            .ok()
            .flatten()
        };
        wait_until(Duration::from_secs(60), "the disabled task row", || async {
            enabled().await == Some(false)
        })
        .await;
        if listen {
            // `b` listens (its listener connection is up) before the change is made.
            wait_until(Duration::from_secs(60), "b's listener", || async {
                sqlx::query_scalar::<_, i64>(
                    "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'b-listener'",
                )
                .fetch_one(&pool)
                .await
                .unwrap()
                    == 1
            })
            .await;
        }
        write(true);
        wait_until(Duration::from_secs(60), "a applied the change", || async {
            enabled().await == Some(true)
        })
        .await;
        a.stop().await;
        wait_until(
            Duration::from_secs(30),
            "b runs the enabled task",
            || async {
                rec.starts
                    .lock()
                    .unwrap()
                    .iter()
                    .any(|(task, _, node)| task == "bouncer.change" && node == "b")
            },
        )
        .await;
        b.stop().await;
        assert_eq!(rec.ticks_started_twice("bouncer.change"), vec![]);
        pool.close().await;
    }

    #[tokio::test]
    async fn a_config_change_reaches_a_node_listening_on_a_direct_url() {
        a_config_change_reaches_another_node(true).await;
    }

    #[tokio::test]
    async fn a_config_change_reaches_a_node_without_listen_by_its_poll_interval() {
        a_config_change_reaches_another_node(false).await;
    }
}
