//! Calendars on a real node, on each store: a blackout window over an every-second task, judged
//! by what the handlers recorded (no run of a blocked tick) and by the history (`calendar` skip
//! records for exactly the blocked ticks); and `on_blocked: next_allowed`, where the blocked
//! ticks fold into one run at the end of the window.
//!
//! The calendar is applied by a reconcile of a changed document once the task has run, as an
//! operator's config change would be, so the window lies after the task's first run (calendar
//! skips are counted from the previous scheduled run) and its start is known to the test.
//!
//! On SQLite the seconds are steps of the test clock (`wait_stepping`), the window placed on it.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, DurationRound, SecondsFormat, TimeDelta, Utc};
use common::*;
use scheduler::config::{ConfigDocument, TaskConfig};
use scheduler::schedule::OnBlocked;
use scheduler::store::SkipReason;
use scheduler::{TaskContext, task};

quick_tasks! { blackout_skip = "blackout.skip", blackout_moved = "blackout.moved" }

/// The task `name` every second, blocked by one range `[from, to)`.
fn with_blackout(
    name: &str,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    on_blocked: OnBlocked,
) -> ConfigDocument {
    let rfc = |t: DateTime<Utc>| t.to_rfc3339_opts(SecondsFormat::AutoSi, true);
    let text = format!(
        r#"{{"calendars": {{"blackout": {{"ranges": [{{"from": "{}", "to": "{}"}}]}}}},
            "tasks": [{{"name": "{name}", "enabled": true, "cron": "* * * * * *",
                        "calendar": "blackout", "on_blocked": "{on_blocked}"}}]}}"#,
        rfc(from),
        rfc(to),
    );
    ConfigDocument::from_json(&text).unwrap()
}

/// Starts a node running `name` every second, waits for its first runs, then applies a
/// blackout from 5 s from now, `length` long, and returns the node, the recorder and the window.
async fn run_then_black_out(
    db: &TestDb,
    name: &str,
    length: TimeDelta,
    on_blocked: OnBlocked,
) -> (RunningNode, Arc<Recorder>, DateTime<Utc>, DateTime<Utc>) {
    let rec = Arc::new(Recorder::default());
    let plain: TaskConfig = entry(name, "* * * * * *");
    let n = start(
        node(db, "a", tasks(name))
            .config_document(doc(vec![plain]))
            .state(Arc::clone(&rec))
            .build()
            .unwrap(),
    );
    wait_stepping(db, Duration::from_secs(60), "the task runs", || async {
        rec.starts_of(name) >= 2
    })
    .await;
    let from = db.now().duration_trunc(TimeDelta::seconds(1)).unwrap() + TimeDelta::seconds(5);
    let to = from + length;
    let reconciler = scheduler::testing::reconciler::Reconciler::new(
        db.node_store(2),
        tasks(name),
        chrono_tz::Tz::UTC,
        "operator",
    );
    let report = reconciler
        .reconcile(&with_blackout(name, from, to, on_blocked))
        .await
        .unwrap();
    assert_eq!(
        report.updated,
        [name],
        "the calendar changes the row in place"
    );
    // The scenario: the calendar is on the row well before its window (a node claims at most
    // a second ahead).
    assert!(
        db.now() < from - TimeDelta::seconds(2),
        "the reconcile took too long to stage the window"
    );
    assert!(db.task(name).await.calendar.is_some(), "stored on the row");
    (n, rec, from, to)
}

fn ticks_started(rec: &Recorder, name: &str) -> Vec<DateTime<Utc>> {
    let mut ticks: Vec<_> = rec
        .starts
        .lock()
        .unwrap()
        .iter()
        .filter(|(t, _, _)| t == name)
        .map(|(_, tick, _)| *tick)
        .collect();
    ticks.sort();
    ticks
}

