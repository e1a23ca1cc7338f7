//! An instance made at run time naming a calendar of the config document follows that calendar
//! when the document changes it (a hot reload), from that reconcile on, as a config instance and
//! a task do: its rows' rules are rewritten by the reconcile, not at its next upsert. Judged by
//! what the handlers recorded.
//!
//! On SQLite the seconds are steps of the test clock (`wait_stepping`), the window placed on it.

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, TimeDelta, Utc};
use common::*;
use scheduler::{Schedule, TaskContext, task};

on_both_backends! {
    threads = 2;
    a_run_time_instance_follows_its_calendar_changed_in_the_document,
}

/// How many yearly instances name the calendar besides the running ones: more than a batch of
/// the reconcile's writes (`scheduler::store` writes a reconcile's rows 1,000 to a statement).
const YEARLY: usize = 1_100;

/// Each run as its handler saw it: `(key, tick)`.
#[derive(Default)]
struct Ran(Mutex<Vec<(String, DateTime<Utc>)>>);

impl Ran {
    fn of(&self, key: &str) -> usize {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter(|(k, _)| k == key)
            .count()
    }

    /// The ticks of `key`'s runs after `after`.
    fn after(&self, key: &str, after: DateTime<Utc>) -> Vec<DateTime<Utc>> {
        let ran = self.0.lock().unwrap();
        ran.iter()
            .filter(|(k, tick)| k == key && *tick > after)
            .map(|(_, tick)| *tick)
            .collect()
    }
}

#[task(name = "icalr.work")]
async fn icalr_work(ctx: TaskContext) {
    let key = ctx.key().unwrap_or("-").to_owned();
    let ran = ctx.state::<Arc<Ran>>().unwrap();
    ran.0.lock().unwrap().push((key, ctx.scheduled_at()));
}

/// The document: `shut` and `open` as given (each a calendar's rules, JSON), `icalr.work`
/// yearly.
fn document(shut: &str, open: &str) -> String {
    format!(
        r#"{{"calendars": {{"shut": {shut}, "open": {open}}},
            "tasks": [{{"name": "icalr.work", "enabled": true, "cron": "0 0 0 1 1 *"}}]}}"#
    )
}

/// Replaces `path` atomically (write a temp file, rename), as config agents do.
fn replace(path: &std::path::Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// Every second, made at run time: `icalr.work/opens` names `shut` (blocking the whole test
/// long), `icalr.work/closes` names `open` (one day in 2099); 1,100 yearly ones name `shut` too.
/// By the handlers' record `closes` runs and `opens` does not. The file is rewritten: `shut`
/// now blocks one day in 2099, `open` the whole test long. From that reconcile on `opens` runs
/// and `closes` does not (no run of a tick after the reconcile); every row naming `shut` holds
/// its new rules.
async fn a_run_time_instance_follows_its_calendar_changed_in_the_document(db: &TestDb) {
    let rfc = |t: DateTime<Utc>| t.to_rfc3339_opts(SecondsFormat::AutoSi, true);
    let blackout = format!(
        r#"{{"ranges": [{{"from": "{}", "to": "{}"}}]}}"#,
        rfc(db.now() - TimeDelta::hours(1)),
        rfc(db.now() + TimeDelta::hours(1)),
    );
    let far = r#"{"dates": ["2099-01-01"]}"#;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tasks.json");
    replace(&path, &document(&blackout, far));
    let ran = Arc::new(Ran::default());
    let scheduler = node(db, "a", tasks("icalr."))
        .config(path.to_str().unwrap())
        .config_poll_interval(Duration::from_millis(200))
        .state(Arc::clone(&ran))
        .build()
        .unwrap();
    let schedules = scheduler.schedules();
    let n = start(scheduler);
    wait_until(Duration::from_secs(60), "the config applied", || async {
        db.try_task("icalr.work").await.is_some()
    })
    .await;
    let every_second = |key: &str, calendar: &str| {
        Schedule::new("icalr.work", key)
            .cron("* * * * * *")
            .calendar(calendar)
    };
    schedules
        .upsert(every_second("opens", "shut"))
        .await
        .unwrap();
    schedules
        .upsert(every_second("closes", "open"))
        .await
        .unwrap();
    let yearly: Vec<Schedule> = (0..YEARLY)
        .map(|i| {
            Schedule::new("icalr.work", format!("y{i:04}"))
                .cron("0 0 0 1 1 *")
                .calendar("shut")
        })
        .collect();
    for batch in yearly.chunks(scheduler::Schedules::MAX_BATCH) {
        for answer in schedules.upsert_many(batch.to_vec()).await.unwrap() {
            answer.unwrap();
        }
    }
    wait_stepping(
        db,
        Duration::from_secs(120),
        "three runs of the instance its calendar allows",
        || async { ran.of("closes") >= 3 },
    )
    .await;
    assert_eq!(ran.of("opens"), 0, "`shut` blocks it");

    // `shut` no longer blocks the test's time; `open` does.
    replace(&path, &document(r#"{"dates": ["2099-01-02"]}"#, &blackout));
    wait_stepping(
        db,
        Duration::from_secs(60),
        "three runs of the instance whose calendar no longer blocks it",
        || async { ran.of("opens") >= 3 },
    )
    .await;
    // The reconcile that rewrote the rules committed before `opens` first ran: no tick of
    // `closes` after now was claimed before it.
    let seen = db.now();
    let before = ran.of("opens");
    wait_stepping(
        db,
        Duration::from_secs(60),
        "three more runs of the instance allowed now",
        || async { ran.of("opens") >= before + 3 },
    )
    .await;
    n.stop().await;
    assert_eq!(
        ran.after("closes", seen),
        Vec::<DateTime<Utc>>::new(),
        "`open` blocks it from the reconcile on"
    );

    // Every row naming `shut` (the yearly ones past a batch too) holds its new rules.
    let rows = db.task_rows().await;
    let naming_shut: Vec<_> = rows
        .iter()
        .filter(|r| r.name.starts_with("icalr.work/y") || r.name == "icalr.work/opens")
        .collect();
    assert_eq!(naming_shut.len(), YEARLY + 1);
    for row in naming_shut {
        let stored = row.calendar.as_deref().unwrap_or_default();
        assert!(
            stored.contains("2099-01-02") && !stored.contains("ranges"),
            "{}: {stored}",
            row.name
        );
    }
}
