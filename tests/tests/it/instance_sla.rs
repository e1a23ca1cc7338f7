//! An instance's own service levels (`Schedule::sla`; `sla` in the admin API, the command line
//! and the config file's instances): its breaches are judged by its own levels, else by its
//! task's, on real nodes posting their alerts to a real webhook receiver on 127.0.0.1, judged
//! by what the receiver took. How they are written, checked and shown: `instance_sla_api`.

use crate::common;

use std::time::Duration;

use chrono::TimeDelta;
use common::*;
use scheduler::config::{TaskConfig, TaskSla};
use scheduler::{Schedule, Schedules, task};
use serde_json::{Value, json};

on_both_backends! {
    threads = 2;
    an_instance_s_own_warn_after_judges_its_runs_and_a_sibling_takes_its_task_s,
    an_instance_s_own_start_within_raises_its_late_tick,
    an_instance_s_own_deadline_is_read_in_its_own_zone_and_met_by_its_own_runs,
}

const WHSEC: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const YEARLY: &str = "0 0 0 1 1 *";

/// Works 3 s: past a warning of 1 s, within one of an hour.
#[task(name = "isla.strict")]
async fn isla_strict() {
    tokio::time::sleep(Duration::from_secs(3)).await;
}

/// Works 3 s too; its task names no levels.
#[task(name = "isla.calm")]
async fn isla_calm() {
    tokio::time::sleep(Duration::from_secs(3)).await;
}

/// The events of type `kind` about row `row` the receiver took.
fn of(got: &Bodies, kind: &str, row: &str) -> Vec<Value> {
    got.lock()
        .unwrap()
        .iter()
        .filter(|b| b["type"] == kind)
        .filter(|b| b["data"]["task"] == row || b["data"]["run"]["task"] == row)
        .cloned()
        .collect()
}

fn sla(levels: Value) -> TaskSla {
    serde_json::from_value(levels).unwrap()
}

/// A node running the `isla.` tasks under `config`, posting its alerts to a receiver.
async fn alerting_node(
    db: &TestDb,
    config: scheduler::config::ConfigDocument,
) -> (RunningNode, Bodies, tokio::task::JoinHandle<()>) {
    let (url, got, server) = webhook_receiver().await;
    let webhook = scheduler::webhook::WebhookSettings::new(&url, WHSEC).unwrap();
    let builder = node(db, "a", tasks("isla."))
        .config_document(config)
        .poll_interval(Duration::from_millis(500))
        .webhook(webhook)
        // No missed-run alerts: the ticks here are late on purpose.
        .missed_grace(Duration::from_secs(3600));
    let n = started(db, builder, &["isla.strict", "isla.calm"]).await;
    (n, got, server)
}

