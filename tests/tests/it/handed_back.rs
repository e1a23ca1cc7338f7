//! A run handed back before it started (claimed as its node began to drain) is history, not
//! the task's last run: the task's last start, status, error, end and failure streak stay
//! those of the run that last ran, and the tick is due again at once. A backfill's run handed
//! back so puts its tick back: the backfill runs it later (here on another node), and the run
//! is `run.interrupted`, not `run.abandoned` (no alert: no handler ran).

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, DurationRound, TimeDelta, Utc};
use common::*;
use scheduler::events::SchedulerEvent;
use scheduler::store::Store;
use scheduler::testing::backfill::BackfillRequest;
use scheduler::testing::operate::{self, Actor};
use scheduler::testing::store::{IncidentQuery, RunStatus};
use scheduler::{TaskContext, task};

use crate::guarantees::SlowClaims;

on_both_backends!(
    threads = 2;
    a_run_handed_back_unstarted_leaves_the_tasks_last_run_as_it_was,
    a_backfill_run_handed_back_unstarted_puts_its_tick_back,
);

#[task(name = "handback.task")]
async fn handback_task(ctx: TaskContext) {
    let _guard = recorder(&ctx).enter(&ctx);
    recorder(&ctx).finished(&ctx);
}

/// The task runs once (`succeeded`); its tick is due again and claimed by a node that begins
/// to stop during the claim: that run is handed back unstarted and recorded `interrupted` in
/// the history, while the task's row still tells of the run that succeeded, its start included.
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
    assert_eq!(
        task.last_run_at, before.last_run_at,
        "the last start is the run that started, not the start planned for the one handed back"
    );
    assert_eq!(task.last_finished_at, before.last_finished_at);
    assert_eq!(task.consecutive_failures, before.consecutive_failures);
}

const BACKFILLED: &str = "handbackfill.hourly";

#[task(name = "handbackfill.hourly")]
async fn handbackfill_hourly(ctx: TaskContext) {
    let _guard = recorder(&ctx).enter(&ctx);
    recorder(&ctx).finished(&ctx);
}

/// How often the handler started each of `ticks`.
fn starts_per_tick(rec: &Recorder, ticks: &[DateTime<Utc>]) -> Vec<usize> {
    let starts = rec.starts.lock().unwrap();
    ticks
        .iter()
        .map(|t| {
            starts
                .iter()
                .filter(|(task, tick, _)| task == BACKFILLED && tick == t)
                .count()
        })
        .collect()
}

/// A backfill of three past ticks; its first run is claimed as the node begins to stop, and
/// handed back unstarted. Its tick is put back: a second node runs every tick exactly once (the
/// handler's own record), the backfill is done with all three succeeded, and the run handed
/// back is `run.interrupted`, never `run.abandoned`, with no incident.
async fn a_backfill_run_handed_back_unstarted_puts_its_tick_back(db: &TestDb) {
    let base = (Utc::now() - TimeDelta::days(2))
        .duration_trunc(TimeDelta::days(1))
        .unwrap();
    let ticks: Vec<_> = (0..3).map(|h| base + TimeDelta::hours(h)).collect();
    let next_hour = Utc::now().duration_trunc(TimeDelta::hours(1)).unwrap() + TimeDelta::hours(1);
    db.insert_task(BACKFILLED, "0 * * * *", Some(next_hour))
        .await;
    let request = BackfillRequest::new(BACKFILLED, ticks[0], ticks[2]).pace(Duration::ZERO);
    let id = operate::backfill(db.api(), &request, &Actor::new("alice", "test"))
        .await
        .unwrap()
        .expect("accepted")
        .id
        .expect("recorded");
    let config = || doc(vec![entry(BACKFILLED, "0 * * * *")]);

    let rec = Arc::new(Recorder::default());
    let slow = Arc::new(SlowClaims {
        inner: db.node_store(2),
        claiming: tokio::sync::Notify::new(),
    });
    let draining = node(db, "a", tasks("handbackfill."))
        .store(Arc::clone(&slow) as Arc<dyn Store>)
        .config_document(config())
        .state(Arc::clone(&rec))
        .build()
        .unwrap();
    let mut events = draining.subscribe();
    let n = start(draining);
    slow.claiming.notified().await;
    n.stop().await;
    assert_eq!(rec.starts_of(BACKFILLED), 0, "nothing started");
    let runs = db.runs(Some(BACKFILLED)).await;
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(runs[0].status, RunStatus::Interrupted);
    assert_eq!(runs[0].started_at, None, "never started");
    let mut kinds = Vec::new();
    while let Ok(Some(e)) = tokio::time::timeout(Duration::from_millis(100), events.recv()).await {
        let e = e.into_inner();
        if matches!(
            e,
            SchedulerEvent::RunInterrupted { .. } | SchedulerEvent::RunAbandoned { .. }
        ) {
            kinds.push(e.kind());
        }
    }
    assert_eq!(kinds, ["run.interrupted"], "handed back, not abandoned");

    let second = start(
        node(db, "b", tasks("handbackfill."))
            .config_document(config())
            .state(Arc::clone(&rec))
            .build()
            .unwrap(),
    );
    wait_until(Duration::from_secs(60), "the backfill is done", || async {
        let (record, _) = db.api().backfill(id).await.unwrap().expect("recorded");
        record.state() == "done"
    })
    .await;
    second.stop().await;
    assert_eq!(
        starts_per_tick(&rec, &ticks),
        [1, 1, 1],
        "every tick ran exactly once, the one handed back included"
    );
    assert_eq!(
        rec.finishes.lock().unwrap().len(),
        3,
        "the handler's own record"
    );
    let (record, _) = db.api().backfill(id).await.unwrap().expect("recorded");
    assert_eq!(
        (record.progress.total, record.progress.succeeded),
        (3, 3),
        "{record:?}"
    );
    let incidents = db
        .api()
        .incidents(&IncidentQuery::new(100).task(BACKFILLED))
        .await
        .unwrap();
    assert!(incidents.is_empty(), "{incidents:?}");
}
