//! Run policies against each real store: timeouts, retries, misfire handling, manual runs,
//! missed-run detection, and the events they raise. Every behaviour is written once and run on
//! a fresh PostgreSQL schema and a fresh SQLite file (`on_postgres::...` and `on_sqlite::...`).

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use scheduler::events::SchedulerEvent;
use scheduler::{TaskContext, task};

on_both_backends!(
    threads = 2;
    a_run_past_its_timeout_is_stopped_and_recorded_timed_out,
    a_failed_run_is_retried_across_nodes_until_it_succeeds,
    a_retry_that_would_reach_the_next_tick_gives_way,
    overdue_ticks_are_skipped_or_run_once_per_the_misfire_rule,
    a_manual_run_runs_once_recorded_and_audited,
    a_pause_stops_runs_survives_reconciles_and_its_ticks_are_recorded,
    a_task_nobody_runs_is_reported_missed_once_and_recovered,
    the_first_node_back_reports_a_run_it_serves_late,
    a_failure_is_delivered_to_the_webhook_signed,
    an_alert_survives_its_node_and_is_delivered_once,
    a_gone_endpoint_is_disabled,
    orphaned_tasks_and_disabled_ticks_are_reported,
);

/// Ignores cancellation and would run for a minute.
#[task(name = "timeout.stubborn", timeout = "1s")]
async fn timeout_stubborn(ctx: TaskContext) {
    let _guard = recorder(&ctx).enter(&ctx);
    tokio::time::sleep(Duration::from_secs(60)).await;
    recorder(&ctx).finished(&ctx);
}

/// Stops when told.
#[task(name = "timeout.polite", timeout = "1s")]
async fn timeout_polite(ctx: TaskContext) -> Result<(), scheduler::Interrupted> {
    let _guard = recorder(&ctx).enter(&ctx);
    tokio::select! {
        _ = ctx.cancelled() => {
            recorder(&ctx).note_cancelled();
            Err(ctx.interrupted())
        }
        _ = tokio::time::sleep(Duration::from_secs(60)) => Ok(()),
    }
}

/// A run past its timeout is told through its context, then stopped (a handler that ignores
/// the request is never polled again), recorded `timed_out`, and raises `run.timed_out`.
async fn a_run_past_its_timeout_is_stopped_and_recorded_timed_out(db: &TestDb) {
    let rec = Arc::new(Recorder::default());
    let scheduler = node(db, "a", tasks("timeout."))
        .config_document(doc(vec![
            entry("timeout.stubborn", "0 0 1 1 *"),
            entry("timeout.polite", "0 0 1 1 *"),
        ]))
        .state(Arc::clone(&rec))
        .build()
        .unwrap();
    let mut events = scheduler.subscribe();
    let n = start(scheduler);
    trigger_all_now(db, 2).await;
    wait_until(Duration::from_secs(30), "both timed out", || async {
        db.count_runs("timeout.stubborn", RunStatus::TimedOut).await == 1
            && db.count_runs("timeout.polite", RunStatus::TimedOut).await == 1
    })
    .await;
    n.stop().await;
    assert_eq!(rec.cancellations(), 1, "the polite one was told");
    assert!(rec.finishes.lock().unwrap().is_empty(), "neither ran on");
    let errors: Vec<String> = db
        .runs(None)
        .await
        .into_iter()
        .map(|r| r.error.unwrap_or_default())
        .collect();
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(
        errors.iter().all(|e| e.contains("timeout of 1s")),
        "{errors:?}"
    );
    let mut timed_out = 0;
    while let Ok(Some(e)) = tokio::time::timeout(Duration::from_millis(100), events.recv()).await {
        if let SchedulerEvent::RunTimedOut { .. } = e.event {
            timed_out += 1;
        }
    }
    assert_eq!(timed_out, 2);
}

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::Ordering;

use chrono::{DateTime, DurationRound, TimeDelta, Utc};
use scheduler::store::{SkipReason, Store};
use scheduler::testing::operate::{self, Actor};
use scheduler::testing::store::{RunQuery, RunRequest, RunStatus, Trigger};

