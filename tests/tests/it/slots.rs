//! Handler slots and claims ahead: a tick of many more rows than a node has slots is claimed
//! ahead of it whole (each run takes its slot on the tick), and the node still never runs more
//! handlers at once than it has slots.

use crate::common;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use common::*;
use scheduler::TaskContext;
use scheduler::testing::store::{RunQuery, RunStatus};

on_both_backends!(
    threads = 2;
    a_tick_of_more_rows_than_slots_is_claimed_ahead_whole_and_runs_in_its_slots,
    a_tick_of_more_rows_than_one_claim_takes_is_claimed_in_turns_each_once,
);

/// `runs_waiting_for_slots_held_by_hung_handlers_go_to_another_node` on both stores.
mod hung_slots {
    mod on_postgres {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn runs_waiting_for_slots_held_by_hung_handlers_go_to_another_node() {
            let db = crate::common::TestDb::postgres("runs_waiting_for_slots_held_by_hung").await;
            super::super::runs_waiting_for_slots_held_by_hung_handlers_go_to_another_node(&db)
                .await;
            db.cleanup().await;
        }
    }

    mod on_sqlite {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn runs_waiting_for_slots_held_by_hung_handlers_go_to_another_node() {
            let db = crate::common::TestDb::sqlite("runs_waiting_for_slots_held_by_hung").await;
            super::super::runs_waiting_for_slots_held_by_hung_handlers_go_to_another_node(&db)
                .await;
            db.cleanup().await;
        }
    }
}

/// A handler's start: (task, tick, when it started).
type Start = (String, DateTime<Utc>, DateTime<Utc>);

/// What the handlers saw: how many ran at once (now, at most), and each start.
#[derive(Default)]
struct Seen {
    now: AtomicUsize,
    max: AtomicUsize,
    starts: std::sync::Mutex<Vec<Start>>,
}

/// By the handlers' own record: no run started before its tick, and each tick of each task
/// started once.
fn each_tick_once_none_early(seen: &Seen) {
    let starts = seen.starts.lock().unwrap().clone();
    let early: Vec<_> = starts.iter().filter(|(_, tick, at)| at < tick).collect();
    assert!(
        early.is_empty(),
        "runs started before their tick: {early:?}"
    );
    let mut once = BTreeSet::new();
    for (task, tick, _) in &starts {
        assert!(
            once.insert((task, tick)),
            "{task} started its tick {tick} twice"
        );
    }
}

