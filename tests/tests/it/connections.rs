//! Promise 9, connections are bounded: a node holds at most its pool's connections (4 by
//! default, the change listener's included), counted by the server (`pg_stat_activity`), while
//! it runs a burst of runs, serves admin reads 16 at once and has its backends killed; and
//! after its backends are frozen (SIGSTOP: the node gives up on them and opens others), the ones
//! it gave up on end once they run again, so the count comes back to the bound. Judged also by
//! the handlers' own record: every tick of every instance ran once.

use crate::common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use common::{doc, entry, start, wait_until};
use scheduler::store::PgStore;
use scheduler::{Schedule, Scheduler, TaskContext, TaskRegistry, task};
use scheduler_tests::TempCluster;

scheduler_tests::postgres_tests! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    a_node_holds_at_most_its_pool_of_connections;
}

/// The node's `application_name`: its backends, counted by the server.
const APP: &str = "bounded-node";
/// The pool's size (the default).
const POOL: i64 = 4;
/// Instances of the one task, each due every second.
const INSTANCES: usize = 40;

/// Each (key, tick) a handler started.
#[derive(Default)]
struct Starts(Mutex<HashMap<(String, DateTime<Utc>), usize>>);

impl Starts {
    fn count(&self) -> usize {
        self.0.lock().unwrap().values().sum()
    }

    fn twice(&self) -> Vec<(String, DateTime<Utc>, usize)> {
        let mut twice: Vec<_> = self
            .0
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, n)| **n > 1)
            .map(|((k, t), n)| (k.clone(), *t, *n))
            .collect();
        twice.sort();
        twice
    }
}

#[task(name = "bounded.tick")]
async fn bounded_tick(ctx: TaskContext) {
    let starts = ctx.state::<Arc<Starts>>().expect("shared starts");
    *starts
        .0
        .lock()
        .unwrap()
        .entry((ctx.key().unwrap_or_default().to_owned(), ctx.scheduled_at()))
        .or_default() += 1;
    tokio::time::sleep(Duration::from_millis(20)).await;
}

/// The node's backends now.
async fn backends(admin: &sqlx::PgPool) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM pg_stat_activity WHERE application_name = $1")
        .bind(APP)
        .fetch_one(admin)
        .await
        .unwrap()
}

async fn backend_pids(admin: &sqlx::PgPool) -> Vec<i32> {
    sqlx::query_scalar("SELECT pid FROM pg_stat_activity WHERE application_name = $1")
        .bind(APP)
        .fetch_all(admin)
        .await
        .unwrap()
}