/// The current minute, to the minute.
fn minute_now() -> DateTime<Utc> {
    Utc::now().duration_trunc(TimeDelta::minutes(1)).unwrap()
}

/// Events of a node, gathered in the background.
fn gather(mut events: scheduler::events::EventStream) -> Arc<Mutex<Vec<SchedulerEvent>>> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&seen);
    tokio::spawn(async move {
        while let Some(e) = events.recv().await {
            sink.lock().unwrap().push(e.into_inner());
        }
    });
    seen
}

fn kinds(seen: &Mutex<Vec<SchedulerEvent>>) -> Vec<&'static str> {
    seen.lock().unwrap().iter().map(|e| e.kind()).collect()
}

/// Fails its first two attempts, then succeeds.
#[task(name = "retry.flaky", retries = 2, backoff = "200ms")]
async fn retry_flaky(ctx: TaskContext) -> Result<(), std::io::Error> {
    let _guard = recorder(&ctx).enter(&ctx);
    tokio::time::sleep(Duration::from_millis(50)).await;
    // This test's own count (both backends' tests run in one process at once).
    if recorder(&ctx).starts_of("retry.flaky") <= 2 {
        return Err(std::io::Error::other("upstream flaked"));
    }
    recorder(&ctx).finished(&ctx);
    Ok(())
}

/// A failed run is retried with backoff, each attempt its own run (serving the same tick), on
/// whichever node claims it, never two at once; the third attempt succeeds.
async fn a_failed_run_is_retried_across_nodes_until_it_succeeds(db: &TestDb) {
    let rec = Arc::new(Recorder::default());
    let config = doc(vec![entry("retry.flaky", "0 0 1 1 *")]);
    let a = node(db, "a", tasks("retry."))
        .config_document(config.clone())
        .state(Arc::clone(&rec))
        .build()
        .unwrap();
    let seen = gather(a.subscribe());
    let a = start(a);
    let b = node(db, "b", tasks("retry."))
        .config_document(config)
        .state(Arc::clone(&rec))
        .build()
        .unwrap();
    let seen_b = gather(b.subscribe());
    let b = start(b);
    trigger_all_now(db, 1).await;
    wait_until(
        Duration::from_secs(30),
        "the third attempt succeeds",
        || async { db.count_runs("retry.flaky", RunStatus::Succeeded).await == 1 },
    )
    .await;
    a.stop().await;
    b.stop().await;
    let runs = db.api().runs(&RunQuery::latest(10)).await.unwrap();
    let mut runs: Vec<_> = runs.into_iter().rev().collect();
    runs.retain(|r| r.task_name == "retry.flaky");
    let attempts: Vec<(i32, Trigger, String)> = runs
        .iter()
        .map(|r| (r.attempt, r.trigger, r.status.to_string()))
        .collect();
    assert_eq!(
        attempts,
        [
            (1, Trigger::Schedule, "failed".to_owned()),
            (2, Trigger::Retry, "failed".to_owned()),
            (3, Trigger::Retry, "succeeded".to_owned())
        ]
    );
    assert!(
        runs.iter().all(|r| r.scheduled_at == runs[0].scheduled_at),
        "one tick"
    );
    assert_eq!(
        rec.max_overlap.load(Ordering::SeqCst),
        1,
        "never two attempts at once"
    );
    let retries = [&seen, &seen_b]
        .iter()
        .flat_map(|s| s.lock().unwrap().clone())
        .filter(|e| matches!(e, SchedulerEvent::RetryScheduled { .. }))
        .count();
    assert_eq!(retries, 2, "one per failed attempt");
}

/// Always fails; its backoff is longer than its interval.
#[task(name = "giveway.task", retries = 3, backoff = "30s")]
async fn giveway_task(ctx: TaskContext) -> Result<(), std::io::Error> {
    let _guard = recorder(&ctx).enter(&ctx);
    Err(std::io::Error::other("still broken"))
}

