//! The operator commands of the `scheduler` binary, run as a real process against real
//! PostgreSQL (a schema per test, `DATABASE_URL`) and a real SQLite file, with a real node in
//! this test process running the tasks: status of an empty and of a populated store, runs and
//! their filters (`--json` parsed), a manual run asked for by the command and run by the node
//! (the handler's own record shows it), pause and resume with their audit entries, a run's log,
//! and clear errors for an unknown task, a paused task, a missing run and a bad URL (its password
//! redacted, with its real cause). On SQLite the commands work beside the node that holds the
//! file, in another process.

use std::sync::{Arc, Mutex, Once};
use std::time::Duration;

use scheduler::config::{ConfigDocument, TaskConfig};
use scheduler::store::{PgStore, SqliteStore, Store};
use scheduler::testing::store::{RunQuery, RunStatus};
use scheduler::{Scheduler, TaskContext, TaskRegistry, task};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

/// Run ids the handlers of one node saw, shared with them as scheduler state.
type Seen = Arc<Mutex<Vec<i64>>>;

#[task(name = "cli.echo")]
async fn echo(ctx: TaskContext) {
    tracing::info!(run = ctx.run_id(), "echo says hello");
    // An escape sequence (clear the screen) that must not reach the operator's terminal.
    tracing::warn!("echo is done\x1b[2J");
    ctx.state::<Seen>()
        .unwrap()
        .lock()
        .unwrap()
        .push(ctx.run_id());
}

#[task(name = "cli.other")]
async fn other() {}

const TASKS: [&str; 2] = ["cli.echo", "cli.other"];

fn init_tracing() {
    static INIT: Once = Once::new();
    INIT.call_once(|| {
        use tracing_subscriber::prelude::*;
        let _ = tracing_subscriber::registry()
            .with(tracing_subscriber::EnvFilter::new("info"))
            .with(scheduler::run_log_layer())
            .try_init();
    });
}

/// The tests that need PostgreSQL, under the one name `scripts/test --sqlite-only` skips.
mod on_postgres {
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn operator_commands() {
        super::operator_commands_on_postgres().await
    }

    #[tokio::test]
    async fn a_schema_without_the_scheduler_tables_is_named_not_created() {
        super::a_schema_without_the_scheduler_tables_is_named_not_created().await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn backfill_commands() {
        super::init_tracing();
        super::backfill_commands(super::Db::postgres().await).await
    }
}

/// The suite's PostgreSQL (`DATABASE_URL`, set by `scripts/test`). In a SQLite-only run
/// (`SCHEDULER_TEST_BACKENDS=sqlite`), a test that gets here is not named `on_postgres::`.
fn postgres_url() -> String {
    assert_ne!(
        std::env::var("SCHEDULER_TEST_BACKENDS").as_deref(),
        Ok("sqlite"),
        "this test needs PostgreSQL, but this is a SQLite-only run, which skips only the tests \
         named `on_postgres::...`: call it from `mod on_postgres`"
    );
    std::env::var("DATABASE_URL").expect("DATABASE_URL is set (scripts/test sets it)")
}

/// Where a test's scheduler tables are, as the command line is told.
struct Db {
    args: Vec<String>,
    /// PostgreSQL: the schema to drop at the end.
    pg: Option<(sqlx::PgPool, String)>,
    /// SQLite: the directory of the file.
    _dir: Option<tempfile::TempDir>,
    sqlite_path: Option<std::path::PathBuf>,
}

impl Db {
    async fn postgres() -> Self {
        let url = postgres_url();
        let pool = sqlx::PgPool::connect(&url).await.unwrap();
        // Named like scheduler_tests::TestSchema's, so its sweep removes what a killed run left.
        let schema = format!(
            "t_cli_ops_{}_{}",
            chrono::Utc::now().timestamp(),
            &uuid::Uuid::new_v4().simple().to_string()[..8]
        );
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {schema}")))
            .execute(&pool)
            .await
            .unwrap();
        Self {
            args: vec![
                "--database-url".into(),
                url,
                "--schema".into(),
                schema.clone(),
            ],
            pg: Some((pool, schema)),
            _dir: None,
            sqlite_path: None,
        }
    }

