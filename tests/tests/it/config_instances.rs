//! Instances declared in the config document (a task entry's `instances`): they run with their
//! arguments, a hot reload changes one in place, one that leaves the document is disabled and
//! kept, an instance made at run time is left alone by every reconcile, bad entries are refused
//! with the reason while the rest of the document applies and their last good state is kept,
//! the config's keys are the config's (an upsert of one is refused), and one declared while its
//! task is paused takes the task's pause. Judged by what the handlers themselves recorded.

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Timelike, Utc};
use common::*;
use scheduler::config::{ConfigDocument, InstanceConfig, TaskConfig};
use scheduler::store::SkipReason;
use scheduler::testing::operate::{self, Actor};
use scheduler::testing::reconciler::Reconciler;
use scheduler::{Error, InstanceRefusal, Schedule, TaskContext, task};
use serde::Deserialize;
use serde_json::{Value, json};

on_both_backends! {
    threads = 2;
    declared_instances_run_with_their_arguments_and_reload_in_place,
    an_instance_leaving_the_document_is_disabled_and_a_runtime_one_left_alone,
    bad_instances_are_refused_while_the_rest_applies,
    an_instance_declared_while_its_task_is_paused_takes_its_pause,
}

/// A run as the handler saw it: key, tick, tenant.
type Run = (Option<String>, DateTime<Utc>, u64);

/// Runs as the handler saw them.
#[derive(Default)]
struct Seen(Mutex<Vec<Run>>);

impl Seen {
    fn ticks(&self, key: &str) -> Vec<DateTime<Utc>> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r.0.as_deref() == Some(key))
            .map(|r| r.1)
            .collect()
    }
}

#[derive(Deserialize)]
struct Tenant {
    tenant: u64,
}

#[task(name = "cinst.sync")]
async fn cinst_sync(ctx: TaskContext) -> Result<(), scheduler::ArgsError> {
    let tenant = ctx.args::<Option<Tenant>>()?.map_or(0, |t| t.tenant);
    let seen = ctx.state::<Arc<Seen>>().unwrap();
    seen.0
        .lock()
        .unwrap()
        .push((ctx.key().map(str::to_owned), ctx.scheduled_at(), tenant));
    Ok(())
}

/// A task with shards: its instances have a row per shard.
#[task(name = "cinst.sharded", shards = 2)]
async fn cinst_sharded() {}

fn instance(key: &str, cron: &str, tenant: u64) -> Value {
    json!({"key": key, "cron": cron, "args": {"tenant": tenant}})
}

/// The document: the task yearly (its instances are what runs), with `instances`.
fn text(instances: Vec<Value>) -> String {
    json!({"tasks": [{"name": "cinst.sync", "enabled": true, "cron": "0 0 0 1 1 *",
                      "instances": instances}]})
    .to_string()
}