/// A retry that would reach the next scheduled tick gives way to it, and that is recorded.
async fn a_retry_that_would_reach_the_next_tick_gives_way(db: &TestDb) {
    let rec = Arc::new(Recorder::default());
    let n = start(
        node(db, "a", tasks("giveway."))
            .config_document(doc(vec![entry("giveway.task", "*/2 * * * * *")]))
            .state(Arc::clone(&rec))
            .build()
            .unwrap(),
    );
    wait_stepping(db, Duration::from_secs(30), "two failed ticks", || async {
        db.count_runs("giveway.task", RunStatus::Failed).await >= 2
    })
    .await;
    n.stop().await;
    let s = db.api();
    let retries = s
        .runs(&RunQuery::latest(10).trigger(Trigger::Retry))
        .await
        .unwrap();
    assert!(retries.is_empty(), "no retry ran: {retries:?}");
    let gave_way = s
        .skips("giveway.task", DateTime::<Utc>::UNIX_EPOCH)
        .await
        .unwrap()
        .into_iter()
        .filter(|k| k.reason == SkipReason::RetryGaveWay)
        .count();
    assert!(gave_way >= 1);
}

quick_tasks! { misfire_skip = "misfire.skip" (misfire = "skip"), misfire_once = "misfire.once" () }

/// After an outage, a task with `misfire = "skip"` skips every overdue tick (recorded) and waits
/// for the next one; one with the default `once` runs the oldest late, once, and records the
/// rest.
async fn overdue_ticks_are_skipped_or_run_once_per_the_misfire_rule(db: &TestDb) {
    // Hourly, ten hours overdue: no tick of its own falls due while the test runs (one would,
    // rightly, run even with `skip`), barring a test that straddles the hour.
    let hour = db.now().duration_trunc(TimeDelta::hours(1)).unwrap();
    for task in ["misfire.skip", "misfire.once"] {
        db.insert_task(task, "0 0 * * * *", Some(hour - TimeDelta::hours(10)))
            .await;
    }
    let rec = Arc::new(Recorder::default());
    let n = start(
        node(db, "a", tasks("misfire."))
            .state(Arc::clone(&rec))
            .build()
            .unwrap(),
    );
    wait_until(
        Duration::from_secs(20),
        "the late run of `once`",
        || async { rec.starts_of("misfire.once") == 1 },
    )
    .await;
    // A tick's time more: `skip` ran nothing meanwhile either.
    db.elapse(Duration::from_secs(1)).await;
    n.stop().await;
    assert_eq!(rec.starts_of("misfire.skip"), 0, "no overdue tick ran");
    let s = db.api();
    let since = DateTime::<Utc>::UNIX_EPOCH;
    let skipped = s.skips("misfire.skip", since).await.unwrap();
    assert_eq!(skipped.len(), 1, "{skipped:?}");
    assert_eq!(skipped[0].reason, SkipReason::Misfire);
    assert!(skipped[0].ticks >= 10, "{skipped:?}");
    let once = s.skips("misfire.once", since).await.unwrap();
    assert_eq!(
        once.iter().map(|k| k.ticks).sum::<i64>(),
        skipped[0].ticks - 1,
        "the rest of the same ticks"
    );
    let next = db.task("misfire.skip").await.next_run_at.unwrap();
    assert!(
        next > Utc::now() - chrono::TimeDelta::seconds(5),
        "waits for the next tick"
    );
}

quick_tasks! { manual_task = "manual.task" () }

