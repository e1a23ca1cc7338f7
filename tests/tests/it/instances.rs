//! Instances of a task made at run time ([`scheduler::Schedules`]): every tick of every instance
//! runs once across the nodes, an upsert changes an instance in place, a removed instance
//! finishes its run in flight and runs no more, arguments that do not decode fail the run with
//! the reason, and what is refused says why. Judged by what the handlers themselves recorded,
//! never by timings.

use crate::common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use common::*;
use scheduler::config::{ConfigDocument, TaskConfig};
use scheduler::testing::operate::{self, Actor};
use scheduler::testing::store::RunStatus;
use scheduler::{Error, InstanceRefusal, Schedule, Schedules, TaskContext, task};
use serde::Deserialize;
use serde_json::json;
use tokio::sync::Notify;

on_both_backends! {
    threads = 2;
    every_tick_of_every_instance_runs_once_across_two_nodes,
    an_upsert_changes_an_instance_in_place_and_keeps_its_history,
    a_removed_instance_finishes_its_run_in_flight_and_runs_no_more,
    pausing_a_task_holds_its_instances_and_resuming_it_ends_only_what_it_held,
    an_instance_made_while_its_task_is_paused_takes_its_pause,
    arguments_that_do_not_decode_fail_the_run_with_the_reason,
    a_document_leaves_instances_alone_but_disabling_the_task_disables_them,
    what_is_refused_says_why,
    a_batch_answers_each_instance_in_order_and_refuses_only_the_bad_ones,
    two_batches_of_the_same_new_keys_in_opposite_orders_both_write,
}

/// One run as its handler saw it: key, tick, node, tenant.
type Seen = (Option<String>, DateTime<Utc>, String, u64);

/// What the handlers saw, per run, at its start.
#[derive(Default)]
struct InstanceLog {
    runs: Mutex<Vec<Seen>>,
    /// A run of the key `hold` waits for this before it ends.
    hold: Notify,
}