fn replace(path: &std::path::Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

struct Node {
    running: RunningNode,
    schedules: scheduler::Schedules,
    path: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

async fn start_node(db: &TestDb, seen: &Arc<Seen>, first: &str) -> Node {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tasks.json");
    replace(&path, first);
    let scheduler = node(db, "a", tasks("cinst.sync"))
        .config(path.to_str().unwrap())
        .config_poll_interval(Duration::from_millis(200))
        .poll_interval(Duration::from_millis(500))
        .state(Arc::clone(seen))
        .build()
        .unwrap();
    let schedules = scheduler.schedules();
    Node {
        running: start(scheduler),
        schedules,
        path,
        _dir: dir,
    }
}

async fn row(db: &TestDb, name: &str) -> Option<(String, bool)> {
    db.try_task(name).await.map(|t| (t.cron, t.enabled))
}

/// Two instances declared every second: each runs with its own key and arguments; one changed
/// to every other second by a rewrite of the file is changed in place (one row, its earlier
/// runs kept) and its runs after the change fall on even seconds; an upsert or a removal of a
/// declared key from Rust is refused, naming the config.
async fn declared_instances_run_with_their_arguments_and_reload_in_place(db: &TestDb) {
    let seen = Arc::new(Seen::default());
    let every = "* * * * * *";
    let node = start_node(
        db,
        &seen,
        &text(vec![instance("t1", every, 1), instance("t2", every, 2)]),
    )
    .await;
    wait_stepping(db, Duration::from_secs(90), "runs of both", || async {
        seen.ticks("t1").len() >= 2 && seen.ticks("t2").len() >= 2
    })
    .await;
    for (key, _, tenant) in seen.0.lock().unwrap().iter() {
        let key = key.as_deref().expect("only instances run");
        assert_eq!(format!("t{tenant}"), key, "each its own arguments");
    }

    let refused = node
        .schedules
        .upsert(Schedule::new("cinst.sync", "t1").cron(every))
        .await
        .unwrap_err();
    assert!(
        matches!(
            refused,
            Error::Instance(InstanceRefusal::ConfigOwned { ref key, .. }) if key == "t1"
        ),
        "{refused}"
    );
    assert!(refused.to_string().contains("config"), "{refused}");
    let refused = node.schedules.remove("cinst.sync", "t2").await.unwrap_err();
    assert!(
        matches!(
            refused,
            Error::Instance(InstanceRefusal::ConfigOwned { .. })
        ),
        "{refused}"
    );

    let runs_before = db.runs(Some("cinst.sync")).await.len();
    replace(
        &node.path,
        &text(vec![
            instance("t1", "*/2 * * * * *", 1),
            instance("t2", every, 2),
        ]),
    );
    wait_until(
        Duration::from_secs(30),
        "the cron changed in place",
        || async { row(db, "cinst.sync/t1").await == Some(("*/2 * * * * *".into(), true)) },
    )
    .await;
    let changed_at = db.now();
    wait_stepping(
        db,
        Duration::from_secs(90),
        "runs after the change",
        || async { seen.ticks("t1").iter().filter(|t| **t > changed_at).count() >= 3 },
    )
    .await;
    node.running.stop().await;
    let after: Vec<_> = seen
        .ticks("t1")
        .into_iter()
        .filter(|t| *t > changed_at + chrono::Duration::seconds(1))
        .collect();
    assert!(
        after.iter().all(|t| t.second() % 2 == 0),
        "after the change, even seconds only: {after:?}"
    );
    let list = node.schedules.list("cinst.sync").await.unwrap();
    let keys: Vec<&str> = list.iter().map(|i| i.key.as_str()).collect();
    assert_eq!(keys, ["t1", "t2"], "one row each, changed in place");
    assert_eq!(list[0].args, json!({"tenant": 1}));
    assert!(
        db.runs(Some("cinst.sync")).await.len() >= runs_before,
        "history kept"
    );
}

/// A declared instance and one made at run time: the declared one leaving the document is
/// disabled (its row kept) and runs no more, while the runtime one runs on, untouched by every
/// reconcile; a key made at run time and then declared is refused by the reconcile, the
/// runtime instance left as it was.
async fn an_instance_leaving_the_document_is_disabled_and_a_runtime_one_left_alone(db: &TestDb) {
    let seen = Arc::new(Seen::default());
    let every = "* * * * * *";
    let node = start_node(
        db,
        &seen,
        &text(vec![instance("kept", every, 1), instance("gone", every, 2)]),
    )
    .await;
    wait_until(Duration::from_secs(30), "the declared rows", || async {
        row(db, "cinst.sync/gone").await.is_some()
    })
    .await;
    node.schedules
        .upsert(
            Schedule::new("cinst.sync", "rt")
                .cron(every)
                .args(json!({"tenant": 9})),
        )
        .await
        .unwrap();
    wait_stepping(db, Duration::from_secs(90), "runs of all three", || async {
        ["kept", "gone", "rt"]
            .iter()
            .all(|k| seen.ticks(k).len() >= 2)
    })
    .await;

    // `gone` leaves the document; `rt` is declared too, which the reconcile refuses.
    replace(
        &node.path,
        &text(vec![
            instance("kept", every, 1),
            instance("rt", "0 0 * * * *", 5),
        ]),
    );
    wait_until(Duration::from_secs(30), "`gone` disabled", || async {
        row(db, "cinst.sync/gone").await == Some((every.into(), false))
    })
    .await;
    let disabled_at = db.now();
    wait_stepping(
        db,
        Duration::from_secs(90),
        "three more runs of `kept` and `rt`",
        || async {
            ["kept", "rt"].iter().all(|k| {
                seen.ticks(k)
                    .iter()
                    .filter(|t| **t > disabled_at + chrono::Duration::seconds(1))
                    .count()
                    >= 3
            })
        },
    )
    .await;
    node.running.stop().await;
    // No tick of `gone` after it was disabled (one claimed at that moment may have run).
    let late: Vec<_> = seen
        .ticks("gone")
        .into_iter()
        .filter(|t| *t > disabled_at + chrono::Duration::seconds(1))
        .collect();
    assert!(
        late.is_empty(),
        "`gone` ran after it was disabled: {late:?}"
    );
    // The runtime instance kept its own schedule and arguments.
    let rt = node
        .schedules
        .get("cinst.sync", "rt")
        .await
        .unwrap()
        .expect("the runtime instance is kept");
    assert_eq!((rt.cron.as_str(), rt.enabled), (every, true));
    assert_eq!(rt.args, json!({"tenant": 9}));
    assert!(
        seen.0
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r.0.as_deref() == Some("rt"))
            .all(|r| r.2 == 9),
        "`rt` ran with its own arguments only"
    );
    // `gone` is kept, disabled.
    assert_eq!(
        row(db, "cinst.sync/gone").await,
        Some((every.into(), false))
    );
}

/// A task paused, then a document declaring an instance of it applied: the instance the
/// reconcile creates takes the task's pause, as one made at run time does (see
/// `instances::an_instance_made_while_its_task_is_paused_takes_its_pause`). Its handler does not
/// run while the task is paused (by the handler's own record); the task's resume ends its pause
/// with the task's, the ticks due meanwhile recorded `paused`, and it runs.
async fn an_instance_declared_while_its_task_is_paused_takes_its_pause(db: &TestDb) {
    let seen = Arc::new(Seen::default());
    let every = "* * * * * *";
    let node = start_node(db, &seen, &text(vec![])).await;
    wait_until(Duration::from_secs(30), "the task's row", || async {
        row(db, "cinst.sync").await.is_some()
    })
    .await;
    let ops = Actor::new("ops", "test");
    assert!(
        operate::pause(db.api(), "cinst.sync", &ops, "maintenance", None)
            .await
            .unwrap()
    );
    replace(&node.path, &text(vec![instance("late", every, 3)]));
    wait_until(Duration::from_secs(30), "the declared row", || async {
        row(db, "cinst.sync/late").await.is_some()
    })
    .await;
    db.elapse(Duration::from_secs(4)).await;
    assert!(
        seen.ticks("late").is_empty(),
        "it started while its task was paused: {:?}",
        seen.ticks("late")
    );
    let pause = db.task("cinst.sync/late").await.pause;
    assert_eq!(
        pause.map(|p| (p.by, p.reason)),
        Some(("ops".to_owned(), "maintenance".to_owned())),
        "it holds its task's pause"
    );

    let resumed_at = db.now();
    let ended = operate::resume(db.api(), "cinst.sync", &ops).await.unwrap();
    assert_eq!(ended.map(|p| p.reason), Some("maintenance".to_owned()));
    wait_stepping(
        db,
        Duration::from_secs(60),
        "two runs after the resume",
        || async { seen.ticks("late").len() >= 2 },
    )
    .await;
    node.running.stop().await;
    assert!(
        seen.ticks("late")
            .iter()
            .all(|t| *t >= resumed_at - chrono::Duration::seconds(1)),
        "no tick of the pause ran: {:?}",
        seen.ticks("late")
    );
    assert!(db.task("cinst.sync/late").await.pause.is_none());
    let paused: Vec<_> = db
        .skips("cinst.sync/late")
        .await
        .into_iter()
        .filter(|k| k.reason == SkipReason::Paused)
        .collect();
    assert!(
        paused.iter().map(|k| k.ticks).sum::<i64>() >= 1,
        "the ticks of the pause recorded `paused`: {paused:?}"
    );
}

fn entry_with(instances: Vec<InstanceConfig>) -> TaskConfig {
    TaskConfig {
        instances,
        ..entry("cinst.sync", "0 0 0 1 1 *")
    }
}

fn declared(key: &str, cron: &str) -> InstanceConfig {
    InstanceConfig {
        key: key.into(),
        cron: cron.into(),
        ..Default::default()
    }
}

fn document(entries: Vec<TaskConfig>) -> ConfigDocument {
    doc(entries)
}

/// Bad instances (a bad key, a bad cron, arguments too large, an unknown task with instances)
/// are refused with the reason, named `task/key`, while the good instances (one of a task with
/// shards too) and the rest of the document apply; a declared instance whose new cron is bad keeps
/// its last good schedule; `check-config` lists the same refusals.
async fn bad_instances_are_refused_while_the_rest_applies(db: &TestDb) {
    let r = Reconciler::new(
        db.node_store(2),
        tasks("cinst."),
        chrono_tz::Tz::UTC,
        "operator",
    );
    let first = document(vec![
        entry_with(vec![
            declared("good", "0 */5 * * * *"),
            declared("later-bad", "0 0 * * * *"),
        ]),
        entry("cinst.sharded", "0 0 0 1 1 *"),
    ]);
    let report = r.reconcile(&first).await.unwrap();
    assert!(report.refused.is_empty(), "{report:?}");
    assert_eq!(
        row(db, "cinst.sync/later-bad").await,
        Some(("0 0 * * * *".into(), true))
    );

    let big = "x".repeat(scheduler::Schedule::MAX_ARGS_BYTES);
    let second = document(vec![
        entry_with(vec![
            declared("good", "0 */5 * * * *"),
            declared("new-good", "0 */10 * * * *"),
            declared("later-bad", "61 * * * * *"),
            declared("bad key", "* * * * * *"),
            InstanceConfig {
                args: Some(json!({ "blob": big })),
                ..declared("too-large", "* * * * * *")
            },
        ]),
        TaskConfig {
            instances: vec![declared("s1", "* * * * * *")],
            ..entry("cinst.sharded", "0 0 0 1 1 *")
        },
        TaskConfig {
            instances: vec![declared("x", "* * * * * *")],
            ..entry("cinst.unknown", "0 0 0 1 1 *")
        },
    ]);
    let report = r.reconcile(&second).await.unwrap();
    let refused: Vec<(&str, &str)> = report
        .refused
        .iter()
        .map(|(n, why)| (n.as_str(), why.as_str()))
        .collect();
    let reason = |name: &str| {
        refused
            .iter()
            .find(|(n, _)| *n == name)
            .unwrap_or_else(|| panic!("{name} refused: {refused:?}"))
            .1
    };
    assert!(reason("cinst.sync/later-bad").contains("61"), "{refused:?}");
    assert!(reason("cinst.sync/bad key").contains("invalid instance key"));
    assert!(reason("cinst.sync/too-large").contains("65536"));
    assert!(
        !refused.iter().any(|(n, _)| n.starts_with("cinst.sharded")),
        "an instance of a task with shards is accepted: {refused:?}"
    );
    assert!(reason("cinst.unknown").contains("registered"));
    // The rest applied: the new instance made, the good one as it was.
    assert_eq!(
        row(db, "cinst.sync/new-good").await,
        Some(("0 */10 * * * *".into(), true))
    );
    assert_eq!(
        row(db, "cinst.sync/good").await,
        Some(("0 */5 * * * *".into(), true))
    );
    // The refused one keeps its last good state; the others were never made.
    assert_eq!(
        row(db, "cinst.sync/later-bad").await,
        Some(("0 0 * * * *".into(), true))
    );
    for never in ["cinst.sync/too-large", "cinst.unknown/x"] {
        assert_eq!(row(db, never).await, None, "{never}");
    }

    // The task with shards: a row per shard (`config_instance_shards` runs them).
    for shard in ["cinst.sharded/s1", "cinst.sharded/s1[1]"] {
        assert_eq!(
            row(db, shard).await,
            Some(("* * * * * *".into(), true)),
            "{shard}"
        );
    }

    // check-config says the same, without a database.
    let check = scheduler::config::check_config_text(
        &serde_json::to_string(&json!({"tasks": [
            {"name": "cinst.sync", "enabled": true, "cron": "0 0 0 1 1 *", "instances": [
                {"key": "good", "cron": "0 */5 * * * *", "args": {"tenant": 1}},
                {"key": "bad key", "cron": "* * * * * *"},
            ]},
        ]}))
        .unwrap(),
        Some(scheduler::config::ConfigFormat::Json),
        "tasks.json",
        &tasks("cinst."),
        chrono_tz::Tz::UTC,
        Utc::now(),
    );
    let problems: Vec<String> = check.problems.iter().map(|p| format!("{p:?}")).collect();
    assert_eq!(problems.len(), 1, "{problems:?}");
    let problems = problems.join("\n");
    assert!(problems.contains("cinst.sync/bad key"), "{problems}");
}
