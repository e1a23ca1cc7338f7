//! Per-run logs: what a handler logs inside its run is kept with the run, bounded, in order,
//! never mixed with another run's, written to the run's own store, and pruned with the run. Real
//! nodes run real handlers against PostgreSQL (a schema per test) and SQLite files; runs are
//! asked for with `operate::trigger`, as an operator would.
//!
//! The test process installs one subscriber with [`scheduler::run_log_layer`], as
//! `scheduler::init_tracing` does for an application.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Once};
use std::time::Duration;

use scheduler::config::{ConfigDocument, TaskConfig};
use scheduler::run_log::{MAX_BYTES, MAX_LINES};
use scheduler::store::{PgStore, SqliteStore, Store};
use scheduler::testing::operate::{self, Actor};
use scheduler::testing::store::{LogChunk, RunQuery, RunRecord, RunRequest, RunStatus};
use scheduler::{Scheduler, TaskContext, TaskRegistry, task};
use scheduler_tests::TestSchema;
use tokio_util::sync::CancellationToken;

scheduler_tests::postgres_tests! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    a_secret_a_handler_logs_is_never_stored_on_postgres,
    logs_are_bounded_ordered_and_pruned_on_postgres,
    concurrent_runs_do_not_mix_on_postgres,
    each_node_writes_to_its_own_store_on_postgres,
}

const CHATTY_LINES: usize = 2_000;

#[task(name = "logs.chatty")]
async fn chatty() {
    for i in 0..CHATTY_LINES {
        tracing::info!(i, "chatty line");
    }
}

#[task(name = "logs.quiet")]
async fn quiet(ctx: TaskContext) {
    for i in 0..20 {
        tracing::info!(line = i, node = ctx.node_id(), "quiet line");
    }
    // Below the enabled level: not captured.
    tracing::trace!("never kept");
    // A task the handler spawns inside its span logs into the run too.
    tokio::spawn(async { tracing::warn!("from a spawned task") }.in_current_span())
        .await
        .unwrap();
}

#[task(name = "logs.huge")]
async fn huge() {
    // 10 lines of 64 KiB: only three fit in 256 KiB.
    let big = "y".repeat(64 * 1024);
    for i in 0..10 {
        tracing::info!(i, "{big}");
    }
}

/// What `logs.secret` logs and must never be stored or served.
const LOGGED_SECRETS: [&str; 9] = [
    "pg-s3cret-1",
    "dsn-s3cret-2",
    "key-s3cret-3",
    "env-s3cret-4",
    "bearer-s3cret-5",
    "colon-s3cret-6",
    "json-s3cret-7",
    "escaped-s3cret-8",
    "multi-s3cret-9",
];