/// `isla.strict`'s entry warns after 1 s, `isla.calm`'s names no levels; every run works 3 s.
/// Made by a handle of the store (not the running node): `isla.strict/plain` (none of its own)
/// raises `task.slow` by its task's 1 s, `isla.strict/lenient` (its own: 1 h) none;
/// `isla.calm/own` (its own: 1 s) raises it, `isla.calm/plain` none. All four succeed. Each
/// event carries its instance's own zone (`isla.calm/own` is in Shanghai), not its task's.
async fn an_instance_s_own_warn_after_judges_its_runs_and_a_sibling_takes_its_task_s(db: &TestDb) {
    let config = doc(vec![
        TaskConfig {
            sla: Some(sla(json!({"warn_after": "1s"}))),
            ..entry("isla.strict", YEARLY)
        },
        entry("isla.calm", YEARLY),
    ]);
    let (n, got, server) = alerting_node(db, config).await;
    let schedules = Schedules::new(db.node_store(2), &tasks("isla."), "test");
    let yearly = |task: &str, key: &str| Schedule::new(task, key).cron(YEARLY);
    schedules
        .upsert(yearly("isla.strict", "plain"))
        .await
        .unwrap();
    let lenient = schedules
        .upsert(yearly("isla.strict", "lenient").sla(sla(json!({"warn_after": "1h"}))))
        .await
        .unwrap();
    assert_eq!(
        lenient.sla.as_ref().and_then(|s| s.warn_after.as_deref()),
        Some("1h")
    );
    schedules
        .upsert(
            yearly("isla.calm", "own")
                .timezone("Asia/Shanghai")
                .sla(sla(json!({"warn_after": "1s"}))),
        )
        .await
        .unwrap();
    schedules
        .upsert(yearly("isla.calm", "plain"))
        .await
        .unwrap();
    let rows = [
        "isla.strict/plain",
        "isla.strict/lenient",
        "isla.calm/own",
        "isla.calm/plain",
    ];
    for row in rows {
        db.set_next_run(Some(row), Some(db.now())).await;
    }
    db.api().notify().await.unwrap();
    // Each instance's run succeeded (by the history: its key, its status).
    let succeeded = |runs: Vec<scheduler::testing::store::RunRecord>, key: &str| {
        runs.iter().any(|r| {
            r.instance_key.as_deref() == Some(key)
                && r.status == scheduler::testing::store::RunStatus::Succeeded
        })
    };
    wait_until(
        Duration::from_secs(120),
        "the four runs succeeded",
        || async {
            let strict = db.runs(Some("isla.strict")).await;
            let calm = db.runs(Some("isla.calm")).await;
            succeeded(strict.clone(), "plain")
                && succeeded(strict, "lenient")
                && succeeded(calm.clone(), "own")
                && succeeded(calm, "plain")
        },
    )
    .await;
    wait_until(
        Duration::from_secs(60),
        "both task.slow delivered",
        || async {
            !of(&got, "task.slow", "isla.strict/plain").is_empty()
                && !of(&got, "task.slow", "isla.calm/own").is_empty()
        },
    )
    .await;
    outbox_delivered(db).await;
    n.stop().await;

    let plain = of(&got, "task.slow", "isla.strict/plain");
    assert!(!plain.is_empty(), "its task's warning");
    assert_eq!(plain[0]["data"]["warn_after_ms"], 1_000);
    let own = of(&got, "task.slow", "isla.calm/own");
    assert!(!own.is_empty(), "its own warning");
    assert_eq!(own[0]["data"]["warn_after_ms"], 1_000);
    assert_eq!(own[0]["data"]["timezone"], "Asia/Shanghai", "its own zone");
    assert_eq!(
        plain[0]["data"]["timezone"], "UTC",
        "its own zone, its task's too"
    );
    assert!(
        of(&got, "task.slow", "isla.strict/lenient").is_empty(),
        "its own hour, not its task's second"
    );
    assert!(
        of(&got, "task.slow", "isla.calm/plain").is_empty(),
        "its task names no levels"
    );
    server.abort();
}

/// `isla.calm` names no levels. Its instances `late` (its own `start_within: 5s`) and `waits`
/// (none) hold a limit no document declares, so their ticks, due a minute ago, wait: `late`
/// raises `task.late` once, naming its own 5 s; `waits` raises none.
async fn an_instance_s_own_start_within_raises_its_late_tick(db: &TestDb) {
    let config = doc(vec![
        entry("isla.strict", YEARLY),
        entry("isla.calm", YEARLY),
    ]);
    let (n, got, server) = alerting_node(db, config).await;
    let schedules = Schedules::new(db.node_store(2), &tasks("isla."), "test");
    let held = |key: &str| {
        Schedule::new("isla.calm", key)
            .cron(YEARLY)
            .limit("undeclared")
    };
    schedules
        .upsert(held("late").sla(sla(json!({"start_within": "5s"}))))
        .await
        .unwrap();
    schedules.upsert(held("waits")).await.unwrap();
    for row in ["isla.calm/late", "isla.calm/waits"] {
        db.set_next_run(Some(row), Some(db.now() - TimeDelta::seconds(60)))
            .await;
    }
    db.api().notify().await.unwrap();
    wait_stepping(
        db,
        Duration::from_secs(60),
        "task.late delivered",
        || async { !of(&got, "task.late", "isla.calm/late").is_empty() },
    )
    .await;
    // The watch keeps judging: a few more passes.
    tokio::time::sleep(Duration::from_secs(3)).await;
    outbox_delivered(db).await;
    n.stop().await;

    let late = of(&got, "task.late", "isla.calm/late");
    assert_eq!(late.len(), 1, "once per tick: {late:?}");
    assert_eq!(late[0]["data"]["start_within_ms"], 5_000);
    assert!(
        of(&got, "task.late", "isla.calm/waits").is_empty(),
        "neither it nor its task names levels"
    );
    assert!(
        db.runs(Some("isla.calm")).await.is_empty(),
        "staged: the limit held both ticks"
    );
    server.abort();
}

