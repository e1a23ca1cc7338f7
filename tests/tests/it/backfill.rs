//! Backfill on demand, against each real store (`on_postgres::...` and `on_sqlite::...`) with a
//! real node in this process: a range of an hourly task's past ticks, some of which already
//! succeeded, listed by a dry run (exactly the missing ticks, nothing written), then run for real
//! (each missing tick once, judged by the handler's own record of `ctx.scheduled_at()`), `all`
//! running every tick again, the cap and the concurrency refused, never two runs of the task at
//! once (the handler's own overlap count), a backfill recorded before any node runs taken by the
//! node that starts later (the queue is in the database), a second backfill of a busy task
//! refused, and a cancel that stops the pending rest. Through the admin API: the token (401
//! without or with a wrong one, 403 on a node without one), an unknown task (404), a bad range
//! (400), a dry run (200) and a backfill (201) followed to its end and cancelled.

use crate::admin_support;
use crate::common;

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, DurationRound, TimeDelta, Utc};
use reqwest::StatusCode;
use scheduler::testing::backfill::{BackfillRefusal, BackfillRequest};
use scheduler::testing::operate::{self, Actor};
use scheduler::testing::store::{BackfillCancel, BackfillRecord, RunQuery, Trigger};
use scheduler::{TaskContext, task};
use serde_json::{Value, json};

use admin_support::assert_documented;
use common::*;

on_both_backends!(
    threads = 2;
    a_backfill_runs_the_missing_ticks_once_each_and_never_overlaps,
    the_admin_api_backfills_behind_the_token,
    a_backfill_leaves_out_the_ticks_the_task_calendar_blocks,
);

const TASK: &str = "backfill.hourly";
const TOKEN: &str = "backfill-test-token-0123456789";

/// Records its start (tick and overlap) and works a little, so that two runs at once would
/// overlap.
#[task(name = "backfill.hourly")]
async fn backfill_hourly(ctx: TaskContext) {
    let _guard = recorder(&ctx).enter(&ctx);
    tokio::time::sleep(Duration::from_millis(30)).await;
    recorder(&ctx).finished(&ctx);
}

/// Ten hourly ticks two days ago: T0 .. T9.
fn ticks() -> Vec<DateTime<Utc>> {
    let base = (Utc::now() - TimeDelta::days(2))
        .duration_trunc(TimeDelta::days(1))
        .unwrap();
    (0..10).map(|h| base + TimeDelta::hours(h)).collect()
}

/// How often the handler started each tick of `range`.
fn starts_per_tick(rec: &Recorder, range: &[DateTime<Utc>]) -> Vec<usize> {
    let starts = rec.starts.lock().unwrap();
    range
        .iter()
        .map(|t| {
            starts
                .iter()
                .filter(|(task, tick, _)| task == TASK && tick == t)
                .count()
        })
        .collect()
}

fn who() -> Actor {
    Actor::new("alice", "test")
}

async fn record(db: &TestDb, id: i64) -> BackfillRecord {
    db.api().backfill(id).await.unwrap().expect("recorded").0
}

async fn wait_done(db: &TestDb, id: i64) -> BackfillRecord {
    wait_until(Duration::from_secs(60), "the backfill is done", || async {
        record(db, id).await.state() == "done"
    })
    .await;
    record(db, id).await
}

/// Backfills `[from, to]` for real with no pace, and returns its id.
async fn backfill(db: &TestDb, from: DateTime<Utc>, to: DateTime<Utc>, all: bool) -> i64 {
    let request = BackfillRequest::new(TASK, from, to)
        .all(all)
        .pace(Duration::ZERO);
    let plan = operate::backfill(db.api(), &request, &who())
        .await
        .unwrap()
        .expect("accepted");
    plan.id.expect("recorded")
}