/// A manual run goes through the same locking, is recorded with its trigger and who asked, and
/// is audited; a paused task refuses it.
async fn a_manual_run_runs_once_recorded_and_audited(db: &TestDb) {
    let rec = Arc::new(Recorder::default());
    let n = start(
        node(db, "a", tasks("manual."))
            .config_document(doc(vec![entry("manual.task", "0 0 1 1 *")]))
            .state(Arc::clone(&rec))
            .build()
            .unwrap(),
    );
    let s = db.api();
    wait_until(Duration::from_secs(20), "the row", || async {
        !s.task_states(Some("manual.task")).await.unwrap().is_empty()
    })
    .await;
    let alice = Actor::new("alice", "test@localhost");
    assert_eq!(
        operate::trigger(s, "manual.task", &alice).await.unwrap(),
        RunRequest::Queued
    );
    wait_until(Duration::from_secs(20), "the manual run", || async {
        rec.starts_of("manual.task") == 1
    })
    .await;
    assert_eq!(
        operate::trigger(s, "no.such.task", &alice).await.unwrap(),
        RunRequest::NotFound
    );
    assert!(
        operate::pause(s, "manual.task", &alice, "maintenance", None)
            .await
            .unwrap()
    );
    assert!(matches!(
        operate::trigger(s, "manual.task", &alice).await.unwrap(),
        RunRequest::Paused(_)
    ));
    tokio::time::sleep(Duration::from_millis(500)).await;
    n.stop().await;
    let runs = s.runs(&RunQuery::latest(10)).await.unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].trigger, Trigger::Manual);
    assert_eq!(runs[0].triggered_by.as_deref(), Some("alice"));
    let audit = s.audit_log(10, None).await.unwrap();
    let actions: Vec<&str> = audit.iter().map(|a| a.action.as_str()).collect();
    assert_eq!(
        actions,
        ["pause", "trigger"],
        "newest first; the refused trigger is not audited"
    );
    assert!(
        audit
            .iter()
            .all(|a| a.actor == "alice" && a.source == "test@localhost")
    );
}

quick_tasks! { paused_tick = "paused.tick" () }

/// A pause stops new runs, survives a reconcile of the config (which reports it), and ends with
/// resume or its expiry; the ticks due while paused are recorded `paused`.
async fn a_pause_stops_runs_survives_reconciles_and_its_ticks_are_recorded(db: &TestDb) {
    let rec = Arc::new(Recorder::default());
    let n = start(
        node(db, "a", tasks("paused."))
            .config_document(doc(vec![entry("paused.tick", "* * * * * *")]))
            .state(Arc::clone(&rec))
            .build()
            .unwrap(),
    );
    let s = db.api();
    wait_stepping(db, Duration::from_secs(20), "runs", || async {
        rec.starts_of("paused.tick") >= 2
    })
    .await;
    let ops = Actor::new("ops", "test");
    let until = db.now() + chrono::TimeDelta::seconds(3);
    assert!(
        operate::pause(s, "paused.tick", &ops, "deploy", Some(until))
            .await
            .unwrap()
    );
    db.elapse(Duration::from_millis(1500)).await; // a run in flight may end
    let at_pause = rec.starts_of("paused.tick");
    // A reconcile of a changed document keeps the pause and reports it.
    let reconciler = scheduler::testing::reconciler::Reconciler::new(
        db.node_store(2),
        tasks("paused."),
        chrono_tz::Tz::UTC,
        "other",
    );
    let report = reconciler
        .reconcile(&doc(vec![entry("paused.tick", "*/1 * * * * *")]))
        .await
        .unwrap();
    assert_eq!(report.paused, ["paused.tick"]);
    assert!(
        s.task_states(Some("paused.tick")).await.unwrap()[0]
            .pause
            .is_some()
    );
    wait_stepping(
        db,
        Duration::from_secs(20),
        "runs after the pause expired",
        || async { rec.starts_of("paused.tick") > at_pause + 1 },
    )
    .await;
    n.stop().await;
    let paused = s
        .skips("paused.tick", DateTime::<Utc>::UNIX_EPOCH)
        .await
        .unwrap()
        .into_iter()
        .filter(|k| k.reason == SkipReason::Paused)
        .collect::<Vec<_>>();
    assert_eq!(
        paused.len(),
        1,
        "one record for the whole pause: {paused:?}"
    );
    assert!(paused[0].ticks >= 1);
    assert!(
        s.task_states(Some("paused.tick")).await.unwrap()[0]
            .pause
            .is_none()
    );
}

quick_tasks! { missed_gone = "missed.gone" (), missed_other = "missed.other" () }

