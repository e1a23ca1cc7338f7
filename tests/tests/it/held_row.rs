//! A lock whose row a transaction holds past the lock's lifetime: what a server process frozen
//! (or stuck) inside the owner's own write does. The owner is alive and in touch with the
//! database, but its renewals queue behind that statement and fail, so its lock expires; a
//! node watching it must not take it over when the row is let go (its release first in the
//! row's queue would run the tick again). Here the test holds the row from a transaction of
//! its own, lets it go the moment another node's rescue would be first in the row's queue, and
//! judges by the handler's own record: the run started once, and succeeded.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::*;
use scheduler::store::PgStore;
use scheduler::testing::store::RunStatus;
use scheduler::{SchedulerBuilder, TaskContext, task};
use sqlx::Row;

scheduler_tests::postgres_tests! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    a_lock_whose_row_is_held_past_its_lifetime_is_not_taken_over,
    a_held_row_holds_back_only_its_own_locks_renewal;
}

#[task(name = "held.slow")]
async fn held_slow(ctx: TaskContext) {
    let _guard = recorder(&ctx).enter(&ctx);
    tokio::time::sleep(Duration::from_secs(2)).await;
}

const TASK: &str = "held.slow";

/// How many `renew.long` handlers ran to their end (the handler's own record).
static LONG_ENDED: AtomicUsize = AtomicUsize::new(0);

#[task(name = "renew.long")]
async fn renew_long(ctx: TaskContext) {
    let _guard = recorder(&ctx).enter(&ctx);
    tokio::time::sleep(Duration::from_secs(8)).await;
    LONG_ENDED.fetch_add(1, Ordering::SeqCst);
}

#[task(name = "renew.stuck")]
async fn renew_stuck(ctx: TaskContext) {
    let _guard = recorder(&ctx).enter(&ctx);
    tokio::time::sleep(Duration::from_secs(8)).await;
}

/// A node running the task on a yearly schedule (the test triggers it), with the suite's
/// intervals: a 3 s lock lifetime, renewed every 600 ms, a 600 ms takeover wait.
fn held_node(db: &TestDb, id: &str, rec: &Arc<Recorder>) -> SchedulerBuilder {
    node(db, id, tasks("held."))
        .poll_interval(Duration::from_millis(500))
        .config_document(doc(vec![entry(TASK, "0 0 1 1 *")]))
        .state(Arc::clone(rec))
}

async fn a_lock_whose_row_is_held_past_its_lifetime_is_not_taken_over() {
    scheduler_tests::init_tracing();
    let db = TestDb::postgres("held_row").await;
    let rec = Arc::new(Recorder::default());
    // The owner's statements give up on a held row quickly (300 ms), so that the row's queue
    // often has none of them: a rescue that queues behind the row is then first in it.
    let owner_store = PgStore::builder(&db.pg().url)
        .schema(&db.pg().schema)
        .max_connections(4)
        .lock_timeout(Duration::from_millis(300))
        .connect_lazy()
        .unwrap();
    let owner = start(
        held_node(&db, "owner", &rec)
            .store(Arc::new(owner_store))
            .build()
            .unwrap(),
    );
    trigger_all_now(&db, 1).await;
    wait_until(
        Duration::from_secs(30),
        "the owner runs the task",
        || async { rec.starts_of(TASK) == 1 },
    )
    .await;

    // Hold the row as the owner's frozen write would.
    let admin = pool(&db);
    let mut holder = db.pg().pool.begin().await.unwrap();
    let holder_pid: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(&mut *holder)
        .await
        .unwrap();
    sqlx::query("SELECT 1 FROM scheduler_tasks WHERE name = $1 FOR NO KEY UPDATE")
        .bind(TASK)
        .execute(&mut *holder)
        .await
        .unwrap();
    let rescuer = start(held_node(&db, "rescuer", &rec).build().unwrap());

    // Past the lock's lifetime and the takeover wait; let go at once if the rescuer's release
    // is first in the row's queue (the first waiter waits on the holder's transaction id, the
    // others on the tuple).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let mut release_first = false;
    while tokio::time::Instant::now() < deadline {
        let first: Vec<String> = sqlx::query(
            "SELECT query FROM pg_stat_activity
             WHERE wait_event = 'transactionid' AND $1 = ANY(pg_blocking_pids(pid))",
        )
        .bind(holder_pid)
        .fetch_all(&admin)
        .await
        .unwrap()
        .iter()
        .map(|row| row.get::<String, _>("query"))
        .collect();
        if first.iter().any(|q| q.contains("decision AS (")) {
            release_first = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    holder.rollback().await.unwrap();
    eprintln!("row let go; a release was first in its queue: {release_first}");

    wait_until(
        Duration::from_secs(30),
        "the run's outcome is written",
        || async { db.count_runs(TASK, RunStatus::Running).await == 0 },
    )
    .await;
    // Time for a takeover to show: a lock lifetime, the takeover wait and a poll, and more.
    tokio::time::sleep(Duration::from_secs(6)).await;
    rescuer.stop().await;
    owner.stop().await;

    assert_eq!(
        rec.starts_of(TASK),
        1,
        "the handler started once (a release first in the row's queue: {release_first})"
    );
    let runs = sqlx::query("SELECT node_id, status FROM scheduler_runs ORDER BY id")
        .fetch_all(&admin)
        .await
        .unwrap();
    let runs: Vec<(String, String)> = runs
        .iter()
        .map(|r| (r.get("node_id"), r.get("status")))
        .collect();
    assert_eq!(
        runs,
        [("owner".to_owned(), "succeeded".to_owned())],
        "one run, the owner's, succeeded"
    );
    db.cleanup().await;
}

/// A row held by another transaction (here the test's, standing in for a statement of the
/// node's own stuck in a frozen server process) holds back the renewal of that row's lock only:
/// the node's other runs keep their locks renewed and finish. Judged by the handlers' record.
async fn a_held_row_holds_back_only_its_own_locks_renewal() {
    scheduler_tests::init_tracing();
    let db = TestDb::postgres("held_renewal").await;
    let rec = Arc::new(Recorder::default());
    let n = start(
        node(&db, "n1", tasks("renew."))
            .poll_interval(Duration::from_millis(500))
            .config_document(doc(vec![
                entry("renew.long", "0 0 1 1 *"),
                entry("renew.stuck", "0 0 1 1 *"),
            ]))
            .state(Arc::clone(&rec))
            .build()
            .unwrap(),
    );
    trigger_all_now(&db, 2).await;
    wait_until(Duration::from_secs(30), "both run", || async {
        rec.starts_of("renew.long") == 1 && rec.starts_of("renew.stuck") == 1
    })
    .await;
    // Hold the stuck task's row for longer than a lock lifetime (3 s).
    let mut holder = db.pg().pool.begin().await.unwrap();
    sqlx::query("SELECT 1 FROM scheduler_tasks WHERE name = 'renew.stuck' FOR NO KEY UPDATE")
        .execute(&mut *holder)
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(6)).await;
    holder.rollback().await.unwrap();
    wait_until(
        Duration::from_secs(30),
        "both runs' outcomes written",
        || async {
            db.count_runs("renew.long", RunStatus::Running).await == 0
                && db.count_runs("renew.stuck", RunStatus::Running).await == 0
        },
    )
    .await;
    n.stop().await;
    assert_eq!(
        LONG_ENDED.load(Ordering::SeqCst),
        1,
        "the other task's handler ran to its end"
    );
    assert_eq!(rec.starts_of("renew.long"), 1, "and was not started again");
    assert_eq!(db.count_runs("renew.long", RunStatus::Succeeded).await, 1);
    db.cleanup().await;
}