async fn a_backfill_runs_the_missing_ticks_once_each_and_never_overlaps(db: &TestDb) {
    let t = ticks();
    let next_hour = Utc::now().duration_trunc(TimeDelta::hours(1)).unwrap() + TimeDelta::hours(1);
    // The task's row as the config will write it; a backfill is recorded before any node runs.
    db.insert_task(TASK, "0 * * * *", Some(next_hour)).await;
    let first = backfill(db, t[2], t[2], false).await;

    let rec = Arc::new(Recorder::default());
    let scheduler = node(db, "a", tasks("backfill."))
        .config_document(doc(vec![entry(TASK, "0 * * * *")]))
        .state(Arc::clone(&rec))
        .build()
        .unwrap();
    let running = start(scheduler);

    // Taken from the database by the node that started later.
    let done = wait_done(db, first).await;
    assert_eq!((done.progress.total, done.progress.succeeded), (1, 1));
    // Seed two more succeeded ticks by running them.
    for tick in [t[5], t[7]] {
        let id = backfill(db, tick, tick, false).await;
        wait_done(db, id).await;
    }
    assert_eq!(
        starts_per_tick(&rec, &t),
        [0, 0, 1, 0, 0, 1, 0, 1, 0, 0],
        "the seeded ticks ran once each"
    );

    // A dry run lists exactly the missing ticks and writes nothing.
    let dry = BackfillRequest::new(TASK, t[0], t[9]).dry_run(true);
    let plan = operate::backfill(db.api(), &dry, &who())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        plan.ticks,
        [t[0], t[1], t[3], t[4], t[6], t[8], t[9]],
        "exactly the ticks without a succeeded run"
    );
    assert_eq!((plan.ticks_in_range, plan.already_succeeded), (10, 3));
    assert_eq!(plan.id, None);
    assert_eq!(db.api().backfills(Some(TASK), 100).await.unwrap().len(), 3);

    // The cap and the concurrency are refused, before anything is written.
    let over = BackfillRequest::new(TASK, t[0], t[9]).all(true).max_runs(5);
    let refused = operate::backfill(db.api(), &over, &who()).await.unwrap();
    assert!(
        matches!(refused, Err(BackfillRefusal::OverCap { max_runs: 5, .. })),
        "{refused:?}"
    );
    assert!(refused.unwrap_err().to_string().contains("--max-runs"));
    let wide = BackfillRequest::new(TASK, t[0], t[9]).concurrency(2);
    assert!(matches!(
        operate::backfill(db.api(), &wide, &who()).await.unwrap(),
        Err(BackfillRefusal::Concurrency(2))
    ));
    let backwards = BackfillRequest::new(TASK, t[9], t[0]);
    assert!(matches!(
        operate::backfill(db.api(), &backwards, &who())
            .await
            .unwrap(),
        Err(BackfillRefusal::EmptyRange { .. })
    ));
    assert_eq!(db.api().backfills(Some(TASK), 100).await.unwrap().len(), 3);

    // For real: each missing tick runs once, judged by the handler's own records.
    let missing = backfill(db, t[0], t[9], false).await;
    let done = wait_done(db, missing).await;
    assert_eq!((done.progress.total, done.progress.succeeded), (7, 7));
    assert_eq!(starts_per_tick(&rec, &t), [1; 10], "every tick ran once");

    // `all` runs every tick again.
    let all = backfill(db, t[0], t[9], true).await;
    let done = wait_done(db, all).await;
    assert_eq!((done.progress.total, done.progress.succeeded), (10, 10));
    assert_eq!(starts_per_tick(&rec, &t), [2; 10], "every tick ran twice");

    // A cancel stops the pending rest: paced an hour apart, the first tick runs, the others wait.
    let request = BackfillRequest::new(TASK, t[0], t[9])
        .all(true)
        .pace(Duration::from_secs(3600));
    let slow = operate::backfill(db.api(), &request, &who())
        .await
        .unwrap()
        .unwrap()
        .id
        .unwrap();
    wait_until(
        Duration::from_secs(60),
        "its first tick started",
        || async { starts_per_tick(&rec, &t)[0] == 3 },
    )
    .await;
    // A second backfill of the task waits for this one.
    let busy = operate::backfill(
        db.api(),
        &BackfillRequest::new(TASK, t[0], t[0]).all(true),
        &who(),
    )
    .await
    .unwrap();
    assert_eq!(busy, Err(BackfillRefusal::Busy(slow)));
    let cancelled = operate::cancel_backfill(db.api(), slow, &who())
        .await
        .unwrap();
    let BackfillCancel::Cancelled { dropped, .. } = cancelled else {
        panic!("cancelled: {cancelled:?}");
    };
    assert_eq!(dropped, 9);
    assert_eq!(
        operate::cancel_backfill(db.api(), slow, &who())
            .await
            .unwrap(),
        BackfillCancel::AlreadyOver
    );
    wait_until(Duration::from_secs(60), "its run ended", || async {
        record(db, slow).await.progress.running == 0
    })
    .await;
    let over = record(db, slow).await;
    assert_eq!(over.state(), "cancelled");
    assert_eq!(
        (
            over.progress.succeeded,
            over.progress.pending,
            over.progress.cancelled
        ),
        (1, 0, 9)
    );
    // The task is free for another backfill, which runs (so nothing of the cancelled one is
    // left queued before it).
    let after = backfill(db, t[9], t[9], true).await;
    wait_done(db, after).await;
    let mut expected = [2; 10];
    expected[0] = 3;
    expected[9] = 3;
    assert_eq!(starts_per_tick(&rec, &t), expected);

    // Never two runs of the task at once, backfilled or scheduled.
    assert_eq!(rec.max_overlap.load(std::sync::atomic::Ordering::SeqCst), 1);
    // Recorded with trigger `backfill` and who asked; audited with the range and the count.
    let runs = db
        .api()
        .runs(&RunQuery::latest(100).task(TASK).trigger(Trigger::Backfill))
        .await
        .unwrap();
    let in_range = runs.iter().filter(|r| t.contains(&r.scheduled_at)).count();
    assert_eq!(in_range, 22);
    assert!(
        runs.iter()
            .all(|r| r.triggered_by.as_deref() == Some("alice"))
    );
    let audit = db.api().audit_log(100, None).await.unwrap();
    let backfills: Vec<_> = audit.iter().filter(|a| a.action == "backfill").collect();
    assert_eq!(backfills.len(), 7, "{audit:?}");
    assert!(
        backfills
            .iter()
            .any(|a| a.actor == "alice" && a.detail.contains("7 runs")),
        "{backfills:?}"
    );
    assert!(audit.iter().any(|a| a.action == "cancel_backfill"));
    running.stop().await;
}

