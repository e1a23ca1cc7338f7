//! The reconciler against each real store: every rule of the original design, written once and
//! run on a fresh PostgreSQL schema and a fresh SQLite file (`on_postgres::...` and
//! `on_sqlite::...`).

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, DurationRound, TimeDelta, Utc};
use common::*;
use scheduler::config::{ConfigDocument, TaskConfig};
use scheduler::testing::reconciler::Reconciler;
use scheduler::testing::store::RunStatus;
use scheduler::{TaskContext, task};

on_both_backends!(
    threads = 2;
    every_reconciler_rule,
    an_older_config_version_cannot_roll_back_a_newer_one,
    cron_change_while_running_never_starts_a_second_run,
    an_enabled_task_without_a_next_run_is_repaired,
    a_reconcile_never_moves_the_next_run_back_to_a_claimed_tick,
);

#[task(name = "rec.a")]
async fn rec_a(ctx: TaskContext) {
    let _guard = recorder(&ctx).enter(&ctx);
}

#[task(name = "rec.b")]
async fn rec_b() {}

#[task(name = "rec.c")]
async fn rec_c() {}

/// Runs for 2.5 s.
#[task(name = "busy.task")]
async fn busy_task(ctx: TaskContext) {
    let _guard = recorder(&ctx).enter(&ctx);
    tokio::time::sleep(Duration::from_millis(2_500)).await;
}

fn reconciler(db: &TestDb, node: &str) -> Reconciler {
    Reconciler::new(db.node_store(2), tasks("rec."), chrono_tz::Tz::UTC, node)
}

fn cfg(name: &str, enabled: bool, cron: &str) -> TaskConfig {
    TaskConfig {
        name: name.into(),
        enabled,
        cron: cron.into(),
        timezone: None,
        ..Default::default()
    }
}

#[derive(Debug, PartialEq)]
struct Row_ {
    name: String,
    cron: String,
    timezone: String,
    enabled: bool,
    next_run_at: Option<DateTime<Utc>>,
    orphaned: bool,
}

async fn rows(db: &TestDb) -> Vec<Row_> {
    db.task_rows()
        .await
        .into_iter()
        .map(|r| Row_ {
            name: r.name,
            cron: r.cron,
            timezone: r.timezone,
            enabled: r.enabled,
            next_run_at: r.next_run_at,
            orphaned: r.orphaned_since.is_some(),
        })
        .collect()
}

