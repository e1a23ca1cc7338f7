//! Faults a node must survive: being killed mid-run, and its database restarting under it.

use crate::common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use scheduler::testing::store::RunStatus;
use scheduler::{TaskContext, task};
use scheduler_tests::TempCluster;
use sqlx::Row;

scheduler_tests::postgres_tests! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    killed_node_is_taken_over,
    an_at_most_once_task_is_not_rerun_after_a_crash,
    node_survives_a_database_restart,
    a_handler_cut_off_from_the_database_is_stopped_and_rerun,
}

/// The survivor's implementation of the task the killed node was running.
#[task(name = "kill.slow")]
async fn kill_slow(ctx: TaskContext) {
    let _guard = recorder(&ctx).enter(&ctx);
}

/// The survivor's implementation of the at-most-once task.
#[task(name = "kill.never", recovery = "never")]
async fn kill_never(ctx: TaskContext) {
    let _guard = recorder(&ctx).enter(&ctx);
}

#[task(name = "restart.tick")]
async fn restart_tick(ctx: TaskContext) {
    let _guard = recorder(&ctx).enter(&ctx);
}

/// Starts a victim process running `task` (triggered now), waits until it runs, SIGKILLs it,
/// and starts a survivor in-process. Returns the schema, the survivor, its recorder and the kill
/// instant.
async fn kill_a_victim_running(
    task: &str,
    tag: &str,
) -> (TestDb, RunningNode, Arc<Recorder>, Instant) {
    let db = TestDb::postgres(tag).await;
    let dir = tempfile_dir(tag);
    let config = dir.join("tasks.json");
    std::fs::write(
        &config,
        format!(r#"{{"tasks":[{{"name":"{task}","enabled":true,"cron":"0 0 1 1 *","timezone":"UTC"}}]}}"#),
    )
    .unwrap();
    let mut victim = std::process::Command::new(env!("CARGO_BIN_EXE_test_node"))
        .env("DATABASE_URL", &db.pg().url)
        .env("SCHEDULER_SCHEMA", &db.pg().schema)
        .env("SCHEDULER_NODE_ID", "victim")
        .env("SCHEDULER_LOCK_LIFETIME", "2s")
        .env("SCHEDULER_POLL_INTERVAL", "500ms")
        .env("SCHEDULER_CONFIG", &config)
        .env("RUST_LOG", "warn")
        .spawn()
        .expect("start the victim node");
    trigger_all_now(&db, 1).await;
    wait_until(
        Duration::from_secs(20),
        "the victim runs the task",
        || async { db.count_runs(task, RunStatus::Running).await == 1 },
    )
    .await;
    victim.kill().expect("SIGKILL the victim");
    victim.wait().unwrap();
    let killed_at = Instant::now();
    let _ = std::fs::remove_dir_all(dir);

    let prefix = format!("{}.", task.split('.').next().unwrap());
    let rec = Arc::new(Recorder::default());
    let survivor = start(
        node(&db, "survivor", tasks(&prefix))
            .poll_interval(Duration::from_millis(500))
            .state(Arc::clone(&rec))
            .build()
            .unwrap(),
    );
    (db, survivor, rec, killed_at)
}

/// A node killed with SIGKILL mid-run leaves its lock behind; once it expires and has been
/// watched expired for the takeover wait, another node marks the orphaned run `lost` and runs
/// the task again, once.
async fn killed_node_is_taken_over() {
    scheduler_tests::init_tracing();
    let (db, survivor, rec, killed_at) = kill_a_victim_running("kill.slow", "kill").await;
    wait_until(
        Duration::from_secs(30),
        "the survivor reruns the task",
        || async { rec.starts_of("kill.slow") == 1 },
    )
    .await;
    let recovery = killed_at.elapsed();
    tokio::time::sleep(Duration::from_millis(500)).await;
    survivor.stop().await;
    eprintln!("recovered {recovery:?} after the kill (lock lifetime 2s)");

    let runs =
        sqlx::query("SELECT node_id, status, error, scheduled_at FROM scheduler_runs ORDER BY id")
            .fetch_all(&pool(&db))
            .await
            .unwrap();
    assert_eq!(runs.len(), 2, "the lost run and exactly one rerun");
    assert_eq!(runs[0].get::<String, _>("node_id"), "victim");
    assert_eq!(runs[0].get::<String, _>("status"), "lost");
    assert!(runs[0].get::<String, _>("error").contains("lock expired"));
    assert_eq!(runs[1].get::<String, _>("node_id"), "survivor");
    assert_eq!(runs[1].get::<String, _>("status"), "succeeded");
    assert_eq!(
        runs[0].get::<chrono::DateTime<chrono::Utc>, _>("scheduled_at"),
        runs[1].get::<chrono::DateTime<chrono::Utc>, _>("scheduled_at"),
        "the rerun serves the lost tick"
    );
    assert_eq!(rec.starts_of("kill.slow"), 1);
    db.cleanup().await;
}

/// With `recovery = "never"`, the run of a killed node is recorded `lost` once its lock is
/// released, and its tick is never run again (at most once).
async fn an_at_most_once_task_is_not_rerun_after_a_crash() {
    scheduler_tests::init_tracing();
    let (db, survivor, rec, _) = kill_a_victim_running("kill.never", "never").await;
    wait_until(Duration::from_secs(30), "the run recorded lost", || async {
        db.count_runs("kill.never", RunStatus::Lost).await == 1
    })
    .await;
    // Well past the moment a rerun would have started.
    tokio::time::sleep(Duration::from_secs(3)).await;
    survivor.stop().await;
    assert_eq!(rec.starts_of("kill.never"), 0, "never run again");
    let error: String =
        sqlx::query_scalar("SELECT error FROM scheduler_runs WHERE status = 'lost'")
            .fetch_one(&pool(&db))
            .await
            .unwrap();
    assert!(error.contains("recovery = never"), "{error}");
    let (free, future): (bool, bool) =
        sqlx::query_as("SELECT lock_token IS NULL, next_run_at > now() FROM scheduler_tasks")
            .fetch_one(&pool(&db))
            .await
            .unwrap();
    assert!(
        free && future,
        "lock released, the next run is the next tick"
    );
    db.cleanup().await;
}

/// The database restarts under a running node: the node keeps running, reconnects, and resumes
/// scheduling; no tick runs twice.
async fn node_survives_a_database_restart() {
    scheduler_tests::init_tracing();
    let cluster = TempCluster::start()
        .await
        .expect("a throwaway PostgreSQL cluster");
    let rec = Arc::new(Recorder::default());
    let scheduler = cluster_node(&cluster, "survivor", "restart.tick", "* * * * * *", &rec)
        .lock_lifetime(Duration::from_secs(3))
        .heartbeat_interval(Duration::from_millis(500))
        .build()
        .unwrap();
    let node = start(scheduler);
    wait_until(
        Duration::from_secs(60),
        "runs before the restart",
        || async { rec.starts_of("restart.tick") >= 2 },
    )
    .await;
    cluster.stop().await.expect("stop the database");
    tokio::time::sleep(Duration::from_secs(3)).await;
    let before = rec.starts_of("restart.tick");
    cluster
        .start_again()
        .await
        .expect("start the database again");
    wait_until(
        Duration::from_secs(60),
        "runs after the restart",
        || async { rec.starts_of("restart.tick") >= before + 3 },
    )
    .await;
    assert!(!node.handle.is_finished(), "the node kept running");
    node.stop().await;

    let pool = sqlx::PgPool::connect(&cluster.url()).await.unwrap();
    let dup: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM (SELECT scheduled_at FROM scheduler_runs GROUP BY scheduled_at HAVING count(*) > 1) d",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(dup, 0, "no tick ran twice");
    pool.close().await;
}

/// Runs until told to stop; remembers that it was.
#[task(name = "cutoff.task")]
async fn cutoff_task(ctx: TaskContext) -> Result<(), scheduler::Interrupted> {
    let _guard = recorder(&ctx).enter(&ctx);
    tokio::select! {
        _ = ctx.cancelled() => {
            recorder(&ctx).note_cancelled();
            Err(ctx.interrupted())
        }
        _ = tokio::time::sleep(Duration::from_secs(120)) => Ok(()),
    }
}

/// The database goes away under a running handler: its lock cannot be renewed, so the handler
/// is told to stop (before the lock could expire and another node take over); it says it did
/// not finish, so once the database is back the run is recorded `interrupted` and the same
/// tick runs again at once.
async fn a_handler_cut_off_from_the_database_is_stopped_and_rerun() {
    scheduler_tests::init_tracing();
    let cluster = TempCluster::start()
        .await
        .expect("a throwaway PostgreSQL cluster");
    let rec = Arc::new(Recorder::default());
    let scheduler = cluster_node(&cluster, "survivor", "cutoff.task", "* * * * * *", &rec)
        .lock_lifetime(Duration::from_secs(2))
        .lock_renew_interval(Duration::from_millis(500))
        .build()
        .unwrap();
    let node = start(scheduler);
    wait_until(Duration::from_secs(60), "the handler runs", || async {
        rec.starts_of("cutoff.task") == 1
    })
    .await;
    cluster.stop().await.expect("stop the database");
    wait_until(
        Duration::from_secs(30),
        "the handler is told to stop",
        || async { rec.cancellations() == 1 },
    )
    .await;
    cluster
        .start_again()
        .await
        .expect("start the database again");
    wait_until(Duration::from_secs(60), "the task runs again", || async {
        rec.starts_of("cutoff.task") >= 2
    })
    .await;
    node.stop().await;
    let pool = sqlx::PgPool::connect(&cluster.url()).await.unwrap();
    let runs: Vec<(String, Option<String>, chrono::DateTime<chrono::Utc>)> = sqlx::query_as(
        "SELECT status, error, scheduled_at FROM scheduler_runs ORDER BY id LIMIT 2",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(runs[0].0, "interrupted", "{runs:?}");
    assert!(
        runs[0]
            .1
            .as_deref()
            .unwrap()
            .contains("could not be renewed"),
        "{runs:?}"
    );
    assert_eq!(
        runs[1].2, runs[0].2,
        "the interrupted tick ran again: {runs:?}"
    );
    pool.close().await;
}

fn tempfile_dir(tag: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("scheduler-{tag}-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
