//! Limits shared by tasks (`limits: {name: N}`, `#[task(limit = "...")]`): at most N runs
//! holding a limit run at once across the nodes; a tick waiting for it is visible as waiting
//! with the holders, then runs late or is skipped by its misfire rule (recorded, naming the
//! limit), never lost silently and never overlapping itself; a killed holder's share comes
//! back with its lock; the config refuses a bad limit and keeps the last good size. Judged by
//! what the handlers themselves recorded, never by timings.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, TimeDelta, Utc};
use common::*;
use scheduler::config::{ConfigDocument, TaskConfig};
use scheduler::store::SkipReason;
use scheduler::{TaskContext, task};
use tokio::sync::Notify;

on_both_backends! {
    threads = 4;
    six_tasks_share_a_limit_of_two_across_two_nodes,
    a_waiting_tick_is_visible_and_skipped_naming_the_limit,
    a_limit_changed_in_the_config_takes_effect_and_a_bad_one_is_refused;
    postgres_only: a_killed_holders_share_comes_back_with_its_lock,
}

/// One run as its handler saw it: task, tick, node, wall-clock start and end (`None`: still
/// running).
type Span = (String, DateTime<Utc>, String, Instant, Option<Instant>);

/// What the handlers recorded.
struct LimitLog {
    /// How long a sharing handler works.
    work: Duration,
    spans: Mutex<Vec<Span>>,
    /// `sl.hold` waits for this before it ends.
    release: Notify,
}

impl LimitLog {
    fn new(work: Duration) -> Arc<Self> {
        Arc::new(LimitLog {
            work,
            spans: Mutex::new(Vec::new()),
            release: Notify::new(),
        })
    }

    fn start(&self, ctx: &TaskContext) -> usize {
        let mut spans = self.spans.lock().unwrap();
        spans.push((
            ctx.task_name().to_owned(),
            ctx.scheduled_at(),
            ctx.node_id().to_owned(),
            Instant::now(),
            None,
        ));
        spans.len() - 1
    }

    fn end(&self, i: usize) {
        self.spans.lock().unwrap()[i].4 = Some(Instant::now());
    }

    fn spans(&self) -> Vec<Span> {
        self.spans.lock().unwrap().clone()
    }

    fn starts_of(&self, task: &str) -> usize {
        self.spans().iter().filter(|s| s.0 == task).count()
    }
}

fn log(ctx: &TaskContext) -> Arc<LimitLog> {
    Arc::clone(
        ctx.state::<Arc<LimitLog>>()
            .expect("the nodes share a LimitLog"),
    )
}

/// Works `log.work`, recording its start and end.
async fn work(ctx: TaskContext) {
    let log = log(&ctx);
    let i = log.start(&ctx);
    tokio::time::sleep(log.work).await;
    log.end(i);
}

macro_rules! sharing_tasks {
    ($($fn_name:ident = $name:literal),* $(,)?) => {$(
        #[task(name = $name, limit = "warehouse-db")]
        async fn $fn_name(ctx: TaskContext) {
            work(ctx).await;
        }
    )*};
}

sharing_tasks!(
    share_1 = "sl.share.1",
    share_2 = "sl.share.2",
    share_3 = "sl.share.3",
    share_4 = "sl.share.4",
    share_5 = "sl.share.5",
    share_6 = "sl.share.6",
);

/// Holds the limit `solo` until the test lets it go.
#[task(name = "sl.hold", limit = "solo")]
async fn sl_hold(ctx: TaskContext) {
    let log = log(&ctx);
    let i = log.start(&ctx);
    log.release.notified().await;
    log.end(i);
}

/// Every second under `solo`; a tick later than its misfire grace is skipped.
#[task(name = "sl.late", limit = "solo", misfire = "skip")]
async fn sl_late(ctx: TaskContext) {
    work(ctx).await;
}

/// Names no limit in its attribute: the config entry gives it one.
#[task(name = "sl.plain")]
async fn sl_plain(ctx: TaskContext) {
    work(ctx).await;
}

/// The survivor's implementation of the task the killed node holds `kill-db` with.
#[task(name = "limit.kill.hold", limit = "kill-db")]
async fn limit_kill_hold(ctx: TaskContext) {
    work(ctx).await;
}

/// Every second under `kill-db`: waits while the victim holds it.
#[task(name = "limit.kill.wait", limit = "kill-db")]
async fn limit_kill_wait(ctx: TaskContext) {
    work(ctx).await;
}

