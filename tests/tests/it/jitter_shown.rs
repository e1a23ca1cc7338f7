//! Jitter as operators read it: each scheduled run's start (`starts_at`: its tick plus its
//! offset in its row's window) in the run history of the admin API (`GET /api/runs`, with and
//! without a task, and `GET /api/runs/{id}`) and of the command line (`scheduler runs --json`,
//! and the table's `OFFSET`), the same as the jitter function's for the run's own tick. The runs
//! are those the handlers themselves recorded.

use crate::common;

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use common::*;
use reqwest::StatusCode;
use scheduler::testing::jitter::start_of;
use scheduler::testing::operate::{self, Actor};
use scheduler::testing::store::Trigger;
use scheduler::{Schedule, ScheduleSpec, TaskContext, task};
use serde_json::Value;

on_both_backends! {
    threads = 2;
    the_run_history_gives_each_scheduled_run_its_start,
}

/// Every other second: a window of a second or more moves each start well off its tick.
const CRON: &str = "*/2 * * * * *";
/// The attribute's window: the task's own row's, and the instance without a window of its own.
const TASK_WINDOW: Duration = Duration::from_secs(1);
/// The window of the instance with its own.
const OWN_WINDOW: Duration = Duration::from_millis(1500);

/// Run ids the handler saw, each with its row's key ("" for the task's own row).
#[derive(Default)]
struct Ran(Mutex<Vec<(String, i64)>>);

impl Ran {
    fn of(&self, key: &str) -> usize {
        self.0.lock().unwrap().iter().filter(|r| r.0 == key).count()
    }
    fn ids(&self) -> BTreeSet<i64> {
        self.0.lock().unwrap().iter().map(|r| r.1).collect()
    }
}

#[task(name = "jshow.sync", jitter = "1s")]
async fn jshow_sync(ctx: TaskContext) {
    let ran = ctx.state::<Arc<Ran>>().unwrap();
    ran.0
        .lock()
        .unwrap()
        .push((ctx.key().unwrap_or_default().to_owned(), ctx.run_id()));
}

async fn get(addr: SocketAddr, path: &str) -> Value {
    let r = reqwest::get(format!("http://{addr}{path}")).await.unwrap();
    assert_eq!(r.status(), StatusCode::OK, "{path}");
    r.json().await.unwrap()
}

