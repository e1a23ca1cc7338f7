//! An instance's own shared limit (`Schedule::limit`): its runs hold its own limit, else its
//! task's, judged by the handlers' own record of their starts and ends and by the holders the
//! store shows. (Owners, labels and how each way of writing an instance shows its limit:
//! `instance_tags`.)

use crate::common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use scheduler::{Schedule, Schedules, TaskContext, task};

on_both_backends! {
    threads = 2;
    an_instance_s_own_limit_keeps_its_holders_apart_and_a_sibling_holds_its_task_s,
}

/// One run as its handler saw it: its key, its start and end on this process's clock.
type Span = (String, Instant, Option<Instant>);

struct WorkLog {
    work: Duration,
    spans: Mutex<Vec<Span>>,
}

impl WorkLog {
    fn of(&self, keys: &[&str]) -> Vec<Span> {
        let spans = self.spans.lock().unwrap();
        spans
            .iter()
            .filter(|s| keys.contains(&s.0.as_str()))
            .cloned()
            .collect()
    }
}

/// Works a while, recording its start and end.
#[task(name = "itag.work", limit = "task-solo")]
async fn itag_work(ctx: TaskContext) {
    let log = Arc::clone(ctx.state::<Arc<WorkLog>>().unwrap());
    let key = ctx.key().unwrap_or("").to_owned();
    let i = {
        let mut spans = log.spans.lock().unwrap();
        spans.push((key, Instant::now(), None));
        spans.len() - 1
    };
    tokio::time::sleep(log.work).await;
    log.spans.lock().unwrap()[i].2 = Some(Instant::now());
}

/// The most handlers running at once among `spans`, by their own record.
fn most_at_once(spans: &[Span]) -> usize {
    common::most_at_once(spans.iter().map(|s| (s.1, s.2)))
}

/// `itag.work` names `task-solo: 1` (its attribute). Instances `a` and `b` name `inst-solo: 1`
/// of their own, `c` and `d` none, all every second, each run working a while. By the handlers'
/// own record `a` and `b` never ran at once, nor did `c` and `d` (under their task's limit);
/// the store showed only `a` or `b` holding `inst-solo`, only `c` or `d` holding `task-solo`.
async fn an_instance_s_own_limit_keeps_its_holders_apart_and_a_sibling_holds_its_task_s(
    db: &TestDb,
) {
    let log = Arc::new(WorkLog {
        work: if db.is_sqlite() {
            Duration::from_millis(150)
        } else {
            Duration::from_millis(1200)
        },
        spans: Mutex::new(Vec::new()),
    });
    let mut config = doc(vec![entry("itag.work", "0 0 0 1 1 *")]);
    config.limits = [("inst-solo".to_owned(), 1), ("task-solo".to_owned(), 1)].into();
    let builder = node_with(db, "a", tasks("itag.work"), config, &log)
        .poll_interval(Duration::from_millis(500));
    let running = started(db, builder, &["itag.work"]).await;
    let schedules = Schedules::new(db.node_store(2), &tasks("itag.work"), "test");
    let every_second = |key: &str| Schedule::new("itag.work", key).cron("* * * * * *");
    for key in ["a", "b"] {
        let made = schedules
            .upsert(every_second(key).limit("inst-solo"))
            .await
            .unwrap();
        assert_eq!(made.limit.as_deref(), Some("inst-solo"));
    }
    for key in ["c", "d"] {
        assert_eq!(
            schedules.upsert(every_second(key)).await.unwrap().limit,
            None
        );
    }
    let holders: Mutex<BTreeMap<String, Vec<String>>> = Mutex::default();
    wait_stepping(
        db,
        Duration::from_secs(180),
        "three runs of each instance, each limit seen held",
        || async {
            for limit in db.api().limits().await.unwrap() {
                let mut seen = holders.lock().unwrap();
                let rows = seen.entry(limit.name.clone()).or_default();
                rows.extend(limit.holders.iter().map(|h| h.row.clone()));
            }
            let seen = holders.lock().unwrap();
            ["a", "b", "c", "d"]
                .iter()
                .all(|k| log.of(&[k]).iter().filter(|s| s.2.is_some()).count() >= 3)
                && ["inst-solo", "task-solo"]
                    .iter()
                    .all(|l| seen.get(*l).is_some_and(|rows| !rows.is_empty()))
        },
    )
    .await;
    running.stop().await;

    assert_eq!(
        most_at_once(&log.of(&["a", "b"])),
        1,
        "a and b share inst-solo: 1"
    );
    assert_eq!(
        most_at_once(&log.of(&["c", "d"])),
        1,
        "c and d share task-solo: 1"
    );
    let seen = holders.into_inner().unwrap();
    for (limit, rows) in [
        ("inst-solo", ["itag.work/a", "itag.work/b"]),
        ("task-solo", ["itag.work/c", "itag.work/d"]),
    ] {
        let held = &seen[limit];
        assert!(
            held.iter().all(|r| rows.contains(&r.as_str())),
            "{limit} held by {held:?}"
        );
    }
}
