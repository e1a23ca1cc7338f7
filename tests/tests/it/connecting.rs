//! The connection strings libpq takes, against real servers on 127.0.0.1: a host list whose
//! first host is a closed port, the keyword form, and a primary with a real streaming standby
//! (`pg_basebackup -R`) listed first, where `target_session_attrs` chooses the server. Whether
//! a task ran is judged by its handler's own record.

use crate::common;

mod on_postgres {
    use std::sync::Arc;
    use std::time::Duration;

    use scheduler::store::postgres::choose_server;
    use scheduler::store::{HistoryStore, NodeStore, PgStore, Store, StoreSettings};
    use scheduler::{Scheduler, TaskContext, TaskRegistry, task};
    use scheduler_tests::TempCluster;

    use super::common::*;

    #[task(name = "hosts.tick")]
    async fn hosts_tick(ctx: TaskContext) {
        let rec = recorder(&ctx);
        let _run = rec.enter(&ctx);
        rec.finished(&ctx);
    }

    /// A port on 127.0.0.1 nothing listens on (bound, then released).
    fn closed_port() -> u16 {
        std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    }

    /// The first host refuses the connection: the store goes on to the second, as libpq does.
    #[tokio::test]
    async fn a_closed_first_host_is_skipped() {
        let cluster = TempCluster::start().await.expect("start a cluster");
        let port = cluster.port();
        let url = format!(
            "postgres://postgres:pw@127.0.0.1:{},127.0.0.1:{port}/postgres",
            closed_port()
        );
        let store = PgStore::builder(url).schema("jobs").connect_lazy().unwrap();
        store.migrate().await.unwrap();
        store.nodes().await.unwrap();
        assert_eq!(
            store.current_server().as_deref(),
            Some(format!("127.0.0.1:{port}").as_str())
        );
        assert!(!format!("{store:?}").contains(":pw@"), "{store:?}");
    }

    /// The keyword form, with its port list, through the constructor that picks a backend.
    #[tokio::test]
    async fn the_keyword_form_with_a_host_list() {
        let cluster = TempCluster::start().await.expect("start a cluster");
        let mut settings = StoreSettings::url(format!(
            "host=127.0.0.1,127.0.0.1 port={},{} dbname=postgres user=postgres connect_timeout=5",
            closed_port(),
            cluster.port()
        ));
        settings.schema = Some("jobs".into());
        let store = scheduler::store::connect(&settings).unwrap();
        store.migrate().await.unwrap();
        assert!(store.nodes().await.unwrap().is_empty());
    }

