//! Helpers shared by the engine's integration tests: a recorder handlers write into, node
//! builders with test-sized intervals, bounded waiting, and the database a test runs on
//! ([`TestDb`], either backend).

#![allow(dead_code)]

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use scheduler::config::{ConfigDocument, TaskConfig};
use scheduler::store::Store;
use scheduler::{Scheduler, SchedulerBuilder, Schedules, TaskContext, TaskRegistry};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

mod admin_client;
mod cli;
#[macro_use]
mod db;
mod nodes;
mod webhook;
pub use admin_client::AdminClient;
pub use cli::{app_output, run_app};
pub use db::TestDb;
pub use nodes::{AdminNode, admin_node, node_with, rows_written, started, started_all};
pub use webhook::{Bodies, outbox_delivered, webhook_receiver};

/// What handlers saw, shared with them as scheduler state.
#[derive(Default)]
pub struct Recorder {
    running: Mutex<HashMap<String, usize>>,
    pub max_overlap: AtomicUsize,
    pub starts: Mutex<Vec<(String, DateTime<Utc>, String)>>,
    /// Runs whose handler returned `Ok`: (task, tick).
    pub finishes: Mutex<Vec<(String, DateTime<Utc>)>>,
    cancelled: AtomicUsize,
}

impl Recorder {
    /// Records a start; returns a guard that records the end. Tracks per-task overlap.
    pub fn enter(&self, ctx: &TaskContext) -> RunGuard<'_> {
        let mut running = self.running.lock().unwrap();
        let n = running.entry(ctx.task_name().to_owned()).or_default();
        *n += 1;
        self.max_overlap.fetch_max(*n, Ordering::SeqCst);
        self.starts.lock().unwrap().push((
            ctx.task_name().to_owned(),
            ctx.scheduled_at(),
            ctx.node_id().to_owned(),
        ));
        RunGuard {
            recorder: self,
            task: ctx.task_name().to_owned(),
        }
    }

    /// A handler is about to return `Ok`.
    pub fn finished(&self, ctx: &TaskContext) {
        self.finishes
            .lock()
            .unwrap()
            .push((ctx.task_name().to_owned(), ctx.scheduled_at()));
    }

    /// Ticks of `task` started more than once, with how often.
    pub fn ticks_started_twice(&self, task: &str) -> Vec<(DateTime<Utc>, usize)> {
        let mut by_tick: HashMap<DateTime<Utc>, usize> = HashMap::new();
        for (t, tick, _) in self.starts.lock().unwrap().iter() {
            if t == task {
                *by_tick.entry(*tick).or_default() += 1;
            }
        }
        let mut twice: Vec<_> = by_tick.into_iter().filter(|(_, n)| *n > 1).collect();
        twice.sort();
        twice
    }

    /// A handler saw its context cancelled.
    pub fn note_cancelled(&self) {
        self.cancelled.fetch_add(1, Ordering::SeqCst);
    }

    pub fn cancellations(&self) -> usize {
        self.cancelled.load(Ordering::SeqCst)
    }

    pub fn starts_of(&self, task: &str) -> usize {
        self.starts
            .lock()
            .unwrap()
            .iter()
            .filter(|(t, _, _)| t == task)
            .count()
    }
}

pub struct RunGuard<'a> {
    recorder: &'a Recorder,
    task: String,
}

impl Drop for RunGuard<'_> {
    fn drop(&mut self) {
        *self
            .recorder
            .running
            .lock()
            .unwrap()
            .get_mut(&self.task)
            .unwrap() -= 1;
    }
}

/// The most handlers running at once among `spans` (each a start and, unless it still runs, an
/// end, on this process's clock), by their own record.
pub fn most_at_once(spans: impl IntoIterator<Item = (Instant, Option<Instant>)>) -> usize {
    let far = Instant::now() + Duration::from_secs(3600);
    let mut events: Vec<(Instant, i32)> = Vec::new();
    for (start, end) in spans {
        events.push((start, 1));
        events.push((end.unwrap_or(far), -1));
    }
    // An end and a start at the same instant: the end first.
    events.sort();
    let (mut now, mut most) = (0i32, 0i32);
    for (_, d) in events {
        now += d;
        most = most.max(now);
    }
    usize::try_from(most).unwrap_or(0)
}

/// Tasks that record their start with [`recorder`] and return at once:
/// `fn_name = "task.name"`, options for `#[task]` in parentheses after it if any.
#[macro_export]
macro_rules! quick_tasks {
    ($($fn_name:ident = $name:literal $(($($opt:tt)*))?),* $(,)?) => {$(
        #[task(name = $name, $($($opt)*)?)]
        async fn $fn_name(ctx: TaskContext) {
            let _guard = recorder(&ctx).enter(&ctx);
        }
    )*};
}

/// The recorder of a handler's scheduler (every test node shares one).
pub fn recorder(ctx: &TaskContext) -> &std::sync::Arc<Recorder> {
    ctx.state::<std::sync::Arc<Recorder>>()
        .expect("test nodes share a Recorder")
}

/// Registry of the tasks in this test binary whose names start with `prefix`.
pub fn tasks(prefix: &str) -> TaskRegistry {
    TaskRegistry::collect()
        .unwrap()
        .retain(|n| n.starts_with(prefix))
}