/// `skip`: no handler runs a tick in the window; the claim after it records the window's ticks
/// as one `calendar` skip; the task runs on after the window.
async fn a_blackout_window_skips_its_ticks_and_records_them(db: &TestDb) {
    let name = "blackout.skip";
    let (n, rec, from, to) =
        run_then_black_out(db, name, TimeDelta::seconds(4), OnBlocked::Skip).await;
    wait_stepping(
        db,
        Duration::from_secs(60),
        "runs after the window and the calendar skips recorded",
        || async {
            ticks_started(&rec, name)
                .iter()
                .any(|t| *t >= to + TimeDelta::seconds(2))
                && db
                    .skips(name)
                    .await
                    .iter()
                    .any(|s| s.reason == SkipReason::Calendar)
        },
    )
    .await;
    n.stop().await;

    let started = ticks_started(&rec, name);
    let in_window: Vec<_> = started.iter().filter(|t| from <= **t && **t < to).collect();
    assert!(in_window.is_empty(), "ran in the blackout: {in_window:?}");
    assert!(started.iter().any(|t| *t < from), "ran before the window");
    assert!(
        started.contains(&to),
        "the first tick after the window runs"
    );
    let calendar: Vec<_> = db
        .skips(name)
        .await
        .into_iter()
        .filter(|s| s.reason == SkipReason::Calendar)
        .collect();
    assert_eq!(calendar.len(), 1, "one record for the window: {calendar:?}");
    assert_eq!(
        (
            calendar[0].first_tick,
            calendar[0].last_tick,
            calendar[0].ticks
        ),
        (from, to - TimeDelta::seconds(1), 4),
        "exactly the window's ticks: {calendar:?}"
    );
    assert!(calendar[0].exact);
    let runs = db.runs(Some(name)).await;
    assert!(
        runs.iter()
            .all(|r| r.scheduled_at < from || r.scheduled_at >= to),
        "no run recorded in the window"
    );
}

/// `next_allowed`: the window's ticks move to its end (half a second past a tick) and fold into
/// one run there; the ticks it does not stand for are recorded `calendar`.
async fn next_allowed_moves_the_windows_ticks_into_one_run_at_its_end(db: &TestDb) {
    let name = "blackout.moved";
    let (n, rec, from, to) = run_then_black_out(
        db,
        name,
        TimeDelta::milliseconds(3_500),
        OnBlocked::NextAllowed,
    )
    .await;
    wait_stepping(
        db,
        Duration::from_secs(60),
        "runs after the window",
        || async {
            ticks_started(&rec, name)
                .iter()
                .any(|t| *t >= to + TimeDelta::seconds(2))
        },
    )
    .await;
    n.stop().await;

    let started = ticks_started(&rec, name);
    let window: Vec<_> = started
        .iter()
        .filter(|t| from <= **t && **t <= to)
        .copied()
        .collect();
    assert_eq!(window, [to], "one run, at the end of the window");
    assert_eq!(
        rec.ticks_started_twice(name),
        [],
        "no tick ran twice, the moved one included"
    );
    let calendar: Vec<_> = db
        .skips(name)
        .await
        .into_iter()
        .filter(|s| s.reason == SkipReason::Calendar)
        .collect();
    // Moved: from, +1, +2, +3; the run stands for the first, the other three are recorded.
    assert_eq!(calendar.len(), 1, "{calendar:?}");
    assert_eq!(
        (
            calendar[0].first_tick,
            calendar[0].last_tick,
            calendar[0].ticks
        ),
        (
            from + TimeDelta::seconds(1),
            from + TimeDelta::seconds(3),
            3
        ),
        "{calendar:?}"
    );
    let runs = db.runs(Some(name)).await;
    assert_eq!(
        runs.iter().filter(|r| r.scheduled_at == to).count(),
        1,
        "recorded with the instant it moved to"
    );
}

on_both_backends!(
    threads = 4;
    a_blackout_window_skips_its_ticks_and_records_them,
    next_allowed_moves_the_windows_ticks_into_one_run_at_its_end,
);
