//! An instance's own calendar (a config instance's `calendar`: a name of the document's
//! `calendars`): its ticks are skipped by its own calendar, else by its task's, judged by what
//! the handlers recorded; a name the document does not have refuses that instance alone.
//!
//! Made at run time (`Schedule::calendar`, the admin API's `calendar`, `instances upsert
//! --calendar`), an instance names a calendar of the document its node applied: its ticks follow
//! it, and a name the document does not have is refused, nothing written.
//!
//! On SQLite the seconds are steps of the test clock (`wait_stepping`), the window placed on it.

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, TimeDelta, Utc};
use common::*;
use scheduler::config::ConfigDocument;
use scheduler::{Schedule, TaskContext, task};
use serde_json::{Value, json};

on_both_backends! {
    threads = 2;
    an_instance_s_ticks_follow_its_own_calendar_else_its_task_s,
    an_instance_made_at_run_time_follows_the_calendar_it_names,
    the_api_and_the_command_line_write_show_and_refuse_an_instance_s_calendar,
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

/// The document of the run-time tests: `blackout` (the whole test long) and `far` (one day in
/// 2099); `ical.open` names no calendar, `ical.held` names `blackout`.
fn calendars_document(db: &TestDb) -> String {
    let rfc = |t: DateTime<Utc>| t.to_rfc3339_opts(SecondsFormat::AutoSi, true);
    format!(
        r#"{{"calendars": {{"blackout": {{"ranges": [{{"from": "{}", "to": "{}"}}]}},
                            "far": {{"dates": ["2099-01-01"]}}}},
            "tasks": [
              {{"name": "ical.open", "enabled": true, "cron": "0 0 0 1 1 *"}},
              {{"name": "ical.held", "enabled": true, "cron": "0 0 0 1 1 *",
                "calendar": "blackout"}}]}}"#,
        rfc(db.now() - TimeDelta::hours(1)),
        rfc(db.now() + TimeDelta::hours(1)),
    )
}

/// Made with the node's `Schedules`, every second: `ical.open/own` names `blackout`,
/// `ical.open/plain` none, `ical.held/free` names `far` (over its task's `blackout`). By the
/// handlers' record `plain` and `free` ran, `own` never did. `ical.open/lost` names `nope`: an
/// error naming it, nothing written.
async fn an_instance_made_at_run_time_follows_the_calendar_it_names(db: &TestDb) {
    let config = ConfigDocument::from_json(&calendars_document(db)).unwrap();
    let ran = Arc::new(Ran::default());
    let scheduler = node(db, "a", tasks("ical."))
        .config_document(config)
        .state(Arc::clone(&ran))
        .build()
        .unwrap();
    let schedules = scheduler.schedules();
    let n = start(scheduler);
    wait_until(Duration::from_secs(60), "the config applied", || async {
        db.try_task("ical.held").await.is_some() && db.try_task("ical.open").await.is_some()
    })
    .await;
    let every_second = |task: &str, key: &str| Schedule::new(task, key).cron("* * * * * *");
    let own = schedules
        .upsert(every_second("ical.open", "own").calendar("blackout"))
        .await
        .unwrap();
    assert_eq!(own.calendar.as_deref(), Some("blackout"), "{own:?}");
    schedules
        .upsert(every_second("ical.open", "plain"))
        .await
        .unwrap();
    schedules
        .upsert(every_second("ical.held", "free").calendar("far"))
        .await
        .unwrap();
    let refused = schedules
        .upsert(every_second("ical.open", "lost").calendar("nope"))
        .await
        .unwrap_err();
    let message = refused.to_string();
    assert!(
        matches!(refused, scheduler::Error::Instance(_))
            && message.contains("`nope`")
            && message.contains("ical.open/lost"),
        "{message}"
    );
    assert!(schedules.get("ical.open", "lost").await.unwrap().is_none());
    wait_stepping(
        db,
        Duration::from_secs(120),
        "three runs of each instance the calendars allow",
        || async { ran.of("ical.open/plain") >= 3 && ran.of("ical.held/free") >= 3 },
    )
    .await;
    n.stop().await;
    assert_eq!(ran.of("ical.open/own"), 0, "its own calendar blocks it");
}

