//! Values a user sets outside their range (`docs/limits.md`), against each real store with a real
//! node in this process: a backfill's pace of 10^16 ms is refused by the admin API with a `400`
//! naming `pace_ms` and its range, and one already stored (a row written before the range
//! existed) cannot break the claim transaction every task shares: the node keeps running its
//! every-second task, judged by the handler's own record. An `sla.warn_after` of
//! `500000000000years` written into the config file of a running node is refused, and the node
//! keeps running the task on its last good config, judged by its runs recorded as succeeded (the
//! value once panicked the run's thread: no run of the task was recorded again). An incident
//! whose stored reminder interval is 10^16 ms stops no other incident's reminders (on
//! PostgreSQL it once failed every claim of reminders: "interval out of range").

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, DurationRound, TimeDelta, Utc};
use reqwest::StatusCode;
use scheduler::testing::backfill::BackfillRequest;
use scheduler::testing::operate::{self, Actor};
use scheduler::testing::store::{AlertFold, FoldDecision, RunStatus};
use scheduler::{TaskContext, task};
use serde_json::{Value, json};

use common::*;

on_both_backends!(
    threads = 2;
    a_hostile_backfill_pace_is_refused_and_a_stored_one_stops_no_claim,
    an_sla_beyond_its_range_is_refused_and_the_task_keeps_running,
    a_stored_reminder_interval_beyond_its_range_stops_no_reminder,
);

const EVERY_SECOND: &str = "bounds.every_second";
const HOURLY: &str = "bounds.hourly";
const TOKEN: &str = "bounds-test-token-0123456789";

quick_tasks!(
    every_second = "bounds.every_second",
    hourly = "bounds.hourly",
    with_sla = "bounds.sla",
);

/// Three hourly ticks two days ago.
fn ticks() -> Vec<DateTime<Utc>> {
    let base = (Utc::now() - TimeDelta::days(2))
        .duration_trunc(TimeDelta::days(1))
        .unwrap();
    (0..3).map(|h| base + TimeDelta::hours(h)).collect()
}

async fn a_hostile_backfill_pace_is_refused_and_a_stored_one_stops_no_claim(db: &TestDb) {
    let t = ticks();
    let next_hour = Utc::now().duration_trunc(TimeDelta::hours(1)).unwrap() + TimeDelta::hours(1);
    db.insert_task(HOURLY, "0 * * * *", Some(next_hour)).await;
    // A backfill recorded before the node runs, whose stored pace is then made hostile (as a
    // row written before the range existed would be).
    let request = BackfillRequest::new(HOURLY, t[0], t[2]).pace(Duration::from_secs(1));
    let plan = operate::backfill(db.api(), &request, &Actor::new("alice", "test"))
        .await
        .unwrap()
        .expect("accepted");
    db.set_backfill_pace_ms(plan.id.expect("recorded"), 10_000_000_000_000_000)
        .await;

    let rec = Arc::new(Recorder::default());
    let config = doc(vec![
        entry(EVERY_SECOND, "* * * * * *"),
        entry(HOURLY, "0 * * * *"),
    ]);
    let builder = node_with(db, "a", tasks("bounds."), config, &rec).admin_token(TOKEN);
    let node = admin_node(db, builder, &[]).await;
    let base = node.url("");
    let running = node.running;

    // The API refuses the value, naming the field and its range.
    let http = reqwest::Client::new();
    let r = http
        .post(format!("{base}/api/tasks/{HOURLY}/backfill"))
        .bearer_auth(TOKEN)
        .json(&json!({
            "from": t[0].to_rfc3339(), "to": t[2].to_rfc3339(),
            "pace_ms": 10_000_000_000_000_000u64,
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let body: Value = r.json().await.unwrap();
    let message = body["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("`pace_ms`") && message.contains("from 0s to 1day"),
        "{body}"
    );

    // The stored backfill's first tick runs, and the claims go on after it: the every-second
    // task keeps running (its own record), the paced rest waits.
    wait_until(
        Duration::from_secs(60),
        "the backfill's first tick ran",
        || async { rec.starts_of(HOURLY) >= 1 },
    )
    .await;
    let after = rec.starts_of(EVERY_SECOND);
    wait_until(
        Duration::from_secs(60),
        "the every-second task ran three more times",
        || async { rec.starts_of(EVERY_SECOND) >= after + 3 },
    )
    .await;
    assert_eq!(
        rec.starts_of(HOURLY),
        1,
        "the rest is paced (capped at a day)"
    );
    running.stop().await;
}

/// Replaces `path` atomically (write a temp file, rename), as config agents do.
fn replace(path: &std::path::Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

async fn an_sla_beyond_its_range_is_refused_and_the_task_keeps_running(db: &TestDb) {
    const TASK: &str = "bounds.sla";
    let dir = std::env::temp_dir().join(format!("scheduler-bounds-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("tasks.json");
    let with = |warn_after: &str| {
        format!(
            r#"{{"tasks":[{{"name":"{TASK}","enabled":true,"cron":"* * * * * *","sla":{{"warn_after":"{warn_after}"}}}}]}}"#
        )
    };
    replace(&path, &with("10m"));
    let rec = Arc::new(Recorder::default());
    let running = start(
        node(db, "a", tasks(TASK))
            .config(path.to_str().unwrap())
            .config_poll_interval(Duration::from_millis(200))
            .state(Arc::clone(&rec))
            .build()
            .unwrap(),
    );
    wait_until(
        Duration::from_secs(30),
        "runs on the good config",
        || async { rec.starts_of(TASK) >= 2 },
    )
    .await;

    // Judged by the runs recorded as succeeded: a run whose thread panicked is never recorded
    // (its lock expires and its tick is run again, and again).
    replace(&path, &with("500000000000years"));
    let before = db.count_runs(TASK, RunStatus::Succeeded).await;
    wait_until(
        Duration::from_secs(30),
        "runs succeed past the refused config",
        || async { db.count_runs(TASK, RunStatus::Succeeded).await >= before + 4 },
    )
    .await;
    running.stop().await;
    let _ = std::fs::remove_dir_all(dir);
}

async fn a_stored_reminder_interval_beyond_its_range_stops_no_reminder(db: &TestDb) {
    let (a, b) = ("bounds.remind_a", "bounds.remind_b");
    let later = Utc::now() + TimeDelta::hours(1);
    db.insert_task(a, "0 * * * *", Some(later)).await;
    db.insert_task(b, "0 * * * *", Some(later)).await;
    let sent = |_: &scheduler::testing::store::FoldInput<'_>| FoldDecision::Record { notify: true };
    db.api()
        .fold_alerts(
            &[
                AlertFold::new(a, "run.failed", "{}").policy(1, Some(Duration::MAX)),
                AlertFold::new(b, "run.failed", "{}").policy(1, Some(Duration::from_millis(1))),
            ],
            &sent,
        )
        .await
        .unwrap();
    // The interval of `a` as a row written before the range existed would hold it.
    db.set_remind_every_ms(a, 10_000_000_000_000_000).await;
    wait_until(
        Duration::from_secs(30),
        "b's reminder is claimed",
        || async {
            let reminded = db.api().claim_reminders(100).await.unwrap();
            assert!(reminded.iter().all(|i| i.task_name == b), "{reminded:?}");
            !reminded.is_empty()
        },
    )
    .await;
}