fn with_limits(mut doc: ConfigDocument, limits: &[(&str, i64)]) -> ConfigDocument {
    doc.limits = limits.iter().map(|(n, s)| ((*n).to_owned(), *s)).collect();
    doc
}

/// The most handlers running at once among `spans` (of any task), by their own record.
fn most_at_once(spans: &[Span]) -> usize {
    common::most_at_once(spans.iter().map(|s| (s.3, s.4)))
}

/// Every tick of `task` (an every-second cron) from its first run's to its last run's either
/// ran or is in a skip record: none lost silently.
async fn no_tick_lost(db: &TestDb, task: &str, spans: &[Span]) {
    let ran: BTreeSet<DateTime<Utc>> = spans.iter().filter(|s| s.0 == task).map(|s| s.1).collect();
    let (Some(first), Some(last)) = (ran.first().copied(), ran.last().copied()) else {
        return;
    };
    let skips = db.skips(task).await;
    let mut tick = first;
    while tick <= last {
        let skipped = skips
            .iter()
            .any(|s| s.first_tick <= tick && tick <= s.last_tick);
        assert!(
            ran.contains(&tick) || skipped,
            "{task}: tick {tick} neither ran nor was recorded skipped (ran {ran:?}, skips {skips:?})"
        );
        tick += TimeDelta::seconds(1);
    }
}

/// Six every-second tasks share `warehouse-db: 2` on two nodes, each handler working a while:
/// by the handlers' own record never more than two ran at once, no task overlapped itself or
/// ran a tick twice, and every tick between a task's runs ran or was recorded skipped. While
/// they ran, the store showed at most two holders and some ticks waiting.
async fn six_tasks_share_a_limit_of_two_across_two_nodes(db: &TestDb) {
    // On SQLite the test clock moves a second per step: handlers work less wall time.
    let log = LimitLog::new(if db.is_sqlite() {
        Duration::from_millis(150)
    } else {
        Duration::from_millis(1500)
    });
    let names: Vec<String> = (1..=6).map(|i| format!("sl.share.{i}")).collect();
    let config = with_limits(
        doc(names.iter().map(|n| entry(n, "* * * * * *")).collect()),
        &[("warehouse-db", 2)],
    );
    let builders = ["a", "b"].map(|id| {
        node_with(db, id, tasks("sl.share."), config.clone(), &log)
            .poll_interval(Duration::from_millis(500))
    });
    let running = started_all(db, builders, &[]).await;
    let most_holders = std::sync::atomic::AtomicUsize::new(0);
    let saw_waiting = std::sync::atomic::AtomicBool::new(false);
    wait_stepping(
        db,
        Duration::from_secs(180),
        "three runs of every task, on both nodes",
        || async {
            let limits = db.api().limits().await.unwrap();
            if let Some(l) = limits.iter().find(|l| l.name == "warehouse-db") {
                assert_eq!(l.size, Some(2));
                most_holders.fetch_max(l.holders.len(), std::sync::atomic::Ordering::SeqCst);
                if !l.waiting.is_empty() {
                    saw_waiting.store(true, std::sync::atomic::Ordering::SeqCst);
                }
            }
            let spans = log.spans();
            let nodes: BTreeSet<&str> = spans.iter().map(|s| s.2.as_str()).collect();
            names.iter().all(|n| log.starts_of(n) >= 3) && nodes.len() == 2
        },
    )
    .await;
    let most_holders = most_holders.into_inner();
    for n in running {
        n.stop().await;
    }

    let spans = log.spans();
    assert!(
        most_at_once(&spans) <= 2,
        "more than two holders at once by the handlers' record: {}",
        most_at_once(&spans)
    );
    assert!(most_holders <= 2, "the store showed {most_holders} holders");
    // Six every-second tasks on two shares: ticks had to wait, and the store showed them.
    assert!(
        saw_waiting.into_inner(),
        "no tick was ever shown waiting for warehouse-db"
    );
    let mut seen: BTreeMap<(String, DateTime<Utc>), usize> = BTreeMap::new();
    for s in &spans {
        *seen.entry((s.0.clone(), s.1)).or_default() += 1;
    }
    let twice: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "ticks run twice: {twice:?}");
    for name in &names {
        let own: Vec<Span> = spans.iter().filter(|s| &s.0 == name).cloned().collect();
        assert_eq!(most_at_once(&own), 1, "{name} overlapped itself");
        no_tick_lost(db, name, &spans).await;
    }
}