/// A node with the admin server on a free port, with `token` if given, once the task's row is
/// in the store; and its address.
async fn backfill_node(
    db: &TestDb,
    id: &str,
    token: Option<&str>,
    rec: &Arc<Recorder>,
) -> (RunningNode, String) {
    let config = doc(vec![entry(TASK, "0 * * * *")]);
    let mut builder = node_with(db, id, tasks("backfill."), config, rec);
    if let Some(token) = token {
        builder = builder.admin_token(token);
    }
    let node = admin_node(db, builder, &[TASK]).await;
    let base = node.url("");
    (node.running, base)
}

/// The OpenAPI document's path template of `url`'s path.
fn template(url: &str) -> String {
    let path = url.split_once("//").unwrap().1;
    let path = &path[path.find('/').unwrap()..];
    let path = path.split('?').next().unwrap();
    path.split('/')
        .enumerate()
        .map(|(i, part)| match (i, part) {
            (3, p) if p.parse::<i64>().is_ok() => "{id}".to_owned(),
            (3, p) if path.starts_with("/api/tasks/") && !p.is_empty() => "{name}".to_owned(),
            (_, p) => p.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// The OpenAPI document of the node serving `url`.
async fn openapi(http: &reqwest::Client, url: &str) -> Value {
    let base = url.split("/api/").next().unwrap();
    http.get(format!("{base}/openapi.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// Posts `body` to `url`; the answer is checked against the node's OpenAPI document.
async fn post(
    http: &reqwest::Client,
    url: String,
    token: Option<&str>,
    body: Value,
) -> (StatusCode, Value) {
    let doc = openapi(http, &url).await;
    let mut r = http
        .post(&url)
        .header("X-Scheduler-Actor", "bob")
        .json(&body);
    if let Some(token) = token {
        r = r.bearer_auth(token);
    }
    let r = r.send().await.unwrap();
    let status = r.status();
    let body = r.json().await.unwrap_or(Value::Null);
    assert_documented(&doc, "post", &template(&url), status, &body);
    (status, body)
}

/// Gets `url`; the answer is checked against the node's OpenAPI document.
async fn get(http: &reqwest::Client, url: String) -> (StatusCode, Value) {
    let doc = openapi(http, &url).await;
    let r = http.get(&url).bearer_auth(TOKEN).send().await.unwrap();
    let status = r.status();
    let body = r.json().await.unwrap_or(Value::Null);
    assert_documented(&doc, "get", &template(&url), status, &body);
    (status, body)
}

async fn the_admin_api_backfills_behind_the_token(db: &TestDb) {
    let t = ticks();
    let rec = Arc::new(Recorder::default());
    let (a, base) = backfill_node(db, "a", Some(TOKEN), &rec).await;
    let http = reqwest::Client::new();
    let url = format!("{base}/api/tasks/{TASK}/backfill");
    let range = json!({"from": t[0].to_rfc3339(), "to": t[3].to_rfc3339(), "pace_ms": 0});

    // The token.
    let (status, _) = post(&http, url.clone(), None, range.clone()).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, _) = post(
        &http,
        url.clone(),
        Some("not-the-token-0123456789"),
        range.clone(),
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (b, tokenless) = backfill_node(db, "b", None, &rec).await;
    let (status, body) = post(
        &http,
        format!("{tokenless}/api/tasks/{TASK}/backfill"),
        Some(TOKEN),
        range.clone(),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    b.stop().await;

    // An unknown task, a bad range.
    let (status, _) = post(
        &http,
        format!("{base}/api/tasks/no.such.task/backfill"),
        Some(TOKEN),
        range.clone(),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let backwards = json!({"from": t[3].to_rfc3339(), "to": t[0].to_rfc3339()});
    let (status, body) = post(&http, url.clone(), Some(TOKEN), backwards).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let garbled = json!({"from": "yesterday", "to": t[0].to_rfc3339()});
    let (status, body) = post(&http, url.clone(), Some(TOKEN), garbled).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let over = json!({"from": t[0].to_rfc3339(), "to": t[9].to_rfc3339(), "max_runs": 3});
    let (status, body) = post(&http, url.clone(), Some(TOKEN), over).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(body["message"].as_str().unwrap().contains("cap"), "{body}");

    // A dry run, then for real; a date without an offset is read in the task's zone (UTC).
    let mut dry = range.clone();
    dry["dry_run"] = json!(true);
    dry["from"] = json!(t[0].format("%Y-%m-%d").to_string());
    let (status, body) = post(&http, url.clone(), Some(TOKEN), dry).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["runs"], 4);
    assert_eq!(body["id"], Value::Null);
    let listed: Vec<DateTime<Utc>> = serde_json::from_value(body["ticks"].clone()).unwrap();
    assert_eq!(listed, t[..4]);
    assert!(
        rec.starts.lock().unwrap().is_empty(),
        "a dry run runs nothing"
    );
    let (status, body) = post(&http, url.clone(), Some(TOKEN), range.clone()).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let id = body["id"].as_i64().unwrap();
    wait_until(Duration::from_secs(60), "the backfill is done", || async {
        get(&http, format!("{base}/api/backfills/{id}")).await.1["backfill"]["state"] == "done"
    })
    .await;
    let (_, detail) = get(&http, format!("{base}/api/backfills/{id}")).await;
    assert_eq!(detail["backfill"]["progress"]["succeeded"], 4, "{detail}");
    assert_eq!(detail["backfill"]["requested_by"], "bob (admin-token)");
    let ticks: Vec<&Value> = detail["ticks"].as_array().unwrap().iter().collect();
    assert!(
        ticks.iter().all(|t| t["run_status"] == "succeeded"),
        "{detail}"
    );
    assert_eq!(starts_per_tick(&rec, &t[..4]), [1, 1, 1, 1]);
    let (status, list) = get(&http, format!("{base}/api/backfills?task={TASK}")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(list[0]["id"], id);
    let (status, runs) = get(
        &http,
        format!("{base}/api/runs?task={TASK}&trigger=backfill"),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{runs}");
    assert_eq!(runs["runs"].as_array().map(Vec::len), Some(4), "{runs}");

    // Cancel: unknown, over.
    let (status, _) = post(
        &http,
        format!("{base}/api/backfills/999999/cancel"),
        Some(TOKEN),
        json!({}),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, body) = post(
        &http,
        format!("{base}/api/backfills/{id}/cancel"),
        Some(TOKEN),
        json!({}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["outcome"], "already_over");
    let (status, _) = post(
        &http,
        format!("{base}/api/backfills/{id}/cancel"),
        None,
        json!({}),
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    a.stop().await;
}

/// A calendar that blocks T3 and T4 (`skip`): a backfill of T0 .. T9 leaves them out, as the
/// schedule itself would have.
async fn a_backfill_leaves_out_the_ticks_the_task_calendar_blocks(db: &TestDb) {
    let t = ticks();
    let rfc = |t: DateTime<Utc>| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let text = format!(
        r#"{{"calendars": {{"blackout": {{"ranges": [{{"from": "{}", "to": "{}"}}]}}}},
            "tasks": [{{"name": "{TASK}", "enabled": true, "cron": "0 * * * *",
                        "calendar": "blackout", "on_blocked": "skip"}}]}}"#,
        rfc(t[3] - TimeDelta::minutes(1)),
        rfc(t[4] + TimeDelta::minutes(1)),
    );
    let rec = Arc::new(Recorder::default());
    let running = start(
        node(db, "a", tasks("backfill."))
            .config_document(scheduler::config::ConfigDocument::from_json(&text).unwrap())
            .state(Arc::clone(&rec))
            .build()
            .unwrap(),
    );
    wait_until(
        Duration::from_secs(60),
        "the calendar is on the row",
        || async {
            db.try_task(TASK)
                .await
                .is_some_and(|t| t.calendar.is_some())
        },
    )
    .await;
    let dry = BackfillRequest::new(TASK, t[0], t[9]).dry_run(true);
    let plan = operate::backfill(db.api(), &dry, &who())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        plan.ticks,
        [t[0], t[1], t[2], t[5], t[6], t[7], t[8], t[9]],
        "the blocked ticks are left out"
    );
    running.stop().await;
}
