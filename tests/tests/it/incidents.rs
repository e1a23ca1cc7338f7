//! One incident per problem, and service levels per task: real nodes on each store post their
//! alerts to a real webhook receiver on 127.0.0.1, and what reaches it (counted by its
//! records), the incidents the admin API shows, and the runs are judged. No timing assertions:
//! every wait is for a record, and each scenario checks first that it was staged.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use chrono::{TimeDelta, Utc};
use common::*;
use scheduler::config::{TaskConfig, TaskSla};
use scheduler::testing::store::RunStatus;
use scheduler::{TaskContext, task};
use serde_json::{Value, json};

on_both_backends!(
    threads = 2;
    a_failing_task_opens_one_incident_is_reminded_and_resolves_once,
    fewer_failures_in_a_row_than_the_threshold_send_nothing,
    a_snooze_holds_the_alerts_back_and_lifting_it_resumes_them,
    a_start_deadline_fires_once_when_broken_and_not_when_kept,
    a_run_time_warning_fires_once_per_slow_run_and_does_not_stop_it,
    a_wall_clock_deadline_fires_once_when_broken_and_not_when_kept,
    failures_on_two_nodes_fold_into_one_incident_and_one_alert,
    the_snooze_and_pause_commands_set_and_lift_what_they_name,
);

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const TOKEN: &str = "incidents-admin-token-0123456789";
const YEARLY: &str = "0 0 1 1 *";

/// What the handlers of one test are told to do, and what they did.
#[derive(Default)]
struct Switches {
    /// `inc.flaky` fails while this is set.
    failing: AtomicBool,
    /// `inc.twice` fails this many more times, then succeeds.
    failures_left: AtomicUsize,
}

fn switches(ctx: &TaskContext) -> &Arc<Switches> {
    ctx.state::<Arc<Switches>>()
        .expect("incident test nodes share Switches")
}

#[task(name = "inc.flaky")]
async fn inc_flaky(ctx: TaskContext) -> Result<(), std::io::Error> {
    if switches(&ctx).failing.load(Ordering::SeqCst) {
        return Err(std::io::Error::other("the upstream refused"));
    }
    Ok(())
}

#[task(name = "inc.twice")]
async fn inc_twice(ctx: TaskContext) -> Result<(), std::io::Error> {
    let left = &switches(&ctx).failures_left;
    if left
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok()
    {
        return Err(std::io::Error::other("not yet"));
    }
    Ok(())
}

#[task(name = "inc.ontime")]
async fn inc_ontime() {}

#[task(name = "inc.slow")]
async fn inc_slow() {
    tokio::time::sleep(Duration::from_secs(3)).await;
}

#[task(name = "inc.quick")]
async fn inc_quick() {}

#[task(name = "inc.report_kept")]
async fn inc_report_kept() {}

/// The bodies a receiver got, parsed.
#[derive(Default)]
struct Received {
    bodies: std::sync::Mutex<Vec<Value>>,
}

impl Received {
    /// The events of type `kind` about `task` it got.
    fn of(&self, kind: &str, task: &str) -> Vec<Value> {
        self.bodies
            .lock()
            .unwrap()
            .iter()
            .filter(|b| b["type"] == kind)
            .filter(|b| {
                b["data"]["task"] == task
                    || b["data"]["run"]["task"] == task
                    || b["data"]["incident"]["task"] == task
            })
            .cloned()
            .collect()
    }

    fn count(&self, kind: &str, task: &str) -> usize {
        self.of(kind, task).len()
    }
}