    fn sqlite() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ops.db");
        Self {
            args: vec![
                "--database-url".into(),
                format!("sqlite://{}", path.display()),
            ],
            pg: None,
            _dir: Some(dir),
            sqlite_path: Some(path),
        }
    }

    /// A store on the same tables (on SQLite, the only one while it is held).
    async fn store(&self) -> Arc<dyn Store> {
        let store: Arc<dyn Store> = match (&self.pg, &self.sqlite_path) {
            (Some((_, schema)), _) => {
                Arc::new(PgStore::connect_lazy(&self.args[1], schema, 4).unwrap())
            }
            (_, Some(path)) => Arc::new(SqliteStore::builder(path).connect().unwrap()),
            _ => unreachable!(),
        };
        store.migrate().await.unwrap();
        store
    }

    async fn cleanup(self) {
        if let Some((pool, schema)) = self.pg {
            sqlx::query(sqlx::AssertSqlSafe(format!("DROP SCHEMA {schema} CASCADE")))
                .execute(&pool)
                .await
                .unwrap();
        }
    }

    /// Runs `scheduler ARGS... <database args>`: (exit code, stdout, stderr).
    async fn cli(&self, args: &[&str]) -> (i32, String, String) {
        cli_with(args, &self.args).await
    }

    /// [`cli`](Self::cli) that must succeed; its stdout.
    async fn ok(&self, args: &[&str]) -> String {
        let (code, out, err) = self.cli(args).await;
        assert_eq!(code, 0, "scheduler {args:?} failed:\n{out}\n{err}");
        out
    }

    /// [`ok`](Self::ok) with `--json`, parsed.
    async fn json(&self, args: &[&str]) -> Value {
        let mut args = args.to_vec();
        args.push("--json");
        let out = self.ok(&args).await;
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
    }
}

