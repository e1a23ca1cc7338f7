//! LISTEN comes back after its connection is lost, on the server the store chose (after a
//! failover, the new primary), and the node then looks at everything once: notifications are
//! not replicated, and those sent while nobody listened are gone.
//!
//! The nodes here poll only every ten minutes and their task is due once a year, so a manual
//! run that starts within a minute was brought by a notification heard on the new LISTEN, or by
//! the look the node takes when it listens again. Judged by the handlers' own record.

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use common::{doc, entry, start, wait_until};
use scheduler::store::{HistoryStore, PgStore, Store};
use scheduler::testing::operate::{Actor, trigger};
use scheduler::{Scheduler, SchedulerBuilder, TaskContext, TaskRegistry, task};
use scheduler_tests::{TempCluster, TestSchema};

scheduler_tests::postgres_tests! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    a_killed_listen_session_comes_back_and_hears_a_trigger,
    after_a_promotion_listen_comes_back_on_the_new_primary;
}

/// The poll interval: far longer than any wait here.
const SLOW_POLL: Duration = Duration::from_secs(600);
/// A yearly schedule: the task is never due by itself during a test.
const YEARLY: &str = "0 0 0 1 1 *";

/// What the handler saw: (run id, tick) per start. The task is never due by itself: every
/// run is a manual one.
#[derive(Default)]
struct Seen(Mutex<Vec<(i64, DateTime<Utc>)>>);

impl Seen {
    fn manual_runs(&self) -> usize {
        self.0.lock().unwrap().len()
    }

    fn ticks_started_twice(&self) -> Vec<DateTime<Utc>> {
        let mut ticks: Vec<DateTime<Utc>> = self.0.lock().unwrap().iter().map(|s| s.1).collect();
        ticks.sort();
        let mut twice: Vec<DateTime<Utc>> = ticks
            .windows(2)
            .filter(|w| w[0] == w[1])
            .map(|w| w[0])
            .collect();
        twice.dedup();
        twice
    }
}

#[task(name = "la.manual")]
async fn la_manual(ctx: TaskContext) {
    let seen = ctx.state::<Arc<Seen>>().expect("the test's record");
    seen.0
        .lock()
        .unwrap()
        .push((ctx.run_id(), ctx.scheduled_at()));
}

fn slow_node(store: &PgStore, seen: &Arc<Seen>) -> SchedulerBuilder {
    Scheduler::builder()
        .store(Arc::new(store.clone()))
        .node_id("n1")
        .registry(
            TaskRegistry::collect()
                .unwrap()
                .retain(|n| n == "la.manual"),
        )
        .lock_lifetime(Duration::from_secs(3))
        .poll_interval(SLOW_POLL)
        .heartbeat_interval(Duration::from_secs(1))
        .shutdown_timeout(Duration::from_secs(5))
        .config_document(doc(vec![entry("la.manual", YEARLY)]))
        .state(Arc::clone(seen))
}

/// Asks for a run of `la.manual` on `store` and waits (a minute at most, a tenth of the poll
/// interval) until the handler has run `runs` manual runs.
async fn trigger_and_wait(store: &dyn Store, seen: &Seen, runs: usize, what: &str) {
    trigger(store, "la.manual", &Actor::new("test", "listen_again"))
        .await
        .expect("the trigger is recorded");
    wait_until(Duration::from_secs(60), what, || async {
        seen.manual_runs() >= runs
    })
    .await;
}

