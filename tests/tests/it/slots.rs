//! Handler slots and claims ahead: a tick of many more rows than a node has slots is claimed
//! ahead of it whole (each run takes its slot on the tick), and the node still never runs more
//! handlers at once than it has slots.

use crate::common;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use chrono::{DateTime, Utc};
use common::*;
use scheduler::TaskContext;
use scheduler::testing::store::{RunQuery, RunStatus};

on_both_backends!(
    threads = 2;
    a_tick_of_more_rows_than_slots_is_claimed_ahead_whole_and_runs_in_its_slots,
);

/// A handler's start: (task, tick, when it started).
type Start = (String, DateTime<Utc>, DateTime<Utc>);

/// What the handlers saw: how many ran at once (now, at most), and each start.
#[derive(Default)]
struct Seen {
    now: AtomicUsize,
    max: AtomicUsize,
    starts: std::sync::Mutex<Vec<Start>>,
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
        node(db, "a", registry)
            .max_concurrent(SLOTS)
            // The lead is bounded by a quarter of the lock lifetime: 1 s needs 4 s.
            .lock_lifetime(Duration::from_secs(8))
            .config_document(config)
            .state(Arc::clone(&seen))
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