async fn cli_with(args: &[&str], extra: &[String]) -> (i32, String, String) {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_scheduler"))
        .args(args)
        .args(extra)
        .env_remove("DATABASE_URL")
        .env_remove("SCHEDULER_DATABASE_URL")
        .env_remove("SCHEDULER_SCHEMA")
        .env("USER", "tester")
        .output()
        .await
        .expect("run the scheduler binary");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

struct Node {
    stop: CancellationToken,
    handle: tokio::task::JoinHandle<scheduler::Result<()>>,
}

impl Node {
    fn start(store: &Arc<dyn Store>, seen: &Seen) -> Self {
        Self::start_polling(store, seen, Duration::from_millis(500))
    }

    /// A node that re-checks the store only every `poll` (besides its change listener).
    fn start_polling(store: &Arc<dyn Store>, seen: &Seen, poll: Duration) -> Self {
        let scheduler = Scheduler::builder()
            .store(Arc::clone(store))
            .node_id("cli-node")
            .registry(
                TaskRegistry::collect()
                    .unwrap()
                    .retain(|n| TASKS.contains(&n)),
            )
            .config_document(ConfigDocument {
                version: None,
                calendars: Default::default(),
                limits: Default::default(),
                tasks: TASKS
                    .iter()
                    .map(|name| TaskConfig {
                        name: (*name).into(),
                        enabled: true,
                        cron: "0 0 1 1 *".into(),
                        timezone: Some("Asia/Shanghai".into()),
                        ..Default::default()
                    })
                    .collect(),
            })
            .state(Arc::clone(seen))
            .poll_interval(poll)
            .heartbeat_interval(Duration::from_secs(1))
            .shutdown_timeout(Duration::from_secs(5))
            .build()
            .unwrap();
        let stop = CancellationToken::new();
        let s = stop.clone();
        let handle = tokio::spawn(async move { scheduler.run_until(s.cancelled_owned()).await });
        Self { stop, handle }
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

async fn wait_for<F: FnMut() -> bool>(what: &str, mut check: F) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while !check() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn tasks_recorded(store: &Arc<dyn Store>) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while store.task_states(None).await.unwrap().len() < TASKS.len() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the config was not applied"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn ended_manual_run(store: &Arc<dyn Store>) -> i64 {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let runs = store
            .runs(&RunQuery::latest(5).task("cli.echo"))
            .await
            .unwrap();
        if let Some(run) = runs.iter().find(|r| r.status == RunStatus::Succeeded) {
            return run.id;
        }
        assert!(tokio::time::Instant::now() < deadline, "{runs:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn empty_store_status(db: &Db) {
    drop(db.store().await);
    let out = db.ok(&["status"]).await;
    assert!(out.contains("no tasks yet"), "{out}");
    assert!(out.contains("no nodes have registered"), "{out}");
    assert!(out.contains("no task is missed or overdue"), "{out}");
    let status = db.json(&["status"]).await;
    assert_eq!(status["tasks"], Value::Array(vec![]));
    assert_eq!(status["nodes"], Value::Array(vec![]));
    let runs = db.json(&["runs"]).await;
    assert_eq!(runs["runs"], Value::Array(vec![]));
}

/// After a manual run of `cli.echo` (run `run_id`): what status, runs and logs show, and the
/// errors of commands that cannot be done.
async fn inspect_history(db: &Db, run_id: i64, node_alive: bool) {
    let out = db.ok(&["status"]).await;
    for expected in [
        "cli.echo",
        "cli.other",
        "0 0 1 1 *",
        "Asia/Shanghai",
        "succeeded",
        "cli-node",
    ] {
        assert!(out.contains(expected), "{expected}: {out}");
    }
    let status = db.json(&["status"]).await;
    let tasks = status["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 2, "{status}");
    assert_eq!(tasks[0]["name"], "cli.echo");
    assert_eq!(tasks[0]["last_status"], "succeeded");
    assert_eq!(tasks[0]["paused"], false);
    assert_eq!(tasks[1]["last_status"], Value::Null);
    assert_eq!(status["nodes"][0]["node_id"], "cli-node");
    assert_eq!(status["nodes"][0]["alive"], node_alive, "{status}");
    assert_eq!(status["late"], Value::Array(vec![]));

    let runs = db.json(&["runs", "cli.echo"]).await;
    let list = runs["runs"].as_array().unwrap();
    assert_eq!(list.len(), 1, "{runs}");
    assert_eq!(list[0]["id"], run_id);
    assert_eq!(list[0]["trigger"], "manual");
    assert_eq!(list[0]["triggered_by"], "alice");
    assert_eq!(list[0]["status"], "succeeded");
    assert_eq!(runs["next_before"], Value::Null);
    let filtered = |args: &'static [&'static str]| async move {
        db.json(args).await["runs"].as_array().unwrap().len()
    };
    assert_eq!(filtered(&["runs", "--trigger", "manual"]).await, 1);
    assert_eq!(filtered(&["runs", "--trigger", "schedule"]).await, 0);
    assert_eq!(filtered(&["runs", "--status", "failed"]).await, 0);
    assert_eq!(
        filtered(&[
            "runs",
            "--status",
            "succeeded",
            "--since",
            "2020-01-01T00:00:00Z"
        ])
        .await,
        1
    );
    assert_eq!(
        filtered(&["runs", "--until", "2020-01-01T00:00:00Z"]).await,
        0
    );
    assert_eq!(filtered(&["runs", "cli.other"]).await, 0);
    let page = db.json(&["runs", "--limit", "1"]).await;
    assert_eq!(
        page["next_before"], run_id,
        "a full page says where the next starts"
    );
    let next = format!("{run_id}");
    let out = db.ok(&["runs", "--before", &next]).await;
    assert_eq!(out, "no runs match\n");
    let out = db.ok(&["runs"]).await;
    assert!(out.starts_with("ID"), "{out}");
    assert!(out.contains("manual (alice)"), "{out}");

    let log = db.ok(&["logs", &next]).await;
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines.len(), 2, "{log}");
    assert!(lines[0].contains(" INFO cli_ops: echo says hello"), "{log}");
    assert!(lines[0].ends_with(&format!("run={run_id}")), "{log}");
    assert!(
        lines[1].contains(" WARN cli_ops: echo is done\\x1b[2J"),
        "{log}"
    );
    assert!(!log.contains('\x1b'), "printed escaped: {log:?}");
    let log = db.json(&["logs", &next]).await;
    assert_eq!(log["lines"], 2);
    assert_eq!(log["truncated"], false);
    assert_eq!(log["run"]["task_name"], "cli.echo");

    let (code, _, err) = db.cli(&["logs", "999999"]).await;
    assert_eq!(code, 1);
    assert!(err.contains("no run with id 999999"), "{err}");
    let (code, _, err) = db.cli(&["trigger", "cli.ecoh"]).await;
    assert_eq!(code, 1);
    assert!(
        err.contains("no task named `cli.ecoh`") && err.contains("did you mean `cli.echo`"),
        "{err}"
    );
    let (code, _, err) = db.cli(&["runs", "nothing.like.it"]).await;
    assert_eq!(code, 1);
    assert!(err.contains("`scheduler status` lists them"), "{err}");
    let (code, _, err) = db.cli(&["runs", "--status", "sleeping"]).await;
    assert_eq!(code, 2, "a usage error");
    assert!(err.contains("not a run status"), "{err}");
}

/// Pause (refusing a manual run), resume, and the audit trail of all three actions.
async fn pause_and_resume(db: &Db) {
    let out = db
        .ok(&[
            "pause",
            "cli.echo",
            "--reason",
            "upstream is down\x1b]0;owned\x07",
            "--for",
            "2h",
            "--actor",
            "bob",
        ])
        .await;
    assert!(out.contains("paused cli.echo until"), "{out}");
    let out = db.ok(&["status"]).await;
    assert!(
        out.contains("cli.echo paused by bob at")
            && out.contains(": upstream is down\\x1b]0;owned\\x07"),
        "{out}"
    );
    assert!(!out.contains(['\x1b', '\x07']), "printed escaped: {out:?}");
    let status = db.json(&["status"]).await;
    assert_eq!(status["tasks"][0]["paused"], true);
    assert_eq!(
        status["tasks"][0]["pause"]["reason"],
        "upstream is down\x1b]0;owned\x07"
    );
    assert!(status["tasks"][0]["pause"]["until"].is_string());

    let (code, _, err) = db.cli(&["trigger", "cli.echo"]).await;
    assert_eq!(code, 1);
    assert!(
        err.contains("cli.echo is paused (by bob") && err.contains("scheduler resume cli.echo"),
        "{err}"
    );
    let (code, _, err) = db
        .cli(&[
            "pause",
            "cli.echo",
            "--reason",
            "x",
            "--until",
            "2001-01-01T00:00:00Z",
        ])
        .await;
    assert_eq!(code, 1);
    assert!(err.contains("already past"), "{err}");

    let resumed = db.json(&["resume", "cli.echo", "--actor", "carol"]).await;
    assert_eq!(resumed["resumed"], true);
    assert_eq!(resumed["pause"]["by"], "bob");
    let out = db.ok(&["resume", "cli.echo"]).await;
    assert!(out.contains("was not paused"), "{out}");
    let (code, _, err) = db.cli(&["resume", "cli.nope"]).await;
    assert_eq!(code, 1, "{err}");
}

/// `snooze` holds a task's alerts back (a reason and an end are required; audited), the store
/// shows it in force, `unsnooze` lifts it.
async fn snooze_and_unsnooze(db: &Db, store: &Arc<dyn Store>) {
    let out = db
        .ok(&[
            "snooze",
            "cli.echo",
            "--reason",
            "planned upstream maintenance",
            "--for",
            "2h",
            "--actor",
            "bob",
        ])
        .await;
    assert!(
        out.contains("snoozed the alerts of cli.echo until"),
        "{out}"
    );
    let snoozes = store.snoozes().await.unwrap();
    assert_eq!(snoozes.len(), 1, "{snoozes:?}");
    assert_eq!(snoozes[0].task_name, "cli.echo");
    assert_eq!(snoozes[0].by, "bob");
    let (code, _, err) = db
        .cli(&[
            "snooze",
            "cli.echo",
            "--reason",
            "x",
            "--until",
            "2001-01-01T00:00:00Z",
        ])
        .await;
    assert_eq!(code, 1);
    assert!(err.contains("already past"), "{err}");
    let (code, _, err) = db.cli(&["snooze", "cli.echo", "--reason", "x"]).await;
    assert_eq!(code, 2, "an end is required: {err}");
    let (code, _, err) = db
        .cli(&["snooze", "cli.nope", "--reason", "x", "--for", "1h"])
        .await;
    assert_eq!(code, 1, "{err}");
    let lifted = db.json(&["unsnooze", "cli.echo", "--actor", "carol"]).await;
    assert_eq!(lifted["unsnoozed"], true);
    assert_eq!(lifted["snooze"]["by"], "bob");
    assert!(store.snoozes().await.unwrap().is_empty());
    let out = db.ok(&["unsnooze", "cli.echo"]).await;
    assert!(out.contains("was not snoozed"), "{out}");
    let audit = store.audit_log(100, None).await.unwrap();
    assert!(
        audit
            .iter()
            .any(|a| a.action == "snooze" && a.actor == "bob"),
        "{audit:?}"
    );
    assert!(
        audit
            .iter()
            .any(|a| a.action == "unsnooze" && a.actor == "carol"),
        "{audit:?}"
    );
}

async fn audit_entries(store: &Arc<dyn Store>) -> Vec<(String, String, String, String)> {
    let mut entries: Vec<_> = store
        .audit_log(50, None)
        .await
        .unwrap()
        .into_iter()
        .map(|e| (e.actor, e.action, e.task, e.source))
        .collect();
    entries.reverse();
    entries
}

fn assert_audited(entries: &[(String, String, String, String)]) {
    let host = gethostname::gethostname().to_string_lossy().into_owned();
    let expected: Vec<(String, String, String, String)> = [
        ("alice", "trigger"),
        ("bob", "pause"),
        ("carol", "resume"),
        ("tester", "resume"),
    ]
    .iter()
    .map(|(who, what)| {
        let who = if *who == "tester" {
            format!("tester@{host}")
        } else {
            (*who).to_owned()
        };
        (
            who,
            (*what).to_owned(),
            "cli.echo".to_owned(),
            format!("cli@{host}"),
        )
    })
    .collect();
    // A resume of a task that was not paused may or may not be recorded; the rest must be.
    let recorded: Vec<_> = entries
        .iter()
        .filter(|e| e.0 != format!("tester@{host}"))
        .cloned()
        .collect();
    assert_eq!(recorded, expected[..3], "{entries:?}");
}

async fn operator_commands_on_postgres() {
    init_tracing();
    let db = Db::postgres().await;
    empty_store_status(&db).await;

    let store = db.store().await;
    let seen = Seen::default();
    let node = Node::start(&store, &seen);
    tasks_recorded(&store).await;
    let (code, out, err) = db.cli(&["trigger", "cli.echo", "--actor", "alice"]).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("asked for a run of cli.echo now (manual, by alice)"),
        "{out}"
    );
    assert!(
        !err.contains("no live node"),
        "the node runs the task: {err}"
    );
    // The node runs it: the handler's own record shows the run.
    wait_for("the node ran the manual run", || {
        !seen.lock().unwrap().is_empty()
    })
    .await;
    let run_id = ended_manual_run(&store).await;
    assert_eq!(*seen.lock().unwrap(), [run_id]);

    inspect_history(&db, run_id, true).await;
    pause_and_resume(&db).await;
    assert_audited(&audit_entries(&store).await);
    snooze_and_unsnooze(&db, &store).await;
    node.stop().await;

    // A tick nobody ran (every node is gone): status says the task is overdue.
    let (pool, schema) = db.pg.as_ref().unwrap();
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "UPDATE {schema}.scheduler_tasks SET next_run_at = now() - interval '1 hour' WHERE name = 'cli.other'"
    )))
    .execute(pool)
    .await
    .unwrap();
    let out = db.ok(&["status"]).await;
    assert!(out.contains("overdue: cli.other was due at"), "{out}");
    assert!(out.contains("stopped"), "the node stopped: {out}");
    let status = db.json(&["status"]).await;
    assert_eq!(status["late"], serde_json::json!(["cli.other"]));
    assert_eq!(status["tasks"][1]["late"], "overdue");
    assert_eq!(status["tasks"][0]["late"], Value::Null);
    assert_eq!(status["nodes"][0]["alive"], false);
    db.cleanup().await;
}

