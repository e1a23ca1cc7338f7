//! Catch-up after a long outage against each real store: the ticks nobody ran are counted
//! inside the claim (misfire `skip`) or after the run (misfire `once`), and that planning never
//! walks so many ticks that a run claimed with them starts with its lease already spent.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, SubsecRound, TimeDelta, Utc};
use common::*;
use scheduler::store::SkipReason;
use scheduler::testing::store::{RunStatus, SkipRecord};
use scheduler::{TaskContext, task};

on_both_backends!(
    threads = 2;
    a_long_outage_in_utc_is_counted_exactly,
    a_long_outage_in_a_zone_with_daylight_saving_is_counted_within_the_claim_budget,
);

quick_tasks! {
    utc_skip = "utc.skip" (misfire = "skip"),
    utc_once = "utc.once" (),
    dst_skip_0 = "dst.skip.0" (misfire = "skip"),
    dst_skip_1 = "dst.skip.1" (misfire = "skip"),
    dst_skip_2 = "dst.skip.2" (misfire = "skip"),
    dst_skip_3 = "dst.skip.3" (misfire = "skip"),
    dst_once = "dst.once" (),
}

/// Twenty days of an every-second schedule: more ticks than the engine ever counts one by one
/// (1,000,000).
const OUTAGE_DAYS: i64 = 20;

async fn set_timezone(db: &TestDb, prefix: &str, zone: &str) {
    let pattern = format!("{prefix}%");
    match db {
        TestDb::Postgres { store, .. } => {
            sqlx::query("UPDATE scheduler_tasks SET timezone = $1 WHERE name LIKE $2")
                .bind(zone)
                .bind(&pattern)
                .execute(store.pool())
                .await
                .unwrap();
        }
        TestDb::Sqlite { store, .. } => {
            sqlx::query("UPDATE scheduler_tasks SET timezone = ?1 WHERE name LIKE ?2")
                .bind(zone)
                .bind(&pattern)
                .execute(store.pool())
                .await
                .unwrap();
        }
    }
}

/// The skip records of `task` for ticks before `before` (those of the outage).
async fn outage_skips(db: &TestDb, task: &str, before: DateTime<Utc>) -> Vec<SkipRecord> {
    db.api()
        .skips(task, DateTime::<Utc>::UNIX_EPOCH)
        .await
        .unwrap()
        .into_iter()
        .filter(|s| s.first_tick < before)
        .collect()
}

/// In UTC an every-second schedule repeats every minute: the 1,728,000 ticks of twenty days are
/// counted exactly, in the claim for `skip` and after the run for `once`, instead of walking a
/// million of them and recording "at least 1,000,000".
async fn a_long_outage_in_utc_is_counted_exactly(db: &TestDb) {
    let now = Utc::now();
    // On a whole second: the first overdue tick itself.
    let overdue = now.trunc_subsecs(0) - TimeDelta::days(OUTAGE_DAYS);
    for task in ["utc.skip", "utc.once"] {
        db.insert_task(task, "* * * * * *", Some(overdue)).await;
    }
    let rec = Arc::new(Recorder::default());
    let n = start(
        node(db, "a", tasks("utc."))
            .state(Arc::clone(&rec))
            .build()
            .unwrap(),
    );
    wait_until(Duration::from_secs(60), "both outages recorded", || async {
        !outage_skips(db, "utc.skip", now).await.is_empty()
            && !outage_skips(db, "utc.once", now).await.is_empty()
    })
    .await;
    n.stop().await;

    let skipped = outage_skips(db, "utc.skip", now).await;
    assert_eq!(skipped.len(), 1, "{skipped:?}");
    let s = &skipped[0];
    assert_eq!(s.reason, SkipReason::Misfire);
    assert!(s.exact, "{s:?}");
    assert_eq!(s.first_tick, overdue);
    // Every second from the first overdue tick to the last one before the claim.
    assert_eq!(
        s.ticks,
        (s.last_tick - s.first_tick).num_seconds() + 1,
        "{s:?}"
    );
    assert!(s.ticks >= OUTAGE_DAYS * 86_400, "{s:?}");

    let once = outage_skips(db, "utc.once", now).await;
    assert!(once.iter().all(|k| k.exact), "{once:?}");
    let ticks: i64 = once.iter().map(|k| k.ticks).sum();
    assert!(ticks >= OUTAGE_DAYS * 86_400 - 1, "{once:?}");
    // The catch-up run kept its lease. A later tick's run may be handed back unstarted by the
    // stop (claimed ahead of its tick): that one is not the catch-up's.
    let catch_up: Vec<RunStatus> = db
        .runs(Some("utc.once"))
        .await
        .into_iter()
        .filter(|r| r.scheduled_at < now)
        .map(|r| r.status)
        .collect();
    assert!(
        !catch_up.contains(&RunStatus::Interrupted),
        "the catch-up run was not stopped: {catch_up:?}"
    );
}

