//! Process isolation against real processes: the `test_node` binary started as an isolated
//! run's child by the node's side ([`ChildCommand`], [`ChildRun`]), with no engine and no
//! PostgreSQL (a SQLite file keeps the run logs). Every ending is judged from the outside, and
//! the handlers' own records (files they write) say what they did.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use scheduler::run_log::{MAX_LINES, RunLogCapture};
use scheduler::store::{HistoryStore, SqliteStore, Store};
use scheduler::testing::isolation::{ChildCommand, ChildExit, ChildRun, RunIdentity};
use scheduler_tests::{isolation_record_dir, wait_until};

/// Generous: the suite shares two cores with other builds.
const PATIENCE: Duration = Duration::from_secs(120);

/// One isolated run of a `test_node` task.
struct Isolated {
    child: ChildRun,
    capture: RunLogCapture,
    run_id: i64,
    store: Arc<SqliteStore>,
    _dir: tempfile::TempDir,
}

impl Isolated {
    async fn start(task: &str) -> Self {
        Self::start_with(task, None).await
    }

    async fn start_with(task: &str, memory_limit: Option<u64>) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::builder(dir.path().join("runs.db"))
            .connect()
            .unwrap();
        store.migrate().await.unwrap();
        let store = Arc::new(store);
        let run_id = new_run_id();
        let capture = RunLogCapture::external(run_id, Arc::clone(&store) as Arc<dyn Store>);
        let identity = RunIdentity::new(task, run_id, chrono::Utc::now(), "node-iso").attempt(2);
        let child = ChildCommand::new(identity)
            .program(env!("CARGO_BIN_EXE_test_node"))
            .memory_limit(memory_limit)
            .spawn(capture.lines())
            .await
            .expect("start the child");
        Self {
            child,
            capture,
            run_id,
            store,
            _dir: dir,
        }
    }

    /// The handler's record `key`, once it wrote it.
    async fn record(&self, key: &str) -> String {
        let path = isolation_record_dir(self.run_id).join(key);
        wait_until(PATIENCE, &format!("the handler records `{key}`"), || {
            let exists = path.exists();
            async move { exists }
        })
        .await;
        std::fs::read_to_string(&path).unwrap()
    }

    /// Waits for the end, then writes and reads back the run's log.
    async fn finish(mut self) -> (ChildExit, String, Vec<scheduler::testing::store::LogChunk>) {
        let exit = self.child.wait().await;
        let pid = self.child.pid();
        assert_eq!(
            process_state(pid),
            None,
            "the child is reaped once waited for"
        );
        self.capture.finish().await;
        let chunks = self.store.run_log(self.run_id).await.unwrap();
        let text = chunks.iter().map(|c| c.text.as_str()).collect();
        let _ = std::fs::remove_dir_all(isolation_record_dir(self.run_id));
        (exit, text, chunks)
    }
}

fn new_run_id() -> i64 {
    (uuid::Uuid::new_v4().as_u128() as i64) & i64::MAX
}

/// The state letter of process `pid` (`R`, `S`, `Z`, ...), `None` once it is reaped.
fn process_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(") ")?.1.chars().next()
}

/// Whether `pid` is dead: reaped, or a zombie waiting for whoever adopted it.
fn is_dead(pid: u32) -> bool {
    matches!(process_state(pid), None | Some('Z' | 'X'))
}

/// Kills `pid` when dropped if it is still a live `test_node` (or a `sleep 3600` a handler
/// started): a test that fails half-way must not leave a child spinning on a shared machine.
struct KillOnDrop(u32);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let cmdline = std::fs::read(format!("/proc/{}/cmdline", self.0)).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline);
        let ours = cmdline.contains("test_node") || cmdline.starts_with("sleep\x003600\x00");
        if !is_dead(self.0) && ours {
            // SAFETY: signals a live process checked to be this test's `test_node` child.
            unsafe { libc::kill(self.0 as i32, libc::SIGKILL) };
        }
    }
}

async fn wait_dead(pid: u32, what: &str) {
    wait_until(PATIENCE, what, || {
        let dead = is_dead(pid);
        async move { dead }
    })
    .await;
}