/// `solo: 1` held by `sl.hold`: `sl.late` (every second, misfire skip) waits, shown by the
/// store with its holder; its ticks later than their grace are recorded skipped for the limit
/// (`limit`), and once the holder ends it runs, its handler never beside the holder's.
async fn a_waiting_tick_is_visible_and_skipped_naming_the_limit(db: &TestDb) {
    let log = LimitLog::new(Duration::from_millis(50));
    let config = with_limits(
        doc(vec![
            entry("sl.hold", "0 0 0 1 1 *"),
            entry("sl.late", "* * * * * *"),
        ]),
        &[("solo", 1)],
    );
    let registry = tasks("sl.").retain(|n| n == "sl.hold" || n == "sl.late");
    let builder =
        node_with(db, "a", registry, config, &log).poll_interval(Duration::from_millis(500));
    let running = started(db, builder, &["sl.hold"]).await;
    // Run the holder now, unless `sl.late` took the share first: then wait for it to end.
    db.set_next_run(Some("sl.hold"), Some(db.now())).await;
    db.api().notify().await.unwrap();
    wait_stepping(db, Duration::from_secs(60), "the holder runs", || async {
        log.starts_of("sl.hold") == 1
    })
    .await;
    let late_before = log.starts_of("sl.late");
    wait_stepping(
        db,
        Duration::from_secs(60),
        "sl.late shown waiting for solo, held by sl.hold, and a tick skipped for the limit",
        || async {
            let limits = db.api().limits().await.unwrap();
            let shown = limits.iter().any(|l| {
                l.name == "solo"
                    && l.size == Some(1)
                    && l.holders
                        .iter()
                        .any(|h| h.row == "sl.hold" && h.node == "a")
                    && l.waiting.iter().any(|w| w.row == "sl.late")
            });
            let skipped = db
                .skips("sl.late")
                .await
                .iter()
                .any(|s| s.reason == SkipReason::Limit);
            shown && skipped
        },
    )
    .await;
    assert_eq!(
        log.starts_of("sl.late"),
        late_before,
        "nothing ran beside the holder"
    );
    log.release.notify_one();
    wait_stepping(
        db,
        Duration::from_secs(60),
        "sl.late runs once the share is back",
        || async { log.starts_of("sl.late") > late_before },
    )
    .await;
    running.stop().await;
    let spans = log.spans();
    assert_eq!(most_at_once(&spans), 1, "solo: 1 never held twice");
    // Nothing is left marked waiting once it ran or was skipped... unless a later tick waits.
    no_tick_lost(db, "sl.late", &spans).await;
}

/// The config declares `limits` and an entry names one: a size changed in the config takes
/// effect at the reconcile; a bad size (0), a bad name or an undeclared limit is refused with a
/// reason naming it, the limit keeping its last good size and the entry its last valid state.
async fn a_limit_changed_in_the_config_takes_effect_and_a_bad_one_is_refused(db: &TestDb) {
    use scheduler::testing::reconciler::Reconciler;
    let registry = tasks("sl.plain");
    let reconciler = Reconciler::new(db.node_store(2), registry, chrono_tz::UTC, "n");
    let plain = |limit: &str| TaskConfig {
        limit: Some(limit.to_owned()),
        ..entry("sl.plain", "0 0 0 1 1 *")
    };
    let size = |limits: Vec<scheduler::testing::store::LimitState>, name: &str| {
        limits.iter().find(|l| l.name == name).and_then(|l| l.size)
    };

    let report = reconciler
        .reconcile(&with_limits(doc(vec![plain("db")]), &[("db", 2)]))
        .await
        .unwrap();
    assert!(report.refused.is_empty(), "{:?}", report.refused);
    assert_eq!(size(db.api().limits().await.unwrap(), "db"), Some(2));
    let row = |rows: Vec<scheduler::testing::store::TaskRow>| {
        rows.into_iter()
            .find(|r| r.name == "sl.plain")
            .and_then(|r| r.limit)
    };
    assert_eq!(row(db.task_rows().await).as_deref(), Some("db"));

    // Hot reload: the size changes.
    reconciler
        .reconcile(&with_limits(doc(vec![plain("db")]), &[("db", 3)]))
        .await
        .unwrap();
    assert_eq!(size(db.api().limits().await.unwrap(), "db"), Some(3));

    // A bad size: refused, named; the limit keeps 3, the entry its limit.
    let report = reconciler
        .reconcile(&with_limits(doc(vec![plain("db")]), &[("db", 0)]))
        .await
        .unwrap();
    let refused: Vec<&(String, String)> = report.refused.iter().collect();
    assert!(
        refused
            .iter()
            .any(|(name, why)| name == "sl.plain" && why.contains("limits.db")),
        "{refused:?}"
    );
    assert_eq!(size(db.api().limits().await.unwrap(), "db"), Some(3));
    assert_eq!(row(db.task_rows().await).as_deref(), Some("db"));

    // An undeclared limit: refused, named; the entry keeps its limit.
    let report = reconciler
        .reconcile(&with_limits(doc(vec![plain("nope")]), &[("db", 3)]))
        .await
        .unwrap();
    assert!(
        report
            .refused
            .iter()
            .any(|(name, why)| name == "sl.plain" && why.contains("limit `nope` is not declared")),
        "{:?}",
        report.refused
    );
    assert_eq!(row(db.task_rows().await).as_deref(), Some("db"));

    // Another limit named: the row follows.
    reconciler
        .reconcile(&with_limits(
            doc(vec![plain("api")]),
            &[("db", 3), ("api", 1)],
        ))
        .await
        .unwrap();
    assert_eq!(row(db.task_rows().await).as_deref(), Some("api"));
    assert_eq!(size(db.api().limits().await.unwrap(), "api"), Some(1));
}