/// On SQLite the node holds the file's lock and the commands open it beside the node (operator
/// mode, in another process). The node polls only hourly here, so it can only see what the
/// commands commit through its change listener (`PRAGMA data_version`): a manual run is run, a
/// pause is honoured (a due tick of the paused task is not run, that of another task is).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn operator_commands_on_sqlite() {
    init_tracing();
    let db = Db::sqlite();
    let (code, _, err) = db.cli(&["status"]).await;
    assert_eq!(code, 1);
    assert!(
        err.contains("does not exist"),
        "a missing file is not created: {err}"
    );
    empty_store_status(&db).await;

    let seen = Seen::default();
    let store = db.store().await;
    let node = Node::start_polling(&store, &seen, Duration::from_secs(3600));
    tasks_recorded(&store).await;
    let path = db.sqlite_path.clone().unwrap();
    assert!(
        SqliteStore::builder(&path).connect().is_err(),
        "a second node is still refused"
    );

    let (code, out, err) = db.cli(&["trigger", "cli.echo", "--actor", "alice"]).await;
    assert_eq!(
        code, 0,
        "the node holds the file, the command works beside it: {err}"
    );
    assert!(out.contains("asked for a run of cli.echo now"), "{out}");
    assert!(
        !err.contains("no live node"),
        "the node runs the task: {err}"
    );
    wait_for("the node ran the manual run", || {
        !seen.lock().unwrap().is_empty()
    })
    .await;
    let run_id = ended_manual_run(&store).await;
    assert_eq!(*seen.lock().unwrap(), [run_id]);

    inspect_history(&db, run_id, true).await;
    pause_and_resume(&db).await;
    assert_audited(&audit_entries(&store).await);
    snooze_and_unsnooze(&db, &store).await;

    // A pause the node honours: both tasks fall due at once (written from yet another
    // connection, which wakes nobody), then a manual run of `cli.other` is asked for (which
    // wakes the node); the node runs `cli.other` and not the paused `cli.echo`, due in the same
    // pass.
    db.ok(&["pause", "cli.echo", "--reason", "maintenance"])
        .await;
    let due = chrono::Utc::now() - chrono::Duration::seconds(1);
    {
        use sqlx::Connection;
        let mut conn = sqlx::SqliteConnection::connect(&format!("sqlite://{}", path.display()))
            .await
            .unwrap();
        sqlx::query("UPDATE scheduler_tasks SET next_run_at = ?1")
            .bind(due.timestamp_micros())
            .execute(&mut conn)
            .await
            .unwrap();
        conn.close().await.unwrap();
    }
    db.ok(&["trigger", "cli.other"]).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let states = store.task_states(None).await.unwrap();
        let other = states.iter().find(|s| s.name == "cli.other").unwrap();
        if other.last_status == Some(RunStatus::Succeeded) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the node never ran the due tick of cli.other: {other:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(*seen.lock().unwrap(), [run_id], "a paused task did not run");
    db.ok(&["resume", "cli.echo"]).await;
    // The resume moves the tick passed meanwhile to the next fire time (the yearly cron has no
    // tick between the two instants, so no skip is recorded).
    let states = store.task_states(None).await.unwrap();
    let echo = states.iter().find(|s| s.name == "cli.echo").unwrap();
    assert!(echo.pause.is_none(), "{echo:?}");
    assert!(echo.next_run_at.is_some_and(|next| next > due), "{echo:?}");
    node.stop().await;
    drop(store);

    // With no node, a run asked for waits, and the command says nobody will run it yet.
    let (code, out, err) = db.cli(&["trigger", "cli.echo", "--actor", "alice"]).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("asked for a run of cli.echo now"), "{out}");
    assert!(err.contains("no live node registers cli.echo"), "{err}");
    let again = db.json(&["trigger", "cli.echo", "--actor", "alice"]).await;
    assert_eq!(again["result"], "already_queued");
    assert_eq!(again["live_runner"], false);
    let out = db.ok(&["status"]).await;
    assert!(out.contains("cli.echo: a manual run is waiting"), "{out}");
}