/// A webhook receiver on a free port of 127.0.0.1 answering 204 at `/hook`.
async fn receiver() -> (String, Arc<Received>, tokio::task::JoinHandle<()>) {
    let got = Arc::new(Received::default());
    let sink = Arc::clone(&got);
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |body: String| {
            let sink = Arc::clone(&sink);
            async move {
                let json = serde_json::from_str(&body).unwrap_or(Value::Null);
                sink.bodies.lock().unwrap().push(json);
                axum::http::StatusCode::NO_CONTENT
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let handle = tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    (url, got, handle)
}

fn sla(json: Value) -> Option<TaskSla> {
    Some(serde_json::from_value(json).unwrap())
}

fn with_sla(name: &str, cron: &str, levels: Value) -> TaskConfig {
    TaskConfig {
        sla: sla(levels),
        ..entry(name, cron)
    }
}

/// A running node with its admin API, posting its alerts to a receiver.
struct Node {
    node: RunningNode,
    admin: std::net::SocketAddr,
    http: reqwest::Client,
    got: Arc<Received>,
    server: tokio::task::JoinHandle<()>,
}

impl Node {
    /// Running `prefix`'s tasks by `entries`, once the store has every row of `rows`.
    async fn start(
        db: &TestDb,
        prefix: &str,
        entries: Vec<TaskConfig>,
        state: Arc<Switches>,
        rows: &[&str],
    ) -> Self {
        let (url, got, server) = receiver().await;
        let webhook = scheduler::webhook::WebhookSettings::new(&url, SECRET).unwrap();
        let builder = node_with(db, "a", tasks(prefix), doc(entries), &state)
            .webhook(webhook)
            // No missed-run alerts in these tests: their ticks are late on purpose.
            .missed_grace(Duration::from_secs(3600))
            .admin_token(TOKEN);
        let started = admin_node(db, builder, rows).await;
        Self {
            node: started.running,
            admin: started.addr,
            http: reqwest::Client::new(),
            got,
            server,
        }
    }

    async fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> (u16, Value) {
        let alice = AdminClient {
            token: Some(TOKEN),
            actor: Some("alice"),
        };
        let url = format!("http://{}{path}", self.admin);
        let (status, body) = alice.call(method, url, body).await;
        (status.as_u16(), body)
    }

    /// The incidents the admin API shows for `task` (newest first).
    async fn incidents(&self, task: &str) -> Vec<Value> {
        let (status, body) = self
            .call(
                reqwest::Method::GET,
                &format!("/api/incidents?task={task}"),
                None,
            )
            .await;
        assert_eq!(status, 200, "{body}");
        body["incidents"].as_array().cloned().unwrap_or_default()
    }

    async fn stop(self) {
        self.node.stop().await;
        self.server.abort();
    }
}

/// A task failing every second: one incident, one `run.failed` sent however often it fails,
/// reminders while it stays open (at the 2 s interval: at least one arrives), and one
/// `incident.resolved` once it succeeds (later successes send nothing).
async fn a_failing_task_opens_one_incident_is_reminded_and_resolves_once(db: &TestDb) {
    let state = Arc::new(Switches::default());
    state.failing.store(true, Ordering::SeqCst);
    let n = Node::start(
        db,
        "inc.flaky",
        vec![with_sla(
            "inc.flaky",
            "* * * * * *",
            json!({"remind_every": "2s"}),
        )],
        Arc::clone(&state),
        &[],
    )
    .await;
    wait_until(
        Duration::from_secs(90),
        "a reminder and 3 failures",
        || async {
            n.got.count("incident.reminder", "inc.flaky") >= 1
                && db.count_runs("inc.flaky", RunStatus::Failed).await >= 3
        },
    )
    .await;
    let open = n.incidents("inc.flaky").await;
    assert_eq!(open.len(), 1, "one incident: {open:?}");
    assert_eq!(open[0]["state"], "open");
    assert_eq!(open[0]["kind"], "run.failed");
    assert!(open[0]["count"].as_i64().unwrap() >= 3, "{open:?}");
    assert!(open[0]["notified_at"].is_string(), "{open:?}");
    let reminder = &n.got.of("incident.reminder", "inc.flaky")[0];
    assert_eq!(reminder["data"]["incident"]["kind"], "run.failed");

    state.failing.store(false, Ordering::SeqCst);
    wait_until(Duration::from_secs(60), "incident.resolved", || async {
        n.got.count("incident.resolved", "inc.flaky") >= 1
    })
    .await;
    // Later successes close nothing more.
    let succeeded = db.count_runs("inc.flaky", RunStatus::Succeeded).await;
    wait_until(Duration::from_secs(60), "three more successes", || async {
        db.count_runs("inc.flaky", RunStatus::Succeeded).await >= succeeded + 3
    })
    .await;
    outbox_delivered(db).await;
    let failed_runs = db.count_runs("inc.flaky", RunStatus::Failed).await;
    assert!(failed_runs >= 3, "staged: {failed_runs} failed runs");
    assert_eq!(
        n.got.count("run.failed", "inc.flaky"),
        1,
        "one alert for the incident"
    );
    assert_eq!(
        n.got.count("incident.resolved", "inc.flaky"),
        1,
        "one recovery"
    );
    let closed = n.incidents("inc.flaky").await;
    assert_eq!(closed.len(), 1, "{closed:?}");
    assert_eq!(closed[0]["state"], "closed");
    assert!(
        closed[0]["closed_by"]
            .as_str()
            .unwrap()
            .contains("succeeded"),
        "{closed:?}"
    );
    n.stop().await;
}

/// `alert_after_failures: 3`: two failures in a row then a success send nothing (the incident
/// is recorded, held back, and closed silently); three in a row send one `run.failed`.
async fn fewer_failures_in_a_row_than_the_threshold_send_nothing(db: &TestDb) {
    let state = Arc::new(Switches::default());
    state.failures_left.store(2, Ordering::SeqCst);
    let n = Node::start(
        db,
        "inc.twice",
        vec![with_sla(
            "inc.twice",
            "* * * * * *",
            json!({"alert_after_failures": 3}),
        )],
        Arc::clone(&state),
        &[],
    )
    .await;
    wait_stepping(
        db,
        Duration::from_secs(60),
        "two failures, then a success",
        || async {
            db.count_runs("inc.twice", RunStatus::Failed).await == 2
                && db.count_runs("inc.twice", RunStatus::Succeeded).await >= 1
        },
    )
    .await;
    wait_until(
        Duration::from_secs(60),
        "the held-back incident closed",
        || async {
            n.incidents("inc.twice")
                .await
                .first()
                .is_some_and(|i| i["state"] == "closed")
        },
    )
    .await;
    let held = n.incidents("inc.twice").await;
    assert_eq!(held[0]["count"], 2, "{held:?}");
    assert!(held[0]["notified_at"].is_null(), "never sent: {held:?}");
    outbox_delivered(db).await;
    assert_eq!(n.got.count("run.failed", "inc.twice"), 0);
    assert_eq!(n.got.count("incident.resolved", "inc.twice"), 0);

    // Now three in a row (and more): one alert, from the third.
    state.failures_left.store(usize::MAX, Ordering::SeqCst);
    wait_stepping(db, Duration::from_secs(60), "run.failed sent", || async {
        n.got.count("run.failed", "inc.twice") >= 1
    })
    .await;
    let open = n.incidents("inc.twice").await;
    assert_eq!(open[0]["state"], "open", "{open:?}");
    assert!(open[0]["count"].as_i64().unwrap() >= 3, "{open:?}");
    outbox_delivered(db).await;
    assert_eq!(n.got.count("run.failed", "inc.twice"), 1);
    n.stop().await;
}

/// A snoozed task keeps running and its failures are folded into its incident, but nothing is
/// sent; lifting the snooze (through the admin API, audited) sends the next one.
async fn a_snooze_holds_the_alerts_back_and_lifting_it_resumes_them(db: &TestDb) {
    let state = Arc::new(Switches::default());
    let n = Node::start(
        db,
        "inc.flaky",
        vec![entry("inc.flaky", "* * * * * *")],
        Arc::clone(&state),
        &[],
    )
    .await;
    wait_until(Duration::from_secs(60), "a success", || async {
        db.count_runs("inc.flaky", RunStatus::Succeeded).await >= 1
    })
    .await;
    let until = (Utc::now() + TimeDelta::hours(1)).to_rfc3339();
    let (status, body) = n
        .call(
            reqwest::Method::POST,
            "/api/tasks/inc.flaky/snooze",
            Some(json!({"reason": "upstream maintenance", "until": until})),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["snooze"]["reason"], "upstream maintenance");
    assert!(
        body["snooze"]["by"].as_str().unwrap().starts_with("alice"),
        "{body}"
    );
    // Refused: no reason, an end already past, an unknown task, no token.
    let (status, _) = n
        .call(
            reqwest::Method::POST,
            "/api/tasks/inc.flaky/snooze",
            Some(json!({"reason": " ", "until": until})),
        )
        .await;
    assert_eq!(status, 400);
    let past = (Utc::now() - TimeDelta::hours(1)).to_rfc3339();
    let (status, _) = n
        .call(
            reqwest::Method::POST,
            "/api/tasks/inc.flaky/snooze",
            Some(json!({"reason": "x", "until": past})),
        )
        .await;
    assert_eq!(status, 409);
    let (status, _) = n
        .call(
            reqwest::Method::POST,
            "/api/tasks/inc.nobody/snooze",
            Some(json!({"reason": "x", "until": until})),
        )
        .await;
    assert_eq!(status, 404);
    let anonymous = n
        .http
        .delete(format!("http://{}/api/tasks/inc.flaky/snooze", n.admin))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status().as_u16(), 401);

    state.failing.store(true, Ordering::SeqCst);
    wait_until(Duration::from_secs(60), "three failures folded", || async {
        n.incidents("inc.flaky")
            .await
            .first()
            .is_some_and(|i| i["state"] == "open" && i["count"].as_i64().unwrap_or(0) >= 3)
    })
    .await;
    let held = n.incidents("inc.flaky").await;
    assert!(held[0]["notified_at"].is_null(), "held back: {held:?}");
    let (_, listed) = n
        .call(reqwest::Method::GET, "/api/incidents?state=open", None)
        .await;
    assert_eq!(listed["snoozes"][0]["task"], "inc.flaky", "{listed}");
    outbox_delivered(db).await;
    assert_eq!(
        n.got.count("run.failed", "inc.flaky"),
        0,
        "snoozed: nothing sent"
    );
    assert!(
        db.count_runs("inc.flaky", RunStatus::Failed).await >= 3,
        "the task keeps running while snoozed"
    );

    let (status, body) = n
        .call(reqwest::Method::DELETE, "/api/tasks/inc.flaky/snooze", None)
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["ended"]["reason"], "upstream maintenance");
    wait_until(
        Duration::from_secs(60),
        "run.failed sent after the lift",
        || async { n.got.count("run.failed", "inc.flaky") >= 1 },
    )
    .await;
    let audit = db.api().audit_log(50, None).await.unwrap();
    for action in ["snooze", "unsnooze"] {
        assert!(
            audit.iter().any(|a| a.action == action
                && a.task == "inc.flaky"
                && a.actor.starts_with("alice")),
            "{action} audited: {audit:?}"
        );
    }
    outbox_delivered(db).await;
    assert_eq!(
        n.got.count("run.failed", "inc.flaky"),
        1,
        "one alert for the incident"
    );
    n.stop().await;
}

