//! The engine against a real PostgreSQL: several nodes sharing nothing but the database.
//! Each test has its own schema and its own task-name prefix.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use chrono::{DateTime, Utc};
use common::*;
use scheduler::{TaskContext, task};
use sqlx::Row;

// ---- tasks ---------------------------------------------------------------------------------

macro_rules! quick_tasks {
    ($($fn_name:ident = $name:literal),* $(,)?) => {$(
        #[task(name = $name)]
        async fn $fn_name(ctx: TaskContext) {
            let _guard = recorder(&ctx).enter(&ctx);
        }
    )*};
}

quick_tasks! {
    once_00 = "once.00", once_01 = "once.01", once_02 = "once.02", once_03 = "once.03",
    once_04 = "once.04", once_05 = "once.05", once_06 = "once.06", once_07 = "once.07",
    once_08 = "once.08", once_09 = "once.09", once_10 = "once.10", once_11 = "once.11",
    once_12 = "once.12", once_13 = "once.13", once_14 = "once.14", once_15 = "once.15",
    once_16 = "once.16", once_17 = "once.17", once_18 = "once.18", once_19 = "once.19",
}

quick_tasks! {
    deploy_old = "deploy.old", deploy_new = "deploy.new",
    overdue_task = "overdue.task",
    outage_task = "outage.task",
}

/// Runs three times the test lock lifetime.
#[task(name = "long.renewed")]
async fn long_renewed(ctx: TaskContext) {
    let _guard = recorder(&ctx).enter(&ctx);
    tokio::time::sleep(Duration::from_millis(3_300)).await;
}

/// Longer than its one-second interval.
#[task(name = "overrun.task")]
async fn overrun_task(ctx: TaskContext) {
    let _guard = recorder(&ctx).enter(&ctx);
    tokio::time::sleep(Duration::from_millis(2_500)).await;
}

#[task(name = "panic.task")]
async fn panic_task(ctx: TaskContext) {
    let _guard = recorder(&ctx).enter(&ctx);
    if ctx.scheduled_at().timestamp() % 2 == 0 {
        panic!("boom at an even second");
    }
}

#[task(name = "fails.task")]
async fn fails_task(ctx: TaskContext) -> Result<(), std::io::Error> {
    let _guard = recorder(&ctx).enter(&ctx);
    Err(std::io::Error::other("upstream said no"))
}

/// Stops early when asked.
#[task(name = "drain.polite")]
async fn drain_polite(ctx: TaskContext) {
    let _guard = recorder(&ctx).enter(&ctx);
    tokio::select! {
        _ = ctx.cancelled() => {}
        _ = tokio::time::sleep(Duration::from_secs(60)) => {}
    }
}

/// Ignores cancellation.
#[task(name = "drain.stubborn")]
async fn drain_stubborn(ctx: TaskContext) {
    let _guard = recorder(&ctx).enter(&ctx);
    tokio::time::sleep(Duration::from_secs(600)).await;
}

/// Runs until told to stop; remembers that it was.
#[task(name = "steal.task")]
async fn steal_task(ctx: TaskContext) {
    let _guard = recorder(&ctx).enter(&ctx);
    tokio::select! {
        _ = ctx.cancelled() => recorder(&ctx).note_cancelled(),
        _ = tokio::time::sleep(Duration::from_secs(60)) => {}
    }
}

// ---- tests ---------------------------------------------------------------------------------