/// A flag outside its range (`docs/limits.md`) is refused before anything is read or written:
/// status 2, the flag and its range named.
#[tokio::test]
async fn flags_outside_their_range_are_refused_naming_flag_and_range() {
    let unreachable = ["--database-url", "postgres://ops@127.0.0.1:1/jobs"];
    for (args, flag, range) in [
        (
            vec![
                "backfill",
                "cli.echo",
                "--from",
                "2026-03-01",
                "--to",
                "2026-03-02",
                "--pace",
                "300000years",
            ],
            "`--pace`",
            "from 0s to 1day",
        ),
        (
            vec![
                "backfill",
                "cli.echo",
                "--from",
                "2026-03-01",
                "--to",
                "2026-03-02",
                "--max-runs",
                "4000000",
            ],
            "`--max-runs`",
            "from 1 to 1000000",
        ),
        (
            vec!["pause", "cli.echo", "--reason", "x", "--for", "300000years"],
            "`--for`",
            "from 1s to 10years",
        ),
        (
            vec!["snooze", "cli.echo", "--reason", "x", "--for", "0s"],
            "`--for`",
            "from 1s to 10years",
        ),
    ] {
        let (code, _, err) = cli_with(&args, &unreachable.map(String::from)).await;
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(flag) && err.contains(range), "{args:?}: {err}");
    }
}