/// `start_within`: a tick nobody starts raises `task.late` once, while it still waits; a task
/// whose ticks start on time raises none.
async fn a_start_deadline_fires_once_when_broken_and_not_when_kept(db: &TestDb) {
    // `inc.waiting` is a row no node runs (its code is not deployed here): its tick waits.
    db.insert_task(
        "inc.waiting",
        YEARLY,
        Some(db.now() - TimeDelta::seconds(60)),
    )
    .await;
    let n = Node::start(
        db,
        "inc.ontime",
        vec![
            with_sla("inc.ontime", "* * * * * *", json!({"start_within": "10s"})),
            with_sla("inc.waiting", YEARLY, json!({"start_within": "10s"})),
        ],
        Arc::new(Switches::default()),
        &[],
    )
    .await;
    wait_until(
        Duration::from_secs(60),
        "task.late for the waiting tick",
        || async { n.got.count("task.late", "inc.waiting") >= 1 },
    )
    .await;
    // The watch keeps judging (each pass judges every task): wait for more on-time runs.
    let ran = db.count_runs("inc.ontime", RunStatus::Succeeded).await;
    wait_stepping(
        db,
        Duration::from_secs(60),
        "three more on-time runs",
        || async { db.count_runs("inc.ontime", RunStatus::Succeeded).await >= ran + 3 },
    )
    .await;
    outbox_delivered(db).await;
    let late = n.got.of("task.late", "inc.waiting");
    assert_eq!(late.len(), 1, "once per tick: {late:?}");
    assert_eq!(late[0]["data"]["start_within_ms"], 10_000);
    assert_eq!(n.got.count("task.late", "inc.ontime"), 0, "kept");
    let incidents = n.incidents("inc.waiting").await;
    assert_eq!(incidents.len(), 1, "{incidents:?}");
    assert_eq!(incidents[0]["kind"], "task.late");
    assert_eq!(incidents[0]["count"], 1);
    n.stop().await;
}

