//! A write whose COMMIT got no answer (the connection lost as the server committed: a failover,
//! a network cut, a killed backend) has an unknown outcome. The node reads back what it wrote
//! before it decides: a claim that committed starts its runs (it is not left to expire and be
//! recorded lost), a finish that committed is not written again, a renewal that committed keeps
//! the run going.
//!
//! The fault is real: a proxy between the node and a private cluster forwards the COMMIT (or
//! the renewal) and swallows the server's answer, closing both sides
//! (`scheduler_tests::commit_cut`). Judged by the handlers' own record: every run in the history
//! was started by its handler, no tick started twice, no run left `running` or recorded `lost`.

use crate::common;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use common::{doc, entry, start, wait_until};
use scheduler::{Scheduler, SchedulerBuilder, TaskContext, TaskRegistry, task};
use scheduler_tests::TempCluster;
use scheduler_tests::commit_cut::CommitCut;

scheduler_tests::postgres_tests! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    a_claim_whose_commit_answer_is_lost_starts_its_run,
    a_finish_whose_commit_answer_is_lost_is_recorded_once,
    a_renewal_whose_answer_is_lost_keeps_its_run,
    an_outbox_insert_whose_answer_is_lost_is_read_back;
}

/// What the handlers saw: one entry per start, and the runs that ended, by run id.
#[derive(Default)]
struct Seen {
    starts: Mutex<Vec<(String, DateTime<Utc>, i64)>>,
    ends: Mutex<Vec<i64>>,
    cancelled: Mutex<Vec<i64>>,
}

impl Seen {
    fn of(ctx: &TaskContext) -> &Arc<Seen> {
        ctx.state::<Arc<Seen>>().expect("the test's record")
    }

    fn start(&self, ctx: &TaskContext) {
        self.starts.lock().unwrap().push((
            ctx.task_name().to_owned(),
            ctx.scheduled_at(),
            ctx.run_id(),
        ));
    }

    fn starts(&self) -> usize {
        self.starts.lock().unwrap().len()
    }

    fn run_ids(&self) -> HashSet<i64> {
        self.starts.lock().unwrap().iter().map(|s| s.2).collect()
    }

    fn ticks_started_twice(&self) -> Vec<DateTime<Utc>> {
        let mut seen = HashSet::new();
        let mut twice: Vec<_> = self
            .starts
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, tick, _)| !seen.insert(*tick))
            .map(|(_, tick, _)| *tick)
            .collect();
        twice.sort();
        twice
    }
}

#[task(name = "cc.claim")]
async fn cc_claim(ctx: TaskContext) {
    Seen::of(&ctx).start(&ctx);
    Seen::of(&ctx).ends.lock().unwrap().push(ctx.run_id());
}

#[task(name = "cc.finish")]
async fn cc_finish(ctx: TaskContext) {
    Seen::of(&ctx).start(&ctx);
    Seen::of(&ctx).ends.lock().unwrap().push(ctx.run_id());
}

/// Works four seconds (past the lock lifetime: its lock must be renewed), unless told to stop.
#[task(name = "cc.renew")]
async fn cc_renew(ctx: TaskContext) {
    let seen = Seen::of(&ctx);
    seen.start(&ctx);
    tokio::select! {
        () = ctx.cancelled() => seen.cancelled.lock().unwrap().push(ctx.run_id()),
        () = tokio::time::sleep(Duration::from_secs(4)) => {}
    }
    seen.ends.lock().unwrap().push(ctx.run_id());
}

/// A node running only `task`, reaching `cluster` through `proxy`.
fn cut_node(proxy: &CommitCut, task: &str, cron: &str, seen: &Arc<Seen>) -> SchedulerBuilder {
    let name = task.to_owned();
    Scheduler::builder()
        .database_url(format!(
            "postgres://postgres@127.0.0.1:{}/postgres",
            proxy.addr().port()
        ))
        .node_id("n1")
        .registry(TaskRegistry::collect().unwrap().retain(move |n| n == name))
        .poll_interval(Duration::from_millis(500))
        .heartbeat_interval(Duration::from_millis(500))
        .lock_lifetime(Duration::from_secs(3))
        .config_document(doc(vec![entry(task, cron)]))
        .state(Arc::clone(seen))
}

async fn cluster_and_proxy() -> (TempCluster, CommitCut) {
    scheduler_tests::init_tracing();
    let cluster = TempCluster::start().await.expect("a throwaway cluster");
    let proxy = CommitCut::start(([127, 0, 0, 1], cluster.port()).into())
        .await
        .expect("the proxy");
    (cluster, proxy)
}

/// The history of `task` against the handlers' record: every run that ended was started by its
/// handler (a run row no handler saw is a claim that looked failed and expired), none is left
/// `running` or recorded `lost`, no tick started twice.
async fn judge(cluster: &TempCluster, task: &str, seen: &Seen) {
    let pool = sqlx::PgPool::connect(&cluster.url()).await.unwrap();
    let runs: Vec<(i64, String)> = sqlx::query_as(
        "SELECT id, status FROM scheduler_runs WHERE task_name = $1 AND status <> 'interrupted' \
         ORDER BY id",
    )
    .bind(task)
    .fetch_all(&pool)
    .await
    .unwrap();
    pool.close().await;
    assert!(!runs.is_empty(), "runs were recorded");
    let started = seen.run_ids();
    let unseen: Vec<&(i64, String)> = runs
        .iter()
        .filter(|(id, _)| !started.contains(id))
        .collect();
    assert_eq!(
        unseen,
        Vec::<&(i64, String)>::new(),
        "runs no handler started"
    );
    let stuck: Vec<&(i64, String)> = runs
        .iter()
        .filter(|(_, status)| status == "running" || status == "lost")
        .collect();
    assert_eq!(
        stuck,
        Vec::<&(i64, String)>::new(),
        "runs left running or lost"
    );
    assert_eq!(
        seen.ticks_started_twice(),
        Vec::<DateTime<Utc>>::new(),
        "no tick started twice"
    );
}