/// 20 tasks every second on three nodes for at least 30 ticks: every tick of every task runs
/// exactly once (a tick folded into a late run is counted, never run twice).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_tick_runs_exactly_once_across_three_nodes() {
    scheduler_tests::init_tracing();
    let db = migrated_schema("once").await;
    let rec = Arc::new(Recorder::default());
    let config = doc((0..20)
        .map(|i| entry(&format!("once.{i:02}"), "* * * * * *"))
        .collect());
    let nodes: Vec<_> = ["a", "b", "c"]
        .iter()
        .map(|id| {
            start(
                node(&db, id, tasks("once."))
                    .config_document(config.clone())
                    .state(Arc::clone(&rec))
                    .build()
                    .unwrap(),
            )
        })
        .collect();
    let pool = pool(&db);
    wait_until(Duration::from_secs(90), "31 ticks of every task", || {
        let pool = pool.clone();
        async move {
            let min: Option<i64> = sqlx::query_scalar(
                "SELECT min(n) FROM (SELECT count(*) AS n FROM scheduler_runs GROUP BY task_name) s",
            )
            .fetch_one(&pool)
            .await
            .unwrap();
            min.unwrap_or(0) >= 31 && {
                let tasks: i64 =
                    sqlx::query_scalar("SELECT count(DISTINCT task_name) FROM scheduler_runs")
                        .fetch_one(&pool)
                        .await
                        .unwrap();
                tasks == 20
            }
        }
    })
    .await;
    for n in nodes {
        n.stop().await;
    }

    let rows = sqlx::query(
        "SELECT task_name, scheduled_at, ticks_collapsed, status, node_id FROM scheduler_runs ORDER BY task_name, scheduled_at",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    let mut by_task: BTreeMap<String, Vec<(DateTime<Utc>, i32)>> = BTreeMap::new();
    let mut nodes_used = BTreeSet::new();
    for r in &rows {
        let status: String = r.get("status");
        assert!(
            status == "succeeded" || status == "cancelled",
            "unexpected status {status}"
        );
        nodes_used.insert(r.get::<String, _>("node_id"));
        by_task
            .entry(r.get("task_name"))
            .or_default()
            .push((r.get("scheduled_at"), r.get("ticks_collapsed")));
    }
    assert_eq!(by_task.len(), 20);
    for (task, runs) in &by_task {
        let ticks: BTreeSet<_> = runs.iter().map(|(t, _)| *t).collect();
        assert_eq!(ticks.len(), runs.len(), "{task}: a tick ran twice");
        // Every second between the first and the last tick is served by exactly one run: its own,
        // or folded into the run before it.
        let covered: i64 = runs.iter().map(|(_, c)| 1 + i64::from(*c)).sum::<i64>()
            - i64::from(runs.last().unwrap().1);
        let span = (runs.last().unwrap().0 - runs.first().unwrap().0).num_seconds() + 1;
        assert_eq!(
            covered, span,
            "{task}: ticks missing between first and last run"
        );
        assert!(runs.len() >= 30, "{task}: only {} runs", runs.len());
    }
    assert_eq!(
        rec.max_overlap.load(Ordering::SeqCst),
        1,
        "a task ran twice at the same time"
    );
    assert!(
        nodes_used.len() >= 2,
        "work was spread over the nodes: {nodes_used:?}"
    );
    db.cleanup().await;
}

/// A handler running three times its lock lifetime keeps its lock (renewed by the watchdog) and
/// is never started twice, though another node is polling for it the whole time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_handler_is_renewed_and_never_started_twice() {
    scheduler_tests::init_tracing();
    let db = migrated_schema("renew").await;
    let rec = Arc::new(Recorder::default());
    let config = doc(vec![entry("long.renewed", "* * * * * *")]);
    let build = |id: &str| {
        node(&db, id, tasks("long."))
            .lock_lifetime(Duration::from_secs(1))
            .lock_renew_interval(Duration::from_millis(250))
            .poll_interval(Duration::from_millis(200))
            .config_document(config.clone())
            .state(Arc::clone(&rec))
            .build()
            .unwrap()
    };
    let a = start(build("a"));
    let b = start(build("b"));
    let pool = pool(&db);
    wait_until(Duration::from_secs(60), "two long runs finished", || {
        let pool = pool.clone();
        async move {
            sqlx::query_scalar::<_, i64>(
                "SELECT count(*) FROM scheduler_runs WHERE task_name = 'long.renewed' AND status = 'succeeded'",
            )
            .fetch_one(&pool)
            .await
            .unwrap()
                >= 2
        }
    })
    .await;
    a.stop().await;
    b.stop().await;
    assert_eq!(count_runs(&db, "long.renewed", "lost").await, 0);
    assert_eq!(
        rec.max_overlap.load(Ordering::SeqCst),
        1,
        "the task ran twice at once"
    );
    // Each run outlived the lock lifetime several times over.
    let longest: f64 = sqlx::query_scalar(
        "SELECT max(extract(epoch FROM finished_at - started_at))::float8 FROM scheduler_runs WHERE status = 'succeeded'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert!(longest >= 3.0, "runs lasted {longest}s, expected ~3.3s");
    db.cleanup().await;
}

