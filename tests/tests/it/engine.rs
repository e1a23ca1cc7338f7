//! The engine against each real store: several nodes sharing nothing but the database (on
//! SQLite, several schedulers in one process sharing its one store). Every behaviour is written
//! once and run on a fresh PostgreSQL schema and a fresh SQLite file (`on_postgres::...` and
//! `on_sqlite::...`); each has its own task-name prefix.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use chrono::{DurationRound, TimeDelta, Utc};
use common::*;
use scheduler::store::SkipReason;
use scheduler::testing::store::RunStatus;
use scheduler::{TaskContext, task};

// ---- tasks ---------------------------------------------------------------------------------

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
    let rec = recorder(&ctx);
    let _guard = rec.enter(&ctx);
    tokio::select! {
        () = tokio::time::sleep(Duration::from_millis(3_300)) => rec.finished(&ctx),
        () = ctx.cancelled() => rec.note_cancelled(),
    }
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

quick_tasks! { stuck_task = "stuck.task" }
quick_tasks! { unreadable_task = "unreadable.task", unreadable_neighbour = "unreadable.neighbour" }
quick_tasks! { order_paused = "order.paused", order_running = "order.running" }

/// One handler start: task, tick, wall clock at the start.
type Start = (String, chrono::DateTime<Utc>, chrono::DateTime<Utc>);

/// Handler starts, as the handlers saw them.
#[derive(Default)]
struct Starts(std::sync::Mutex<Vec<Start>>);

fn record_start(ctx: TaskContext) -> scheduler::__private::TaskFuture {
    Box::pin(async move {
        let now = Utc::now();
        if let Ok(starts) = ctx.state::<Arc<Starts>>() {
            starts
                .0
                .lock()
                .unwrap()
                .push((ctx.task_name().to_owned(), ctx.scheduled_at(), now));
        }
        Ok(())
    })
}

/// `n` tasks `ahead.0000`.. recording their starts (built at run time: too many to write out).
fn ahead_tasks(n: usize) -> scheduler::TaskRegistry {
    recording_tasks("ahead", n)
}

/// `n` tasks `{prefix}.0000`.. recording their starts.
fn recording_tasks(prefix: &str, n: usize) -> scheduler::TaskRegistry {
    tasks_with(prefix, n, record_start)
}

/// Handlers running at once on a node, as the handlers saw it.
#[derive(Default)]
struct Concurrency {
    now: std::sync::atomic::AtomicUsize,
    max: std::sync::atomic::AtomicUsize,
    starts: std::sync::atomic::AtomicUsize,
}