/// `isla.calm` names no levels. Its instance `report` (in Shanghai) names its own `succeed_by`
/// a few seconds ahead, in its own zone, and never runs (it holds a limit no document
/// declares): `task.deadline_missed` is raised once for it, naming its zone; its sibling
/// `kept`, with the same deadline, succeeds before it and raises none.
async fn an_instance_s_own_deadline_is_read_in_its_own_zone_and_met_by_its_own_runs(db: &TestDb) {
    let config = doc(vec![
        entry("isla.strict", YEARLY),
        entry("isla.calm", YEARLY),
    ]);
    let (n, got, server) = alerting_node(db, config).await;
    let zone: chrono_tz::Tz = "Asia/Shanghai".parse().unwrap();
    let deadline = db.now() + TimeDelta::seconds(10);
    let at = deadline.with_timezone(&zone).format("%H:%M:%S").to_string();
    let schedules = Schedules::new(db.node_store(2), &tasks("isla."), "test");
    let levels = || sla(json!({"succeed_by": at}));
    schedules
        .upsert(
            Schedule::new("isla.calm", "report")
                .cron(YEARLY)
                .timezone("Asia/Shanghai")
                .limit("undeclared")
                .sla(levels()),
        )
        .await
        .unwrap();
    schedules
        .upsert(
            Schedule::new("isla.calm", "kept")
                .cron(YEARLY)
                .timezone("Asia/Shanghai")
                .sla(levels()),
        )
        .await
        .unwrap();
    for row in ["isla.calm/report", "isla.calm/kept"] {
        db.set_next_run(Some(row), Some(db.now() - TimeDelta::seconds(5)))
            .await;
    }
    db.api().notify().await.unwrap();
    // Its run first (unstepped: on SQLite the deadline waits for the test clock's steps).
    wait_until(Duration::from_secs(60), "kept succeeded", || async {
        db.runs(Some("isla.calm"))
            .await
            .iter()
            .any(|r| r.instance_key.as_deref() == Some("kept") && r.finished_at.is_some())
    })
    .await;
    wait_stepping(
        db,
        Duration::from_secs(60),
        "task.deadline_missed",
        || async { !of(&got, "task.deadline_missed", "isla.calm/report").is_empty() },
    )
    .await;
    outbox_delivered(db).await;
    n.stop().await;

    let kept = db.runs(Some("isla.calm")).await;
    assert!(
        kept.iter()
            .any(|r| r.instance_key.as_deref() == Some("kept")
                && r.finished_at.is_some_and(|f| f <= deadline)),
        "staged: kept succeeded before the deadline: {kept:?}"
    );
    let missed = of(&got, "task.deadline_missed", "isla.calm/report");
    assert_eq!(missed.len(), 1, "once: {missed:?}");
    assert_eq!(missed[0]["data"]["succeed_by"], at);
    assert_eq!(missed[0]["data"]["timezone"], "Asia/Shanghai");
    assert!(
        of(&got, "task.deadline_missed", "isla.calm/kept").is_empty(),
        "its own run met it"
    );
    server.abort();
}