/// A run longer than its interval is followed by one run right after it: no overlap, no burst,
/// the skipped ticks counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overrunning_handler_runs_once_after_finishing() {
    scheduler_tests::init_tracing();
    let db = migrated_schema("overrun").await;
    let rec = Arc::new(Recorder::default());
    let n = start(
        node(&db, "a", tasks("overrun."))
            .config_document(doc(vec![entry("overrun.task", "* * * * * *")]))
            .state(Arc::clone(&rec))
            .build()
            .unwrap(),
    );
    let pool = pool(&db);
    wait_until(Duration::from_secs(60), "three overrunning runs", || {
        let pool = pool.clone();
        async move {
            sqlx::query_scalar::<_, i64>(
                "SELECT count(*) FROM scheduler_runs WHERE status = 'succeeded'",
            )
            .fetch_one(&pool)
            .await
            .unwrap()
                >= 3
        }
    })
    .await;
    n.stop().await;
    assert_eq!(rec.max_overlap.load(Ordering::SeqCst), 1);
    let rows = sqlx::query(
        "SELECT started_at, finished_at, ticks_collapsed FROM scheduler_runs WHERE status = 'succeeded' ORDER BY started_at",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    for pair in rows.windows(2) {
        let prev_end: DateTime<Utc> = pair[0].get("finished_at");
        let next_start: DateTime<Utc> = pair[1].get("started_at");
        assert!(next_start >= prev_end, "runs overlapped");
        let collapsed: i32 = pair[1].get("ticks_collapsed");
        assert!(
            collapsed >= 1,
            "the ticks missed during a 2.5 s run are folded into one run"
        );
    }
    db.cleanup().await;
}

/// Handler errors and panics are recorded as `failed` with the message; the node keeps running.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn panics_and_errors_are_recorded_and_the_node_lives() {
    scheduler_tests::init_tracing();
    let db = migrated_schema("panic").await;
    let rec = Arc::new(Recorder::default());
    let registry = scheduler::TaskRegistry::collect()
        .unwrap()
        .retain(|n| n == "panic.task" || n == "fails.task");
    let n = start(
        node(&db, "a", registry)
            .config_document(doc(vec![
                entry("panic.task", "* * * * * *"),
                entry("fails.task", "* * * * * *"),
            ]))
            .state(Arc::clone(&rec))
            .build()
            .unwrap(),
    );
    wait_until(
        Duration::from_secs(30),
        "panics, successes and failures recorded",
        || async {
            let p = run_statuses(&db, "panic.task").await;
            let f = run_statuses(&db, "fails.task").await;
            p.get("failed").copied().unwrap_or(0) >= 2
                && p.get("succeeded").copied().unwrap_or(0) >= 2
                && f.get("failed").copied().unwrap_or(0) >= 2
        },
    )
    .await;
    n.stop().await;
    let pool = pool(&db);
    let panic_error: String = sqlx::query_scalar(
        "SELECT error FROM scheduler_runs WHERE task_name = 'panic.task' AND status = 'failed' LIMIT 1",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert!(
        panic_error.contains("handler panicked: boom at an even second"),
        "{panic_error}"
    );
    let row = sqlx::query(
        "SELECT last_status, last_error, consecutive_failures FROM scheduler_tasks WHERE name = 'fails.task'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(row.get::<String, _>("last_status"), "failed");
    assert_eq!(row.get::<String, _>("last_error"), "upstream said no");
    assert!(row.get::<i32, _>("consecutive_failures") >= 2);
    db.cleanup().await;
}

/// Graceful shutdown: a handler that honours the cancellation finishes as `succeeded`; one that
/// ignores it is stopped after the drain timeout, recorded `cancelled`, its lock released and its
/// tick handed over, so another node runs it at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_shutdown_drains_and_hands_over() {
    scheduler_tests::init_tracing();
    let db = migrated_schema("drain").await;
    let rec = Arc::new(Recorder::default());
    let config = doc(vec![
        entry("drain.polite", "0 0 1 1 *"),
        entry("drain.stubborn", "0 0 1 1 *"),
    ]);
    let a = start(
        node(&db, "a", tasks("drain."))
            .shutdown_timeout(Duration::from_millis(500))
            .config_document(config.clone())
            .state(Arc::clone(&rec))
            .build()
            .unwrap(),
    );
    let pool = pool(&db);
    trigger_all_now(&db, 2).await;
    wait_until(Duration::from_secs(20), "both handlers running", || async {
        rec.starts_of("drain.polite") == 1 && rec.starts_of("drain.stubborn") == 1
    })
    .await;
    a.stop().await;
    assert_eq!(count_runs(&db, "drain.polite", "succeeded").await, 1);
    assert_eq!(count_runs(&db, "drain.stubborn", "interrupted").await, 1);
    let row = sqlx::query(
        "SELECT lock_token IS NULL AS free, next_run_at <= now() AS due FROM scheduler_tasks WHERE name = 'drain.stubborn'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert!(row.get::<bool, _>("free"), "lock released");
    assert!(row.get::<bool, _>("due"), "tick handed over");

    let b = start(
        node(&db, "b", tasks("drain."))
            .shutdown_timeout(Duration::from_millis(200))
            .config_document(config)
            .state(Arc::clone(&rec))
            .build()
            .unwrap(),
    );
    wait_until(
        Duration::from_secs(20),
        "node b takes the handed-over tick",
        || async { rec.starts_of("drain.stubborn") == 2 },
    )
    .await;
    b.stop().await;
    let nodes: Vec<String> = sqlx::query_scalar(
        "SELECT node_id FROM scheduler_runs WHERE task_name = 'drain.stubborn' ORDER BY id",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(nodes, ["a", "b"]);
    let stopped: i64 =
        sqlx::query_scalar("SELECT count(*) FROM scheduler_nodes WHERE stopped_at IS NOT NULL")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(stopped, 2, "both nodes marked stopped");
    db.cleanup().await;
}

/// A node claims only the tasks its binary registers (rolling deploys).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_claims_only_registered_tasks() {
    scheduler_tests::init_tracing();
    let db = migrated_schema("deploy").await;
    let rec = Arc::new(Recorder::default());
    let config = doc(vec![
        entry("deploy.old", "* * * * * *"),
        entry("deploy.new", "* * * * * *"),
    ]);
    // The old binary knows only deploy.old; the new one both.
    let old = scheduler::TaskRegistry::collect()
        .unwrap()
        .retain(|n| n == "deploy.old");
    let a = start(
        node(&db, "old", old)
            .config_document(config.clone())
            .state(Arc::clone(&rec))
            .build()
            .unwrap(),
    );
    wait_until(
        Duration::from_secs(20),
        "old node runs deploy.old",
        || async { rec.starts_of("deploy.old") >= 2 },
    )
    .await;
    assert_eq!(
        rec.starts_of("deploy.new"),
        0,
        "old node never runs a task it does not have"
    );
    let b = start(
        node(&db, "new", tasks("deploy."))
            .config_document(config)
            .state(Arc::clone(&rec))
            .build()
            .unwrap(),
    );
    wait_until(
        Duration::from_secs(20),
        "new node runs deploy.new",
        || async { rec.starts_of("deploy.new") >= 2 },
    )
    .await;
    a.stop().await;
    b.stop().await;
    let wrong: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM scheduler_runs WHERE task_name = 'deploy.new' AND node_id = 'old'",
    )
    .fetch_one(&pool(&db))
    .await
    .unwrap();
    assert_eq!(wrong, 0);
    db.cleanup().await;
}