async fn every_reconciler_rule(db: &TestDb) {
    let r = reconciler(db, "n1");

    // Unknown names and bad cron are refused; valid entries created, disabled ones too.
    let first = doc(vec![
        cfg("rec.a", true, "*/5 * * * *"),
        cfg("rec.b", false, "0 3 * * *"),
        cfg("rec.unknown", true, "* * * * *"),
        cfg("rec.c", true, "61 * * * *"),
    ]);
    let report = r.reconcile(&first).await.unwrap();
    assert_eq!(report.created, ["rec.a", "rec.b"]);
    let refused: Vec<_> = report.refused.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(refused, ["rec.unknown", "rec.c"]);
    let reason = &report.refused.iter().find(|(n, _)| n == "rec.c").unwrap().1;
    assert!(
        reason.contains("minute"),
        "the refusal names the field: {reason}"
    );
    let state = rows(db).await;
    assert_eq!(state.len(), 2, "nothing created for refused entries");
    assert!(state[0].enabled && state[0].next_run_at.is_some());
    assert!(!state[1].enabled && state[1].next_run_at.is_none());

    // An unchanged config writes nothing.
    let before = db.row_versions().await;
    let report = r.reconcile(&first).await.unwrap();
    assert!(!report.changed_anything());
    assert_eq!(
        db.row_versions().await,
        before,
        "an unchanged config wrote rows"
    );

    // A cron change updates in place and recomputes the next run; enabling computes one; the
    // now-valid entry is created.
    let report = r
        .reconcile(&doc(vec![
            cfg("rec.a", true, "0 0 1 1 *"),
            cfg("rec.b", true, "0 3 * * *"),
            cfg("rec.c", true, "* * * * *"),
        ]))
        .await
        .unwrap();
    assert_eq!(report.updated, ["rec.a"]);
    assert_eq!(report.enabled, ["rec.b"]);
    assert_eq!(report.created, ["rec.c"]);
    let after = db.row_versions().await;
    assert!(
        after[0] != before[0] && after[1] != before[1],
        "the versions see writes: {before:?} -> {after:?}"
    );
    let state = rows(db).await;
    assert_eq!(state[0].cron, "0 0 1 1 *");
    let next_a = state[0].next_run_at.unwrap();
    assert_eq!(next_a.format("%m-%d %H:%M").to_string(), "01-01 00:00");
    assert!(state[1].enabled && state[1].next_run_at.is_some());

    // A bad cron keeps the previous valid schedule; other entries still apply.
    let report = r
        .reconcile(&doc(vec![
            cfg("rec.a", true, "0 0 31 2 *"),
            cfg("rec.b", false, "0 3 * * *"),
            cfg("rec.c", true, "* * * * *"),
        ]))
        .await
        .unwrap();
    assert_eq!(report.refused.len(), 1);
    assert_eq!(report.disabled, ["rec.b"]);
    let state = rows(db).await;
    assert_eq!(state[0].cron, "0 0 1 1 *", "last valid schedule kept");
    assert_eq!(state[0].next_run_at, Some(next_a));
    assert!(!state[1].enabled, "disabled, not deleted");

    // A duplicated entry is refused entirely; the row keeps its state.
    let report = r
        .reconcile(&doc(vec![
            cfg("rec.a", true, "0 0 1 1 *"),
            cfg("rec.b", false, "0 3 * * *"),
            cfg("rec.c", true, "*/2 * * * *"),
            cfg("rec.c", true, "*/3 * * * *"),
        ]))
        .await
        .unwrap();
    let dup: Vec<_> = report
        .refused
        .iter()
        .filter(|(n, _)| n == "rec.c")
        .collect();
    assert_eq!(dup.len(), 1, "{dup:?}");
    assert!(
        dup[0].1.contains('2'),
        "the refusal says how often the name appears: {}",
        dup[0].1
    );
    assert_eq!(rows(db).await[2].cron, "* * * * *");

    // A registered task absent from the config is disabled, never deleted; a row known to
    // neither config nor code is kept and flagged.
    db.insert_task("gone.task", "* * * * *", None).await;
    let report = r
        .reconcile(&doc(vec![
            cfg("rec.a", true, "0 0 1 1 *"),
            cfg("rec.b", false, "0 3 * * *"),
        ]))
        .await
        .unwrap();
    assert_eq!(report.absent, ["rec.c"]);
    assert_eq!(report.disabled, ["rec.c"]);
    assert_eq!(report.orphaned, ["gone.task"]);
    let state = rows(db).await;
    assert_eq!(state.len(), 4, "no row deleted");
    let ghost = state.iter().find(|r| r.name == "gone.task").unwrap();
    assert!(ghost.orphaned && ghost.enabled);
    assert!(!state.iter().find(|r| r.name == "rec.c").unwrap().enabled);

    // Time zones are stored and applied.
    let report = r
        .reconcile(&ConfigDocument {
            version: None,
            calendars: Default::default(),
            limits: Default::default(),
            tasks: vec![
                TaskConfig {
                    name: "rec.a".into(),
                    enabled: true,
                    cron: "0 9 * * *".into(),
                    timezone: Some("Asia/Shanghai".into()),
                    ..Default::default()
                },
                TaskConfig {
                    name: "rec.b".into(),
                    enabled: true,
                    cron: "0 9 * * *".into(),
                    timezone: Some("Mars/Olympus".into()),
                    ..Default::default()
                },
            ],
        })
        .await
        .unwrap();
    assert_eq!(report.updated, ["rec.a"]);
    assert_eq!(report.refused.len(), 1);
    let state = rows(db).await;
    let a = state.iter().find(|r| r.name == "rec.a").unwrap();
    assert_eq!(a.timezone, "Asia/Shanghai");
    assert_eq!(a.next_run_at.unwrap().format("%H:%M").to_string(), "01:00");
}

/// Two nodes holding different document versions during a rollout: the older one cannot roll
/// the database back.
async fn an_older_config_version_cannot_roll_back_a_newer_one(db: &TestDb) {
    let new_node = reconciler(db, "new");
    let old_node = reconciler(db, "old");
    let v = |version: i64, cron: &str| ConfigDocument {
        version: Some(version),
        calendars: Default::default(),
        limits: Default::default(),
        tasks: vec![cfg("rec.a", true, cron)],
    };
    new_node.reconcile(&v(2, "*/2 * * * *")).await.unwrap();
    let report = old_node.reconcile(&v(1, "*/1 * * * *")).await.unwrap();
    assert_eq!(report.stale.map(|s| (s.version, s.current)), Some((1, 2)));
    assert_eq!(rows(db).await[0].cron, "*/2 * * * *");
    // Flip-flopping back and forth changes nothing.
    for _ in 0..3 {
        new_node.reconcile(&v(2, "*/2 * * * *")).await.unwrap();
        old_node.reconcile(&v(1, "*/1 * * * *")).await.unwrap();
        assert_eq!(rows(db).await[0].cron, "*/2 * * * *");
    }
    let report = old_node.reconcile(&v(3, "*/3 * * * *")).await.unwrap();
    assert_eq!(report.updated, ["rec.a"]);
    assert_eq!(rows(db).await[0].cron, "*/3 * * * *");
}