/// `warn_after`: a run going on past it raises `task.slow` once and still succeeds; a quick
/// run raises none.
async fn a_run_time_warning_fires_once_per_slow_run_and_does_not_stop_it(db: &TestDb) {
    let n = Node::start(
        db,
        "inc.",
        vec![
            with_sla("inc.slow", YEARLY, json!({"warn_after": "1s"})),
            with_sla("inc.quick", YEARLY, json!({"warn_after": "10s"})),
        ],
        Arc::new(Switches::default()),
        // Only these two rows: the registry has every `inc.` task, the config names two.
        &["inc.slow", "inc.quick"],
    )
    .await;
    db.set_next_run(Some("inc.slow"), Some(Utc::now())).await;
    db.set_next_run(Some("inc.quick"), Some(Utc::now())).await;
    db.api().notify().await.unwrap();
    wait_until(Duration::from_secs(60), "both runs succeeded", || async {
        db.count_runs("inc.slow", RunStatus::Succeeded).await == 1
            && db.count_runs("inc.quick", RunStatus::Succeeded).await == 1
    })
    .await;
    wait_until(Duration::from_secs(60), "task.slow delivered", || async {
        n.got.count("task.slow", "inc.slow") >= 1
    })
    .await;
    outbox_delivered(db).await;
    let slow = n.got.of("task.slow", "inc.slow");
    assert_eq!(slow.len(), 1, "once per run: {slow:?}");
    assert_eq!(slow[0]["data"]["warn_after_ms"], 1_000);
    assert_eq!(n.got.count("task.slow", "inc.quick"), 0, "kept");
    n.stop().await;
}