/// A task nobody runs (its nodes are gone) raises `task.missed` once, from the database, on a
/// node that does not even register it; a node that runs it again raises `task.recovered`.
async fn a_task_nobody_runs_is_reported_missed_once_and_recovered(db: &TestDb) {
    db.insert_task(
        "missed.gone",
        "*/2 * * * * *",
        Some(db.now() - TimeDelta::seconds(30)),
    )
    .await;
    let watcher = node(db, "watcher", tasks("missed.other"))
        .heartbeat_interval(Duration::from_millis(300))
        .build()
        .unwrap();
    let seen = gather(watcher.subscribe());
    let watcher = start(watcher);
    wait_until(Duration::from_secs(20), "task.missed", || async {
        kinds(&seen).contains(&"task.missed")
    })
    .await;
    // A tick of the task's more (missed too), and heartbeats that look again.
    db.elapse(Duration::from_secs(2)).await;
    assert_eq!(
        kinds(&seen).iter().filter(|k| **k == "task.missed").count(),
        1,
        "once per incident"
    );
    let runner = node(db, "runner", tasks("missed.gone")).build().unwrap();
    let seen_runner = gather(runner.subscribe());
    let runner = start(runner);
    wait_until(Duration::from_secs(20), "task.recovered", || async {
        kinds(&seen_runner).contains(&"task.recovered")
    })
    .await;
    watcher.stop().await;
    runner.stop().await;
    let missed = db.task("missed.gone").await.missed_since;
    assert_eq!(missed, None, "the incident is closed");
}

quick_tasks! { late_task = "late.task" () }

/// When every node was down past a tick's grace, the first node back runs it and reports the
/// incident (missed, then recovered) itself.
async fn the_first_node_back_reports_a_run_it_serves_late(db: &TestDb) {
    db.insert_task(
        "late.task",
        "0 * * * * *",
        Some(minute_now() - TimeDelta::minutes(5)),
    )
    .await;
    let n = node(db, "a", tasks("late.")).build().unwrap();
    let seen = gather(n.subscribe());
    let n = start(n);
    wait_until(Duration::from_secs(20), "missed and recovered", || async {
        let k = kinds(&seen);
        k.contains(&"task.missed") && k.contains(&"task.recovered")
    })
    .await;
    n.stop().await;
}

/// One call a webhook receiver got: id, timestamp, signature, body, and whether it verified.
type Call = (String, i64, String, String, bool);

/// What a webhook receiver got.
#[derive(Default)]
struct Received {
    calls: Mutex<Vec<Call>>,
}

async fn receiver(
    secret: &str,
    status: u16,
) -> (
    std::net::SocketAddr,
    Arc<Received>,
    tokio::task::JoinHandle<()>,
) {
    use axum::extract::State;
    use axum::http::{HeaderMap, StatusCode};
    let secret = scheduler::webhook::WebhookSecret::parse(secret).unwrap();
    let got = Arc::new(Received::default());
    let state = (Arc::clone(&got), secret, status);
    let app = axum::Router::new()
        .route(
            "/hook",
            axum::routing::post(
                |State((got, secret, status)): State<(
                    Arc<Received>,
                    scheduler::webhook::WebhookSecret,
                    u16,
                )>,
                 headers: HeaderMap,
                 body: String| async move {
                    let h = |n: &str| {
                        headers
                            .get(n)
                            .and_then(|v| v.to_str().ok())
                            .unwrap_or("")
                            .to_owned()
                    };
                    let id = h("webhook-id");
                    let ts: i64 = h("webhook-timestamp").parse().unwrap_or(0);
                    let sig = h("webhook-signature");
                    let ok = secret.verify(&id, ts, body.as_bytes(), &sig);
                    got.calls.lock().unwrap().push((id, ts, sig, body, ok));
                    StatusCode::from_u16(status).unwrap()
                },
            ),
        )
        .with_state(state);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let handle = tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    (addr, got, handle)
}