#[tokio::test]
async fn unreachable_or_unknown_databases_are_named_without_their_password() {
    let (code, _, err) = cli_with(
        &[
            "status",
            "--database-url",
            "postgres://ops:hunter2@127.0.0.1:1/jobs",
        ],
        &[],
    )
    .await;
    assert_eq!(code, 1);
    assert!(!err.contains("hunter2"), "{err}");
    assert!(err.contains("postgres://ops:***@127.0.0.1:1/jobs"), "{err}");
    assert!(
        err.contains("cannot reach") && err.to_lowercase().contains("refused"),
        "the real cause, not a pool timeout: {err}"
    );
    assert!(!err.contains("pool timed out"), "{err}");
    let (code, _, err) = cli_with(
        &["runs", "--database-url", "mysql://ops:hunter2@db/jobs"],
        &[],
    )
    .await;
    assert_eq!(code, 1);
    assert!(
        !err.contains("hunter2") && err.contains("postgres://"),
        "{err}"
    );
    let (code, _, err) = cli_with(
        &[
            "pause",
            "x",
            "--reason",
            "r",
            "--for",
            "2h",
            "--until",
            "2030-01-01T00:00:00Z",
        ],
        &[],
    )
    .await;
    assert_eq!(
        code, 2,
        "--for and --until together are a usage error: {err}"
    );
    let (code, _, err) = cli_with(&["pause", "x", "--reason", "r", "--for", "soon"], &[]).await;
    assert_eq!(code, 2);
    assert!(err.contains("not a duration"), "{err}");
    let (code, _, err) = cli_with(&["pause", "x"], &[]).await;
    assert_eq!(code, 2, "a missing --reason is a usage error: {err}");
}