/// `succeed_by`: a task with no success since the previous deadline raises
/// `task.deadline_missed` once when the deadline passes; one that succeeded before it raises
/// none.
async fn a_wall_clock_deadline_fires_once_when_broken_and_not_when_kept(db: &TestDb) {
    // A deadline a little ahead, in UTC (the tasks' zone), to the second, on the nodes' clock.
    let deadline = db.now() + TimeDelta::seconds(8);
    let at = deadline.format("%H:%M:%S").to_string();
    // `inc.report_missed` is a row no node runs: it cannot succeed.
    db.insert_task("inc.report_missed", YEARLY, None).await;
    let n = Node::start(
        db,
        "inc.report_kept",
        vec![
            with_sla("inc.report_kept", YEARLY, json!({"succeed_by": at})),
            with_sla("inc.report_missed", YEARLY, json!({"succeed_by": at})),
        ],
        Arc::new(Switches::default()),
        &["inc.report_kept"],
    )
    .await;
    db.set_next_run(Some("inc.report_kept"), Some(db.now()))
        .await;
    db.api().notify().await.unwrap();
    wait_until(
        Duration::from_secs(60),
        "the kept report succeeded",
        || async { db.count_runs("inc.report_kept", RunStatus::Succeeded).await == 1 },
    )
    .await;
    let run = &db.runs(Some("inc.report_kept")).await[0];
    assert!(
        run.finished_at.unwrap() <= deadline,
        "staged: the report succeeded before its deadline ({run:?}, deadline {deadline})"
    );
    wait_stepping(
        db,
        Duration::from_secs(60),
        "task.deadline_missed",
        || async { n.got.count("task.deadline_missed", "inc.report_missed") >= 1 },
    )
    .await;
    outbox_delivered(db).await;
    let missed = n.got.of("task.deadline_missed", "inc.report_missed");
    assert_eq!(missed.len(), 1, "once: {missed:?}");
    assert_eq!(missed[0]["data"]["succeed_by"], at);
    assert_eq!(missed[0]["data"]["timezone"], "UTC");
    assert_eq!(
        n.got.count("task.deadline_missed", "inc.report_kept"),
        0,
        "kept"
    );
    let incidents = n.incidents("inc.report_missed").await;
    assert_eq!(incidents.len(), 1, "{incidents:?}");
    assert_eq!(incidents[0]["kind"], "task.deadline_missed");
    n.stop().await;
}