/// The pid of the session listening on `channel` (`None` while there is none).
async fn listening_pid(admin: &sqlx::PgPool, channel: &str) -> Option<i32> {
    sqlx::query_scalar(
        "SELECT pid FROM pg_stat_activity WHERE starts_with(query, $1) AND pid <> pg_backend_pid()",
    )
    .bind(format!(r#"LISTEN "{channel}""#))
    .fetch_optional(admin)
    .await
    .unwrap()
}

/// The node's LISTEN session is ended by an administrator (`pg_terminate_backend`): a trigger
/// sent at once, before the node listens again, and one sent after, both run within a minute.
async fn a_killed_listen_session_comes_back_and_hears_a_trigger() {
    scheduler_tests::init_tracing();
    let db = TestSchema::new("listen_again").await;
    let store = PgStore::builder(db.url.clone())
        .schema(db.schema.clone())
        .connect_lazy()
        .unwrap();
    store.migrate().await.unwrap();
    let seen = Arc::new(Seen::default());
    let node = start(slow_node(&store, &seen).build().unwrap());
    let channel = store.notify_channel().to_owned();
    wait_until(Duration::from_secs(60), "the node listens", || async {
        listening_pid(&db.pool, &channel).await.is_some()
            && !store.task_states(None).await.unwrap().is_empty()
    })
    .await;
    let first = listening_pid(&db.pool, &channel).await;
    trigger_and_wait(&store, &seen, 1, "a manual run while listening").await;
    let killed: bool = sqlx::query_scalar("SELECT pg_terminate_backend($1)")
        .bind(first.unwrap())
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert!(killed, "the LISTEN session was ended");
    trigger_and_wait(&store, &seen, 2, "a manual run sent as LISTEN was lost").await;
    wait_until(Duration::from_secs(60), "a new LISTEN session", || async {
        listening_pid(&db.pool, &channel)
            .await
            .is_some_and(|pid| Some(pid) != first)
    })
    .await;
    trigger_and_wait(&store, &seen, 3, "a manual run after LISTEN came back").await;
    node.stop().await;
    assert_eq!(seen.ticks_started_twice(), Vec::<DateTime<Utc>>::new());
    db.cleanup().await;
}

/// The primary stops and its standby (listed first in a multi-host URL) is promoted: a trigger
/// sent to the new primary at once runs, and so does one sent after the node settled there,
/// which only a LISTEN on the new primary can bring before the ten-minute poll.
async fn after_a_promotion_listen_comes_back_on_the_new_primary() {
    scheduler_tests::init_tracing();
    let primary = TempCluster::start().await.expect("start a primary");
    let standby = primary.start_standby().await.expect("start a standby");
    let (p, s) = (primary.port(), standby.port());
    let url = format!(
        "postgres://postgres@127.0.0.1:{s},127.0.0.1:{p}/postgres?target_session_attrs=read-write&connect_timeout=2"
    );
    let store = PgStore::builder(url).schema("jobs").connect_lazy().unwrap();
    let seen = Arc::new(Seen::default());
    let node = start(slow_node(&store, &seen).build().unwrap());
    let channel = store.notify_channel().to_owned();
    let on_primary = sqlx::PgPool::connect(&primary.url()).await.unwrap();
    wait_until(Duration::from_secs(60), "the node listens", || async {
        listening_pid(&on_primary, &channel).await.is_some()
    })
    .await;
    trigger_and_wait(&store, &seen, 1, "a manual run before the failover").await;
    on_primary.close().await;

    primary.stop().await.expect("stop the primary");
    standby.promote().await.expect("promote the standby");
    let promoted = std::time::Instant::now();
    // Another client of the new primary (the operator's command line, say).
    let operator = PgStore::builder(standby.url())
        .schema("jobs")
        .connect_lazy()
        .unwrap();
    trigger_and_wait(
        &operator,
        &seen,
        2,
        "a manual run sent right after the promotion",
    )
    .await;
    eprintln!(
        "the manual run sent right after the promotion ran {:?} after it",
        promoted.elapsed()
    );
    let on_new = sqlx::PgPool::connect(&standby.url()).await.unwrap();
    wait_until(
        Duration::from_secs(60),
        "the node listens on the new primary",
        || async { listening_pid(&on_new, &channel).await.is_some() },
    )
    .await;
    let sent = std::time::Instant::now();
    trigger_and_wait(&operator, &seen, 3, "a manual run heard on the new primary").await;
    eprintln!(
        "a manual run sent later ran {:?} after it was sent",
        sent.elapsed()
    );
    on_new.close().await;
    node.stop().await;
    assert_eq!(seen.ticks_started_twice(), Vec::<DateTime<Utc>>::new());
    assert_eq!(store.current_server(), Some(format!("127.0.0.1:{s}")));
}