/// `calendar` in the admin API's single and list `PUT` and in every answer; an unknown name is
/// a 400 naming it, nothing written. `instances upsert --calendar NAME` (the calendars read from
/// `--config`) and `upsert-many`'s `calendar` do the same from the command line.
async fn the_api_and_the_command_line_write_show_and_refuse_an_instance_s_calendar(db: &TestDb) {
    const TOKEN: &str = "instance-calendar-admin-token-0123";
    const YEARLY: &str = "0 0 0 1 1 *";
    let text = calendars_document(db);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tasks.json");
    std::fs::write(&path, &text).unwrap();
    let builder = node(db, "a", tasks("ical."))
        .config_document(ConfigDocument::from_json(&text).unwrap())
        .admin_token(TOKEN);
    let admin = admin_node(db, builder, &["ical.open"]).await;
    let base = admin.url("/api/tasks/ical.open/instances");
    let admin_api = AdminClient::with_token(TOKEN);
    let put = reqwest::Method::PUT;
    let body = json!({"cron": YEARLY, "calendar": "blackout"});
    let (status, got) = admin_api
        .call(put.clone(), format!("{base}/one"), Some(body))
        .await;
    assert_eq!(
        (status.as_u16(), &got["calendar"]),
        (200, &json!("blackout")),
        "{got}"
    );
    let (_, got) = admin_api
        .call(reqwest::Method::GET, format!("{base}/one"), None)
        .await;
    assert_eq!(got["calendar"], "blackout", "{got}");
    let (_, list) = admin_api
        .call(reqwest::Method::GET, base.clone(), None)
        .await;
    assert_eq!(list["instances"][0]["calendar"], "blackout", "{list}");
    let body = json!({"cron": YEARLY, "calendar": "nope"});
    let (status, got) = admin_api
        .call(put.clone(), format!("{base}/bad"), Some(body))
        .await;
    assert_eq!(status, 400, "{got}");
    assert!(got.to_string().contains("`nope`"), "{got}");
    let (status, got) = admin_api
        .call(reqwest::Method::GET, format!("{base}/bad"), None)
        .await;
    assert_eq!(status, 404, "nothing written: {got}");
    let body = json!([{"key": "l1", "cron": YEARLY, "calendar": "far"},
                      {"key": "l2", "cron": YEARLY, "calendar": "nope"}]);
    let (status, got) = admin_api.call(put, base.clone(), Some(body)).await;
    assert_eq!(status, 200, "{got}");
    assert_eq!(got["results"][0]["instance"]["calendar"], "far", "{got}");
    assert_eq!(got["results"][1]["status"], 400, "{got}");
    assert!(got["results"][1].to_string().contains("`nope`"), "{got}");

    let cli = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_test_node"))
            .args(args)
            .args(db.cli_store_args())
            .env_remove("DATABASE_URL")
            .env_remove("SCHEDULER_DATABASE_URL")
            .env_remove("SCHEDULER_SCHEMA")
            .env_remove("SCHEDULER_CONFIG")
            .output()
            .expect("run the application binary");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8(out.stdout).unwrap() + &String::from_utf8(out.stderr).unwrap(),
        )
    };
    let config = path.to_str().unwrap();
    let upsert = |key: &'static str, calendar: &'static str| {
        let args = [
            "instances",
            "upsert",
            "ical.open",
            key,
            "--cron",
            YEARLY,
            "--calendar",
            calendar,
            "--config",
            config,
            "--json",
        ];
        cli(&args)
    };
    let (code, out) = upsert("c1", "far");
    assert_eq!(code, 0, "{out}");
    let shown: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(shown["calendar"], "far", "{shown}");
    let (code, out) = upsert("c2", "nope");
    assert_ne!(code, 0, "{out}");
    assert!(out.contains("`nope`"), "{out}");
    let (code, out) = cli(&["instances", "get", "ical.open", "c2"]);
    assert_ne!(code, 0, "nothing written: {out}");
    let file = dir.path().join("many.json");
    let items = json!([{"key": "m1", "cron": YEARLY, "calendar": "blackout"},
                       {"key": "m2", "cron": YEARLY, "calendar": "nope"}]);
    std::fs::write(&file, items.to_string()).unwrap();
    let args = [
        "instances",
        "upsert-many",
        "ical.open",
        "--file",
        file.to_str().unwrap(),
        "--config",
        config,
        "--json",
    ];
    let (code, out) = cli(&args);
    assert_eq!(code, 0, "{out}");
    let report: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["written"], 1, "{report}");
    assert!(report["refused"].to_string().contains("`nope`"), "{report}");
    let (code, out) = cli(&["instances", "get", "ical.open", "m1", "--json"]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(
        serde_json::from_str::<Value>(&out).unwrap()["calendar"],
        "blackout"
    );
    admin.running.stop().await;
}