/// Counts itself out again however the handler ends.
struct Running(Arc<Seen>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.now.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Notes its start and counts itself in for 5 ms.
fn counted(ctx: TaskContext) -> scheduler::__private::TaskFuture {
    Box::pin(async move {
        let at = Utc::now();
        let Ok(seen) = ctx.state::<Arc<Seen>>() else {
            return Ok(());
        };
        let now = seen.now.fetch_add(1, Ordering::SeqCst) + 1;
        seen.max.fetch_max(now, Ordering::SeqCst);
        let _running = Running(Arc::clone(seen));
        seen.starts
            .lock()
            .unwrap()
            .push((ctx.task_name().to_owned(), ctx.scheduled_at(), at));
        tokio::time::sleep(Duration::from_millis(5)).await;
        Ok(())
    })
}

/// 60 tasks on one tick every 2 s, one node with 10 handler slots and 10,000 tasks registered
/// (so it claims each tick a second ahead). More than 10 runs are seen waiting for their tick at
/// once: the tick is claimed ahead beyond the free slots (before, a claim took at most one run
/// per free slot, and the rest were claimed after the tick as slots freed up). By the handlers'
/// own count never more than 10 run at once; by their own clocks no run starts before its tick,
/// and each tick of each task starts once.
async fn a_tick_of_more_rows_than_slots_is_claimed_ahead_whole_and_runs_in_its_slots(db: &TestDb) {
    const SLOTS: usize = 10;
    const DUE: usize = 60;
    const REGISTERED: usize = 10_000;
    let seen = Arc::new(Seen::default());
    let registry = tasks_with("slot", REGISTERED, counted);
    // The others never come due (once a year), but count for the claim's lead.
    let config = doc(registry
        .iter()
        .enumerate()
        .map(|(i, d)| {
            entry(
                d.name,
                if i < DUE {
                    "*/2 * * * * *"
                } else {
                    "0 0 0 1 1 *"
                },
            )
        })
        .collect());
    let n = start(
        node_with(db, "a", registry, config, &seen)
            .max_concurrent(SLOTS)
            // The lead is bounded by a quarter of the lock lifetime: 1 s needs 4 s.
            .lock_lifetime(Duration::from_secs(8))
            .build()
            .unwrap(),
    );
    let deadline = tokio::time::Instant::now() + Duration::from_secs(240);
    let mut most_waiting = 0;
    loop {
        let waiting = db
            .api()
            .runs(&RunQuery::latest(1000).status(RunStatus::Running))
            .await
            .unwrap()
            .into_iter()
            .filter(|r| r.scheduled_at > Utc::now())
            .count();
        most_waiting = most_waiting.max(waiting);
        if most_waiting > SLOTS && seen.starts.lock().unwrap().len() >= DUE * 4 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "within 240 s: 4 ticks of every task ({} starts) and more than {SLOTS} runs seen \
             waiting for their tick at once (at most {most_waiting})",
            seen.starts.lock().unwrap().len()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    n.stop().await;

    assert!(
        seen.max.load(Ordering::SeqCst) <= SLOTS,
        "handlers running at once, by their own count: {} (slots: {SLOTS})",
        seen.max.load(Ordering::SeqCst)
    );
    each_tick_once_none_early(&seen);
}

/// `slot.0000` and `slot.0001` hang (until their node stops), the others return at once.
fn hangs_or_returns(ctx: TaskContext) -> scheduler::__private::TaskFuture {
    Box::pin(async move {
        let hangs = matches!(ctx.task_name(), "slot.0000" | "slot.0001");
        let _guard = recorder(&ctx).enter(&ctx);
        if hangs {
            ctx.cancellation_token().cancelled().await;
        }
        Ok(())
    })
}

/// Node `a` (2 slots, a claim's lead of a second: 10,000 tasks registered) claims two tasks
/// whose handlers hang without a timeout, and, half a second later, four more ahead of their
/// tick, with its 2 slots still free. On their tick the four find both slots held by the hung
/// handlers. Before, they waited for a slot behind them as long as those hung, their locks kept
/// (node `b`, started meanwhile with every slot free, could never take them). Now a run that
/// finds no slot come free within a lock lifetime is handed back unstarted, recorded
/// `interrupted` with why, and `b` runs it: by the handlers' own record each of the four ticks
/// starts once, on `b`.
///
/// On the wall clock on both stores, never stepped: a run claimed ahead waits for its tick on
/// Tokio's clock (the handler pool's timer, set at the claim to the test clock's distance to
/// the tick), so a step between the two claims reorders the starts. Stepped, `a` claimed the
/// hanging two 0.6 s ahead, the next step carried the clock past the four's tick, and `a`
/// claimed them as due at once: they took the two free slots there and then, while the hanging
/// two still waited 0.4 s of wall time for their timers (5 failures in 8 runs, 2026-12-07).
async fn runs_waiting_for_slots_held_by_hung_handlers_go_to_another_node(db: &TestDb) {
    const REGISTERED: usize = 10_000;
    let rec = Arc::new(Recorder::default());
    let registry = || tasks_with("slot", REGISTERED, hangs_or_returns);
    let config = doc(registry()
        .iter()
        .map(|d| entry(d.name, "0 0 0 1 1 *"))
        .collect());
    let a = start(
        node_with(db, "a", registry(), config.clone(), &rec)
            .max_concurrent(2)
            .lock_lifetime(Duration::from_secs(8))
            .build()
            .unwrap(),
    );
    wait_until(Duration::from_secs(120), "the config applied", || async {
        db.tasks().await.len() == REGISTERED
    })
    .await;
    let hung = ["slot.0000", "slot.0001"];
    let waiting = ["slot.0002", "slot.0003", "slot.0004", "slot.0005"];
    // Whole microseconds, as the stores keep them.
    let tick =
        DateTime::from_timestamp_micros((db.now() + TimeDelta::seconds(3)).timestamp_micros())
            .unwrap();
    let later = tick + TimeDelta::milliseconds(400);
    for task in hung {
        db.set_next_run(Some(task), Some(tick)).await;
    }
    for task in waiting {
        db.set_next_run(Some(task), Some(later)).await;
    }
    db.api().notify().await.unwrap();
    wait_until(
        Duration::from_secs(60),
        "both hanging handlers started",
        || async { hung.iter().all(|t| rec.starts_of(t) == 1) },
    )
    .await;
    // What the test is about: the four were claimed ahead by `a` (its slots free then), and
    // find both slots held on their tick.
    for task in waiting {
        assert_eq!(
            rec.starts_of(task),
            0,
            "{task} had not started when both slots were taken"
        );
        let runs = db.runs(Some(task)).await;
        assert!(
            runs.iter()
                .any(|r| r.status == RunStatus::Running && r.node_id == "a"),
            "{task} was claimed ahead by a: {runs:?}"
        );
    }
    let b = start(
        node_with(db, "b", registry(), config, &rec)
            .lock_lifetime(Duration::from_secs(8))
            .build()
            .unwrap(),
    );
    wait_until(
        Duration::from_secs(90),
        "each of the four waiting runs started on b",
        || async { waiting.iter().all(|t| rec.starts_of(t) >= 1) },
    )
    .await;
    b.stop().await;
    a.stop().await;

    let starts = rec.starts.lock().unwrap().clone();
    for task in waiting {
        let theirs: Vec<_> = starts.iter().filter(|(t, _, _)| t == task).collect();
        assert_eq!(theirs.len(), 1, "{task} started once: {theirs:?}");
        assert_eq!(theirs[0].1, later, "{task} ran its tick");
        assert_eq!(theirs[0].2, "b", "{task} ran on b: {theirs:?}");
        let runs = db.runs(Some(task)).await;
        assert!(
            runs.iter().any(|r| r.status == RunStatus::Interrupted
                && r.node_id == "a"
                && r.error
                    .as_deref()
                    .is_some_and(|e| e.contains("no handler slot"))),
            "{task}'s hand-back by a is recorded with why: {runs:?}"
        );
    }
    for task in hung {
        assert_eq!(rec.starts_of(task), 1, "{task} started once");
    }
}

/// 5,000 tasks on one tick, one node with the default slots: more than one claim takes
/// (`MAX_CLAIM_ROWS`, 2,000), so the tick is claimed in turns, one claim after the other. By
/// the handlers' own record every task runs each of two ticks once, none before its tick.
async fn a_tick_of_more_rows_than_one_claim_takes_is_claimed_in_turns_each_once(db: &TestDb) {
    const TASKS: usize = 5_000;
    let seen = Arc::new(Seen::default());
    let registry = tasks_with("turn", TASKS, counted);
    let config = doc(registry
        .iter()
        .map(|d| entry(d.name, "*/5 * * * * *"))
        .collect());
    let n = start(
        node_with(db, "a", registry, config, &seen)
            .lock_lifetime(Duration::from_secs(8))
            .build()
            .unwrap(),
    );
    let ticks = |seen: &Seen| {
        let starts = seen.starts.lock().unwrap();
        let mut per_tick: std::collections::BTreeMap<DateTime<Utc>, usize> = Default::default();
        for (_, tick, _) in starts.iter() {
            *per_tick.entry(*tick).or_default() += 1;
        }
        per_tick
    };
    // On the wall clock (the handlers note their start by it): not stepped.
    wait_until(Duration::from_secs(240), "two whole ticks run", || async {
        ticks(&seen).values().filter(|n| **n >= TASKS).count() >= 2
    })
    .await;
    n.stop().await;
    each_tick_once_none_early(&seen);
}