/// After all nodes were down, an overdue task runs once (not once per missed tick), the run says
/// how many ticks it folded in, and the schedule resumes in the future.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overdue_task_runs_once_after_downtime() {
    scheduler_tests::init_tracing();
    let db = migrated_schema("overdue").await;
    let pool = pool(&db);
    // As left by a cluster that went down 2 hours ago: every-minute task, next run long past.
    sqlx::query(
        "INSERT INTO scheduler_tasks (name, cron, timezone, enabled, next_run_at) VALUES ('overdue.task', '* * * * *', 'UTC', true, date_trunc('minute', now()) - interval '2 hours')",
    )
    .execute(&pool)
    .await
    .unwrap();
    let rec = Arc::new(Recorder::default());
    // Re-registration with the same config must not overwrite the overdue next run.
    let n = start(
        node(&db, "a", tasks("overdue."))
            .config_document(doc(vec![entry("overdue.task", "* * * * *")]))
            .state(Arc::clone(&rec))
            .build()
            .unwrap(),
    );
    wait_until(Duration::from_secs(20), "the overdue run", || async {
        count_runs(&db, "overdue.task", "succeeded").await == 1
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    n.stop().await;
    let rows =
        sqlx::query("SELECT ticks_collapsed FROM scheduler_runs WHERE task_name = 'overdue.task'")
            .fetch_all(&pool)
            .await
            .unwrap();
    assert_eq!(rows.len(), 1, "one run, not a burst of catch-ups");
    let collapsed: i32 = rows[0].get("ticks_collapsed");
    assert!(
        (119..=121).contains(&collapsed),
        "ticks_collapsed = {collapsed}"
    );
    let future: bool = sqlx::query_scalar(
        "SELECT next_run_at > now() FROM scheduler_tasks WHERE name = 'overdue.task'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert!(future);
    db.cleanup().await;
}

/// An expired lock whose holder died between claim and start is released even though the task's
/// next run is in the future (Agenda's "jobs that silently stop").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_lock_on_a_future_task_is_released() {
    scheduler_tests::init_tracing();
    let db = migrated_schema("expired").await;
    let pool = pool(&db);
    sqlx::query(
        "INSERT INTO scheduler_tasks (name, cron, timezone, enabled, next_run_at, lock_owner, lock_token, lock_expires_at) VALUES ('overdue.task', '0 0 1 1 *', 'UTC', true, now() + interval '1 day', 'dead-node', gen_random_uuid(), now() - interval '1 second')",
    )
    .execute(&pool)
    .await
    .unwrap();
    let n = start(
        node(&db, "a", tasks("overdue."))
            .state(Arc::new(Recorder::default()))
            .build()
            .unwrap(),
    );
    wait_until(Duration::from_secs(20), "lock released", || {
        let pool = pool.clone();
        async move {
            sqlx::query_scalar::<_, bool>("SELECT lock_token IS NULL FROM scheduler_tasks")
                .fetch_one(&pool)
                .await
                .unwrap()
        }
    })
    .await;
    n.stop().await;
    let next_in_future: bool =
        sqlx::query_scalar("SELECT next_run_at > now() FROM scheduler_tasks")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert!(
        next_in_future,
        "a released lock without a lost run does not trigger a run"
    );
    db.cleanup().await;
}

/// A lock taken over while the handler runs (here: stolen by hand) is noticed at the next
/// renewal: the handler is stopped at once (its gate closes before it could react), the run is
/// recorded `interrupted`, and the new holder's lock is left alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stolen_lock_stops_the_handler_and_records_the_run_lost() {
    scheduler_tests::init_tracing();
    let db = migrated_schema("steal").await;
    let rec = Arc::new(Recorder::default());
    let n = start(
        node(&db, "a", tasks("steal."))
            .lock_lifetime(Duration::from_secs(1))
            .lock_renew_interval(Duration::from_millis(250))
            .config_document(doc(vec![entry("steal.task", "0 0 1 1 *")]))
            .state(Arc::clone(&rec))
            .build()
            .unwrap(),
    );
    let pool = pool(&db);
    trigger_all_now(&db, 1).await;
    wait_until(Duration::from_secs(20), "the handler runs", || async {
        count_runs(&db, "steal.task", "running").await == 1
    })
    .await;
    sqlx::query(
        "UPDATE scheduler_tasks SET lock_owner = 'thief', lock_token = gen_random_uuid(), lock_expires_at = now() + interval '1 hour'",
    )
    .execute(&pool)
    .await
    .unwrap();
    wait_until(
        Duration::from_secs(20),
        "the run recorded interrupted",
        || async { count_runs(&db, "steal.task", "interrupted").await == 1 },
    )
    .await;
    assert_eq!(
        rec.cancellations(),
        0,
        "another node may be running it: the handler is stopped at once, never polled again"
    );
    let owner: String = sqlx::query_scalar("SELECT lock_owner FROM scheduler_tasks")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(
        owner, "thief",
        "the new holder's lock is not released by the old one"
    );
    let error: String = sqlx::query_scalar("SELECT error FROM scheduler_runs")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert!(error.contains("another node released it"), "{error}");
    n.stop().await;
    db.cleanup().await;
}

quick_tasks! { stuck_task = "stuck.task" }

/// Without any config to reconcile, an enabled task that lost its next run is scheduled again
/// from its stored cron by the node's maintenance, and runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_enabled_task_without_a_next_run_is_rescheduled_without_a_config() {
    scheduler_tests::init_tracing();
    let db = migrated_schema("stuck").await;
    sqlx::query(
        "INSERT INTO scheduler_tasks (name, cron, timezone, enabled, next_run_at)
         VALUES ('stuck.task', '* * * * * *', 'UTC', true, NULL)",
    )
    .execute(&pool(&db))
    .await
    .unwrap();
    let rec = Arc::new(Recorder::default());
    let n = start(
        node(&db, "a", tasks("stuck."))
            .state(Arc::clone(&rec))
            .build()
            .unwrap(),
    );
    wait_until(Duration::from_secs(20), "it runs", || async {
        rec.starts_of("stuck.task") >= 1
    })
    .await;
    n.stop().await;
    db.cleanup().await;
}