/// A cron changed while its handler runs: the running handler keeps its lock, no second run
/// starts, and the new schedule applies after it finishes.
async fn cron_change_while_running_never_starts_a_second_run(db: &TestDb) {
    let rec = Arc::new(Recorder::default());
    let n = start(
        node(db, "a", tasks("busy."))
            .config_document(doc(vec![entry("busy.task", "* * * * * *")]))
            .state(Arc::clone(&rec))
            .build()
            .unwrap(),
    );
    wait_until(Duration::from_secs(20), "the handler runs", || async {
        db.count_runs("busy.task", RunStatus::Running).await == 1
    })
    .await;
    let lock_before = db.lock_token("busy.task").await;
    let r = Reconciler::new(
        db.node_store(2),
        tasks("busy."),
        chrono_tz::Tz::UTC,
        "operator",
    );
    let report = r
        .reconcile(&doc(vec![entry("busy.task", "*/3 * * * * *")]))
        .await
        .unwrap();
    assert_eq!(report.updated, ["busy.task"]);
    let lock_after = db.lock_token("busy.task").await;
    assert!(lock_before.is_some());
    assert_eq!(lock_before, lock_after, "the lock was not touched");
    wait_until(
        Duration::from_secs(30),
        "two more runs on the new schedule",
        || async { db.count_runs("busy.task", RunStatus::Succeeded).await >= 3 },
    )
    .await;
    n.stop().await;
    assert_eq!(rec.max_overlap.load(std::sync::atomic::Ordering::SeqCst), 1);
    assert_eq!(rec.ticks_started_twice("busy.task"), []);
    let ticks: Vec<DateTime<Utc>> = db
        .runs(None)
        .await
        .into_iter()
        .skip(1)
        .map(|r| r.scheduled_at)
        .collect();
    assert!(ticks.len() >= 2);
    for t in ticks {
        assert_eq!(
            t.timestamp() % 3,
            0,
            "runs after the change follow */3: {t}"
        );
    }
}

/// An enabled row that lost its next run (an older node could not read its schedule and
/// cleared it, or it was edited by hand) is repaired by the next reconcile, even though its
/// entry did not change, and the repair is reported.
async fn an_enabled_task_without_a_next_run_is_repaired(db: &TestDb) {
    let rec = reconciler(db, "n1");
    let doc = ConfigDocument {
        version: None,
        calendars: Default::default(),
        limits: Default::default(),
        tasks: vec![cfg("rec.a", true, "*/5 * * * *")],
    };
    rec.reconcile(&doc).await.unwrap();
    db.set_next_run(None, None).await;
    let report = rec.reconcile(&doc).await.unwrap();
    assert_eq!(report.repaired, ["rec.a"]);
    assert!(rows(db).await[0].next_run_at.is_some());
    let again = rec.reconcile(&doc).await.unwrap();
    assert!(again.repaired.is_empty() && !again.changed_anything());
}

/// A reconcile never schedules the next run at or before the tick most recently claimed, even
/// when its own clock lags behind the claim (it planned before the claim committed).
async fn a_reconcile_never_moves_the_next_run_back_to_a_claimed_tick(db: &TestDb) {
    let rec = reconciler(db, "n1");
    rec.reconcile(&ConfigDocument {
        version: None,
        calendars: Default::default(),
        limits: Default::default(),
        tasks: vec![cfg("rec.a", true, "0 0 1 1 *")],
    })
    .await
    .unwrap();
    // A claim served the tick an hour from now (as if the database clock were ahead of the
    // reconcile's) and advanced the row.
    let hour = Utc::now().duration_trunc(TimeDelta::hours(1)).unwrap();
    db.set_claimed(
        "rec.a",
        hour + TimeDelta::hours(1),
        hour + TimeDelta::hours(2),
    )
    .await;
    rec.reconcile(&ConfigDocument {
        version: None,
        calendars: Default::default(),
        limits: Default::default(),
        tasks: vec![cfg("rec.a", true, "0 * * * *")],
    })
    .await
    .unwrap();
    let row = db.task_rows().await.remove(0);
    let (next, claimed) = (row.next_run_at.unwrap(), row.last_scheduled_at.unwrap());
    assert!(
        next > claimed,
        "next {next} after the claimed tick {claimed}"
    );
}