/// A node process holding `kill-db: 1` is killed with SIGKILL mid-run: while it held the share
/// the survivor's every-second task waited (shown waiting, the victim the holder); once the
/// victim's lock expired and was released, the share came back and the survivor ran, never
/// before the kill.
async fn a_killed_holders_share_comes_back_with_its_lock() {
    let db = TestDb::postgres("limit_kill").await;
    let dir = std::env::temp_dir().join(format!("scheduler-limit-kill-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("tasks.json");
    let text = r#"{"limits": {"kill-db": 1},
        "tasks": [{"name": "limit.kill.hold", "enabled": true, "cron": "0 0 0 1 1 *"},
                  {"name": "limit.kill.wait", "enabled": true, "cron": "* * * * * *"}]}"#;
    std::fs::write(&config, text).unwrap();
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
    wait_until(Duration::from_secs(60), "the config applied", || async {
        db.try_task("limit.kill.hold").await.is_some()
    })
    .await;
    db.set_next_run(Some("limit.kill.hold"), Some(Utc::now()))
        .await;
    db.api().notify().await.unwrap();
    wait_until(
        Duration::from_secs(30),
        "the victim holds kill-db",
        || async {
            let limits = db.api().limits().await.unwrap();
            limits.iter().any(|l| {
                l.name == "kill-db"
                    && l.holders
                        .iter()
                        .any(|h| h.row == "limit.kill.hold" && h.node == "victim")
            })
        },
    )
    .await;

    let log = LimitLog::new(Duration::from_millis(100));
    let config = ConfigDocument::parse(text, scheduler::config::ConfigFormat::Json, "t").unwrap();
    let survivor = start(
        node_with(&db, "survivor", tasks("limit.kill."), config, &log)
            .poll_interval(Duration::from_millis(500))
            .build()
            .unwrap(),
    );
    wait_until(
        Duration::from_secs(30),
        "limit.kill.wait shown waiting for kill-db",
        || async {
            let limits = db.api().limits().await.unwrap();
            limits.iter().any(|l| {
                l.name == "kill-db" && l.waiting.iter().any(|w| w.row == "limit.kill.wait")
            })
        },
    )
    .await;
    assert_eq!(
        log.spans().len(),
        0,
        "nothing ran beside the victim's holder"
    );
    victim.kill().expect("SIGKILL the victim");
    victim.wait().unwrap();
    let killed_at = Instant::now();
    wait_until(
        Duration::from_secs(60),
        "the survivor runs under kill-db",
        || async { log.starts_of("limit.kill.wait") >= 2 },
    )
    .await;
    survivor.stop().await;
    let _ = std::fs::remove_dir_all(dir);
    let spans = log.spans();
    assert!(
        spans.iter().all(|s| s.3 > killed_at),
        "a run started before the victim's share came back"
    );
    assert_eq!(most_at_once(&spans), 1, "kill-db: 1 never held twice");
    no_tick_lost(&db, "limit.kill.wait", &spans).await;
    db.cleanup().await;
}