impl InstanceLog {
    fn ticks_of(&self, key: &str) -> Vec<DateTime<Utc>> {
        self.runs
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

/// Records its run; a run of the key `hold` waits to be let go.
#[task(name = "inst.sync")]
async fn inst_sync(ctx: TaskContext) -> Result<(), scheduler::ArgsError> {
    let Tenant { tenant } = ctx.args()?;
    let log = ctx.state::<Arc<InstanceLog>>().unwrap();
    log.runs.lock().unwrap().push((
        ctx.key().map(str::to_owned),
        ctx.scheduled_at(),
        ctx.node_id().to_owned(),
        tenant,
    ));
    if ctx.key() == Some("hold") {
        log.hold.notified().await;
    }
    Ok(())
}

/// A broadcast task: its instances run on every node.
#[task(name = "inst.broadcast", shards = "nodes")]
async fn inst_broadcast(_ctx: TaskContext) {}

/// Nodes `ids` running `inst.*` (the handles to make instances with, from the first), started,
/// once the task's row is in the store.
async fn nodes(db: &TestDb, ids: &[&str], log: &Arc<InstanceLog>) -> (Schedules, Vec<RunningNode>) {
    let builders = ids.iter().map(|id| {
        node_with(db, id, tasks("inst."), config(), log).poll_interval(Duration::from_millis(500))
    });
    let running = started_all(db, builders, &["inst.sync"]).await;
    (running[0].schedules.clone(), running)
}

/// The tasks' own schedules: yearly (their instances are what runs).
fn config() -> ConfigDocument {
    doc(vec![
        entry("inst.sync", "0 0 0 1 1 *"),
        entry("inst.broadcast", "0 0 0 1 1 *"),
    ])
}

fn every_second(key: &str, tenant: u64) -> Schedule {
    Schedule::new("inst.sync", key)
        .cron("* * * * * *")
        .args(json!({ "tenant": tenant }))
}

/// Three instances of one task every second on two nodes: each tick of each instance ran once,
/// with its own key and arguments, the store recorded each run under the task with its key,
/// and both nodes ran some.
async fn every_tick_of_every_instance_runs_once_across_two_nodes(db: &TestDb) {
    let log = Arc::new(InstanceLog::default());
    let (schedules, running) = nodes(db, &["a", "b"], &log).await;
    for (key, tenant) in [("t1", 1), ("t2", 2), ("t3", 3)] {
        schedules.upsert(every_second(key, tenant)).await.unwrap();
    }
    let enough = |log: &InstanceLog| {
        let runs = log.runs.lock().unwrap();
        let nodes: std::collections::BTreeSet<&str> = runs.iter().map(|r| r.2.as_str()).collect();
        ["t1", "t2", "t3"]
            .iter()
            .all(|k| runs.iter().filter(|r| r.0.as_deref() == Some(k)).count() >= 4)
            && nodes.len() == 2
    };
    wait_stepping(
        db,
        Duration::from_secs(120),
        "four ticks of each instance, runs on both nodes",
        || async { enough(&log) },
    )
    .await;
    for n in running {
        n.stop().await;
    }

    let runs = log.runs.lock().unwrap().clone();
    let mut seen: BTreeMap<(String, DateTime<Utc>), usize> = BTreeMap::new();
    for (key, tick, _, tenant) in &runs {
        let key = key.clone().expect("every run is an instance's");
        assert_eq!(format!("t{tenant}"), key, "each instance's own arguments");
        *seen.entry((key, *tick)).or_default() += 1;
    }
    let twice: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "ticks run twice: {twice:?}");
    // The store's record agrees: one run per tick of each instance, under the task's name.
    let mut stored: BTreeMap<(String, DateTime<Utc>), usize> = BTreeMap::new();
    for run in db.runs(Some("inst.sync")).await {
        let key = run.instance_key.clone().expect("recorded with its key");
        *stored.entry((key, run.scheduled_at)).or_default() += 1;
    }
    assert!(stored.values().all(|n| *n == 1), "{stored:?}");
    for key in seen.keys() {
        assert!(stored.contains_key(key), "run {key:?} recorded");
    }
}

/// An instance every second changed to every other second: the same instance (one in the
/// list), its earlier runs kept, and its runs after the change on even seconds only.
async fn an_upsert_changes_an_instance_in_place_and_keeps_its_history(db: &TestDb) {
    let log = Arc::new(InstanceLog::default());
    let (schedules, running) = nodes(db, &["a"], &log).await;
    schedules.upsert(every_second("t1", 1)).await.unwrap();
    wait_stepping(db, Duration::from_secs(60), "two runs", || async {
        log.ticks_of("t1").len() >= 2
    })
    .await;
    let changed = schedules
        .upsert(every_second("t1", 1).cron("*/2 * * * * *"))
        .await
        .unwrap();
    let changed_at = db.now();
    assert_eq!(changed.cron, "*/2 * * * * *");
    let next = changed.next_run_at.expect("a next run");
    assert_eq!(chrono::Timelike::second(&next) % 2, 0, "recomputed: {next}");
    let before = log.ticks_of("t1").len();
    wait_stepping(
        db,
        Duration::from_secs(60),
        "three runs after the change",
        || async {
            log.ticks_of("t1")
                .iter()
                .filter(|t| **t > changed_at)
                .count()
                >= 3
        },
    )
    .await;
    for n in running {
        n.stop().await;
    }
    let list = schedules.list("inst.sync").await.unwrap();
    assert_eq!(list.len(), 1, "{list:?}");
    let after: Vec<_> = log
        .ticks_of("t1")
        .into_iter()
        .filter(|t| *t > changed_at + chrono::Duration::seconds(1))
        .collect();
    assert!(
        after.iter().all(|t| chrono::Timelike::second(t) % 2 == 0),
        "after the change, even seconds only: {after:?}"
    );
    let recorded = db.runs(Some("inst.sync")).await;
    assert!(
        recorded.len() >= before,
        "the runs before the change are kept: {} of {before}",
        recorded.len()
    );
}

/// An instance removed while its run is in flight: the run finishes and is recorded, no later
/// tick of it runs (while another instance of the task goes on ticking), and it is gone from
/// the list.
async fn a_removed_instance_finishes_its_run_in_flight_and_runs_no_more(db: &TestDb) {
    let log = Arc::new(InstanceLog::default());
    let (schedules, running) = nodes(db, &["a"], &log).await;
    schedules.upsert(every_second("hold", 7)).await.unwrap();
    wait_stepping(
        db,
        Duration::from_secs(60),
        "the held run started",
        || async { !log.ticks_of("hold").is_empty() },
    )
    .await;
    assert!(schedules.remove("inst.sync", "hold").await.unwrap());
    assert_eq!(schedules.get("inst.sync", "hold").await.unwrap(), None);
    assert!(
        !schedules.remove("inst.sync", "hold").await.unwrap(),
        "removed once"
    );
    log.hold.notify_one();
    wait_until(Duration::from_secs(60), "the held run recorded", || async {
        db.runs(Some("inst.sync"))
            .await
            .iter()
            .any(|r| r.instance_key.as_deref() == Some("hold") && r.status == RunStatus::Succeeded)
    })
    .await;
    // Another instance's ticks go on: three of them after the held run ended.
    schedules.upsert(every_second("other", 8)).await.unwrap();
    wait_stepping(
        db,
        Duration::from_secs(60),
        "three ticks of another instance",
        || async { log.ticks_of("other").len() >= 3 },
    )
    .await;
    for n in running {
        n.stop().await;
    }
    assert_eq!(log.ticks_of("hold").len(), 1, "no tick after the removal");
    let held: Vec<_> = db
        .runs(Some("inst.sync"))
        .await
        .into_iter()
        .filter(|r| r.instance_key.as_deref() == Some("hold"))
        .collect();
    assert_eq!(held.len(), 1, "{held:?}");
    assert_eq!(held[0].status, RunStatus::Succeeded);
    let audit = db.api().audit_log(100, None).await.unwrap();
    assert!(
        audit
            .iter()
            .any(|a| a.action == "instance remove" && a.detail == "hold"),
        "{audit:?}"
    );
}

/// Pausing the task holds every instance of it (by the handlers' own record: no start while
/// paused), and resuming the task ends that hold; an instance paused on its own before stays
/// paused through the task's resume, until resumed itself.
async fn pausing_a_task_holds_its_instances_and_resuming_it_ends_only_what_it_held(db: &TestDb) {
    let log = Arc::new(InstanceLog::default());
    let (schedules, running) = nodes(db, &["a"], &log).await;
    for (key, tenant) in [("t1", 1), ("t2", 2)] {
        schedules.upsert(every_second(key, tenant)).await.unwrap();
    }
    wait_stepping(db, Duration::from_secs(60), "two ticks of each", || async {
        log.ticks_of("t1").len() >= 2 && log.ticks_of("t2").len() >= 2
    })
    .await;
    let ops = Actor::new("ops", "test");
    assert!(
        operate::pause(db.api(), "inst.sync/t2", &ops, "tenant on hold", None)
            .await
            .unwrap()
    );
    assert!(
        operate::pause(db.api(), "inst.sync", &ops, "maintenance", None)
            .await
            .unwrap()
    );
    // Runs under way (a second's tick, claimed before the pause) end; then none starts.
    db.elapse(Duration::from_secs(2)).await;
    let before = log.runs.lock().unwrap().len();
    db.elapse(Duration::from_secs(3)).await;
    assert_eq!(
        log.runs.lock().unwrap().len(),
        before,
        "no instance started while its task was paused"
    );

    let ended = operate::resume(db.api(), "inst.sync", &ops).await.unwrap();
    assert_eq!(ended.map(|p| p.reason), Some("maintenance".to_owned()));
    let (t1, t2) = (log.ticks_of("t1").len(), log.ticks_of("t2").len());
    wait_stepping(
        db,
        Duration::from_secs(60),
        "two ticks of t1 after the resume",
        || async { log.ticks_of("t1").len() >= t1 + 2 },
    )
    .await;
    assert_eq!(
        log.ticks_of("t2").len(),
        t2,
        "the instance paused on its own stays paused"
    );
    operate::resume(db.api(), "inst.sync/t2", &ops)
        .await
        .unwrap()
        .expect("its own pause ended");
    wait_stepping(
        db,
        Duration::from_secs(60),
        "a tick of t2 after its own resume",
        || async { log.ticks_of("t2").len() > t2 },
    )
    .await;
    for n in running {
        n.stop().await;
    }
}

/// Instances made while their task is paused (one alone, two in a batch) take the task's pause
/// as pausing the task gives it to those it finds: none of them starts while the task is paused
/// (by the handlers' own record), and the task's resume ends their pause with its own. One paused
/// on its own before the task's pause, changed meanwhile, keeps its own pause through the
/// task's resume.
async fn an_instance_made_while_its_task_is_paused_takes_its_pause(db: &TestDb) {
    let log = Arc::new(InstanceLog::default());
    let (schedules, running) = nodes(db, &["a"], &log).await;
    let ops = Actor::new("ops", "test");
    // Yearly until the batch below makes it every second (no tick of it before its own pause).
    schedules
        .upsert(every_second("own", 9).cron("0 0 0 1 1 *"))
        .await
        .unwrap();
    assert!(
        operate::pause(db.api(), "inst.sync/own", &ops, "tenant on hold", None)
            .await
            .unwrap()
    );
    assert!(
        operate::pause(db.api(), "inst.sync", &ops, "maintenance", None)
            .await
            .unwrap()
    );
    schedules.upsert(every_second("new", 1)).await.unwrap();
    let batch = schedules
        .upsert_many([
            every_second("b1", 2),
            every_second("b2", 3),
            every_second("own", 10),
        ])
        .await
        .unwrap();
    assert!(batch.iter().all(Result::is_ok), "{batch:?}");
    db.elapse(Duration::from_secs(4)).await;
    for key in ["new", "b1", "b2", "own"] {
        assert!(
            log.ticks_of(key).is_empty(),
            "{key} started while its task was paused: {:?}",
            log.ticks_of(key)
        );
    }
    for key in ["new", "b1", "b2"] {
        let pause = db.task(&format!("inst.sync/{key}")).await.pause;
        assert_eq!(
            pause.map(|p| (p.by, p.reason)),
            Some(("ops".to_owned(), "maintenance".to_owned())),
            "{key} holds its task's pause"
        );
    }
    let own = db.task("inst.sync/own").await.pause.map(|p| p.reason);
    assert_eq!(own.as_deref(), Some("tenant on hold"), "its own pause kept");

    let ended = operate::resume(db.api(), "inst.sync", &ops).await.unwrap();
    assert_eq!(ended.map(|p| p.reason), Some("maintenance".to_owned()));
    wait_stepping(
        db,
        Duration::from_secs(60),
        "two ticks of each instance made while paused, after the resume",
        || async {
            ["new", "b1", "b2"]
                .iter()
                .all(|key| log.ticks_of(key).len() >= 2)
        },
    )
    .await;
    for n in running {
        n.stop().await;
    }
    assert!(log.ticks_of("own").is_empty(), "its own pause holds it");
    let own = db.task("inst.sync/own").await.pause.map(|p| p.reason);
    assert_eq!(own.as_deref(), Some("tenant on hold"));
}

/// Arguments the handler cannot decode: the run is recorded failed, saying why.
async fn arguments_that_do_not_decode_fail_the_run_with_the_reason(db: &TestDb) {
    let log = Arc::new(InstanceLog::default());
    let (schedules, running) = nodes(db, &["a"], &log).await;
    schedules
        .upsert(every_second("bad", 0).args(json!({"tenant": "forty-two"})))
        .await
        .unwrap();
    wait_stepping(db, Duration::from_secs(60), "a failed run", || async {
        db.runs(Some("inst.sync"))
            .await
            .iter()
            .any(|r| r.status == RunStatus::Failed)
    })
    .await;
    for n in running {
        n.stop().await;
    }
    let failed = db
        .runs(Some("inst.sync"))
        .await
        .into_iter()
        .find(|r| r.status == RunStatus::Failed)
        .unwrap();
    assert_eq!(failed.instance_key.as_deref(), Some("bad"));
    let error = failed.error.unwrap_or_default();
    assert!(
        error.contains("inst.sync/bad") && error.contains("invalid type"),
        "{error}"
    );
    assert!(
        log.ticks_of("bad").is_empty(),
        "the handler went no further"
    );
}

/// Every refusal, each saying why, and nothing written for any.
async fn what_is_refused_says_why(db: &TestDb) {
    let log = Arc::new(InstanceLog::default());
    let scheduler = node_with(db, "a", tasks("inst."), config(), &log)
        .build()
        .unwrap();
    let schedules = scheduler.schedules();
    // Before any node has written the task's row.
    let refused = schedules.upsert(every_second("t1", 1)).await.unwrap_err();
    assert!(
        matches!(
            refused,
            Error::Instance(InstanceRefusal::TaskNotStored { .. })
        ),
        "{refused}"
    );
    let running = start(scheduler);
    rows_written(db, &["inst.sync", "inst.broadcast"]).await;
    let refusal = |e: Error| match e {
        Error::Instance(r) => r,
        other => panic!("not a refusal: {other}"),
    };
    let unknown = schedules
        .upsert(Schedule::new("inst.nope", "k").cron("* * * * * *"))
        .await
        .unwrap_err();
    assert!(
        unknown.to_string().contains("no task `inst.nope`"),
        "{unknown}"
    );
    assert!(matches!(
        refusal(unknown),
        InstanceRefusal::UnknownTask { .. }
    ));
    for key in ["", "a/b", "a[1]", "a@b", "with space", &"k".repeat(129)] {
        let e = schedules.upsert(every_second(key, 1)).await.unwrap_err();
        assert!(
            matches!(refusal(e), InstanceRefusal::BadKey { .. }),
            "{key:?}"
        );
    }
    let e = schedules
        .upsert(Schedule::new("inst.sync", "k"))
        .await
        .unwrap_err();
    assert!(matches!(refusal(e), InstanceRefusal::NoCron { .. }));
    let e = schedules
        .upsert(Schedule::new("inst.sync", "k").cron("0 61 * * *"))
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Schedule(_)), "{e}");
    let e = schedules
        .upsert(every_second("k", 1).timezone("Mars/Olympus"))
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Schedule(_)), "{e}");
    let e = schedules
        .upsert(every_second("k", 1).args_json("{tenant: 1"))
        .await
        .unwrap_err();
    assert!(matches!(refusal(e), InstanceRefusal::ArgsNotJson { .. }));
    let big = "x".repeat(Schedule::MAX_ARGS_BYTES);
    let e = schedules
        .upsert(every_second("k", 1).args(json!({ "blob": big })))
        .await
        .unwrap_err();
    assert!(matches!(refusal(e), InstanceRefusal::ArgsTooLarge { .. }));
    assert!(
        schedules.list("inst.sync").await.unwrap().is_empty(),
        "nothing written"
    );
    running.stop().await;
}