/// Two nodes run the same failing task (each tick on one of them) and raise its failures each
/// on its own: they fold into one incident, and the receiver gets one `run.failed`.
async fn failures_on_two_nodes_fold_into_one_incident_and_one_alert(db: &TestDb) {
    let (url, got, server) = receiver().await;
    let state = Arc::new(Switches::default());
    state.failing.store(true, Ordering::SeqCst);
    let start_node = |id: &str| {
        let webhook = scheduler::webhook::WebhookSettings::new(&url, SECRET).unwrap();
        let config = doc(vec![entry("inc.flaky", "* * * * * *")]);
        start(
            node_with(db, id, tasks("inc.flaky"), config, &state)
                .webhook(webhook)
                .build()
                .unwrap(),
        )
    };
    let (a, b) = (start_node("a"), start_node("b"));
    wait_until(
        Duration::from_secs(90),
        "failures on both nodes",
        || async {
            let runs = db.runs(Some("inc.flaky")).await;
            let failed = |node: &str| {
                runs.iter()
                    .filter(|r| r.status == RunStatus::Failed && r.node_id == node)
                    .count()
            };
            failed("a") >= 2 && failed("b") >= 2
        },
    )
    .await;
    outbox_delivered(db).await;
    a.stop().await;
    b.stop().await;
    server.abort();
    assert_eq!(got.count("run.failed", "inc.flaky"), 1, "one alert");
    let open = db
        .api()
        .incidents(&scheduler::testing::store::IncidentQuery::new(10).task("inc.flaky"))
        .await
        .unwrap();
    assert_eq!(open.len(), 1, "one incident: {open:?}");
    assert!(open[0].count >= 4, "{open:?}");
}

/// The application's own `snooze`/`unsnooze` and `pause`/`resume` commands, run as a real
/// process against the store: each sets what it names with its end and reason, lifting says
/// what it lifted, lifting again changes nothing, an unknown task is an error, and a snooze
/// without an end is refused.
async fn the_snooze_and_pause_commands_set_and_lift_what_they_name(db: &TestDb) {
    let config = doc(vec![entry("inc.flaky", YEARLY)]);
    let state = Arc::new(Switches::default());
    let builder = node_with(db, "a", tasks("inc.flaky"), config, &state);
    let n = started(db, builder, &["inc.flaky"]).await;
    n.stop().await;
    let cli = |args: &[&str]| run_app(db, &[args, &["--actor", "ops-bob"]].concat());

    let (code, out) = cli(&[
        "snooze",
        "inc.flaky",
        "--for",
        "2h",
        "--reason",
        "vendor maintenance",
    ]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("snoozed the alerts of inc.flaky until"),
        "{out}"
    );
    let snoozes = db.api().snoozes().await.unwrap();
    assert_eq!(snoozes.len(), 1, "{snoozes:?}");
    assert_eq!(snoozes[0].reason, "vendor maintenance");
    let left = snoozes[0].until - Utc::now();
    assert!(
        left > TimeDelta::minutes(100) && left <= TimeDelta::hours(2),
        "{left}"
    );
    let (code, out) = cli(&["unsnooze", "inc.flaky"]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("lifted the snooze of inc.flaky (by ops-bob"),
        "{out}"
    );
    assert!(db.api().snoozes().await.unwrap().is_empty());
    let (code, out) = cli(&["unsnooze", "inc.flaky"]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("inc.flaky was not snoozed; nothing changed"),
        "{out}"
    );
    let (code, out) = cli(&["unsnooze", "inc.nobody"]);
    assert_ne!(code, 0, "{out}");
    assert!(out.contains("inc.nobody"), "{out}");
    let (code, out) = cli(&["snooze", "inc.flaky", "--reason", "no end"]);
    assert_ne!(code, 0, "{out}");
    assert!(out.contains("--until"), "{out}");

    let (code, out) = cli(&["pause", "inc.flaky", "--for", "1h", "--reason", "by hand"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("paused inc.flaky until"), "{out}");
    let (code, out) = cli(&["resume", "inc.flaky"]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("resumed inc.flaky (paused by ops-bob"),
        "{out}"
    );
    let (code, out) = cli(&["resume", "inc.flaky"]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("inc.flaky was not paused; nothing changed"),
        "{out}"
    );
    let (code, out) = cli(&["resume", "inc.nobody"]);
    assert_ne!(code, 0, "{out}");
    assert!(out.contains("inc.nobody"), "{out}");
}