/// A schema without the scheduler's tables is named, not created.
async fn a_schema_without_the_scheduler_tables_is_named_not_created() {
    let (code, _, err) = cli_with(
        &[
            "status",
            "--database-url",
            &postgres_url(),
            "--schema",
            "t_cli_ops_no_such_schema",
        ],
        &[],
    )
    .await;
    assert_eq!(code, 1);
    assert!(err.contains("no scheduler tables there"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn backfill_commands_on_sqlite() {
    init_tracing();
    backfill_commands(Db::sqlite()).await
}

/// `backfill` through the binary, beside a node that polls only hourly (so it runs what the
/// commands commit as its change listener hears of it): a dry run in the task's zone lists the
/// five yearly ticks and runs nothing, the cap refuses, the backfill runs each tick once with
/// trigger `backfill`, `backfill status` follows it, `backfill cancel` says when one is over.
async fn backfill_commands(db: Db) {
    let seen = Seen::default();
    let store = db.store().await;
    let node = Node::start_polling(&store, &seen, Duration::from_secs(3600));
    tasks_recorded(&store).await;
    // Dates without an offset are read in the task's zone (Asia/Shanghai): each yearly tick is
    // 1 January 00:00 there, 16:00 UTC the day before.
    let range = ["--from", "2020-01-01", "--to", "2024-12-31"];
    let expected: Vec<String> = (2019..2024)
        .map(|y| format!("{y}-12-31T16:00:00Z"))
        .collect();
    let mut args = vec!["backfill", "cli.echo"];
    args.extend(range);
    args.push("--dry-run");
    let dry = db.json(&args).await;
    assert_eq!(dry["runs"], 5, "{dry}");
    assert_eq!(dry["id"], Value::Null);
    let ticks: Vec<String> = serde_json::from_value(dry["ticks"].clone()).unwrap();
    assert_eq!(ticks, expected);
    let mut capped = vec!["backfill", "cli.echo", "--max-runs", "3"];
    capped.extend(range);
    let (code, _, err) = db.cli(&capped).await;
    assert_eq!(code, 1);
    assert!(err.contains("cap of 3"), "{err}");
    let (code, _, err) = db
        .cli(&[
            "backfill",
            "no.such",
            "--from",
            "2020-01-01",
            "--to",
            "2021-01-01",
        ])
        .await;
    assert_eq!(code, 1);
    assert!(err.contains("no task named `no.such`"), "{err}");
    assert!(seen.lock().unwrap().is_empty(), "nothing ran yet");

    let mut real = vec!["backfill", "cli.echo", "--pace", "0s", "--actor", "alice"];
    real.extend(range);
    let out = db.ok(&real).await;
    assert!(out.contains("backfill recorded: will run 5"), "{out}");
    wait_for("the node ran the five ticks", || {
        seen.lock().unwrap().len() == 5
    })
    .await;
    let list = db.json(&["backfill", "status"]).await;
    let id = list[0]["id"].as_i64().unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let status = loop {
        let status = db.json(&["backfill", "status", &id.to_string()]).await;
        if status["state"] == "done" {
            break status;
        }
        assert!(tokio::time::Instant::now() < deadline, "{status}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(status["progress"]["succeeded"], 5, "{status}");
    assert_eq!(status["requested_by"], "alice");
    let runs = store
        .runs(&RunQuery::latest(10).task("cli.echo"))
        .await
        .unwrap();
    let mut served: Vec<String> = runs
        .iter()
        .filter(|r| r.trigger == scheduler::testing::store::Trigger::Backfill)
        .map(|r| r.scheduled_at.format("%Y-%m-%dT%H:%M:%SZ").to_string())
        .collect();
    served.sort();
    assert_eq!(served, expected);
    let mut ids: Vec<i64> = runs.iter().map(|r| r.id).collect();
    ids.sort();
    let mut ran = seen.lock().unwrap().clone();
    ran.sort();
    assert_eq!(ran, ids, "each backfilled run ran once");
    let table = db.ok(&["backfill", "status"]).await;
    assert!(
        table.contains("done") && table.contains("cli.echo"),
        "{table}"
    );
    let out = db.ok(&["backfill", "status", &id.to_string()]).await;
    assert!(out.contains("5 done of 5"), "{out}");
    let out = db.ok(&["backfill", "cancel", &id.to_string()]).await;
    assert!(out.contains("already over"), "{out}");
    let (code, _, err) = db.cli(&["backfill", "cancel", "999999"]).await;
    assert_eq!(code, 1);
    assert!(err.contains("no backfill 999999"), "{err}");
    let runs_out = db.ok(&["runs", "cli.echo", "--trigger", "backfill"]).await;
    assert!(runs_out.contains("backfill (alice)"), "{runs_out}");
    node.stop().await;
    drop(store);
    db.cleanup().await;
}