/// A node on `config`, started, once its reconcile has written the task's row.
async fn node_on(db: &TestDb, config: ConfigDocument, log: &Arc<InstanceLog>) -> RunningNode {
    started(
        db,
        node_with(db, "a", tasks("inst."), config, log),
        &["inst.sync"],
    )
    .await
}

/// Documents never name instances: one applied after an instance was made leaves it as it was.
/// A document that disables the task disables its instances (nothing scheduled, no run); one
/// that enables it again enables them, each with a next run.
async fn a_document_leaves_instances_alone_but_disabling_the_task_disables_them(db: &TestDb) {
    let log = Arc::new(InstanceLog::default());
    let running = node_on(db, config(), &log).await;
    let schedules = Schedules::new(db.node_store(2), &tasks("inst."), "test");
    let yearly = || Schedule::new("inst.sync", "t1").cron("0 0 0 1 1 *");
    let made = schedules.upsert(yearly()).await.unwrap();
    assert!(made.enabled && made.next_run_at.is_some(), "{made:?}");
    running.stop().await;

    // Another document (another version of the task's schedule): the instance is untouched.
    let other = doc(vec![
        entry("inst.sync", "0 0 0 2 1 *"),
        entry("inst.broadcast", "0 0 0 1 1 *"),
    ]);
    node_on(db, other, &log).await.stop().await;
    assert_eq!(
        schedules.get("inst.sync", "t1").await.unwrap(),
        Some(made.clone())
    );

    // The task disabled: its instance too.
    let disabled = doc(vec![
        TaskConfig {
            enabled: false,
            ..entry("inst.sync", "0 0 0 1 1 *")
        },
        entry("inst.broadcast", "0 0 0 1 1 *"),
    ]);
    let running = node_on(db, disabled, &log).await;
    wait_until(Duration::from_secs(60), "the instance disabled", || async {
        schedules
            .get("inst.sync", "t1")
            .await
            .unwrap()
            .is_some_and(|i| !i.enabled)
    })
    .await;
    running.stop().await;
    assert_eq!(schedules.list("inst.sync").await.unwrap().len(), 1, "kept");

    // Enabled again: its instance too, with a next run.
    let running = node_on(db, config(), &log).await;
    wait_until(Duration::from_secs(60), "the instance enabled", || async {
        schedules
            .get("inst.sync", "t1")
            .await
            .unwrap()
            .is_some_and(|i| i.enabled && i.next_run_at.is_some())
    })
    .await;
    running.stop().await;
    assert!(
        log.runs.lock().unwrap().is_empty(),
        "a yearly schedule ran nothing"
    );
}