#[task(name = "hook.fails")]
async fn hook_fails(ctx: TaskContext) -> Result<(), std::io::Error> {
    let _guard = recorder(&ctx).enter(&ctx);
    Err(std::io::Error::other("payment provider refused"))
}

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// A failure is delivered to the webhook as a signed Standard Webhooks message that a receiver
/// verifies; the attempt is in the delivery log.
async fn a_failure_is_delivered_to_the_webhook_signed(db: &TestDb) {
    let (addr, got, server) = receiver(SECRET, 200).await;
    let webhook =
        scheduler::webhook::WebhookSettings::new(&format!("http://{addr}/hook"), SECRET).unwrap();
    let n = start(
        node(db, "a", tasks("hook."))
            .config_document(doc(vec![entry("hook.fails", "0 0 1 1 *")]))
            .webhook(webhook)
            .state(Arc::new(Recorder::default()))
            .build()
            .unwrap(),
    );
    trigger_all_now(db, 1).await;
    wait_until(Duration::from_secs(30), "the delivery", || async {
        !got.calls.lock().unwrap().is_empty()
    })
    .await;
    n.stop().await;
    server.abort();
    let calls = got.calls.lock().unwrap().clone();
    assert_eq!(calls.len(), 1, "{calls:?}");
    let (id, _, sig, body, verified) = &calls[0];
    assert!(verified, "signature verifies");
    assert!(id.starts_with("msg_") && sig.starts_with("v1,"));
    let json: serde_json::Value = serde_json::from_str(body).unwrap();
    assert_eq!(json["type"], "run.failed");
    assert_eq!(json["data"]["run"]["task"], "hook.fails");
    assert!(
        json["data"]["error"]
            .as_str()
            .unwrap()
            .contains("payment provider refused")
    );
    let log = db.api().deliveries(10).await.unwrap();
    assert_eq!(log.len(), 1);
    assert_eq!(log[0].status, Some(200));
}