/// The application binary's `runs` for the task, as an operator runs it (no registry, no
/// config): its output.
fn cli_runs(db: &TestDb, json: bool) -> String {
    let mut args = vec!["runs", "jshow.sync", "--limit", "1000"];
    if json {
        args.push("--json");
    }
    let out = app_output(db, &args);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

/// When the run `run` (a view's JSON) was due to start: its tick at its offset in its row's
/// window (the task's own row, or an instance with its own window, or one with its task's).
fn start_of_run(run: &Value) -> DateTime<Utc> {
    let spec = ScheduleSpec::parse(CRON, "UTC").unwrap();
    let tick: DateTime<Utc> = run["scheduled_at"].as_str().unwrap().parse().unwrap();
    match run["instance_key"].as_str() {
        None => start_of("jshow.sync", &spec, tick, TASK_WINDOW),
        Some("own") => start_of("jshow.sync/own", &spec, tick, OWN_WINDOW),
        Some(key) => start_of(&format!("jshow.sync/{key}"), &spec, tick, TASK_WINDOW),
    }
}

/// Checks every run of `runs` (views' JSON): a scheduled run's `starts_at` is its tick's start,
/// off its tick; a manual run has none. Returns the rows ("" for the task's own) whose scheduled
/// runs were checked, and how many manual runs.
fn check_starts(runs: &[Value], source: &str) -> (BTreeSet<String>, usize) {
    let mut rows = BTreeSet::new();
    let mut manual = 0;
    for run in runs {
        match run["trigger"].as_str().unwrap() {
            "schedule" => {
                let starts_at = run["starts_at"]
                    .as_str()
                    .unwrap_or_else(|| panic!("{source}: no starts_at: {run}"));
                let starts_at: DateTime<Utc> = starts_at.parse().unwrap();
                assert_eq!(starts_at, start_of_run(run), "{source}: {run}");
                rows.insert(run["instance_key"].as_str().unwrap_or("").to_owned());
            }
            "manual" => {
                assert!(run.get("starts_at").is_none(), "{source}: {run}");
                manual += 1;
            }
            other => panic!("{source}: a {other} run: {run}"),
        }
    }
    (rows, manual)
}

/// A task with a 1 s window and two instances (one with its own 1.5 s window, one with its
/// task's), every other second, and a manual run: each scheduled run the handler made is given
/// its tick's start in its own row's window, in the admin API's run history (filtered by task and
/// not, and one run alone) and the command line's; the manual run has none.
async fn the_run_history_gives_each_scheduled_run_its_start(db: &TestDb) {
    let ran = Arc::new(Ran::default());
    let config = doc(vec![entry("jshow.sync", CRON)]);
    let builder = node_with(db, "a", tasks("jshow."), config, &ran);
    let AdminNode {
        running,
        addr,
        schedules,
    } = admin_node(db, builder, &["jshow.sync"]).await;
    schedules
        .upsert(
            Schedule::new("jshow.sync", "own")
                .cron(CRON)
                .jitter(OWN_WINDOW),
        )
        .await
        .unwrap();
    schedules
        .upsert(Schedule::new("jshow.sync", "inherits").cron(CRON))
        .await
        .unwrap();
    let ops = Actor::new("ops", "test");
    operate::trigger(db.api(), "jshow.sync", &ops)
        .await
        .unwrap();
    wait_stepping(
        db,
        Duration::from_secs(90),
        "runs of every row, and the manual run",
        || async {
            let ids = ran.ids();
            let manual_ran = db
                .runs(Some("jshow.sync"))
                .await
                .iter()
                .any(|r| r.trigger == Trigger::Manual && ids.contains(&r.id));
            manual_ran && ["", "own", "inherits"].iter().all(|k| ran.of(k) >= 3)
        },
    )
    .await;
    let ran_ids = ran.ids();
    let handled = |runs: &[Value]| -> Vec<Value> {
        runs.iter()
            .filter(|r| ran_ids.contains(&r["id"].as_i64().unwrap()))
            .cloned()
            .collect()
    };
    let all_rows: BTreeSet<String> = ["", "own", "inherits"].map(str::to_owned).into();

    let page = get(addr, "/api/runs?task=jshow.sync&limit=500").await;
    let runs = handled(page["runs"].as_array().unwrap());
    assert_eq!(check_starts(&runs, "/api/runs?task"), (all_rows.clone(), 1));
    let page = get(addr, "/api/runs?limit=500").await;
    let runs = handled(page["runs"].as_array().unwrap());
    assert_eq!(check_starts(&runs, "/api/runs"), (all_rows.clone(), 1));
    for run in &runs {
        let id = run["id"].as_i64().unwrap();
        let one = get(addr, &format!("/api/runs/{id}")).await;
        assert_eq!(one["run"]["starts_at"], run["starts_at"], "{one}");
    }

    running.stop().await;
    let out: Value = serde_json::from_str(&cli_runs(db, true)).unwrap();
    let runs = handled(out["runs"].as_array().unwrap());
    assert_eq!(check_starts(&runs, "runs --json"), (all_rows, 1));
    // The table: each scheduled run's offset after its tick, none for the manual run.
    let table = cli_runs(db, false);
    let header = table.lines().next().unwrap();
    assert!(
        header.contains("TICK") && header.contains("OFFSET"),
        "{table}"
    );
    for run in &runs {
        let id = run["id"].as_i64().unwrap().to_string();
        let line = table
            .lines()
            .find(|l| l.split_whitespace().next() == Some(id.as_str()))
            .unwrap_or_else(|| panic!("run {id} in {table}"));
        let offset = line.split_whitespace().nth(3).unwrap();
        match run["trigger"].as_str().unwrap() {
            "schedule" => assert!(offset.starts_with('+'), "{line}"),
            _ => assert_eq!(offset, "-", "{line}"),
        }
    }
}