/// `Schedules::upsert_many`: one answer per schedule in the order given, each refusal the one
/// `upsert` gives, the good ones written (a key given twice written twice, the second last);
/// a batch over `Schedules::MAX_BATCH` refused whole, nothing written.
async fn a_batch_answers_each_instance_in_order_and_refuses_only_the_bad_ones(db: &TestDb) {
    let log = Arc::new(InstanceLog::default());
    let running = node_on(db, config(), &log).await;
    let schedules = Schedules::new(db.node_store(2), &tasks("inst."), "test");
    let yearly = |key: &str| Schedule::new("inst.sync", key).cron("0 0 0 1 1 *");
    let answers = schedules
        .upsert_many([
            yearly("b1").args(json!({"tenant": 1})),
            yearly("bad key"),
            Schedule::new("inst.broadcast", "b2").cron("0 0 0 1 1 *"),
            Schedule::new("inst.sync", "b3"),
            yearly("b4").timezone("Mars/Olympus"),
            yearly("b5"),
            yearly("b1").args(json!({"tenant": 11})),
            Schedule::new("inst.nope", "b6").cron("0 0 0 1 1 *"),
        ])
        .await
        .unwrap();
    assert_eq!(answers.len(), 8);
    let refusal = |i: usize| match &answers[i] {
        Err(Error::Instance(r)) => r.clone(),
        other => panic!("{i}: not a refusal: {other:?}"),
    };
    assert_eq!(answers[0].as_ref().unwrap().args, json!({"tenant": 1}));
    assert!(matches!(refusal(1), InstanceRefusal::BadKey { .. }));
    // A broadcast task has instances (see instance_broadcast.rs).
    assert_eq!(answers[2].as_ref().unwrap().key, "b2");
    assert!(matches!(refusal(3), InstanceRefusal::NoCron { .. }));
    assert!(
        matches!(answers[4], Err(Error::Schedule(_))),
        "{:?}",
        answers[4]
    );
    assert_eq!(answers[5].as_ref().unwrap().key, "b5");
    assert_eq!(answers[6].as_ref().unwrap().args, json!({"tenant": 11}));
    assert!(matches!(refusal(7), InstanceRefusal::UnknownTask { .. }));
    let listed: Vec<(String, serde_json::Value)> = schedules
        .list("inst.sync")
        .await
        .unwrap()
        .into_iter()
        .map(|i| (i.key, i.args))
        .collect();
    assert_eq!(
        listed,
        [
            ("b1".to_owned(), json!({"tenant": 11})),
            ("b5".to_owned(), serde_json::Value::Null)
        ]
    );
    assert_eq!(
        schedules.get("inst.sync", "b1").await.unwrap(),
        answers[6].as_ref().ok().cloned()
    );
    // Over the cap: refused whole.
    let many = (0..=Schedules::MAX_BATCH).map(|i| yearly(&format!("many-{i}")));
    let e = schedules.upsert_many(many).await.unwrap_err();
    assert!(
        matches!(
            e,
            Error::Instance(InstanceRefusal::BatchTooLarge { count: 1_001 })
        ),
        "{e}"
    );
    assert_eq!(schedules.list("inst.sync").await.unwrap().len(), 2);
    assert!(schedules.upsert_many([]).await.unwrap().is_empty());
    running.stop().await;
}