/// Alerts raised while the receiver is down wait in the outbox, survive the node that raised
/// them, and are delivered once, by another node.
async fn an_alert_survives_its_node_and_is_delivered_once(db: &TestDb) {
    // Reserve a port, then close it: the receiver is down.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}/hook");
    let webhook = scheduler::webhook::WebhookSettings::new(&url, SECRET).unwrap();
    let a = start(
        node(db, "a", tasks("hook."))
            .config_document(doc(vec![entry("hook.fails", "0 0 1 1 *")]))
            .webhook(webhook.clone())
            .state(Arc::new(Recorder::default()))
            .build()
            .unwrap(),
    );
    trigger_all_now(db, 1).await;
    wait_until(
        Duration::from_secs(30),
        "the alert in the outbox, tried once",
        || async { db.outbox().await.first().is_some_and(|(n, _)| *n >= 1) },
    )
    .await;
    a.stop().await;
    // The receiver comes up on that port; make the retry due now; another node delivers.
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .unwrap();
    let got = Arc::new(Received::default());
    let sink = Arc::clone(&got);
    let server = tokio::spawn(async move {
        let app = axum::Router::new().route(
            "/hook",
            axum::routing::post(move |headers: axum::http::HeaderMap, body: String| {
                let sink = Arc::clone(&sink);
                async move {
                    let id = headers["webhook-id"].to_str().unwrap().to_owned();
                    sink.calls
                        .lock()
                        .unwrap()
                        .push((id, 0, String::new(), body, true));
                    axum::http::StatusCode::NO_CONTENT
                }
            }),
        );
        axum::serve(listener, app).await.unwrap();
    });
    db.outbox_due_now().await;
    let b = start(
        node(db, "b", tasks("none."))
            .webhook(webhook)
            .build()
            .unwrap(),
    );
    wait_until(Duration::from_secs(30), "delivered", || async {
        db.outbox().await.first().map(|(_, state)| state.as_str()) == Some("delivered")
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    b.stop().await;
    server.abort();
    let calls = got.calls.lock().unwrap().clone();
    let mut ids: HashMap<String, usize> = HashMap::new();
    for c in &calls {
        *ids.entry(c.0.clone()).or_default() += 1;
    }
    assert_eq!(ids.len(), 1, "one event: {calls:?}");
    assert!(ids.values().all(|n| *n == 1), "delivered once");
    assert_eq!(db.outbox().await.len(), 1, "one event");
    // Newest first.
    let attempts: Vec<(String, i32)> = db
        .api()
        .deliveries(100)
        .await
        .unwrap()
        .into_iter()
        .map(|d| (d.node_id, d.attempt))
        .collect();
    assert_eq!(attempts.first().unwrap().0, "b", "{attempts:?}");
    assert!(
        attempts.iter().any(|(n, _)| n == "a"),
        "the failed attempt is logged too"
    );
}

/// An endpoint that answers 410 Gone is disabled for every node: later alerts are not sent.
async fn a_gone_endpoint_is_disabled(db: &TestDb) {
    let (addr, got, server) = receiver(SECRET, 410).await;
    let webhook =
        scheduler::webhook::WebhookSettings::new(&format!("http://{addr}/hook"), SECRET).unwrap();
    let n = start(
        node(db, "a", tasks("hook."))
            .config_document(doc(vec![entry("hook.fails", "* * * * * *")]))
            .webhook(webhook.clone())
            .state(Arc::new(Recorder::default()))
            .build()
            .unwrap(),
    );
    wait_until(Duration::from_secs(30), "disabled", || async {
        db.api()
            .webhook_disabled(&webhook.url_digest())
            .await
            .unwrap()
            .is_some()
    })
    .await;
    // Wall time: the alerts of these seconds' failures go through the outbox to the deliverer on
    // Tokio's clock, and the outbox is judged once they have.
    tokio::time::sleep(Duration::from_secs(3)).await;
    n.stop().await;
    server.abort();
    assert_eq!(
        got.calls.lock().unwrap().len(),
        1,
        "nothing sent after the 410"
    );
    let outbox = db.outbox().await;
    assert!(!outbox.is_empty(), "the alerts are in the outbox");
    let pending = outbox.iter().filter(|(_, s)| s == "pending").count();
    assert_eq!(pending, 0, "{outbox:?}");
}

/// A row whose task vanished from code and config raises `task.orphaned`, once; disabling and
/// enabling a task again records the ticks it did not run as `disabled`.
async fn orphaned_tasks_and_disabled_ticks_are_reported(db: &TestDb) {
    db.insert_task("vanished.task", "* * * * *", Some(Utc::now()))
        .await;
    let s: Arc<dyn Store> = db.node_store(2);
    let reconciler = scheduler::testing::reconciler::Reconciler::new(
        Arc::clone(&s),
        tasks("paused."),
        chrono_tz::Tz::UTC,
        "n1",
    );
    let off = doc(vec![scheduler::config::TaskConfig {
        enabled: false,
        ..entry("paused.tick", "* * * * * *")
    }]);
    let report = reconciler.reconcile(&off).await.unwrap();
    assert_eq!(report.newly_orphaned, ["vanished.task"]);
    let again = reconciler
        .reconcile(&doc(vec![scheduler::config::TaskConfig {
            enabled: false,
            ..entry("paused.tick", "*/1 * * * * *")
        }]))
        .await
        .unwrap();
    assert!(again.newly_orphaned.is_empty(), "once");
    db.set_disabled_at("paused.tick", Utc::now() - TimeDelta::seconds(10))
        .await;
    let on = reconciler
        .reconcile(&doc(vec![entry("paused.tick", "* * * * * *")]))
        .await
        .unwrap();
    assert_eq!(on.disabled_ticks.len(), 1, "{on:?}");
    let recorded = s
        .skips("paused.tick", DateTime::<Utc>::UNIX_EPOCH)
        .await
        .unwrap();
    assert_eq!(recorded.len(), 1);
    assert_eq!(recorded[0].reason, SkipReason::Disabled);
    // Every second from the moment it was disabled (10 s ago, before the reconcile ran) to the
    // reconcile: the count is the range's, however long the reconcile took to come.
    let range = &recorded[0];
    assert!(range.exact, "{recorded:?}");
    assert_eq!(
        range.ticks,
        (range.last_tick - range.first_tick).num_seconds() + 1,
        "{recorded:?}"
    );
    assert!(range.ticks >= 9, "{recorded:?}");
}