    /// A standby listed first and `target_session_attrs=read-write`: the store works on the
    /// primary and a task runs; the other targets choose the server libpq would.
    #[tokio::test]
    async fn a_standby_listed_first_is_passed_over_for_the_primary() {
        let primary = TempCluster::start().await.expect("start a primary");
        let standby = primary.start_standby().await.expect("start a standby");
        let (p, s) = (primary.port(), standby.port());
        let list = format!("127.0.0.1:{s},127.0.0.1:{p}");
        let url = |target: &str| {
            format!("postgres://postgres@{list}/postgres?target_session_attrs={target}")
        };

        let chosen = |url: String| async move { choose_server(&url).await.unwrap() };
        let at = |port: u16| format!("127.0.0.1:{port}");
        assert_eq!(chosen(url("read-only")).await, at(s));
        assert_eq!(chosen(url("standby")).await, at(s));
        assert_eq!(chosen(url("read-write")).await, at(p));
        assert_eq!(chosen(url("primary")).await, at(p));
        assert_eq!(chosen(url("any")).await, at(s));
        let primary_first = format!("postgres://postgres@127.0.0.1:{p},127.0.0.1:{s}/postgres");
        assert_eq!(
            chosen(format!(
                "{primary_first}?target_session_attrs=prefer-standby"
            ))
            .await,
            at(s)
        );
        let only_primary = format!("postgres://postgres@127.0.0.1:{p}/postgres");
        assert_eq!(
            chosen(format!(
                "{only_primary}?target_session_attrs=prefer-standby"
            ))
            .await,
            at(p)
        );
        let error = choose_server(&format!(
            "postgres://postgres@127.0.0.1:{s}/postgres?target_session_attrs=primary"
        ))
        .await
        .unwrap_err()
        .to_string();
        assert!(error.contains("is a standby"), "{error}");

        // The store refuses targets that would choose a server refusing writes.
        let refused = PgStore::builder(url("standby"))
            .connect_lazy()
            .unwrap_err()
            .to_string();
        assert!(refused.contains("scheduler writes"), "{refused}");

        let store = PgStore::builder(url("read-write"))
            .schema("jobs")
            .connect_lazy()
            .unwrap();
        let rec = Arc::new(Recorder::default());
        let node = Scheduler::builder()
            .store(Arc::new(store.clone()))
            .node_id("a")
            .registry(
                TaskRegistry::collect()
                    .unwrap()
                    .retain(|n| n == "hosts.tick"),
            )
            .lock_lifetime(Duration::from_secs(3))
            .poll_interval(Duration::from_secs(1))
            .heartbeat_interval(Duration::from_secs(1))
            .shutdown_timeout(Duration::from_secs(5))
            .config_document(doc(vec![entry("hosts.tick", "* * * * * *")]))
            .state(Arc::clone(&rec))
            .build()
            .unwrap();
        let node = start(node);
        wait_until(Duration::from_secs(60), "two ticks ran", || async {
            rec.finishes.lock().unwrap().len() >= 2
        })
        .await;
        node.stop().await;
        assert_eq!(store.current_server(), Some(at(p)));
        // A host list without target_session_attrs means read-write for the store.
        let default_target = PgStore::builder(format!("postgres://postgres@{list}/postgres"))
            .schema("jobs")
            .connect_lazy()
            .unwrap();
        assert!(!default_target.task_states(None).await.unwrap().is_empty());
        assert_eq!(default_target.current_server(), Some(at(p)));
    }

    /// The primary stops and the standby, listed first, is promoted: the node finds the new
    /// primary by itself and the task runs again (judged by its handler's record).
    #[tokio::test]
    async fn after_a_promotion_the_node_finds_the_new_primary() {
        let primary = TempCluster::start().await.expect("start a primary");
        let standby = primary.start_standby().await.expect("start a standby");
        let (p, s) = (primary.port(), standby.port());
        let url = format!(
            "postgres://postgres@127.0.0.1:{s},127.0.0.1:{p}/postgres?target_session_attrs=read-write&connect_timeout=2"
        );
        let store = PgStore::builder(url).schema("jobs").connect_lazy().unwrap();
        let rec = Arc::new(Recorder::default());
        let node = Scheduler::builder()
            .store(Arc::new(store.clone()))
            .node_id("a")
            .registry(
                TaskRegistry::collect()
                    .unwrap()
                    .retain(|n| n == "hosts.tick"),
            )
            .lock_lifetime(Duration::from_secs(3))
            .poll_interval(Duration::from_secs(1))
            .heartbeat_interval(Duration::from_secs(1))
            .shutdown_timeout(Duration::from_secs(5))
            .config_document(doc(vec![entry("hosts.tick", "* * * * * *")]))
            .state(Arc::clone(&rec))
            .build()
            .unwrap();
        let node = start(node);
        let finished = || rec.finishes.lock().unwrap().len();
        wait_until(Duration::from_secs(60), "two ticks ran", || async {
            finished() >= 2
        })
        .await;
        assert_eq!(store.current_server(), Some(format!("127.0.0.1:{p}")));
        primary.stop().await.expect("stop the primary");
        standby.promote().await.expect("promote the standby");
        let before = finished();
        wait_until(
            Duration::from_secs(60),
            "ticks ran on the new primary",
            || async { finished() >= before + 2 },
        )
        .await;
        assert_eq!(store.current_server(), Some(format!("127.0.0.1:{s}")));
        node.stop().await;
    }
}