/// Two batches at once, from two processes' handles, making the same new instances in opposite
/// orders (and a few of their own), twenty times over: both are written whole every time (no
/// deadlock between them, none waits on the other forever), and every key is one instance.
async fn two_batches_of_the_same_new_keys_in_opposite_orders_both_write(db: &TestDb) {
    let log = Arc::new(InstanceLog::default());
    let running = node_on(db, config(), &log).await;
    let one = Schedules::new(db.node_store(2), &tasks("inst."), "one");
    let two = Schedules::new(db.node_store(2), &tasks("inst."), "two");
    let yearly = |key: String| Schedule::new("inst.sync", key).cron("0 0 0 1 1 *");
    let mut expected = std::collections::BTreeSet::new();
    for round in 0..20 {
        let shared: Vec<String> = (0..40).map(|i| format!("r{round}-k{i:02}")).collect();
        let mut first: Vec<String> = shared.clone();
        first.push(format!("r{round}-one"));
        let mut second: Vec<String> = shared.iter().rev().cloned().collect();
        second.insert(0, format!("r{round}-two"));
        expected.extend(first.iter().chain(&second).cloned());
        let (a, b) = tokio::join!(
            one.upsert_many(first.iter().cloned().map(yearly)),
            two.upsert_many(second.iter().cloned().map(yearly)),
        );
        for (who, answers, keys) in [("one", a, &first), ("two", b, &second)] {
            let answers = answers.unwrap_or_else(|e| panic!("round {round}: {who}'s batch: {e}"));
            let written: Vec<String> = answers
                .into_iter()
                .map(|a| {
                    a.unwrap_or_else(|e| panic!("round {round}: {who}: {e}"))
                        .key
                })
                .collect();
            assert_eq!(
                &written, keys,
                "round {round}: {who}'s answers, in its order"
            );
        }
    }
    let listed: Vec<String> = schedules_keys(&one).await;
    let unique: std::collections::BTreeSet<String> = listed.iter().cloned().collect();
    assert_eq!(unique.len(), listed.len(), "each key once");
    assert_eq!(unique, expected);
    running.stop().await;
}

async fn schedules_keys(schedules: &Schedules) -> Vec<String> {
    schedules
        .list("inst.sync")
        .await
        .unwrap()
        .into_iter()
        .map(|i| i.key)
        .collect()
}
