//! A server that stops answering while a connection is on its way back to the pool (a frozen
//! server process, a partition that keeps TCP up) must not take the pool's places with it.
//!
//! Two moments have no statement of ours running, so no operation timeout covers them: sqlx's
//! check of a connection handed back to the pool (a round trip, `Sync`), and the `UNLISTEN *`
//! the change listener's connection sends when the listener is replaced. The fault is real: a
//! proxy between the node and a private cluster (`scheduler_tests::commit_cut`) relays nothing
//! more on the connections that send those messages and keeps their sockets open. Judged by
//! the handlers' own record: the node goes on starting runs, no tick twice.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use scheduler::store::PgStore;
use scheduler::{TaskContext, task};
use scheduler_tests::TempCluster;
use scheduler_tests::commit_cut::CommitCut;

scheduler_tests::postgres_tests! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    release_checks_that_never_answer_do_not_take_the_pool,
    a_listener_replaced_while_its_server_hangs_takes_no_place;
}

#[task(name = "hang.release")]
async fn hang_release(ctx: TaskContext) {
    let _guard = recorder(&ctx).enter(&ctx);
}

#[task(name = "hang.unlisten")]
async fn hang_unlisten(ctx: TaskContext) {
    let _guard = recorder(&ctx).enter(&ctx);
}

/// A private cluster, a proxy in front of it, and a node running `task` every second through
/// the proxy with `max_connections` and short timeouts (one second each).
async fn node_behind_proxy(
    task: &str,
    max_connections: u32,
    rec: &Arc<Recorder>,
) -> (TempCluster, CommitCut, RunningNode) {
    scheduler_tests::init_tracing();
    let cluster = TempCluster::start().await.expect("a throwaway cluster");
    let proxy = CommitCut::start(([127, 0, 0, 1], cluster.port()).into())
        .await
        .expect("the proxy");
    let store = PgStore::builder(format!(
        "postgres://postgres@127.0.0.1:{}/postgres",
        proxy.addr().port()
    ))
    .max_connections(max_connections)
    .statement_timeout(Duration::from_secs(1))
    .acquire_timeout(Duration::from_secs(1))
    .connect_lazy()
    .unwrap();
    let node = start(
        cluster_node(&cluster, "n1", task, "* * * * * *", rec)
            .store(Arc::new(store))
            .build()
            .unwrap(),
    );
    wait_until(Duration::from_secs(60), "first runs", || async {
        rec.starts_of(task) >= 2
    })
    .await;
    (cluster, proxy, node)
}

/// The next six connections handed back to the pool never hear the answer to sqlx's check:
/// more than the pool's places for operations (three of four). The node goes on.
async fn release_checks_that_never_answer_do_not_take_the_pool() {
    let rec = Arc::new(Recorder::default());
    let (_cluster, proxy, node) = node_behind_proxy("hang.release", 4, &rec).await;
    proxy.hang_release_checks(6);
    wait_until(
        Duration::from_secs(30),
        "three release checks hung",
        || async { proxy.hung() >= 3 },
    )
    .await;
    let before = rec.starts_of("hang.release");
    wait_until(
        Duration::from_secs(30),
        "runs after the release checks hung",
        || async { rec.starts_of("hang.release") >= before + 3 },
    )
    .await;
    node.stop().await;
    assert_eq!(rec.ticks_started_twice("hang.release"), []);
}

/// With a pool of two, the node's operation connections are ended by the server: the store
/// chooses its server again, so the listener leaves its connection, whose `UNLISTEN *` is
/// never answered (every time, up to five). The listener's leaving takes none of the pool's
/// places; the node goes on.
async fn a_listener_replaced_while_its_server_hangs_takes_no_place() {
    let rec = Arc::new(Recorder::default());
    let (cluster, proxy, node) = node_behind_proxy("hang.unlisten", 2, &rec).await;
    proxy.hang_statements("UNLISTEN", 5);
    let admin = sqlx::PgPool::connect(&cluster.url()).await.unwrap();
    let ended: Vec<bool> = sqlx::query_scalar(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
         WHERE application_name = 'scheduler' AND query NOT LIKE 'LISTEN%'",
    )
    .fetch_all(&admin)
    .await
    .unwrap();
    assert!(!ended.is_empty(), "the node's connections were ended");
    wait_until(
        Duration::from_secs(30),
        "the listener left its connection",
        || async { proxy.hung() >= 1 },
    )
    .await;
    let before = rec.starts_of("hang.unlisten");
    wait_until(
        Duration::from_secs(30),
        "runs after the listener's UNLISTEN hung",
        || async { rec.starts_of("hang.unlisten") >= before + 3 },
    )
    .await;
    node.stop().await;
    admin.close().await;
    assert_eq!(rec.ticks_started_twice("hang.unlisten"), []);
}
