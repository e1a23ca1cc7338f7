//! Run policies against a real store: timeouts, retries, misfire handling, manual runs,
//! missed-run detection, and the events they raise.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use scheduler::events::SchedulerEvent;
use scheduler::{TaskContext, task};

/// Ignores cancellation and would run for a minute.
#[task(name = "timeout.stubborn", timeout = "1s")]
async fn timeout_stubborn(ctx: TaskContext) {
    let _guard = recorder(&ctx).enter(&ctx);
    tokio::time::sleep(Duration::from_secs(60)).await;
    recorder(&ctx).finished(&ctx);
}

/// Stops when told.
#[task(name = "timeout.polite", timeout = "1s")]
async fn timeout_polite(ctx: TaskContext) -> Result<(), scheduler::Interrupted> {
    let _guard = recorder(&ctx).enter(&ctx);
    tokio::select! {
        _ = ctx.cancelled() => {
            recorder(&ctx).note_cancelled();
            Err(ctx.interrupted())
        }
        _ = tokio::time::sleep(Duration::from_secs(60)) => Ok(()),
    }
}

/// A run past its timeout is told through its context, then stopped (a handler that ignores
/// the request is never polled again), recorded `timed_out`, and raises `run.timed_out`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_past_its_timeout_is_stopped_and_recorded_timed_out() {
    scheduler_tests::init_tracing();
    let db = migrated_schema("timeout").await;
    let rec = Arc::new(Recorder::default());
    let scheduler = node(&db, "a", tasks("timeout."))
        .config_document(doc(vec![
            entry("timeout.stubborn", "0 0 1 1 *"),
            entry("timeout.polite", "0 0 1 1 *"),
        ]))
        .state(Arc::clone(&rec))
        .build()
        .unwrap();
    let mut events = scheduler.subscribe();
    let n = start(scheduler);
    trigger_all_now(&db, 2).await;
    wait_until(Duration::from_secs(30), "both timed out", || async {
        count_runs(&db, "timeout.stubborn", "timed_out").await == 1
            && count_runs(&db, "timeout.polite", "timed_out").await == 1
    })
    .await;
    n.stop().await;
    assert_eq!(rec.cancellations(), 1, "the polite one was told");
    assert!(rec.finishes.lock().unwrap().is_empty(), "neither ran on");
    let errors: Vec<String> =
        sqlx::query_scalar("SELECT error FROM scheduler_runs ORDER BY task_name")
            .fetch_all(&pool(&db))
            .await
            .unwrap();
    assert!(
        errors.iter().all(|e| e.contains("timeout of 1s")),
        "{errors:?}"
    );
    let mut timed_out = 0;
    while let Ok(Some(e)) = tokio::time::timeout(Duration::from_millis(100), events.recv()).await {
        if let SchedulerEvent::RunTimedOut { .. } = e {
            timed_out += 1;
        }
    }
    assert_eq!(timed_out, 2);
    db.cleanup().await;
}