/// Samples the node's backends every 10 ms while `on` holds; the most seen goes to `max`.
fn sampler(
    admin: sqlx::PgPool,
    on: Arc<AtomicBool>,
    max: Arc<AtomicI64>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        while on.load(Ordering::SeqCst) {
            max.fetch_max(backends(&admin).await, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
}

async fn a_node_holds_at_most_its_pool_of_connections() {
    scheduler_tests::init_tracing();
    let cluster = TempCluster::start().await.expect("a throwaway cluster");
    let url = format!("{}?application_name={APP}", cluster.url());
    let store = PgStore::builder(url)
        .statement_timeout(Duration::from_secs(1))
        .acquire_timeout(Duration::from_secs(1))
        .connect_lazy()
        .unwrap();
    let starts = Arc::new(Starts::default());
    let scheduler = Scheduler::builder()
        .store(Arc::new(store))
        .node_id("bounded")
        .registry(
            TaskRegistry::collect()
                .unwrap()
                .retain(|n| n == "bounded.tick"),
        )
        .poll_interval(Duration::from_millis(500))
        .heartbeat_interval(Duration::from_millis(500))
        .config_document(doc(vec![entry("bounded.tick", "0 0 0 1 1 *")]))
        .state(Arc::clone(&starts))
        .admin_addr("127.0.0.1:0".parse().unwrap())
        .build()
        .unwrap();
    let addr = scheduler.admin_addr().unwrap();
    let schedules = scheduler.schedules();
    let node = start(scheduler);
    let admin = sqlx::PgPool::connect(&cluster.url()).await.unwrap();
    wait_until(Duration::from_secs(60), "the task's row", || async {
        schedules
            .upsert_many(
                (0..INSTANCES)
                    .map(|i| Schedule::new("bounded.tick", format!("t{i}")).cron("* * * * * *")),
            )
            .await
            .is_ok_and(|answers| answers.iter().all(Result::is_ok))
    })
    .await;
    wait_until(Duration::from_secs(60), "runs", || async {
        starts.count() >= 2 * INSTANCES
    })
    .await;

    // Load, admin reads 16 at once, and every backend of the node killed every 2 s.
    let on = Arc::new(AtomicBool::new(true));
    let max = Arc::new(AtomicI64::new(0));
    let sampling = sampler(admin.clone(), Arc::clone(&on), Arc::clone(&max));
    let reads = (0..16)
        .map(|_| {
            let on = Arc::clone(&on);
            tokio::spawn(async move {
                let client = reqwest::Client::new();
                let mut ok = 0usize;
                while on.load(Ordering::SeqCst) {
                    for path in [
                        "/api/tasks",
                        "/api/runs?limit=50",
                        "/api/tasks/bounded.tick/instances?ticks=10",
                    ] {
                        if client
                            .get(format!("http://{addr}{path}"))
                            .send()
                            .await
                            .is_ok_and(|r| r.status().is_success())
                        {
                            ok += 1;
                        }
                    }
                }
                ok
            })
        })
        .collect::<Vec<_>>();
    let before = starts.count();
    for _ in 0..5 {
        tokio::time::sleep(Duration::from_secs(2)).await;
        sqlx::query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1",
        )
        .bind(APP)
        .execute(&admin)
        .await
        .unwrap();
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    on.store(false, Ordering::SeqCst);
    sampling.await.unwrap();
    let mut answered = 0;
    for read in reads {
        answered += read.await.unwrap();
    }
    let ran = starts.count() - before;
    eprintln!(
        "under load and kills: at most {} backends; {ran} runs, {answered} admin answers",
        max.load(Ordering::SeqCst)
    );
    assert!(answered > 0, "the admin reads were served");
    assert!(ran > INSTANCES, "the runs went on: {ran}");
    assert!(
        max.load(Ordering::SeqCst) <= POOL,
        "the node held {} connections, more than its pool of {POOL}",
        max.load(Ordering::SeqCst)
    );

    // Frozen backends: the node gives up on them (timeouts) and opens others; once they run
    // again, the ones given up on end, and the count is back within the pool.
    let frozen = backend_pids(&admin).await;
    assert!(!frozen.is_empty());
    for pid in &frozen {
        // SAFETY: plain kill(2) on a backend of our own throwaway cluster.
        unsafe { libc::kill(*pid, libc::SIGSTOP) };
    }
    let during = starts.count();
    let on = Arc::new(AtomicBool::new(true));
    let max = Arc::new(AtomicI64::new(0));
    let sampling = sampler(admin.clone(), Arc::clone(&on), Arc::clone(&max));
    wait_until(
        Duration::from_secs(60),
        "runs while the backends are frozen",
        || async { starts.count() >= during + INSTANCES },
    )
    .await;
    for pid in &frozen {
        // SAFETY: as above.
        unsafe { libc::kill(*pid, libc::SIGCONT) };
    }
    on.store(false, Ordering::SeqCst);
    sampling.await.unwrap();
    eprintln!(
        "frozen: {} backends, at most {} with the node's new ones",
        frozen.len(),
        max.load(Ordering::SeqCst)
    );
    wait_until(
        Duration::from_secs(30),
        "the abandoned backends gone",
        || async { backends(&admin).await <= POOL },
    )
    .await;
    let on = Arc::new(AtomicBool::new(true));
    let max = Arc::new(AtomicI64::new(0));
    let sampling = sampler(admin.clone(), Arc::clone(&on), Arc::clone(&max));
    tokio::time::sleep(Duration::from_secs(5)).await;
    on.store(false, Ordering::SeqCst);
    sampling.await.unwrap();
    assert!(
        max.load(Ordering::SeqCst) <= POOL,
        "after the freeze the node held {} connections",
        max.load(Ordering::SeqCst)
    );

    node.stop().await;
    assert_eq!(starts.twice(), vec![], "ticks started twice");
    admin.close().await;
}