/// Logs the connection strings, keys, headers and request bodies it uses, as handlers do.
#[task(name = "logs.secret")]
async fn logs_secret() {
    let [pg, dsn, key, env, bearer, colon, json, escaped, multi] = LOGGED_SECRETS;
    tracing::info!("connecting to postgres://app:{pg}@db.internal:5432/jobs");
    tracing::info!(dsn = %format!("host=db user=app password={dsn} dbname=jobs"), "connecting");
    tracing::warn!(url = ?format!("https://hooks.example/notify?api_key={key}"), "posting");
    tracing::info!("running PGPASSWORD={env} psql -h db");
    tracing::info!("GET /v1/items Authorization: Bearer {bearer}");
    tracing::info!("settings read: password: {colon}");
    tracing::info!(body = %format!(r#"{{"user":"app","password":"{json}"}}"#), "posting");
    // `?` quotes the document once more: `"{\"token\":\"...\"}"`.
    tracing::info!(body = ?format!(r#"{{"token":"{escaped}"}}"#), "sent");
    tracing::info!("replicas at postgres://app:{multi}@h1:5432,h2:5432/jobs");
}

#[task(name = "logs.pair.a")]
async fn pair_a() {
    interleaved("A").await;
}

#[task(name = "logs.pair.b")]
async fn pair_b() {
    interleaved("B").await;
}

async fn interleaved(who: &str) {
    for i in 0..100 {
        tracing::info!(who, i, "pair line");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

use tracing::Instrument;

/// The steps of `logs.blocked`, shared with it as scheduler state.
#[derive(Default)]
struct Steps {
    started: AtomicBool,
    go: tokio::sync::Notify,
    done: AtomicBool,
}

#[task(name = "logs.blocked")]
async fn blocked(ctx: TaskContext) {
    let steps = ctx.state::<Arc<Steps>>().unwrap();
    let go = steps.go.notified();
    steps.started.store(true, Ordering::SeqCst);
    go.await;
    // Far past the 32 KiB that make the flusher write at once (into a locked database).
    for i in 0..CHATTY_LINES {
        tracing::info!(i, "while the database is locked");
    }
    steps.done.store(true, Ordering::SeqCst);
}

fn init_tracing() {
    static INIT: Once = Once::new();
    INIT.call_once(|| {
        use tracing_subscriber::prelude::*;
        let output_filter = tracing_subscriber::EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
        let _ = tracing_subscriber::registry()
            .with(tracing_subscriber::EnvFilter::new("info"))
            .with(scheduler::run_log_layer())
            .with(
                tracing_subscriber::fmt::layer()
                    .with_test_writer()
                    .with_filter(output_filter),
            )
            .try_init();
    });
}

fn yearly(names: &[&str]) -> ConfigDocument {
    ConfigDocument {
        version: None,
        calendars: Default::default(),
        limits: Default::default(),
        tasks: names
            .iter()
            .map(|name| TaskConfig {
                name: (*name).into(),
                enabled: true,
                cron: "0 0 1 1 *".into(),
                timezone: None,
                ..Default::default()
            })
            .collect(),
    }
}

struct Node {
    stop: CancellationToken,
    handle: tokio::task::JoinHandle<scheduler::Result<()>>,
    /// The admin server's address, when it has one.
    admin: Option<std::net::SocketAddr>,
}

impl Node {
    fn start(store: &Arc<dyn Store>, id: &str, names: &[&str]) -> Self {
        Self::start_with(store, id, names, |b| b)
    }

    /// With an admin server on a free loopback port.
    fn start_serving(store: &Arc<dyn Store>, id: &str, names: &[&str]) -> Self {
        Self::start_with(store, id, names, |b| {
            b.admin_addr("127.0.0.1:0".parse().unwrap())
        })
    }

    fn start_with(
        store: &Arc<dyn Store>,
        id: &str,
        names: &[&str],
        configure: impl FnOnce(scheduler::SchedulerBuilder) -> scheduler::SchedulerBuilder,
    ) -> Self {
        let wanted: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
        let builder = Scheduler::builder()
            .store(Arc::clone(store))
            .node_id(id)
            .registry(
                TaskRegistry::collect()
                    .unwrap()
                    .retain(move |n| wanted.iter().any(|w| w == n)),
            )
            .config_document(yearly(names))
            .poll_interval(Duration::from_millis(500))
            .heartbeat_interval(Duration::from_secs(1))
            .shutdown_timeout(Duration::from_secs(5));
        let scheduler = configure(builder).build().unwrap();
        let admin = scheduler.admin_addr();
        let stop = CancellationToken::new();
        let s = stop.clone();
        let handle = tokio::spawn(async move { scheduler.run_until(s.cancelled_owned()).await });
        Self {
            stop,
            handle,
            admin,
        }
    }

    async fn stop(self) {
        self.stop.cancel();
        tokio::time::timeout(Duration::from_secs(60), self.handle)
            .await
            .expect("node stops within a minute")
            .unwrap()
            .unwrap();
    }
}

/// Asks for a run of `task` (once its row exists) and waits until it has ended.
async fn run_once(store: &Arc<dyn Store>, task: &str) -> RunRecord {
    let who = Actor::new("tester", "test@run_logs");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        match operate::trigger(store.as_ref(), task, &who).await.unwrap() {
            RunRequest::Queued => break,
            RunRequest::NotFound if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            other => panic!("could not ask for a run of {task}: {other:?}"),
        }
    }
    ended_run(store, task).await
}

async fn ended_run(store: &Arc<dyn Store>, task: &str) -> RunRecord {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let runs = store.runs(&RunQuery::latest(10).task(task)).await.unwrap();
        if let Some(run) = runs.into_iter().find(|r| r.status != RunStatus::Running) {
            return run;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no run of {task} ended within a minute"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn text_of(chunks: &[LogChunk]) -> String {
    chunks.iter().map(|c| c.text.as_str()).collect()
}

async fn sqlite_store(dir: &tempfile::TempDir, name: &str) -> Arc<dyn Store> {
    let store = SqliteStore::builder(dir.path().join(name))
        .connect()
        .unwrap();
    store.migrate().await.unwrap();
    Arc::new(store)
}

async fn pg_store(prefix: &str) -> (TestSchema, Arc<dyn Store>) {
    let db = TestSchema::new(prefix).await;
    let store = PgStore::connect_lazy(&db.url, &db.schema, 4).unwrap();
    store.migrate().await.unwrap();
    (db, Arc::new(store))
}

/// A chatty handler's log is exactly its first 500 lines plus the marker; a quiet handler's
/// lines are all there, in order; a run that writes huge lines is cut at 256 KiB; pruning
/// removes a run's log with it.
async fn bounded_ordered_and_pruned(store: Arc<dyn Store>) {
    init_tracing();
    let node = Node::start(
        &store,
        "logs-node",
        &["logs.chatty", "logs.quiet", "logs.huge"],
    );

    let run = run_once(&store, "logs.chatty").await;
    assert_eq!(run.status, RunStatus::Succeeded);
    let chunks = store.run_log(run.id).await.unwrap();
    let text = text_of(&chunks);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), MAX_LINES + 1, "500 lines and the marker");
    for (i, line) in lines[..MAX_LINES].iter().enumerate() {
        assert!(
            line.contains(" INFO run_logs: chatty line") && line.ends_with(&format!(" i={i}")),
            "line {i} is the handler's line {i}: {line}"
        );
    }
    let marker = lines[MAX_LINES];
    assert!(
        marker.contains(&format!("{} more lines", CHATTY_LINES - MAX_LINES)),
        "{marker}"
    );
    let last = chunks.last().unwrap();
    assert!(last.truncated, "the last chunk says the log was cut");
    assert!(chunks[..chunks.len() - 1].iter().all(|c| !c.truncated));
    let seqs: Vec<i32> = chunks.iter().map(|c| c.seq).collect();
    assert_eq!(seqs, (0..chunks.len() as i32).collect::<Vec<_>>());
    assert_eq!(
        chunks.iter().map(|c| c.lines as usize).sum::<usize>(),
        MAX_LINES + 1
    );

    let run = run_once(&store, "logs.quiet").await;
    let chunks = store.run_log(run.id).await.unwrap();
    let text = text_of(&chunks);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 21, "{text}");
    for (i, line) in lines[..20].iter().enumerate() {
        assert!(
            line.contains("quiet line") && line.contains(&format!("line={i} node=logs-node")),
            "{line}"
        );
    }
    assert!(lines[20].contains(" WARN run_logs: from a spawned task"));
    assert!(!text.contains("never kept"));
    assert!(!text.contains("run started") && !text.contains("run finished"));
    assert!(chunks.iter().all(|c| !c.truncated));

    let run = run_once(&store, "logs.huge").await;
    let chunks = store.run_log(run.id).await.unwrap();
    let text = text_of(&chunks);
    assert!(text.len() <= MAX_BYTES + 200, "{} bytes", text.len());
    assert_eq!(text.lines().count(), 4, "three 64 KiB lines and the marker");
    assert!(text.contains("7 more lines"));

    node.stop().await;
    let pruned = store.prune_history(Duration::ZERO, 100).await.unwrap();
    assert!(pruned >= 3, "{pruned}");
    assert!(store.run(run.id).await.unwrap().is_none());
    assert!(
        store.run_log(run.id).await.unwrap().is_empty(),
        "the log went with its run"
    );
}

async fn logs_are_bounded_ordered_and_pruned_on_postgres() {
    let (db, store) = pg_store("run_logs").await;
    bounded_ordered_and_pruned(store).await;
    db.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn logs_are_bounded_ordered_and_pruned_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    bounded_ordered_and_pruned(sqlite_store(&dir, "logs.db").await).await;
}

/// Two runs going at once on one node each keep only their own lines.
/// A handler that logs its DSN (one host or several), a libpq string, an API key, a password
/// variable, a bearer token, a `password: value` label and JSON bodies with secret fields: the
/// run's log, in the store and as the admin API serves it, keeps the lines with every secret
/// replaced by `***`, as a handler's error does.
async fn a_secret_a_handler_logs_is_never_stored(store: Arc<dyn Store>) {
    init_tracing();
    let node = Node::start_serving(&store, "secret", &["logs.secret"]);
    let run = run_once(&store, "logs.secret").await;
    assert_eq!(run.status, RunStatus::Succeeded, "{run:?}");
    let log = text_of(&store.run_log(run.id).await.unwrap());
    let admin = node.admin.expect("served");
    let served: serde_json::Value = reqwest::get(format!("http://{admin}/api/runs/{}", run.id))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    node.stop().await;
    assert_eq!(
        served["log"]["text"].as_str(),
        Some(log.as_str()),
        "{served}"
    );
    assert_eq!(log.lines().count(), LOGGED_SECRETS.len(), "{log}");
    for secret in LOGGED_SECRETS {
        assert!(!log.contains(secret), "{secret} in the run's log: {log}");
    }
    for shown in [
        "Authorization: Bearer ***",
        "password: ***",
        r#"body={"user":"app","password":"***"}"#,
        r#"body="{\"token\":\"***\"}""#,
        "postgres://app:***@h1:5432,h2:5432/jobs",
    ] {
        assert!(log.contains(shown), "{shown} in:\n{log}");
    }
    assert!(
        log.contains("postgres://app:***@db.internal:5432/jobs"),
        "{log}"
    );
    assert!(log.contains("password=***"), "{log}");
    assert!(log.contains("api_key=***"), "{log}");
    assert!(log.contains("PGPASSWORD=***"), "{log}");
}

async fn a_secret_a_handler_logs_is_never_stored_on_postgres() {
    let (schema, store) = pg_store("logs_secret").await;
    a_secret_a_handler_logs_is_never_stored(store).await;
    schema.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_secret_a_handler_logs_is_never_stored_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite_store(&dir, "secret").await;
    a_secret_a_handler_logs_is_never_stored(store).await;
}

async fn concurrent_runs_do_not_mix(store: Arc<dyn Store>) {
    init_tracing();
    let node = Node::start(&store, "pair-node", &["logs.pair.a", "logs.pair.b"]);
    let who = Actor::new("tester", "test@run_logs");
    // Both rows exist, then both runs are asked for together.
    run_once(&store, "logs.pair.a").await;
    for task in ["logs.pair.a", "logs.pair.b"] {
        assert_eq!(
            operate::trigger(store.as_ref(), task, &who).await.unwrap(),
            RunRequest::Queued
        );
    }
    let mut runs = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while runs.len() < 3 {
        runs = store
            .runs(&RunQuery::latest(10))
            .await
            .unwrap()
            .into_iter()
            .filter(|r| r.status != RunStatus::Running)
            .collect();
        assert!(tokio::time::Instant::now() < deadline, "{runs:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The two last runs overlapped in time (each takes ~200 ms and they were queued together).
    for run in &runs[..2] {
        let who = if run.task_name == "logs.pair.a" {
            "A"
        } else {
            "B"
        };
        let text = text_of(&store.run_log(run.id).await.unwrap());
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 100, "{text}");
        for (i, line) in lines.iter().enumerate() {
            assert!(line.ends_with(&format!("who={who} i={i}")), "{line}");
        }
    }
    node.stop().await;
}

async fn concurrent_runs_do_not_mix_on_postgres() {
    let (db, store) = pg_store("run_logs_pair").await;
    concurrent_runs_do_not_mix(store).await;
    db.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_runs_do_not_mix_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    concurrent_runs_do_not_mix(sqlite_store(&dir, "pair.db").await).await;
}

/// Two nodes in one process, each on its own store (run ids overlap): each store holds only its
/// own node's lines.
async fn each_node_writes_to_its_own_store(first: Arc<dyn Store>, second: Arc<dyn Store>) {
    init_tracing();
    let node_one = Node::start(&first, "node-one", &["logs.quiet"]);
    let node_two = Node::start(&second, "node-two", &["logs.quiet"]);
    let (one, two) = tokio::join!(
        run_once(&first, "logs.quiet"),
        run_once(&second, "logs.quiet")
    );
    assert_eq!(
        one.id, two.id,
        "both stores number runs from the same start"
    );
    for (store, run, node, other) in [
        (&first, &one, "node-one", "node-two"),
        (&second, &two, "node-two", "node-one"),
    ] {
        let text = text_of(&store.run_log(run.id).await.unwrap());
        assert_eq!(text.matches(&format!("node={node}")).count(), 20, "{text}");
        assert!(!text.contains(other), "{text}");
    }
    node_one.stop().await;
    node_two.stop().await;
}

/// Logging never waits for the store: with SQLite's write lock held by another connection (so
/// every write of the run's log waits), the handler logs 2,000 lines and returns; its run is
/// recorded, with its whole log, once the lock is released.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn logging_does_not_wait_for_the_store() {
    use sqlx::{Connection, Executor};
    init_tracing();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("locked.db");
    let store = SqliteStore::builder(&path)
        .busy_timeout(Duration::from_secs(60))
        .connect()
        .unwrap();
    store.migrate().await.unwrap();
    let store: Arc<dyn Store> = Arc::new(store);
    let steps = Arc::new(Steps::default());
    let node = {
        let wanted = "logs.blocked";
        let scheduler = Scheduler::builder()
            .store(Arc::clone(&store))
            .node_id("blocked-node")
            .registry(
                TaskRegistry::collect()
                    .unwrap()
                    .retain(move |n| n == wanted),
            )
            .config_document(yearly(&[wanted]))
            .state(Arc::clone(&steps))
            .lock_lifetime(Duration::from_secs(120))
            .poll_interval(Duration::from_millis(500))
            .shutdown_timeout(Duration::from_secs(5))
            .build()
            .unwrap();
        let stop = CancellationToken::new();
        let s = stop.clone();
        let handle = tokio::spawn(async move { scheduler.run_until(s.cancelled_owned()).await });
        Node {
            stop,
            handle,
            admin: None,
        }
    };
    let who = Actor::new("tester", "test@run_logs");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while operate::trigger(store.as_ref(), "logs.blocked", &who)
        .await
        .unwrap()
        != RunRequest::Queued
    {
        assert!(tokio::time::Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    while !steps.started.load(Ordering::SeqCst) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the run did not start"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut other = sqlx::SqliteConnection::connect_with(
        &sqlx::sqlite::SqliteConnectOptions::new().filename(&path),
    )
    .await
    .unwrap();
    other.execute("BEGIN IMMEDIATE").await.unwrap();
    steps.go.notify_one();
    while !steps.done.load(Ordering::SeqCst) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the handler did not get through its logging while the store could not be written"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let runs = store.runs(&RunQuery::latest(5)).await.unwrap();
    assert_eq!(
        runs[0].status,
        RunStatus::Running,
        "nothing could be recorded yet"
    );
    other.execute("ROLLBACK").await.unwrap();
    let run = ended_run(&store, "logs.blocked").await;
    assert_eq!(run.status, RunStatus::Succeeded);
    let text = text_of(&store.run_log(run.id).await.unwrap());
    assert_eq!(text.lines().count(), MAX_LINES + 1, "{text}");
    assert!(
        text.lines()
            .nth(MAX_LINES - 1)
            .unwrap()
            .ends_with(&format!("i={}", MAX_LINES - 1))
    );
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn each_node_writes_to_its_own_store_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let first = sqlite_store(&dir, "first.db").await;
    let second = sqlite_store(&dir, "second.db").await;
    each_node_writes_to_its_own_store(first, second).await;
}

async fn each_node_writes_to_its_own_store_on_postgres() {
    let (db_one, first) = pg_store("run_logs_one").await;
    let (db_two, second) = pg_store("run_logs_two").await;
    each_node_writes_to_its_own_store(first, second).await;
    db_one.cleanup().await;
    db_two.cleanup().await;
}
