//! An instance's own calendar (a config instance's `calendar`: a name of the document's
//! `calendars`): its ticks are skipped by its own calendar, else by its task's, judged by what
//! the handlers recorded; a name the document does not have refuses that instance alone.
//!
//! On SQLite the seconds are steps of the test clock (`wait_stepping`), the window placed on it.

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, TimeDelta, Utc};
use common::*;
use scheduler::config::ConfigDocument;
use scheduler::{TaskContext, task};

on_both_backends! {
    threads = 2;
    an_instance_s_ticks_follow_its_own_calendar_else_its_task_s,
}

/// Each run as its handler saw it: its row (`task/key`).
#[derive(Default)]
struct Ran(Mutex<Vec<String>>);

impl Ran {
    fn of(&self, row: &str) -> usize {
        self.0.lock().unwrap().iter().filter(|r| *r == row).count()
    }
}

fn note(ctx: &TaskContext, task: &str) {
    let row = format!("{task}/{}", ctx.key().unwrap_or("-"));
    ctx.state::<Arc<Ran>>().unwrap().0.lock().unwrap().push(row);
}

#[task(name = "ical.open")]
async fn ical_open(ctx: TaskContext) {
    note(&ctx, "ical.open");
}

#[task(name = "ical.held")]
async fn ical_held(ctx: TaskContext) {
    note(&ctx, "ical.held");
}

/// `ical.open` names no calendar; `ical.held` names `blackout` (the whole test long). Their
/// instances every second: `ical.open/own` names `blackout`, `ical.open/plain` none;
/// `ical.held/free` names `far` (one day in 2099), `ical.held/inherits` none; `ical.held/lost`
/// names `nope`, which the document does not have. By the handlers' record, `plain` and `free`
/// ran, `own` and `inherits` never did; `lost` was refused, its siblings applied. Made at run
/// time (`Schedules`), `ical.open/rt` ran and `ical.held/rt` never did (its task's calendar).
async fn an_instance_s_ticks_follow_its_own_calendar_else_its_task_s(db: &TestDb) {
    let rfc = |t: DateTime<Utc>| t.to_rfc3339_opts(SecondsFormat::AutoSi, true);
    let (from, to) = (
        db.now() - TimeDelta::hours(1),
        db.now() + TimeDelta::hours(1),
    );
    let text = format!(
        r#"{{"calendars": {{"blackout": {{"ranges": [{{"from": "{}", "to": "{}"}}]}},
                            "far": {{"dates": ["2099-01-01"]}}}},
            "tasks": [
              {{"name": "ical.open", "enabled": true, "cron": "0 0 0 1 1 *",
                "instances": [{{"key": "own", "cron": "* * * * * *", "calendar": "blackout"}},
                              {{"key": "plain", "cron": "* * * * * *"}}]}},
              {{"name": "ical.held", "enabled": true, "cron": "0 0 0 1 1 *",
                "calendar": "blackout",
                "instances": [{{"key": "free", "cron": "* * * * * *", "calendar": "far"}},
                              {{"key": "inherits", "cron": "* * * * * *"}},
                              {{"key": "lost", "cron": "* * * * * *", "calendar": "nope"}}]}}]}}"#,
        rfc(from),
        rfc(to),
    );
    let config = ConfigDocument::from_json(&text).unwrap();
    let ran = Arc::new(Ran::default());
    let n = start(
        node(db, "a", tasks("ical."))
            .config_document(config)
            .state(Arc::clone(&ran))
            .build()
            .unwrap(),
    );
    wait_until(Duration::from_secs(60), "the config applied", || async {
        db.try_task("ical.held").await.is_some() && db.try_task("ical.open").await.is_some()
    })
    .await;
    let schedules = scheduler::Schedules::new(db.node_store(2), &tasks("ical."), "test");
    for task in ["ical.open", "ical.held"] {
        schedules
            .upsert(scheduler::Schedule::new(task, "rt").cron("* * * * * *"))
            .await
            .unwrap();
    }
    wait_stepping(
        db,
        Duration::from_secs(120),
        "three runs of each instance the calendars allow",
        || async {
            ran.of("ical.open/plain") >= 3
                && ran.of("ical.held/free") >= 3
                && ran.of("ical.open/rt") >= 3
        },
    )
    .await;
    n.stop().await;

    assert_eq!(ran.of("ical.open/own"), 0, "its own calendar blocks it");
    assert_eq!(
        ran.of("ical.held/inherits"),
        0,
        "its task's calendar blocks it"
    );
    assert_eq!(
        ran.of("ical.held/rt"),
        0,
        "its task's calendar blocks it too"
    );
    assert!(
        db.try_task("ical.held/lost").await.is_none(),
        "an unknown calendar refuses the instance"
    );
    assert!(db.try_task("ical.held/free").await.is_some());
}