#[tokio::test]
async fn a_handler_that_returns_ok_succeeds_with_its_identity_and_its_output_in_the_log() {
    let run = Isolated::start("iso.ok").await;
    let run_id = run.run_id;
    let identity = run.record("identity").await;
    let (exit, log, _) = run.finish().await;
    assert_eq!(exit, ChildExit::Succeeded);
    let mut parts = identity.split(' ');
    assert_eq!(parts.next(), Some("iso.ok"));
    assert_eq!(parts.next(), Some(run_id.to_string().as_str()));
    assert!(parts.next().is_some(), "the tick");
    assert_eq!(parts.next(), Some("node-iso"));

    assert!(
        log.contains(" INFO test_node: hello from the isolated handler answer=42\n"),
        "{log}"
    );
    assert!(
        log.contains(" WARN app::sync: a warning with a target\n"),
        "{log}"
    );
    assert!(log.contains(" INFO stdout: to stdout\n"), "{log}");
    assert!(log.contains(" WARN stderr: to stderr\n"), "{log}");
    if std::env::var_os("RUST_LOG").is_none() {
        assert!(!log.contains("not at the default level"), "{log}");
    }
}

/// An instance's run (its row `task/key`) in a child: the task's handler runs under the task's
/// name and reads the instance's key and arguments, passed with the child's request.
#[tokio::test]
async fn an_instances_run_in_a_child_reads_its_key_and_arguments() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::builder(dir.path().join("runs.db"))
        .connect()
        .unwrap();
    store.migrate().await.unwrap();
    let store: Arc<dyn Store> = Arc::new(store);
    let run_id = new_run_id();
    let capture = RunLogCapture::external(run_id, store);
    let identity = RunIdentity::new("iso.ok/tenant-7", run_id, chrono::Utc::now(), "node-iso")
        .args(Some(r#"{"tenant":7}"#.to_owned()));
    let mut child = ChildCommand::new(identity)
        .program(env!("CARGO_BIN_EXE_test_node"))
        .spawn(capture.lines())
        .await
        .expect("start the child");
    assert_eq!(child.wait().await, ChildExit::Succeeded);
    capture.finish().await;
    let record = |key: &str| std::fs::read_to_string(isolation_record_dir(run_id).join(key));
    let identity = record("identity").unwrap();
    assert!(
        identity.starts_with("iso.ok "),
        "the task's name: {identity}"
    );
    assert_eq!(record("instance").unwrap(), r#"tenant-7 {"tenant": 7}"#);
    let _ = std::fs::remove_dir_all(isolation_record_dir(run_id));
}

/// A manual run of the task's own row with other arguments, in a child: its handler reads them
/// (they go with the child's request, as an instance's do).
#[tokio::test]
async fn a_manual_runs_arguments_reach_a_handler_in_a_child() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::builder(dir.path().join("runs.db"))
        .connect()
        .unwrap();
    store.migrate().await.unwrap();
    let store: Arc<dyn Store> = Arc::new(store);
    let run_id = new_run_id();
    let capture = RunLogCapture::external(run_id, store);
    let identity = RunIdentity::new("iso.ok", run_id, chrono::Utc::now(), "node-iso")
        .args(Some(r#"{"tenant":8}"#.to_owned()));
    let mut child = ChildCommand::new(identity)
        .program(env!("CARGO_BIN_EXE_test_node"))
        .spawn(capture.lines())
        .await
        .expect("start the child");
    assert_eq!(child.wait().await, ChildExit::Succeeded);
    capture.finish().await;
    let record = |key: &str| std::fs::read_to_string(isolation_record_dir(run_id).join(key));
    assert_eq!(record("args").unwrap(), r#"{"tenant": 8}"#);
    assert!(record("instance").is_err(), "not an instance's run");
    let _ = std::fs::remove_dir_all(isolation_record_dir(run_id));
}

#[tokio::test]
async fn the_child_says_when_its_handler_started() {
    let mut run = Isolated::start("iso.ok").await;
    let before = chrono::Utc::now() - chrono::TimeDelta::seconds(1);
    run.child.wait().await;
    let started = run.child.handler_started_at().expect("the child said so");
    assert!(
        started > before,
        "{started} is the child's clock at the handler's start"
    );
    run.finish().await;
}

#[tokio::test]
async fn a_returned_error_reaches_the_node_with_its_causes() {
    let (exit, _, _) = Isolated::start("iso.error").await.finish().await;
    assert_eq!(
        exit,
        ChildExit::Failed {
            error: "the upstream said no: connection refused".into()
        }
    );
}

#[tokio::test]
async fn a_panic_is_reported_with_its_message_and_its_location_is_in_the_log() {
    let (exit, log, _) = Isolated::start("iso.panic").await.finish().await;
    assert_eq!(
        exit,
        ChildExit::Panicked {
            message: "the handler exploded on purpose".into()
        }
    );
    assert!(log.contains("stderr: thread '"), "{log}");
    assert!(
        log.contains("panicked at tests/src/bin/test_node.rs"),
        "{log}"
    );
}

#[tokio::test]
async fn an_abort_is_recorded_as_sigabrt() {
    let (exit, _, _) = Isolated::start("iso.abort").await.finish().await;
    let ChildExit::Signalled {
        signal,
        sent_by_node,
        ..
    } = &exit
    else {
        panic!("{exit:?}");
    };
    assert_eq!(signal.name(), Some("SIGABRT"));
    assert!(!sent_by_node);
    assert!(
        exit.to_string().contains("killed by SIGABRT (aborted)"),
        "{exit}"
    );
}

#[tokio::test]
async fn a_segfault_is_recorded_as_sigsegv() {
    let (exit, _, _) = Isolated::start("iso.segfault").await.finish().await;
    let ChildExit::Signalled {
        signal,
        sent_by_node,
        ..
    } = &exit
    else {
        panic!("{exit:?}");
    };
    assert_eq!(signal.name(), Some("SIGSEGV"));
    assert!(!sent_by_node);
    assert!(exit.to_string().contains("segmentation fault"), "{exit}");
}

#[tokio::test]
async fn exiting_before_the_handler_returns_is_recorded_with_the_code() {
    let (exit, _, _) = Isolated::start("iso.exit").await.finish().await;
    assert_eq!(exit, ChildExit::Exited { code: 3 });
}

#[tokio::test]
async fn a_leak_past_the_memory_limit_is_recorded_as_out_of_memory() {
    const LIMIT: u64 = 256 << 20; // as `iso.leak` declares
    let run = Isolated::start_with("iso.leak", Some(LIMIT)).await;
    let pid: u32 = run.record("pid").await.parse().unwrap();
    let (exit, log, _) = run.finish().await;
    let ChildExit::OutOfMemory { limit, detail } = &exit else {
        panic!("{exit:?}\n{log}");
    };
    assert_eq!(*limit, Some(LIMIT));
    assert!(detail.starts_with("memory allocation of "), "{detail}");
    assert!(
        exit.to_string().contains("(its limit is 256 MiB)"),
        "{exit}"
    );
    assert!(log.contains("stderr: memory allocation of "), "{log}");
    assert!(is_dead(pid));
}

#[tokio::test]
async fn sigterm_fires_cancelled_in_the_child() {
    let mut run = Isolated::start("iso.cooperative").await;
    run.record("pid").await;
    run.child.terminate().unwrap();
    assert_eq!(run.record("cancelled").await, "yes");
    let run_id = run.run_id;
    let (exit, _, _) = run.finish().await;
    let ChildExit::Failed { error } = &exit else {
        panic!("{exit:?}");
    };
    assert_eq!(
        *error,
        format!(
            "interrupted before finishing: run {run_id} of `iso.cooperative` was asked to stop"
        )
    );
}

#[tokio::test]
async fn a_child_that_ignores_sigterm_is_killed_after_the_grace() {
    let mut run = Isolated::start("iso.ignore_term").await;
    run.record("ignoring").await;
    let exit = run.child.stop(Duration::from_millis(500)).await;
    let ChildExit::Signalled {
        signal,
        sent_by_node,
        ..
    } = &exit
    else {
        panic!("{exit:?}");
    };
    assert_eq!(signal.name(), Some("SIGKILL"));
    assert!(sent_by_node, "the node killed it");
    let (again, _, _) = run.finish().await;
    assert_eq!(again, exit, "waiting again gives the same ending");
}

#[tokio::test]
async fn a_child_spinning_on_the_cpu_is_stopped_by_force() {
    let mut run = Isolated::start("iso.spin").await;
    run.record("pid").await;
    let exit = run.child.stop(Duration::from_millis(500)).await;
    assert!(
        matches!(&exit, ChildExit::Signalled { signal, sent_by_node: true, .. } if signal.name() == Some("SIGKILL")),
        "{exit:?}"
    );
    run.finish().await;
}

#[tokio::test]
async fn the_log_keeps_the_first_lines_then_says_how_much_was_cut() {
    let (exit, log, chunks) = Isolated::start("iso.flood").await.finish().await;
    assert_eq!(exit, ChildExit::Succeeded);
    let lines: i32 = chunks.iter().map(|c| c.lines).sum();
    assert_eq!(
        lines as usize,
        MAX_LINES + 1,
        "the first lines and the marker"
    );
    assert!(chunks.last().unwrap().truncated);
    assert!(log.contains("[log truncated: "), "{log}");
    assert!(log.lines().count() == MAX_LINES + 1);
}

#[tokio::test]
async fn dropping_the_handle_kills_the_child_and_what_it_started_and_reaps_it() {
    let run = Isolated::start("iso.grandchild").await;
    let grandchild: u32 = run.record("grandchild").await.parse().unwrap();
    let pid: u32 = run.record("pid").await.parse().unwrap();
    assert_eq!(pid, run.child.pid());
    let records = isolation_record_dir(run.run_id);
    drop(run);
    wait_until(PATIENCE, "the dropped child is reaped", || {
        let reaped = process_state(pid).is_none();
        async move { reaped }
    })
    .await;
    wait_dead(grandchild, "the process the handler started dies with it").await;
    let _ = std::fs::remove_dir_all(records);
}

#[tokio::test]
async fn stopping_a_child_stops_what_its_handler_started() {
    let mut run = Isolated::start("iso.grandchild").await;
    let grandchild: u32 = run.record("grandchild").await.parse().unwrap();
    run.record("pid").await;
    let exit = run.child.stop(Duration::from_secs(5)).await;
    // The handler's SIGTERM listener cancels its context, which it ignores: SIGKILL follows.
    assert!(
        matches!(
            exit,
            ChildExit::Signalled {
                sent_by_node: true,
                ..
            }
        ),
        "{exit:?}"
    );
    wait_dead(grandchild, "the process the handler started is stopped too").await;
    run.finish().await;
}

#[tokio::test]
async fn a_process_the_handler_left_behind_when_it_returned_ends_with_the_run() {
    let run = Isolated::start("iso.leave_behind").await;
    let grandchild: u32 = run.record("grandchild").await.parse().unwrap();
    let _cleanup = KillOnDrop(grandchild);
    let (exit, log, _) = run.finish().await;
    assert_eq!(exit, ChildExit::Succeeded);
    assert!(log.contains(" INFO stdout: before returning\n"), "{log}");
    // Killed with the child's process group, it no longer holds the run's output open.
    wait_dead(
        grandchild,
        "the process the handler left behind ends with the run",
    )
    .await;
    assert!(
        !log.contains("still holds its stdout or stderr open"),
        "{log}"
    );
}

#[tokio::test]
async fn a_process_that_ignores_sigterm_ends_with_a_run_that_was_asked_to_stop() {
    let mut run = Isolated::start("iso.stubborn_grandchild").await;
    let grandchild: u32 = run.record("grandchild").await.parse().unwrap();
    let _cleanup = KillOnDrop(grandchild);
    run.record("pid").await;
    // Once it runs `sleep`, the shell has set SIGTERM to be ignored.
    wait_until(
        PATIENCE,
        "the grandchild ignores SIGTERM and sleeps",
        || {
            let cmdline = std::fs::read(format!("/proc/{grandchild}/cmdline")).unwrap_or_default();
            async move { cmdline == b"sleep\x003600\x00" }
        },
    )
    .await;
    // A timeout or a cancel: SIGTERM to the group; the handler returns within the grace.
    let exit = run.child.stop(PATIENCE).await;
    assert!(
        matches!(&exit, ChildExit::Failed { error } if error.contains("interrupted")),
        "{exit:?}"
    );
    wait_dead(
        grandchild,
        "the process that ignored SIGTERM ends with the run",
    )
    .await;
    run.finish().await;
}

#[tokio::test]
async fn the_limits_are_set_on_the_child() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::builder(dir.path().join("runs.db"))
        .connect()
        .unwrap();
    store.migrate().await.unwrap();
    let store = Arc::new(store);
    let run_id = new_run_id();
    let capture = RunLogCapture::external(run_id, Arc::clone(&store) as Arc<dyn Store>);
    let identity = RunIdentity::new("iso.limits", run_id, chrono::Utc::now(), "node-iso");
    let mut child = ChildCommand::new(identity)
        .program(env!("CARGO_BIN_EXE_test_node"))
        .memory_limit(Some(512 << 20))
        .max_processes(Some(4096))
        .cpu_limit(Some(Duration::from_secs(3600)))
        .max_file_size(Some(1 << 30))
        .spawn(capture.lines())
        .await
        .expect("start the child");
    assert_eq!(child.wait().await, ChildExit::Succeeded);
    let limits = std::fs::read_to_string(isolation_record_dir(run_id).join("limits")).unwrap();
    let _ = std::fs::remove_dir_all(isolation_record_dir(run_id));
    for (name, soft, hard) in [
        ("Max data size", "536870912", "536870912"),
        ("Max processes", "4096", "4096"),
        ("Max cpu time", "3600", "3601"),
        ("Max file size", "1073741824", "1073741824"),
    ] {
        assert_eq!(limit_of(&limits, name), (soft, hard), "{limits}");
    }
}

#[tokio::test]
async fn a_limit_outside_its_range_is_refused_naming_the_option() {
    let identity = RunIdentity::new("iso.limits", new_run_id(), chrono::Utc::now(), "node-iso");
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::builder(dir.path().join("runs.db"))
        .connect()
        .unwrap();
    store.migrate().await.unwrap();
    let capture = RunLogCapture::external(1, Arc::new(store) as Arc<dyn Store>);
    let error = ChildCommand::new(identity)
        .program(env!("CARGO_BIN_EXE_test_node"))
        .max_processes(Some(2))
        .spawn(capture.lines())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        error
            .contains("`max_processes` of task `iso.limits`: 2 is out of range; accepted: from 16"),
        "{error}"
    );
}

/// The soft and hard values of the limit `name` in a `/proc/PID/limits` text.
fn limit_of<'a>(limits: &'a str, name: &str) -> (&'a str, &'a str) {
    let line = limits
        .lines()
        .find(|line| line.starts_with(name))
        .unwrap_or_else(|| panic!("no `{name}` in {limits}"));
    let mut values = line[name.len()..].split_whitespace();
    (values.next().unwrap(), values.next().unwrap())
}

/// A node (`test_node` on SQLite) whose environment holds every kind of secret it has runs an
/// isolated task: the handler's own record of its environment holds none of them, but the
/// application's own variables; its limits come from its attribute; the process it left behind
/// is gone once its run ended.
#[tokio::test]
async fn a_node_keeps_its_secrets_from_an_isolated_handler_and_ends_what_it_left_behind() {
    // `SCHEDULER_LISTEN_URL` and the config source's token and headers cannot be set on a node
    // with a SQLite store and a config file (it refuses them); the list's unit test covers them.
    const SECRETS: [(&str, &str); 9] = [
        (
            "DATABASE_URL",
            "postgres://app:db-password-1@db.invalid/jobs",
        ),
        ("SCHEDULER_ADMIN_TOKEN", "admin-token-0123456789abcdef"),
        (
            "SCHEDULER_ADMIN_VIEWER_TOKEN",
            "viewer-token-0123456789abcdef",
        ),
        (
            "SCHEDULER_WEBHOOK_URL",
            "http://127.0.0.1:9/hook?key=webhook-url-secret",
        ),
        (
            "SCHEDULER_WEBHOOK_SECRET",
            "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        ),
        ("OTEL_EXPORTER_OTLP_HEADERS", "x-api-key=otel-secret"),
        (
            "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
            "x-api-key=otel-traces-secret",
        ),
        ("ISO_TEST_SMTP_PASSWORD", "smtp-password-secret"),
        ("ISO_TEST_BOT_SECRET", "bot-secret-secret"),
    ];
    let dir = tempfile::tempdir().unwrap();
    let records = dir.path().join("records");
    let config = dir.path().join("tasks.json");
    std::fs::write(
        &config,
        r#"{"tasks":[{"name":"iso.environment","enabled":true,"cron":"* * * * * *","timezone":"UTC"}]}"#,
    )
    .unwrap();
    let channels = dir.path().join("channels.toml");
    std::fs::write(
        &channels,
        r#"
[[channels]]
name = "robot"
kind = "dingtalk"
url = "https://oapi.dingtalk.com/robot/send?access_token=abc"
secret = "env:ISO_TEST_BOT_SECRET"

[[channels]]
name = "mail"
kind = "email"
host = "127.0.0.1"
port = 2525
username = "scheduler"
password = "env:ISO_TEST_SMTP_PASSWORD"
from = "scheduler@example.com"
to = ["ops@example.com"]
"#,
    )
    .unwrap();
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_test_node"));
    command
        .env(
            "SCHEDULER_DATABASE_URL",
            format!("sqlite://{}", dir.path().join("s.db").display()),
        )
        .env("SCHEDULER_CONFIG", &config)
        .env("SCHEDULER_CHANNELS_FILE", &channels)
        .env("OTEL_SDK_DISABLED", "true")
        .env("SCHEDULER_ADMIN_ADDR", "127.0.0.1:0")
        .env("ISO_RECORD_DIR", &records)
        .env("RUST_LOG", "error")
        .stdout(std::process::Stdio::null());
    for (name, value) in SECRETS {
        command.env(name, value);
    }
    let mut node = command.spawn().expect("start the node");
    let _node = KillOnDrop(node.id());

    let env_record = wait_for_record(&records, "env-", &mut node).await;
    let run_id = env_record.trim_start_matches("env-");
    let env = std::fs::read_to_string(records.join(&env_record)).unwrap();
    for (name, value) in SECRETS {
        assert!(
            !env.lines()
                .any(|line| line.starts_with(&format!("{name}="))),
            "the handler got `{name}`:\n{env}"
        );
        assert!(
            !env.contains(value),
            "the handler saw the value of `{name}`"
        );
    }
    for name in ["PATH", "HOME", "ISO_RECORD_DIR", "RUST_LOG"] {
        assert!(
            env.lines()
                .any(|line| line.starts_with(&format!("{name}="))),
            "the handler lacks `{name}`:\n{env}"
        );
    }

    let limits = std::fs::read_to_string(records.join(format!("limits-{run_id}"))).unwrap();
    assert_eq!(
        limit_of(&limits, "Max cpu time"),
        ("3600", "3601"),
        "{limits}"
    );
    assert_eq!(
        limit_of(&limits, "Max processes"),
        ("4096", "4096"),
        "{limits}"
    );
    assert_eq!(
        limit_of(&limits, "Max file size"),
        ("1073741824", "1073741824"),
        "{limits}"
    );

    let grandchild: u32 = std::fs::read_to_string(records.join(format!("grandchild-{run_id}")))
        .unwrap()
        .parse()
        .unwrap();
    let _grandchild = KillOnDrop(grandchild);
    wait_dead(
        grandchild,
        "the process the handler left behind ends with its run",
    )
    .await;
    assert!(node.try_wait().unwrap().is_none(), "the node runs on");
    node.kill().unwrap();
    node.wait().unwrap();
}

/// The name of the first file in `dir` whose name starts with `prefix` (not a `.tmp`), once
/// there is one; fails if the node exits first.
async fn wait_for_record(dir: &Path, prefix: &str, node: &mut std::process::Child) -> String {
    let found = std::sync::Mutex::new(None);
    wait_until(PATIENCE, &format!("a handler records `{prefix}*`"), || {
        if let Some(status) = node.try_wait().unwrap() {
            panic!("the node exited: {status}");
        }
        let name = std::fs::read_dir(dir).ok().and_then(|entries| {
            entries
                .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
                .find(|name| name.starts_with(prefix) && !name.ends_with(".tmp"))
        });
        let done = name.is_some();
        if name.is_some() {
            *found.lock().unwrap() = name;
        }
        async move { done }
    })
    .await;
    found.into_inner().unwrap().unwrap()
}

#[tokio::test]
async fn a_killed_node_takes_its_child_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let run_id = new_run_id();
    let mut parent = std::process::Command::new(env!("CARGO_BIN_EXE_isolating_parent"))
        .args([
            env!("CARGO_BIN_EXE_test_node"),
            "iso.spin",
            &run_id.to_string(),
            dir.path().join("runs.db").to_str().unwrap(),
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(parent.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    let child: u32 = line
        .strip_prefix("child ")
        .and_then(|pid| pid.trim().parse().ok())
        .unwrap_or_else(|| panic!("the parent printed {line:?}"));
    let _cleanup = KillOnDrop(child);
    let pid_record = isolation_record_dir(run_id).join("pid");
    wait_until(PATIENCE, "the child's handler runs", || {
        let exists = pid_record.exists();
        async move { exists }
    })
    .await;
    assert!(!is_dead(child));

    parent.kill().unwrap(); // SIGKILL
    parent.wait().unwrap();
    wait_dead(child, "the child of a node killed by SIGKILL dies with it").await;
    let _ = std::fs::remove_dir_all(isolation_record_dir(run_id));
}

#[tokio::test]
async fn an_unknown_task_is_not_started() {
    let (exit, _, _) = Isolated::start("iso.nope").await.finish().await;
    let ChildExit::NotStarted { reason } = &exit else {
        panic!("{exit:?}");
    };
    assert!(
        reason.starts_with("no task named `iso.nope` is registered in this binary"),
        "{reason}"
    );
}

#[tokio::test]
async fn shared_state_is_refused_with_an_error_that_says_why() {
    let (exit, _, _) = Isolated::start("iso.state").await.finish().await;
    let ChildExit::Failed { error } = &exit else {
        panic!("{exit:?}");
    };
    assert!(error.contains("task `iso.state`"), "{error}");
    assert!(error.contains("isolation = \"process\""), "{error}");
}

#[tokio::test]
async fn the_binary_run_again_by_a_handler_is_not_taken_for_a_child() {
    let run = Isolated::start("iso.reexec").await;
    let reexec = run.record("reexec").await;
    let (exit, _, _) = run.finish().await;
    assert_eq!(exit, ChildExit::Succeeded);
    assert!(reexec.starts_with("exit status: 0\n"), "{reexec}");
    assert!(
        reexec.contains("T09:00:00"),
        "the `next` command ran: {reexec}"
    );
}

#[test]
fn records_live_in_a_directory_per_run() {
    assert!(isolation_record_dir(7).ends_with(Path::new("scheduler-isolation-records/7")));
}

/// An application that builds its scheduler itself and never asks whether it is an isolated
/// run's child (`self_built_node`), with a fixed admin address: each child is that binary
/// again, with the node's admin address and without its database URL. Building a scheduler in
/// the child opens no store and binds no port, so its runs (judged by their handler's own
/// record) happen, two of them one after the other.
#[tokio::test]
async fn an_application_that_builds_its_scheduler_itself_runs_its_isolated_tasks() {
    let dir = tempfile::tempdir().unwrap();
    let records = dir.path().join("records");
    let config = dir.path().join("tasks.json");
    std::fs::write(
        &config,
        r#"{"tasks":[{"name":"selfbuilt.iso","enabled":true,"cron":"* * * * * *","timezone":"UTC"}]}"#,
    )
    .unwrap();
    let admin_port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut node = std::process::Command::new(env!("CARGO_BIN_EXE_self_built_node"))
        .current_dir(dir.path())
        .env(
            "SCHEDULER_DATABASE_URL",
            format!("sqlite://{}", dir.path().join("s.db").display()),
        )
        .env("SCHEDULER_CONFIG", &config)
        .env("SCHEDULER_ADMIN_ADDR", format!("127.0.0.1:{admin_port}"))
        .env("OTEL_SDK_DISABLED", "true")
        .env("ISO_RECORD_DIR", &records)
        .env("RUST_LOG", "error")
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("start the node");
    let _node = KillOnDrop(node.id());
    let runs = std::sync::Mutex::new(0usize);
    wait_until(PATIENCE, "two isolated runs record themselves", || {
        if let Some(status) = node.try_wait().unwrap() {
            panic!("the node exited: {status}");
        }
        let count = std::fs::read_dir(&records).map_or(0, |entries| {
            entries
                .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
                .filter(|name| name.starts_with("ran-") && !name.ends_with(".tmp"))
                .count()
        });
        *runs.lock().unwrap() = count;
        async move { count >= 2 }
    })
    .await;
    assert!(
        !dir.path().join("scheduler.db").exists(),
        "a child opened the default SQLite store"
    );
    node.kill().unwrap();
    node.wait().unwrap();
}
