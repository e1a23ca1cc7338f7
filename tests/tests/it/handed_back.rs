//! A run handed back before it started (claimed as its node began to drain) is history, not
//! the task's last run: the task's last status, error, end and failure streak stay those of
//! the run that last ran, and the tick is due again at once.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use common::*;
use scheduler::store::Store;
use scheduler::testing::store::RunStatus;
use scheduler::{TaskContext, task};

use crate::guarantees::SlowClaims;

on_both_backends!(
    threads = 2;
    a_run_handed_back_unstarted_leaves_the_tasks_last_run_as_it_was,
);

#[task(name = "handback.task")]
async fn handback_task(ctx: TaskContext) {
    let _guard = recorder(&ctx).enter(&ctx);
    recorder(&ctx).finished(&ctx);
}

/// The task runs once (`succeeded`); its tick is due again and claimed by a node that begins
/// to stop during the claim: that run is handed back unstarted and recorded `interrupted` in
/// the history, while the task's row still tells of the run that succeeded.
async fn a_run_handed_back_unstarted_leaves_the_tasks_last_run_as_it_was(db: &TestDb) {
    let rec = Arc::new(Recorder::default());
    let setup = start(
        node(db, "setup", tasks("none."))
            .config_document(doc(vec![]))
            .build()
            .unwrap(),
    );
    setup.stop().await;
    db.insert_task("handback.task", "0 0 1 1 *", Some(Utc::now()))
        .await;
    let first = start(
        node(db, "first", tasks("handback."))
            .state(Arc::clone(&rec))
            .build()
            .unwrap(),
    );
    wait_until(
        Duration::from_secs(30),
        "the first run recorded",
        || async { db.task("handback.task").await.last_status == Some(RunStatus::Succeeded) },
    )
    .await;
    first.stop().await;
    assert_eq!(
        rec.finishes.lock().unwrap().len(),
        1,
        "the handler's own record"
    );
    let before = db.task("handback.task").await;

    // The tick due again, claimed as the next node begins to stop.
    db.set_next_run(Some("handback.task"), Some(db.now())).await;
    let slow = Arc::new(SlowClaims {
        inner: db.node_store(2),
        claiming: tokio::sync::Notify::new(),
    });
    let n = start(
        node(db, "a", tasks("handback."))
            .store(Arc::clone(&slow) as Arc<dyn Store>)
            .state(Arc::clone(&rec))
            .build()
            .unwrap(),
    );
    slow.claiming.notified().await;
    n.stop().await;

    assert_eq!(
        rec.starts_of("handback.task"),
        1,
        "only the first run started"
    );
    let runs = db.runs(Some("handback.task")).await;
    assert_eq!(runs.len(), 2, "{runs:?}");
    assert_eq!(runs[1].status, RunStatus::Interrupted, "the history tells");
    let error = runs[1].error.as_deref().unwrap_or_default();
    assert!(error.contains("before starting"), "{error}");
    assert_eq!(runs[1].started_at, None, "never started");

    let task = db.task("handback.task").await;
    assert_eq!(task.lock_owner, None, "lock released");
    assert!(
        task.next_run_at.is_some_and(|t| t <= db.now()),
        "due again: {task:?}"
    );
    assert_eq!(
        task.last_status,
        Some(RunStatus::Succeeded),
        "the last run is the one that ran: {task:?}"
    );
    assert_eq!(task.last_error, before.last_error);
    assert_eq!(task.last_finished_at, before.last_finished_at);
    assert_eq!(task.consecutive_failures, before.consecutive_failures);
}