/// Counts itself in while it runs (out again however it ends, a panic too).
struct Running(Arc<Concurrency>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.now.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Runs 150 ms; every third start panics at its end.
fn busy_handler(ctx: TaskContext) -> scheduler::__private::TaskFuture {
    Box::pin(async move {
        let Ok(seen) = ctx.state::<Arc<Concurrency>>() else {
            return Ok(());
        };
        let now = seen.now.fetch_add(1, Ordering::SeqCst) + 1;
        seen.max.fetch_max(now, Ordering::SeqCst);
        let start = seen.starts.fetch_add(1, Ordering::SeqCst);
        let _running = Running(Arc::clone(seen));
        tokio::time::sleep(Duration::from_millis(150)).await;
        if start % 3 == 0 {
            panic!("a handler that panics gives its slot back all the same");
        }
        Ok(())
    })
}

// ---- behaviours, each run on both backends ---------------------------------------------------

on_both_backends!(
    threads = 4;
    every_tick_runs_exactly_once_across_three_nodes,
    long_handler_is_renewed_and_never_started_twice,
    overrunning_handler_runs_once_after_finishing,
    panics_and_errors_are_recorded_and_the_node_lives,
    graceful_shutdown_drains_and_hands_over,
    a_node_claims_only_registered_tasks,
    overdue_task_runs_once_after_downtime,
    expired_lock_on_a_future_task_is_released,
    a_stolen_lock_stops_the_handler_and_records_the_run_lost,
    an_enabled_task_without_a_next_run_is_rescheduled_without_a_config,
    a_stored_schedule_the_node_cannot_read_is_skipped_and_recorded_once,
    the_config_is_applied_before_anything_is_claimed,
    ticks_claimed_ahead_start_on_their_tick_and_never_before,
    the_history_records_when_handlers_started_and_nothing_for_runs_never_started,
    a_node_runs_at_most_max_concurrent_handlers_and_refills_every_slot,
);

/// 20 tasks every second on three nodes for at least 30 ticks: every tick of every task runs
/// exactly once (a tick folded into a late run is counted, never run twice). On SQLite the
/// seconds are steps of the test clock, so the nodes contend for each tick as fast as they claim.
async fn every_tick_runs_exactly_once_across_three_nodes(db: &TestDb) {
    let min_runs = 30;
    let rec = Arc::new(Recorder::default());
    let names: Vec<String> = (0..20).map(|i| format!("once.{i:02}")).collect();
    let config = doc(names.iter().map(|n| entry(n, "* * * * * *")).collect());
    let nodes: Vec<_> = ["a", "b", "c"]
        .iter()
        .map(|id| {
            start(
                node_with(db, id, tasks("once."), config.clone(), &rec)
                    .build()
                    .unwrap(),
            )
        })
        .collect();
    wait_stepping(
        db,
        Duration::from_secs(90),
        "31 ticks of every task",
        || async {
            // The handlers' record first (cheap), then the store's.
            names.iter().all(|n| rec.starts_of(n) >= 31) && {
                let mut by_task: BTreeMap<String, usize> = BTreeMap::new();
                for r in db.runs(None).await {
                    *by_task.entry(r.task_name).or_default() += 1;
                }
                by_task.len() == 20 && by_task.values().all(|n| *n > min_runs)
            }
        },
    )
    .await;
    for n in nodes {
        n.stop().await;
    }

    let mut by_task: BTreeMap<String, Vec<(chrono::DateTime<Utc>, i64)>> = BTreeMap::new();
    let mut nodes_used = BTreeSet::new();
    let mut runs = db.runs(None).await;
    runs.sort_by(|a, b| (&a.task_name, a.scheduled_at).cmp(&(&b.task_name, b.scheduled_at)));
    for r in runs {
        // The nodes stop one after another: one may drain with a run claimed ahead of its tick
        // (or as the drain began) that never started. That run is recorded `interrupted` and its
        // tick handed over (RELIABILITY.md promise 3); no handler ran it, and the handlers'
        // record below still judges every start.
        if matches!(r.status, RunStatus::Interrupted) && r.started_at.is_none() {
            continue;
        }
        assert!(
            matches!(r.status, RunStatus::Succeeded | RunStatus::Cancelled),
            "unexpected status {}",
            r.status
        );
        nodes_used.insert(r.node_id);
        by_task
            .entry(r.task_name)
            .or_default()
            .push((r.scheduled_at, r.ticks_collapsed));
    }
    assert_eq!(by_task.len(), 20);
    for (task, runs) in &by_task {
        let ticks: BTreeSet<_> = runs.iter().map(|(t, _)| *t).collect();
        assert_eq!(ticks.len(), runs.len(), "{task}: a tick ran twice");
        // Every second between the first and the last tick is served by exactly one run: its own,
        // or folded into the run before it.
        let covered: i64 = runs.iter().map(|(_, c)| 1 + *c).sum::<i64>() - runs.last().unwrap().1;
        let span = (runs.last().unwrap().0 - runs.first().unwrap().0).num_seconds() + 1;
        assert_eq!(
            covered, span,
            "{task}: ticks missing between first and last run"
        );
        assert!(runs.len() >= min_runs, "{task}: only {} runs", runs.len());
        assert_eq!(
            rec.ticks_started_twice(task),
            [],
            "{task}: a handler started a tick twice"
        );
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
}

/// 500 tasks on one tick every 2 s (100 on SQLite, whose one writer on a busy machine falls
/// behind 250 runs a second and then never claims ahead), one node with 10,000 registered (so
/// it claims each tick a second ahead of it: 0.1 ms per registered task). By the handlers' own
/// clocks no run starts before its tick and each tick runs once; runs were seen waiting for
/// their tick, claimed ahead, and no recorded start precedes its tick.
async fn ticks_claimed_ahead_start_on_their_tick_and_never_before(db: &TestDb) {
    let tasks = if db.is_sqlite() { 100 } else { 500 };
    const REGISTERED: usize = 10_000;
    let starts = Arc::new(Starts::default());
    let registry = ahead_tasks(REGISTERED);
    // The others never come due (once a year), but count for the claim's lead.
    let config = doc(registry
        .iter()
        .enumerate()
        .map(|(i, d)| {
            entry(
                d.name,
                if i < tasks {
                    "*/2 * * * * *"
                } else {
                    "0 0 0 1 1 *"
                },
            )
        })
        .collect());
    let n = start(
        node_with(db, "a", registry, config, &starts)
            // The lead is bounded by a quarter of the lock lifetime: 1 s needs 4 s.
            .lock_lifetime(Duration::from_secs(8))
            .build()
            .unwrap(),
    );
    // Wait for the event (a run waiting for its tick) and for 4 ticks of every task.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(300);
    let mut seen_ahead = false;
    loop {
        // Any run recorded running before its tick was claimed ahead (on a slow disk SQLite's
        // claim of 500 runs can eat most of the lead: no margin asked for).
        seen_ahead = seen_ahead || waiting_for_its_tick(db, TimeDelta::zero()).await.is_some();
        if seen_ahead && starts.0.lock().unwrap().len() >= tasks * 4 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "within 300 s: 4 ticks of every task ({} starts) and a run seen waiting for its \
             tick ({seen_ahead})",
            starts.0.lock().unwrap().len()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    n.stop().await;

    let starts = starts.0.lock().unwrap().clone();
    let early: Vec<_> = starts.iter().filter(|(_, tick, at)| at < tick).collect();
    assert_eq!(
        early,
        Vec::<&(_, _, _)>::new(),
        "runs started before their tick"
    );
    let mut seen = BTreeSet::new();
    for (task, tick, _) in &starts {
        assert!(
            seen.insert((task, tick)),
            "{task} started its tick {tick} twice"
        );
    }
    let runs = db.runs(None).await;
    assert!(
        runs.iter()
            .all(|r| r.started_at.is_none_or(|s| s >= r.scheduled_at)),
        "a recorded start precedes its tick"
    );
}

/// A run claimed ahead and still waiting for its tick (more than `margin` away), if one is.
async fn waiting_for_its_tick(
    db: &TestDb,
    margin: TimeDelta,
) -> Option<scheduler::testing::store::RunRecord> {
    db.api()
        .runs(&scheduler::testing::store::RunQuery::latest(1000).status(RunStatus::Running))
        .await
        .unwrap()
        .into_iter()
        .find(|r| r.scheduled_at > Utc::now() + margin)
}

/// 10,000 registered tasks (so the node claims ticks a whole second ahead of them), three of
/// them every 2 s. Judged by the handlers' own clocks: every run's recorded start is when its
/// handler started (the node's measured start on the store's clock, as the lag metric sees
/// it), and a run claimed ahead that the node handed over at shutdown before its tick came has
/// no start at all.
async fn the_history_records_when_handlers_started_and_nothing_for_runs_never_started(db: &TestDb) {
    const REGISTERED: usize = 10_000;
    const RUNNING: [&str; 3] = ["lead.0000", "lead.0001", "lead.0002"];
    let starts = Arc::new(Starts::default());
    let config = doc((0..REGISTERED)
        .map(|i| {
            let name = format!("lead.{i:04}");
            // The others never come due (once a year), but count for the claim's lead.
            let cron = if RUNNING.contains(&name.as_str()) {
                "*/2 * * * * *"
            } else {
                "0 0 0 1 1 *"
            };
            entry(&name, cron)
        })
        .collect());
    let registry = recording_tasks("lead", REGISTERED);
    let n = start(
        node_with(db, "a", registry, config, &starts)
            // The lead is bounded by a quarter of the lock lifetime: 1 s needs 4 s.
            .lock_lifetime(Duration::from_secs(8))
            .build()
            .unwrap(),
    );
    wait_until(Duration::from_secs(120), "3 ticks of each task", || async {
        let starts = starts.0.lock().unwrap();
        RUNNING
            .iter()
            .all(|t| starts.iter().filter(|(task, _, _)| task == t).count() >= 3)
    })
    .await;
    // A run claimed ahead and still waiting for its tick (the claim comes a second before it):
    // stop the node now, and it is handed over before it started.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let waiting = loop {
        // 300 ms left: time enough to stop the node before the tick.
        if let Some(run) = waiting_for_its_tick(db, TimeDelta::milliseconds(300)).await {
            break run;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no run claimed ahead of its tick within 60 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    n.stop().await;

    let starts = starts.0.lock().unwrap().clone();
    let handler_start = |task: &str, tick| {
        starts
            .iter()
            .find(|(t, at, _)| t == task && *at == tick)
            .map(|(_, _, started)| *started)
    };
    assert_eq!(
        handler_start(&waiting.task_name, waiting.scheduled_at),
        None,
        "the staged run's handler never started"
    );
    let runs = db.runs(None).await;
    let staged = runs.iter().find(|r| r.id == waiting.id).expect("recorded");
    assert_eq!(staged.status, RunStatus::Interrupted, "{staged:?}");
    let mut worst = TimeDelta::zero();
    for run in &runs {
        match (
            handler_start(&run.task_name, run.scheduled_at),
            run.started_at,
        ) {
            (Some(handler), Some(recorded)) => {
                worst = worst.max((recorded - handler).abs());
            }
            (None, None) => {}
            (handler, recorded) => panic!(
                "run {} of {} (tick {}): the handler started at {handler:?}, the history says \
                 {recorded:?}",
                run.id, run.task_name, run.scheduled_at
            ),
        }
    }
    eprintln!(
        "{} runs; recorded start vs the handler's own clock: at most {} µs apart",
        runs.len(),
        worst.num_microseconds().unwrap_or(i64::MAX)
    );
    // Generous (no timing assertion): the two clocks differ by the claim's round trip at most,
    // a few milliseconds; a tick's start recorded as its tick would be off by the claim lead.
    assert!(
        worst < TimeDelta::milliseconds(250),
        "recorded starts are up to {worst} away from the handlers' own"
    );
}

/// A handler running three times its lock lifetime keeps its lock (renewed by the watchdog) and
/// is never started twice, though another node is polling for it the whole time.
async fn long_handler_is_renewed_and_never_started_twice(db: &TestDb) {
    let rec = Arc::new(Recorder::default());
    let config = doc(vec![entry("long.renewed", "* * * * * *")]);
    let build = |id: &str| {
        node_with(db, id, tasks("long."), config.clone(), &rec)
            .lock_lifetime(Duration::from_secs(1))
            .lock_renew_interval(Duration::from_millis(250))
            .poll_interval(Duration::from_millis(200))
            .build()
            .unwrap()
    };
    let a = start(build("a"));
    let b = start(build("b"));
    wait_until(
        Duration::from_secs(60),
        "two long runs finished",
        || async { db.count_runs("long.renewed", RunStatus::Succeeded).await >= 2 },
    )
    .await;
    // (Stopping the nodes asks the run in progress to stop: count before.)
    let cancelled_while_running = rec.cancellations();
    let finished = rec.finishes.lock().unwrap().len();
    a.stop().await;
    b.stop().await;
    assert_eq!(db.count_runs("long.renewed", RunStatus::Lost).await, 0);
    assert_eq!(
        rec.max_overlap.load(Ordering::SeqCst),
        1,
        "the task ran twice at once"
    );
    assert_eq!(rec.ticks_started_twice("long.renewed"), []);
    // By the handlers' own record: each run slept its whole 3.3 s (three lock lifetimes) and
    // was never asked to stop, so its lock was renewed throughout.
    assert_eq!(cancelled_while_running, 0, "a long run was asked to stop");
    assert!(finished >= 2, "{finished} runs slept their whole time");
}

/// A run longer than its interval is followed by one run right after it: no overlap, no burst,
/// the skipped ticks counted.
async fn overrunning_handler_runs_once_after_finishing(db: &TestDb) {
    let rec = Arc::new(Recorder::default());
    let config = doc(vec![entry("overrun.task", "* * * * * *")]);
    let n = start(
        node_with(db, "a", tasks("overrun."), config, &rec)
            .build()
            .unwrap(),
    );
    wait_until(
        Duration::from_secs(60),
        "three overrunning runs",
        || async { db.count_runs("overrun.task", RunStatus::Succeeded).await >= 3 },
    )
    .await;
    n.stop().await;
    assert_eq!(rec.max_overlap.load(Ordering::SeqCst), 1);
    let mut runs: Vec<_> = db
        .runs(Some("overrun.task"))
        .await
        .into_iter()
        .filter(|r| r.status == RunStatus::Succeeded)
        .collect();
    runs.sort_by_key(|r| r.started_at);
    assert!(runs.len() >= 3);
    for pair in runs.windows(2) {
        assert!(
            pair[1].started_at.expect("succeeded") >= pair[0].finished_at.unwrap(),
            "runs overlapped"
        );
        assert!(
            pair[1].ticks_collapsed >= 1,
            "the ticks missed during a 2.5 s run are folded into one run"
        );
    }
}

/// Handler errors and panics are recorded as `failed` with the message; the node keeps running.
async fn panics_and_errors_are_recorded_and_the_node_lives(db: &TestDb) {
    let rec = Arc::new(Recorder::default());
    let registry = scheduler::TaskRegistry::collect()
        .unwrap()
        .retain(|n| n == "panic.task" || n == "fails.task");
    let config = doc(vec![
        entry("panic.task", "* * * * * *"),
        entry("fails.task", "* * * * * *"),
    ]);
    let n = start(node_with(db, "a", registry, config, &rec).build().unwrap());
    wait_stepping(
        db,
        Duration::from_secs(30),
        "panics, successes and failures recorded",
        || async {
            let p = db.run_statuses("panic.task").await;
            let f = db.run_statuses("fails.task").await;
            p.get(&RunStatus::Failed).copied().unwrap_or(0) >= 2
                && p.get(&RunStatus::Succeeded).copied().unwrap_or(0) >= 2
                && f.get(&RunStatus::Failed).copied().unwrap_or(0) >= 2
        },
    )
    .await;
    // The failures as the task's row records them, read while the node runs: until it stops,
    // every run of `fails.task` ends by its handler's own error (the row and the run are
    // written together, so the two failed runs waited for are on it).
    let fails = db.task("fails.task").await;
    assert_eq!(fails.last_status, Some(RunStatus::Failed));
    assert_eq!(fails.last_error.as_deref(), Some("upstream said no"));
    assert!(fails.consecutive_failures >= 2);
    n.stop().await;
    let panic_error = db
        .runs(Some("panic.task"))
        .await
        .into_iter()
        .find(|r| r.status == RunStatus::Failed)
        .and_then(|r| r.error)
        .unwrap_or_default();
    assert!(
        panic_error.contains("handler panicked: boom at an even second"),
        "{panic_error}"
    );
    // After the stop, the row says how its last run ended: the stop may end one more run, one
    // claimed (handed back unstarted) or running (its error returned after the node asked it to
    // stop), and such a run is `interrupted` (`engine::outcome`'s table); the failures counted
    // stand.
    let last = db
        .runs(Some("fails.task"))
        .await
        .into_iter()
        .max_by_key(|r| r.id)
        .expect("runs of fails.task");
    let fails = db.task("fails.task").await;
    assert!(
        matches!(last.status, RunStatus::Failed | RunStatus::Interrupted),
        "{last:?}"
    );
    assert_eq!(fails.last_status, Some(last.status), "{last:?}");
    assert_eq!(fails.last_error, last.error, "{last:?}");
    assert!(fails.consecutive_failures >= 2);
}

/// Graceful shutdown: a handler that honours the cancellation finishes as `succeeded`; one that
/// ignores it is stopped after the drain timeout, recorded `interrupted`, its lock released and
/// its tick handed over, so another node runs it at once.
async fn graceful_shutdown_drains_and_hands_over(db: &TestDb) {
    let rec = Arc::new(Recorder::default());
    let config = doc(vec![
        entry("drain.polite", "0 0 1 1 *"),
        entry("drain.stubborn", "0 0 1 1 *"),
    ]);
    let a = start(
        node_with(db, "a", tasks("drain."), config.clone(), &rec)
            .shutdown_timeout(Duration::from_millis(500))
            .build()
            .unwrap(),
    );
    trigger_all_now(db, 2).await;
    wait_until(Duration::from_secs(20), "both handlers running", || async {
        rec.starts_of("drain.polite") == 1 && rec.starts_of("drain.stubborn") == 1
    })
    .await;
    a.stop().await;
    assert_eq!(db.count_runs("drain.polite", RunStatus::Succeeded).await, 1);
    assert_eq!(
        db.count_runs("drain.stubborn", RunStatus::Interrupted)
            .await,
        1
    );
    let stubborn = db.task("drain.stubborn").await;
    assert_eq!(stubborn.lock_owner, None, "lock released");
    assert!(
        stubborn.next_run_at.is_some_and(|t| t <= Utc::now()),
        "tick handed over: {stubborn:?}"
    );

    let b = start(
        node_with(db, "b", tasks("drain."), config, &rec)
            .shutdown_timeout(Duration::from_millis(200))
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
    let nodes: Vec<String> = db
        .runs(Some("drain.stubborn"))
        .await
        .into_iter()
        .map(|r| r.node_id)
        .collect();
    assert_eq!(nodes, ["a", "b"]);
    let stopped = db
        .api()
        .nodes()
        .await
        .unwrap()
        .iter()
        .filter(|n| n.stopped_at.is_some())
        .count();
    assert_eq!(stopped, 2, "both nodes marked stopped");
}

/// A node claims only the tasks its binary registers (rolling deploys).
async fn a_node_claims_only_registered_tasks(db: &TestDb) {
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
        node_with(db, "old", old, config.clone(), &rec)
            .build()
            .unwrap(),
    );
    wait_stepping(
        db,
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
        node_with(db, "new", tasks("deploy."), config, &rec)
            .build()
            .unwrap(),
    );
    wait_stepping(
        db,
        Duration::from_secs(20),
        "new node runs deploy.new",
        || async { rec.starts_of("deploy.new") >= 2 },
    )
    .await;
    a.stop().await;
    b.stop().await;
    let wrong = db
        .runs(Some("deploy.new"))
        .await
        .iter()
        .filter(|r| r.node_id == "old")
        .count();
    assert_eq!(wrong, 0);
    assert!(
        rec.starts
            .lock()
            .unwrap()
            .iter()
            .all(|(task, _, node)| task == "deploy.old" || node == "new"),
        "by the handlers' own record too"
    );
}

/// After all nodes were down, an overdue task runs once (not once per missed tick), the run says
/// how many ticks it folded in, and the schedule resumes in the future.
async fn overdue_task_runs_once_after_downtime(db: &TestDb) {
    // As left by a cluster that went down 2 hours ago: every-minute task, next run long past.
    let minute = db.now().duration_trunc(TimeDelta::minutes(1)).unwrap();
    db.insert_task(
        "overdue.task",
        "* * * * *",
        Some(minute - TimeDelta::hours(2)),
    )
    .await;
    let rec = Arc::new(Recorder::default());
    // Every tick up to here was missed while the cluster was down; a later one (the next minute
    // may begin while the test runs) is on time and runs in its own right.
    let back_at = db.now();
    // Re-registration with the same config must not overwrite the overdue next run.
    let config = doc(vec![entry("overdue.task", "* * * * *")]);
    let n = start(
        node_with(db, "a", tasks("overdue."), config, &rec)
            .build()
            .unwrap(),
    );
    wait_until(Duration::from_secs(20), "the overdue run", || async {
        db.count_runs("overdue.task", RunStatus::Succeeded).await >= 1
    })
    .await;
    // A while more: no catch-up run follows.
    db.elapse(Duration::from_secs(1)).await;
    n.stop().await;
    let runs: Vec<_> = db
        .runs(Some("overdue.task"))
        .await
        .into_iter()
        .filter(|r| r.scheduled_at <= back_at)
        .collect();
    assert_eq!(runs.len(), 1, "one run, not a burst of catch-ups: {runs:?}");
    assert_eq!(runs[0].status, RunStatus::Succeeded);
    let started = rec
        .starts
        .lock()
        .unwrap()
        .iter()
        .filter(|(_, tick, _)| *tick <= back_at)
        .count();
    assert_eq!(started, 1, "one start for the missed ticks");
    let collapsed = runs[0].ticks_collapsed;
    assert!(
        (119..=121).contains(&collapsed),
        "ticks_collapsed = {collapsed}"
    );
    let next = db.task("overdue.task").await.next_run_at;
    assert!(next.is_some_and(|t| t > db.now()), "{next:?}");
}

/// An expired lock whose holder died between claim and start is released even though the task's
/// next run is in the future (Agenda's "jobs that silently stop").
async fn expired_lock_on_a_future_task_is_released(db: &TestDb) {
    db.insert_task(
        "overdue.task",
        "0 0 1 1 *",
        Some(Utc::now() + TimeDelta::days(1)),
    )
    .await;
    db.set_locks("dead-node", Utc::now() - TimeDelta::seconds(1))
        .await;
    assert_eq!(
        db.task("overdue.task").await.lock_owner.as_deref(),
        Some("dead-node")
    );
    let rec = Arc::new(Recorder::default());
    let n = start(
        node(db, "a", tasks("overdue."))
            .state(Arc::clone(&rec))
            .build()
            .unwrap(),
    );
    wait_until(Duration::from_secs(20), "lock released", || async {
        db.task("overdue.task").await.lock_owner.is_none()
    })
    .await;
    n.stop().await;
    let next = db.task("overdue.task").await.next_run_at;
    assert!(
        next.is_some_and(|t| t > Utc::now()),
        "a released lock without a lost run does not trigger a run: {next:?}"
    );
    assert_eq!(rec.starts_of("overdue.task"), 0);
}

/// A lock taken over while the handler runs (here: stolen by hand) is noticed at the next
/// renewal: the handler is stopped at once (its gate closes before it could react), the run is
/// recorded `interrupted`, and the new holder's lock is left alone.
async fn a_stolen_lock_stops_the_handler_and_records_the_run_lost(db: &TestDb) {
    let rec = Arc::new(Recorder::default());
    let config = doc(vec![entry("steal.task", "0 0 1 1 *")]);
    let n = start(
        node_with(db, "a", tasks("steal."), config, &rec)
            .lock_lifetime(Duration::from_secs(1))
            .lock_renew_interval(Duration::from_millis(250))
            .build()
            .unwrap(),
    );
    trigger_all_now(db, 1).await;
    wait_until(Duration::from_secs(20), "the handler runs", || async {
        db.count_runs("steal.task", RunStatus::Running).await == 1
    })
    .await;
    db.set_locks("thief", Utc::now() + TimeDelta::hours(1))
        .await;
    wait_until(
        Duration::from_secs(20),
        "the run recorded interrupted",
        || async { db.count_runs("steal.task", RunStatus::Interrupted).await == 1 },
    )
    .await;
    assert_eq!(
        rec.cancellations(),
        0,
        "another node may be running it: the handler is stopped at once, never polled again"
    );
    assert_eq!(
        db.task("steal.task").await.lock_owner.as_deref(),
        Some("thief"),
        "the new holder's lock is not released by the old one"
    );
    let error = db.runs(Some("steal.task")).await[0]
        .error
        .clone()
        .unwrap_or_default();
    assert!(error.contains("another node released it"), "{error}");
    n.stop().await;
}

/// Without any config to reconcile, an enabled task that lost its next run is scheduled again
/// from its stored cron by the node's maintenance, and runs.
async fn an_enabled_task_without_a_next_run_is_rescheduled_without_a_config(db: &TestDb) {
    db.insert_task("stuck.task", "* * * * * *", None).await;
    let rec = Arc::new(Recorder::default());
    let n = start(
        node(db, "a", tasks("stuck."))
            .state(Arc::clone(&rec))
            .build()
            .unwrap(),
    );
    wait_until(Duration::from_secs(20), "it runs", || async {
        rec.starts_of("stuck.task") >= 1
    })
    .await;
    n.stop().await;
}

/// A due row whose stored schedule this node cannot read (written by a newer version, or by
/// hand) is not run here: the tick is recorded once as skipped with reason `invalid_schedule`,
/// the handler never starts, and the node's other tasks run on.
async fn a_stored_schedule_the_node_cannot_read_is_skipped_and_recorded_once(db: &TestDb) {
    let past = Utc::now() - TimeDelta::seconds(1);
    db.insert_task("unreadable.task", "61 * * * *", Some(past))
        .await;
    db.insert_task("unreadable.neighbour", "* * * * * *", Some(past))
        .await;
    let rec = Arc::new(Recorder::default());
    let n = start(
        node(db, "a", tasks("unreadable."))
            .state(Arc::clone(&rec))
            .build()
            .unwrap(),
    );
    wait_until(
        Duration::from_secs(30),
        "the unreadable tick recorded and the neighbour running",
        || async {
            !db.skips("unreadable.task").await.is_empty()
                && rec.starts_of("unreadable.neighbour") >= 3
        },
    )
    .await;
    n.stop().await;
    let skips = db.skips("unreadable.task").await;
    assert_eq!(skips.len(), 1, "recorded once: {skips:?}");
    assert_eq!(skips[0].reason, SkipReason::InvalidSchedule, "{skips:?}");
    assert_eq!(
        rec.starts_of("unreadable.task"),
        0,
        "its handler never starts"
    );
    assert!(db.runs(Some("unreadable.task")).await.is_empty());
}

/// Start-up order: the config is reconciled before the first claim. A row left enabled and
/// due by an earlier deployment, which the config now disables, never runs on a node starting
/// with that config, while the config's enabled task runs.
async fn the_config_is_applied_before_anything_is_claimed(db: &TestDb) {
    let past = Utc::now() - TimeDelta::seconds(5);
    db.insert_task("order.paused", "* * * * * *", Some(past))
        .await;
    let rec = Arc::new(Recorder::default());
    let config = doc(vec![
        scheduler::config::TaskConfig {
            enabled: false,
            ..entry("order.paused", "* * * * * *")
        },
        entry("order.running", "* * * * * *"),
    ]);
    let n = start(
        node_with(db, "a", tasks("order."), config, &rec)
            .build()
            .unwrap(),
    );
    wait_until(
        Duration::from_secs(30),
        "the enabled task runs a few times",
        || async { rec.starts_of("order.running") >= 3 },
    )
    .await;
    n.stop().await;
    assert_eq!(
        rec.starts_of("order.paused"),
        0,
        "a task the config disables ran before the config was applied"
    );
    assert!(db.runs(Some("order.paused")).await.is_empty());
    assert!(!db.task("order.paused").await.enabled);
}

/// 30 tasks every second on one node with 4 handler slots, each handler 150 ms (a third of them
/// panic at their end): more is due than the slots can run, so they are always full. By the
/// handlers' own count the node never runs more than 4 at once and does run 4; every slot is
/// given back however its handler ended (a slot kept by a panic would stall the node well
/// before 150 starts).
async fn a_node_runs_at_most_max_concurrent_handlers_and_refills_every_slot(db: &TestDb) {
    const SLOTS: usize = 4;
    let seen = Arc::new(Concurrency::default());
    let registry = tasks_with("slots", 30, busy_handler);
    let config = doc(registry
        .iter()
        .map(|d| entry(d.name, "* * * * * *"))
        .collect());
    let n = start(
        node_with(db, "a", registry, config, &seen)
            .max_concurrent(SLOTS)
            .build()
            .unwrap(),
    );
    wait_until(Duration::from_secs(90), "150 handler starts", || async {
        seen.starts.load(Ordering::SeqCst) >= 150
    })
    .await;
    n.stop().await;
    assert_eq!(
        seen.max.load(Ordering::SeqCst),
        SLOTS,
        "handlers running at once, by their own count (never more than max_concurrent, and \
         all of them used)"
    );
    assert_eq!(
        seen.now.load(Ordering::SeqCst),
        0,
        "a handler still running"
    );
    let panicked = db
        .runs(None)
        .await
        .iter()
        .filter(|r| r.status == RunStatus::Failed)
        .count();
    assert!(panicked >= 40, "panicking runs recorded: {panicked}");
}