/// Waits past twice the lock lifetime after a cut, while the task keeps running: a claimed run
/// nobody started would have expired and been recorded lost by then.
async fn run_on_after_cut(seen: &Seen, at_least: usize) {
    let until = tokio::time::Instant::now() + Duration::from_secs(7);
    let before = seen.starts();
    wait_until(
        Duration::from_secs(60),
        "more runs, past twice the lock lifetime after the cut",
        || async { seen.starts() >= before + at_least && tokio::time::Instant::now() >= until },
    )
    .await;
}

/// The COMMIT of a claim that took a run is done, its answer lost: the node reads its claim back,
/// finds the lock its own and starts the run.
async fn a_claim_whose_commit_answer_is_lost_starts_its_run() {
    let (cluster, proxy) = cluster_and_proxy().await;
    let seen = Arc::new(Seen::default());
    let node = start(
        cut_node(&proxy, "cc.claim", "* * * * * *", &seen)
            .build()
            .unwrap(),
    );
    wait_until(Duration::from_secs(60), "a first run", || async {
        seen.starts() >= 1
    })
    .await;
    proxy.arm_commit_after("INSERT INTO scheduler_runs");
    wait_until(Duration::from_secs(30), "a claim's answer lost", || async {
        proxy.cuts() >= 1
    })
    .await;
    run_on_after_cut(&seen, 3).await;
    node.stop().await;
    judge(&cluster, "cc.claim", &seen).await;
}

/// The COMMIT recording a run's end is done, its answer lost: the run is recorded once, as its
/// handler ended it, and the task goes on.
async fn a_finish_whose_commit_answer_is_lost_is_recorded_once() {
    let (cluster, proxy) = cluster_and_proxy().await;
    let seen = Arc::new(Seen::default());
    let node = start(
        cut_node(&proxy, "cc.finish", "* * * * * *", &seen)
            .build()
            .unwrap(),
    );
    wait_until(Duration::from_secs(60), "a first run", || async {
        seen.starts() >= 1
    })
    .await;
    proxy.arm_commit_after("ticks_collapsed = o.collapsed");
    wait_until(
        Duration::from_secs(30),
        "a finish's answer lost",
        || async { proxy.cuts() >= 1 },
    )
    .await;
    run_on_after_cut(&seen, 3).await;
    node.stop().await;
    judge(&cluster, "cc.finish", &seen).await;
    let pool = sqlx::PgPool::connect(&cluster.url()).await.unwrap();
    let ended: Vec<i64> = seen.ends.lock().unwrap().clone();
    let not_succeeded: Vec<(i64, String)> = sqlx::query_as(
        "SELECT id, status FROM scheduler_runs WHERE id = ANY($1) AND status <> 'succeeded'",
    )
    .bind(&ended)
    .fetch_all(&pool)
    .await
    .unwrap();
    pool.close().await;
    assert_eq!(
        not_succeeded,
        Vec::<(i64, String)>::new(),
        "every run whose handler returned is recorded succeeded"
    );
}

/// A lock renewal is done, its answer lost: the run keeps its lock and ends as it would have.
async fn a_renewal_whose_answer_is_lost_keeps_its_run() {
    let (cluster, proxy) = cluster_and_proxy().await;
    let seen = Arc::new(Seen::default());
    let node = start(
        cut_node(&proxy, "cc.renew", "*/6 * * * * *", &seen)
            .build()
            .unwrap(),
    );
    wait_until(Duration::from_secs(60), "a run starts", || async {
        seen.starts() >= 1
    })
    .await;
    proxy.arm_statement("SET lock_expires_at = clock_timestamp()");
    wait_until(
        Duration::from_secs(30),
        "a renewal's answer lost",
        || async { proxy.cuts() >= 1 },
    )
    .await;
    let before = seen.starts();
    wait_until(
        Duration::from_secs(60),
        "the runs after the cut",
        || async { seen.starts() >= before + 2 },
    )
    .await;
    let cancelled = seen.cancelled.lock().unwrap().clone();
    node.stop().await;
    judge(&cluster, "cc.renew", &seen).await;
    assert_eq!(cancelled, Vec::<i64>::new(), "no run told to stop");
}

/// Events written to the outbox, the insert's answer lost: the store reads them back, finds
/// them and says they were written (so the caller does not write them again: no event sent
/// twice).
async fn an_outbox_insert_whose_answer_is_lost_is_read_back() {
    use scheduler::store::{OutboxStore, PgStore, Store};
    use scheduler::testing::store::NewEvent;
    let (cluster, proxy) = cluster_and_proxy().await;
    let url = format!(
        "postgres://postgres@127.0.0.1:{}/postgres",
        proxy.addr().port()
    );
    let store = PgStore::builder(url).connect_lazy().unwrap();
    store.migrate().await.unwrap();
    let events = [
        NewEvent::new("run.failed", r#"{"n": 1}"#),
        NewEvent::new("run.failed", r#"{"n": 2}"#),
    ];
    proxy.arm_statement("INSERT INTO scheduler_outbox");
    let written = store.enqueue_events(&events).await;
    assert_eq!(proxy.cuts(), 1, "the insert's answer was lost");
    written.expect("the insert was read back and found");
    let pool = sqlx::PgPool::connect(&cluster.url()).await.unwrap();
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM scheduler_outbox")
        .fetch_one(&pool)
        .await
        .unwrap();
    pool.close().await;
    assert_eq!(rows, 2, "each event written once");
}