/// In a zone with daylight saving the ticks are walked one by one, but one claim walks at most
/// its budget (200,000 ticks; 200 per task with the default 1,000 handler slots), so the run
/// claimed with them keeps its lease: before, each `skip` task walked 1,000,000 ticks inside the
/// claim, and with the tests' 3 s lock lifetime the lease of `dst.once`, claimed in the same
/// transaction, was spent before its handler started.
async fn a_long_outage_in_a_zone_with_daylight_saving_is_counted_within_the_claim_budget(
    db: &TestDb,
) {
    let now = Utc::now();
    // On a whole second: the first overdue tick itself.
    let overdue = now.trunc_subsecs(0) - TimeDelta::days(OUTAGE_DAYS);
    let skip_tasks = ["dst.skip.0", "dst.skip.1", "dst.skip.2", "dst.skip.3"];
    for task in skip_tasks.iter().chain(&["dst.once"]) {
        db.insert_task(task, "* * * * * *", Some(overdue)).await;
    }
    set_timezone(db, "dst.", "Europe/Berlin").await;
    let rec = Arc::new(Recorder::default());
    let n = start(
        node(db, "a", tasks("dst."))
            .state(Arc::clone(&rec))
            .build()
            .unwrap(),
    );
    wait_until(
        Duration::from_secs(120),
        "the outage recorded and the catch-up run ended",
        || async {
            let mut recorded = true;
            for task in skip_tasks {
                recorded &= !outage_skips(db, task, now).await.is_empty();
            }
            let ended = db
                .runs(Some("dst.once"))
                .await
                .iter()
                .any(|r| r.scheduled_at < now && r.status != RunStatus::Running);
            recorded && ended
        },
    )
    .await;
    n.stop().await;

    let catch_up: Vec<RunStatus> = db
        .runs(Some("dst.once"))
        .await
        .into_iter()
        .filter(|r| r.scheduled_at < now)
        .map(|r| r.status)
        .collect();
    assert_eq!(
        catch_up,
        [RunStatus::Succeeded],
        "one catch-up run, not stopped"
    );
    for task in skip_tasks {
        let skipped = outage_skips(db, task, now).await;
        assert_eq!(skipped.len(), 1, "{skipped:?}");
        let s = &skipped[0];
        assert_eq!(s.reason, SkipReason::Misfire);
        assert_eq!((s.ticks, s.exact), (200, false), "{s:?}");
        assert_eq!(s.first_tick, overdue);
        assert!(s.last_tick > now - TimeDelta::seconds(1), "{s:?}");
    }
    // The catch-up run's end counts the ticks it folded in one by one too, at most 10,000 (its
    // outcome waits for the count): "at least 10,000", not a walk of a million.
    let folded = outage_skips(db, "dst.once", now).await;
    let ticks: i64 = folded.iter().map(|k| k.ticks).sum();
    assert_eq!(ticks, 10_000, "{folded:?}");
    assert!(folded.iter().any(|k| !k.exact), "{folded:?}");
}