/// `n` tasks `{prefix}.0000`.. running `handler` (built at run time).
pub fn tasks_with(
    prefix: &str,
    n: usize,
    handler: fn(TaskContext) -> scheduler::__private::TaskFuture,
) -> TaskRegistry {
    let descriptors = (0..n).map(|i| {
        let name: &'static str = Box::leak(format!("{prefix}.{i:04}").into_boxed_str());
        &*Box::leak(Box::new(scheduler::TaskDescriptor {
            name,
            file: file!(),
            line: line!(),
            module_path: module_path!(),
            options: scheduler::__private::TaskOptions::DEFAULT,
            handler,
        }))
    });
    TaskRegistry::from_descriptors(descriptors).unwrap()
}

pub fn entry(name: &str, cron: &str) -> TaskConfig {
    TaskConfig {
        name: name.into(),
        enabled: true,
        cron: cron.into(),
        timezone: None,
        ..Default::default()
    }
}

pub fn doc(entries: Vec<TaskConfig>) -> ConfigDocument {
    ConfigDocument {
        version: None,
        calendars: Default::default(),
        limits: Default::default(),
        tasks: entries,
    }
}

/// A node on `db` with test-sized intervals, on its clock (see [`TestDb::elapse`]).
pub fn node(db: &TestDb, id: &str, registry: TaskRegistry) -> SchedulerBuilder {
    let builder = match db.clock() {
        Some(clock) => Scheduler::builder().test_clock(clock.clone()),
        None => Scheduler::builder(),
    };
    builder
        .store(db.node_store(4))
        .node_id(id)
        .registry(registry)
        .lock_lifetime(Duration::from_secs(3))
        .poll_interval(Duration::from_secs(2))
        .heartbeat_interval(Duration::from_secs(1))
        .shutdown_timeout(Duration::from_secs(5))
}

/// A running node, stopped gracefully with [`RunningNode::stop`].
pub struct RunningNode {
    pub stop: CancellationToken,
    pub handle: JoinHandle<scheduler::Result<()>>,
    /// Its handle on the instances of its tasks (`Scheduler::schedules`, audited as by it).
    pub schedules: Schedules,
}

impl RunningNode {
    pub async fn stop(self) {
        self.stop.cancel();
        tokio::time::timeout(Duration::from_secs(60), self.handle)
            .await
            .expect("node stops within a minute")
            .expect("node task did not panic")
            .expect("node ran without error");
    }
}

pub fn start(scheduler: Scheduler) -> RunningNode {
    let stop = CancellationToken::new();
    let s = stop.clone();
    let schedules = scheduler.schedules();
    let handle = tokio::spawn(async move { scheduler.run_until(s.cancelled_owned()).await });
    RunningNode {
        stop,
        handle,
        schedules,
    }
}

pub use scheduler_tests::wait_until;

/// Like [`wait_until`], for what the nodes' schedules bring about (an every-second cron's next
/// runs, a retry's backoff): on SQLite the clock is moved a second between looks (see
/// [`TestDb::elapse`]), so the ticks come as fast as the nodes claim and run them; on PostgreSQL
/// the wall clock passes. `limit` is wall time.
pub async fn wait_stepping<F, Fut>(db: &TestDb, limit: Duration, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if check().await {
            return;
        }
        if tokio::time::Instant::now() > deadline {
            panic!("timed out after {limit:?} waiting for: {what}");
        }
        match db.clock() {
            // A little wall time too: the runs claimed at the last step start and end.
            Some(clock) => {
                clock.step(Duration::from_secs(1)).await;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            None => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

/// Waits until the config has created `rows` task rows, then makes every task due now and wakes
/// the nodes (the yearly schedules tests use would not fire on their own).
pub async fn trigger_all_now(db: &TestDb, rows: usize) {
    wait_until(Duration::from_secs(60), "the config applied", || async {
        db.tasks().await.len() == rows
    })
    .await;
    db.set_next_run(None, Some(Utc::now())).await;
    db.api().notify().await.unwrap();
}

/// A node on the private `cluster` running only `task`, on `cron`, with test-sized intervals.
pub fn cluster_node(
    cluster: &scheduler_tests::TempCluster,
    id: &str,
    task: &str,
    cron: &str,
    rec: &std::sync::Arc<Recorder>,
) -> SchedulerBuilder {
    let name = task.to_owned();
    Scheduler::builder()
        .database_url(cluster.url())
        .node_id(id)
        .registry(TaskRegistry::collect().unwrap().retain(move |n| n == name))
        .poll_interval(Duration::from_millis(500))
        .heartbeat_interval(Duration::from_millis(500))
        .config_document(doc(vec![entry(task, cron)]))
        .state(std::sync::Arc::clone(rec))
}

// ---- PostgreSQL only ---------------------------------------------------------------------------
// For tests of PostgreSQL-only behaviour (other processes on one database, throwaway clusters,
// row locks) and of the PostgreSQL store itself.

/// A pool whose connections see the scheduler tables of a PostgreSQL `db`.
pub fn pool(db: &TestDb) -> sqlx::PgPool {
    db.pg_pool()
}

/// A PostgreSQL store on `db` with 2 connections.
pub fn store(db: &scheduler_tests::TestSchema) -> scheduler::store::PgStore {
    scheduler::store::PgStore::connect_lazy(&db.url, &db.schema, 2).unwrap()
}

/// A fresh PostgreSQL schema with the scheduler tables already created.
pub async fn migrated_schema(prefix: &str) -> scheduler_tests::TestSchema {
    let db = scheduler_tests::TestSchema::new(prefix).await;
    store(&db).migrate().await.unwrap();
    db
}
