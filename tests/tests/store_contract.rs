//! The store contract: every behaviour of [`Store`] written once, as an async fn taking
//! `&dyn Store`, and run against each backend (modelled on River's `riverdrivertest`): a migrated
//! PostgreSQL schema ([`TestSchema`]) and a fresh SQLite file per test. A backend is done when
//! this suite passes on it.
//!
//! Tests arrange state through the API wherever it can. The few states it cannot reach (an
//! expired lock, a lock with no run, old history, a database from a newer binary) are arranged by
//! [`Arrange`], the one place that holds backend SQL; a behaviour never reads a backend's tables
//! except for the consecutive-failure count, which no API reports.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use chrono::{DateTime, SubsecRound, Utc};
use scheduler::store::{
    ClaimOutcome, ClaimPlan, ClaimPolicy, ClaimRequest, ClaimedRun, ConfigPlan, ConfigSnapshot,
    ConfigState, DueDecision, DueTask, ExpiredLock, FailureCount, LockKey, NodeInfo, PgStore,
    Recovery, Requeue, RescueDecision, RunEnd, RunFinish, RunRecord, RunStatus, SkipReason,
    SkipRecord, SqliteStore, Store, StoreError, TaskChange, TaskRow,
};
use scheduler_tests::TestSchema;
use uuid::Uuid;

// ---------------------------------------------------------------------------------------------
// Backends, and the one place with backend SQL.
// ---------------------------------------------------------------------------------------------

/// A store under test and what it takes to arrange states the API cannot reach.
enum Arrange {
    Postgres {
        store: PgStore,
        db: TestSchema,
    },
    Sqlite {
        store: SqliteStore,
        _dir: tempfile::TempDir,
    },
}

/// Microseconds of a duration (both backends store microseconds).
fn us(d: Duration) -> i64 {
    i64::try_from(d.as_micros()).unwrap()
}

impl Arrange {
    async fn postgres(test: &str) -> Self {
        scheduler_tests::init_tracing();
        let db = TestSchema::new(&format!("c_{test}")).await;
        let store = PgStore::connect_lazy(&db.url, &db.schema, 4).unwrap();
        store.migrate().await.unwrap();
        Arrange::Postgres { store, db }
    }

    async fn sqlite(_test: &str) -> Self {
        scheduler_tests::init_tracing();
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::builder(dir.path().join("scheduler.db"))
            .connect()
            .unwrap();
        store.migrate().await.unwrap();
        Arrange::Sqlite { store, _dir: dir }
    }

    fn store(&self) -> &dyn Store {
        match self {
            Arrange::Postgres { store, .. } => store,
            Arrange::Sqlite { store, .. } => store,
        }
    }

    async fn cleanup(self) {
        match self {
            Arrange::Postgres { store, db } => {
                store.pool().close().await;
                db.cleanup().await;
            }
            Arrange::Sqlite { store, _dir } => {
                store.pool().close().await;
                drop(store);
            }
        }
    }

    /// Moves `task`'s lock expiry a minute into the past (its owner stopped renewing).
    async fn expire_lock(&self, task: &str) {
        let past = Utc::now() - chrono::Duration::minutes(1);
        match self {
            Arrange::Postgres { db, .. } => {
                sqlx::query("UPDATE scheduler_tasks SET lock_expires_at = $2 WHERE name = $1")
                    .bind(task)
                    .bind(past)
                    .execute(&db.pool)
                    .await
                    .unwrap();
            }
            Arrange::Sqlite { store, .. } => {
                sqlx::query("UPDATE scheduler_tasks SET lock_expires_at = ?2 WHERE name = ?1")
                    .bind(task)
                    .bind(past.timestamp_micros())
                    .execute(store.pool())
                    .await
                    .unwrap();
            }
        }
    }

    /// Gives `task` a lock with no run under it (what an operator's hand edit, or a crash of an
    /// older binary between statements, leaves behind).
    async fn plant_lock(&self, task: &str, owner: &str, token: Uuid, expires_at: DateTime<Utc>) {
        match self {
            Arrange::Postgres { db, .. } => {
                sqlx::query(
                    "UPDATE scheduler_tasks SET lock_owner = $2, lock_token = $3, lock_expires_at = $4
                     WHERE name = $1",
                )
                .bind(task)
                .bind(owner)
                .bind(token)
                .bind(expires_at)
                .execute(&db.pool)
                .await
                .unwrap();
            }
            Arrange::Sqlite { store, .. } => {
                sqlx::query(
                    "UPDATE scheduler_tasks SET lock_owner = ?2, lock_token = ?3, lock_expires_at = ?4
                     WHERE name = ?1",
                )
                .bind(task)
                .bind(owner)
                .bind(token.hyphenated().to_string())
                .bind(expires_at.timestamp_micros())
                .execute(store.pool())
                .await
                .unwrap();
            }
        }
    }

    /// Moves every timestamp of run `run_id` `by` into the past.
    async fn age_run(&self, run_id: i64, by: Duration) {
        match self {
            Arrange::Postgres { db, .. } => {
                sqlx::query(
                    "UPDATE scheduler_runs
                     SET scheduled_at = scheduled_at - $2 * interval '1 microsecond',
                         started_at = started_at - $2 * interval '1 microsecond',
                         finished_at = finished_at - $2 * interval '1 microsecond'
                     WHERE id = $1",
                )
                .bind(run_id)
                .bind(us(by))
                .execute(&db.pool)
                .await
                .unwrap();
            }
            Arrange::Sqlite { store, .. } => {
                sqlx::query(
                    "UPDATE scheduler_runs
                     SET scheduled_at = scheduled_at - ?2, started_at = started_at - ?2,
                         finished_at = finished_at - ?2
                     WHERE id = ?1",
                )
                .bind(run_id)
                .bind(us(by))
                .execute(store.pool())
                .await
                .unwrap();
            }
        }
    }

    /// Moves the recording time of `task`'s skip records `by` into the past.
    async fn age_skips(&self, task: &str, by: Duration) {
        match self {
            Arrange::Postgres { db, .. } => {
                sqlx::query(
                    "UPDATE scheduler_skips SET recorded_at = recorded_at - $2 * interval '1 microsecond'
                     WHERE task_name = $1",
                )
                .bind(task)
                .bind(us(by))
                .execute(&db.pool)
                .await
                .unwrap();
            }
            Arrange::Sqlite { store, .. } => {
                sqlx::query(
                    "UPDATE scheduler_skips SET recorded_at = recorded_at - ?2 WHERE task_name = ?1",
                )
                .bind(task)
                .bind(us(by))
                .execute(store.pool())
                .await
                .unwrap();
            }
        }
    }

    /// Moves node `node`'s last heartbeat `by` into the past.
    async fn age_node(&self, node: &str, by: Duration) {
        match self {
            Arrange::Postgres { db, .. } => {
                sqlx::query(
                    "UPDATE scheduler_nodes SET heartbeat_at = heartbeat_at - $2 * interval '1 microsecond'
                     WHERE node_id = $1",
                )
                .bind(node)
                .bind(us(by))
                .execute(&db.pool)
                .await
                .unwrap();
            }
            Arrange::Sqlite { store, .. } => {
                sqlx::query(
                    "UPDATE scheduler_nodes SET heartbeat_at = heartbeat_at - ?2 WHERE node_id = ?1",
                )
                .bind(node)
                .bind(us(by))
                .execute(store.pool())
                .await
                .unwrap();
            }
        }
    }

    /// Records a migration this binary does not know, as a newer binary would have.
    async fn record_future_migration(&self) {
        match self {
            Arrange::Postgres { db, .. } => {
                sqlx::query(
                    "INSERT INTO scheduler_migrations (version, description) VALUES (999, 'from the future')",
                )
                .execute(&db.pool)
                .await
                .unwrap();
            }
            Arrange::Sqlite { store, .. } => {
                sqlx::query(
                    "INSERT INTO scheduler_migrations (version, description, applied_at)
                     VALUES (999, 'from the future', 0)",
                )
                .execute(store.pool())
                .await
                .unwrap();
            }
        }
    }

    /// `task`'s consecutive-failure count (no API reports it).
    async fn consecutive_failures(&self, task: &str) -> i64 {
        match self {
            Arrange::Postgres { db, .. } => sqlx::query_scalar(
                "SELECT consecutive_failures::int8 FROM scheduler_tasks WHERE name = $1",
            )
            .bind(task)
            .fetch_one(&db.pool)
            .await
            .unwrap(),
            Arrange::Sqlite { store, .. } => sqlx::query_scalar(
                "SELECT consecutive_failures FROM scheduler_tasks WHERE name = ?1",
            )
            .bind(task)
            .fetch_one(store.pool())
            .await
            .unwrap(),
        }
    }
}

/// Generates one `#[tokio::test]` per behaviour and backend, in `mod postgres` and `mod sqlite`.
macro_rules! contract {
    ($($behaviour:ident),* $(,)?) => {
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $behaviour() {
                    let arrange = super::Arrange::postgres(stringify!($behaviour)).await;
                    super::$behaviour(arrange.store(), &arrange).await;
                    arrange.cleanup().await;
                }
            )*
        }
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $behaviour() {
                    let arrange = super::Arrange::sqlite(stringify!($behaviour)).await;
                    super::$behaviour(arrange.store(), &arrange).await;
                    arrange.cleanup().await;
                }
            )*
        }
    };
}

contract![
    migrating_again_is_a_no_op,
    a_database_migrated_by_a_newer_binary_is_refused,
    nodes_register_beat_and_stop,
    next_wake_reports_the_earliest_claimable_tick_and_lock_expiry,
    claim_takes_due_enabled_unlocked_listed_tasks_oldest_first_up_to_the_limit,
    a_claim_records_what_the_plan_says,
    a_left_task_is_untouched,
    an_expired_lock_the_policy_waits_for_is_left_alone,
    a_released_lock_ends_its_run_as_decided_and_makes_the_tick_due_again,
    a_rescued_tick_is_claimed_in_the_same_claim,
    a_lock_renewed_during_its_rescue_is_not_released,
    a_lock_without_a_running_run_is_released_without_touching_runs,
    renewal_extends_only_locks_held_under_owner_and_token_also_after_expiry,
    a_finish_records_the_outcome_and_releases_only_its_own_lock,
    a_hand_over_makes_the_tick_due_at_once,
    failure_counts_reset_increment_and_keep,
    a_late_finish_over_a_lost_run_records_the_real_outcome,
    a_finish_stores_its_skips_and_sums_their_ticks,
    skip_records_are_listed_from_since_oldest_first,
    reschedule_fills_only_enabled_unlocked_rows_without_a_next_run,
    prune_history_deletes_old_finished_runs_skips_and_nodes_in_batches,
    apply_config_nothing_and_stale_write_nothing,
    apply_config_creates_without_overwriting_and_updates_in_place,
    the_orphan_flag_keeps_its_first_instant_and_is_cleared,
    a_document_without_a_version_keeps_the_applied_one,
    recent_runs_are_newest_first_and_filtered_by_task,
    the_listener_wakes_after_a_released_lock_and_an_applied_config,
];

// ---------------------------------------------------------------------------------------------
// Helpers written against the API only.
// ---------------------------------------------------------------------------------------------

const NODE: &str = "node-a";
const LIFETIME: Duration = Duration::from_secs(60);
const HOUR: chrono::Duration = chrono::Duration::hours(1);

/// Now, in whole seconds (so every instant the tests write round-trips exactly).
fn now_s() -> DateTime<Utc> {
    Utc::now().trunc_subsecs(0)
}

fn names(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

/// `t` is within a few seconds of the test's clock (the store's clock is the database's).
#[track_caller]
fn assert_near_now(t: DateTime<Utc>) {
    let off = (t - Utc::now()).num_milliseconds().abs();
    assert!(off < 5_000, "{t} is {off} ms from now");
}

#[track_caller]
fn assert_near(a: DateTime<Utc>, b: DateTime<Utc>) {
    let off = (a - b).num_milliseconds().abs();
    assert!(off < 2_000, "{a} and {b} are {off} ms apart");
}

static DIGESTS: AtomicU64 = AtomicU64::new(0);

/// Applies `changes` as a new (unversioned) document.
async fn apply(s: &dyn Store, changes: Vec<TaskChange>) {
    let digest = format!("digest-{}", DIGESTS.fetch_add(1, Ordering::Relaxed));
    let state = ConfigState::new(None, digest, NODE);
    let plan = s
        .apply_config(&move |_: &ConfigSnapshot| ConfigPlan::Apply {
            changes: changes.clone(),
            state: state.clone(),
            skips: Vec::new(),
        })
        .await
        .unwrap();
    assert!(matches!(plan, ConfigPlan::Apply { .. }));
}

fn create(name: &str, enabled: bool, next: Option<DateTime<Utc>>) -> TaskChange {
    TaskChange::Create {
        name: name.into(),
        cron: "0 * * * *".into(),
        timezone: "UTC".into(),
        enabled,
        next_run_at: next,
    }
}

/// Creates enabled tasks, each due at its instant.
async fn seed(s: &dyn Store, tasks: &[(&str, DateTime<Utc>)]) {
    apply(
        s,
        tasks
            .iter()
            .map(|(n, at)| create(n, true, Some(*at)))
            .collect(),
    )
    .await;
}

async fn row(s: &dyn Store, name: &str) -> TaskRow {
    let (_, rows) = s.load_tasks().await.unwrap();
    rows.into_iter()
        .find(|r| r.name == name)
        .unwrap_or_else(|| panic!("no row {name}"))
}

async fn run(s: &dyn Store, id: i64) -> RunRecord {
    s.recent_runs(None, 1_000)
        .await
        .unwrap()
        .into_iter()
        .find(|r| r.id == id)
        .unwrap_or_else(|| panic!("no run {id}"))
}

type RescueFn<'a> = Box<dyn Fn(&ExpiredLock) -> RescueDecision + Send + Sync + 'a>;
type PlanFn<'a> = Box<dyn Fn(&DueTask) -> DueDecision + Send + Sync + 'a>;

/// A claim policy made of two closures, recording what it was offered.
struct Rules<'a> {
    rescue: RescueFn<'a>,
    plan: PlanFn<'a>,
    offered: Mutex<Vec<String>>,
    tasks: Mutex<Vec<DueTask>>,
    expired: Mutex<Vec<ExpiredLock>>,
    clocks: Mutex<Vec<DateTime<Utc>>>,
}

impl<'a> Rules<'a> {
    /// Waits for every expired lock; runs every due tick and schedules the next an hour later.
    fn hourly() -> Self {
        Self {
            rescue: Box::new(|_| RescueDecision::Wait),
            plan: Box::new(|t| {
                DueDecision::Run(scheduled(tick(t), Some(tick(t) + HOUR), Recovery::Rerun))
            }),
            offered: Mutex::default(),
            tasks: Mutex::default(),
            expired: Mutex::default(),
            clocks: Mutex::default(),
        }
    }

    fn plan(mut self, plan: impl Fn(&DueTask) -> DueDecision + Send + Sync + 'a) -> Self {
        self.plan = Box::new(plan);
        self
    }

    fn rescue(
        mut self,
        rescue: impl Fn(&ExpiredLock) -> RescueDecision + Send + Sync + 'a,
    ) -> Self {
        self.rescue = Box::new(rescue);
        self
    }

    fn offered(&self) -> Vec<String> {
        self.offered.lock().unwrap().clone()
    }

    /// The due tasks offered, as offered.
    fn tasks(&self) -> Vec<DueTask> {
        self.tasks.lock().unwrap().clone()
    }

    fn expired(&self) -> Vec<ExpiredLock> {
        self.expired.lock().unwrap().clone()
    }
}

impl ClaimPolicy for Rules<'_> {
    fn rescue(&self, lock: &ExpiredLock, db_now: DateTime<Utc>) -> RescueDecision {
        self.clocks.lock().unwrap().push(db_now);
        self.expired.lock().unwrap().push(lock.clone());
        (self.rescue)(lock)
    }

    fn plan(&self, task: &DueTask, db_now: DateTime<Utc>) -> DueDecision {
        self.clocks.lock().unwrap().push(db_now);
        self.offered.lock().unwrap().push(task.name.clone());
        self.tasks.lock().unwrap().push(task.clone());
        (self.plan)(task)
    }
}

/// A plan that keeps the task due (its next run is the tick just served).
fn stay_due(t: &DueTask) -> DueDecision {
    DueDecision::Run(scheduled(tick(t), Some(tick(t)), Recovery::Rerun))
}

fn release(
    status: RunStatus,
    error: Option<&str>,
    requeue: Option<Requeue>,
    failures: FailureCount,
) -> RescueDecision {
    RescueDecision::Release {
        run_end: Some(RunEnd::new(status, error.map(str::to_owned))),
        requeue,
        failures,
    }
}

/// The tick a due task offers (the tests' tasks have one unless they say otherwise).
#[track_caller]
fn tick(task: &DueTask) -> DateTime<Utc> {
    task.next_run_at.expect("a scheduled tick is due")
}

/// A plan serving the scheduled tick `served`, scheduling `next`, with the suite's lock lifetime.
fn scheduled(served: DateTime<Utc>, next: Option<DateTime<Utc>>, recovery: Recovery) -> ClaimPlan {
    ClaimPlan::scheduled(served, next, recovery, LIFETIME)
}

/// `keys`, each to be renewed for the suite's lock lifetime.
fn held(keys: &[LockKey]) -> Vec<(LockKey, Duration)> {
    keys.iter().map(|k| (k.clone(), LIFETIME)).collect()
}

async fn claim_as(
    s: &dyn Store,
    node: &str,
    tasks: &[&str],
    limit: usize,
    policy: &dyn ClaimPolicy,
) -> ClaimOutcome {
    let tasks = names(tasks);
    s.claim(ClaimRequest::new(node, &tasks, limit), policy)
        .await
        .unwrap()
}

async fn claim(
    s: &dyn Store,
    tasks: &[&str],
    limit: usize,
    policy: &dyn ClaimPolicy,
) -> ClaimOutcome {
    claim_as(s, NODE, tasks, limit, policy).await
}

/// Claims `task` (due now) with `policy` and returns its run.
async fn claim_one(s: &dyn Store, task: &str, policy: &dyn ClaimPolicy) -> ClaimedRun {
    let out = claim(s, &[task], 1, policy).await;
    assert_eq!(out.claimed.len(), 1, "{task} claimed: {out:?}");
    out.claimed.into_iter().next().unwrap()
}

fn key(run: &ClaimedRun) -> LockKey {
    LockKey::new(&run.task_name, run.lock_token)
}

fn finish(
    run: &ClaimedRun,
    status: RunStatus,
    error: Option<&str>,
    failures: FailureCount,
) -> RunFinish {
    RunFinish::new(
        run.run_id,
        key(run),
        RunEnd::new(status, error.map(str::to_owned)),
        failures,
    )
}

/// Finishes one run and returns whether its lock was held.
async fn finish_one(s: &dyn Store, f: RunFinish) -> bool {
    let results = s.finish_runs(&[f]).await.unwrap();
    assert_eq!(results.len(), 1);
    results[0].lock_held
}

fn skip(
    task: &str,
    reason: SkipReason,
    first: DateTime<Utc>,
    last: DateTime<Utc>,
    ticks: i64,
) -> SkipRecord {
    SkipRecord::new(task, reason, first, last, ticks)
}

// ---------------------------------------------------------------------------------------------
// The behaviours.
// ---------------------------------------------------------------------------------------------

async fn migrating_again_is_a_no_op(s: &dyn Store, _: &Arrange) {
    s.migrate().await.unwrap();
    s.migrate().await.unwrap();
    let (db_now, rows) = s.load_tasks().await.unwrap();
    assert_near_now(db_now);
    assert!(rows.is_empty());
    assert_eq!(s.config_state().await.unwrap(), None);
    // The tables work after the repeated migration.
    seed(s, &[("a", now_s())]).await;
    s.migrate().await.unwrap();
    assert_eq!(s.load_tasks().await.unwrap().1.len(), 1);
}

async fn a_database_migrated_by_a_newer_binary_is_refused(s: &dyn Store, arrange: &Arrange) {
    arrange.record_future_migration().await;
    let error = s.migrate().await.unwrap_err();
    assert!(matches!(error, StoreError::Setup { .. }), "{error:?}");
    assert!(!error.is_transient());
    let message = error.to_string();
    assert!(message.contains("newer than this binary"), "{message}");
    assert!(message.contains("999"), "{message}");
}

async fn nodes_register_beat_and_stop(s: &dyn Store, arrange: &Arrange) {
    let silent_after = Duration::from_secs(30);
    let beat = s.heartbeat("me", silent_after).await.unwrap();
    assert!(!beat.registered, "no row yet");
    assert!(beat.silent.is_empty());
    for id in ["me", "crashed", "stopped"] {
        s.register_node(&NodeInfo::new(id, "host", 7, "test", names(&["a", "b"])))
            .await
            .unwrap();
    }
    s.deregister_node("stopped").await.unwrap();
    s.deregister_node("never-registered").await.unwrap();
    for id in ["crashed", "stopped"] {
        arrange.age_node(id, Duration::from_secs(300)).await;
    }
    let beat = s.heartbeat("me", silent_after).await.unwrap();
    assert!(beat.registered);
    assert_eq!(
        beat.silent,
        ["crashed"],
        "a cleanly stopped node is not silent"
    );

    // A node that beats again is heard; a stopped node that beats is running again.
    assert!(
        s.heartbeat("crashed", silent_after)
            .await
            .unwrap()
            .registered
    );
    assert!(
        s.heartbeat("stopped", silent_after)
            .await
            .unwrap()
            .registered
    );
    assert!(
        s.heartbeat("me", silent_after)
            .await
            .unwrap()
            .silent
            .is_empty()
    );
    arrange.age_node("stopped", Duration::from_secs(300)).await;
    assert_eq!(
        s.heartbeat("me", silent_after).await.unwrap().silent,
        ["stopped"]
    );
    // Registering again is an upsert.
    s.register_node(&NodeInfo::new("stopped", "host2", 8, "test", vec![]))
        .await
        .unwrap();
    assert!(
        s.heartbeat("me", silent_after)
            .await
            .unwrap()
            .silent
            .is_empty()
    );
}

async fn next_wake_reports_the_earliest_claimable_tick_and_lock_expiry(s: &dyn Store, _: &Arrange) {
    let wake = s.next_wake(&names(&["a"])).await.unwrap();
    assert_near_now(wake.db_now);
    assert_eq!((wake.due_at, wake.expiry_at), (None, None), "empty store");

    let t = now_s() - HOUR;
    seed(
        s,
        &[
            ("a", t + chrono::Duration::minutes(10)),
            ("unlisted", t),
            ("d", t + chrono::Duration::minutes(20)),
        ],
    )
    .await;
    apply(
        s,
        vec![
            create("off", false, Some(t - HOUR)),
            create("none", true, None),
        ],
    )
    .await;
    let listed = names(&["a", "d", "off", "none", "missing"]);
    let wake = s.next_wake(&listed).await.unwrap();
    assert_eq!(wake.due_at, Some(t + chrono::Duration::minutes(10)));
    assert_eq!(wake.expiry_at, None);
    assert_eq!(s.next_wake(&[]).await.unwrap().due_at, None);

    let before = Utc::now();
    claim_one(s, "a", &Rules::hourly()).await;
    let after = Utc::now();
    let wake = s.next_wake(&listed).await.unwrap();
    assert_eq!(
        wake.due_at,
        Some(t + chrono::Duration::minutes(20)),
        "a locked task is not due"
    );
    let expiry = wake.expiry_at.expect("a lock is held");
    let lifetime = chrono::Duration::from_std(LIFETIME).unwrap();
    let slack = chrono::Duration::seconds(2);
    assert!(
        expiry >= before + lifetime - slack && expiry <= after + lifetime + slack,
        "{expiry} is not a lifetime after the claim"
    );
    // Any lock's expiry counts, whoever may claim the task.
    assert_eq!(s.next_wake(&[]).await.unwrap().expiry_at, Some(expiry));
}

async fn claim_takes_due_enabled_unlocked_listed_tasks_oldest_first_up_to_the_limit(
    s: &dyn Store,
    _: &Arrange,
) {
    let t = now_s();
    seed(
        s,
        &[
            ("old", t - HOUR * 3),
            ("mid", t - HOUR * 2),
            ("young", t - HOUR),
            ("future", t + HOUR),
            ("unlisted", t - HOUR * 5),
        ],
    )
    .await;
    apply(
        s,
        vec![
            create("off", false, Some(t - HOUR * 4)),
            create("none", true, None),
        ],
    )
    .await;
    let listed = ["old", "mid", "young", "future", "off", "none", "missing"];

    let rules = Rules::hourly();
    let out = claim(s, &listed, 2, &rules).await;
    assert_eq!(
        rules.offered(),
        ["old", "mid"],
        "the oldest due ticks, in order"
    );
    assert!(out.rescued.is_empty() && out.waiting.is_empty() && out.left.is_empty());
    let mut claimed: Vec<&str> = out.claimed.iter().map(|r| r.task_name.as_str()).collect();
    claimed.sort();
    assert_eq!(claimed, ["mid", "old"]);
    assert_ne!(out.claimed[0].lock_token, out.claimed[1].lock_token);
    assert_ne!(out.claimed[0].run_id, out.claimed[1].run_id);
    for c in &out.claimed {
        assert_near_now(c.claimed_at);
        assert_eq!(c.previous_finished_at, None);
    }

    // "old" is due again (its next run is an hour after its tick) but locked.
    assert_eq!(row(s, "old").await.next_run_at, Some(t - HOUR * 2));
    let rules = Rules::hourly();
    let out = claim(s, &listed, 10, &rules).await;
    assert_eq!(rules.offered(), ["young"]);
    assert_eq!(out.claimed.len(), 1);
    let rules = Rules::hourly();
    let out = claim(s, &listed, 10, &rules).await;
    assert!(
        out.claimed.is_empty() && rules.offered().is_empty(),
        "{out:?}"
    );
    // A zero limit claims nothing.
    seed(s, &[("later", t)]).await;
    let rules = Rules::hourly();
    let out = claim(s, &["later"], 0, &rules).await;
    assert!(out.claimed.is_empty() && rules.offered().is_empty());
}

async fn a_claim_records_what_the_plan_says(s: &dyn Store, _: &Arrange) {
    let t = now_s() - HOUR;
    seed(s, &[("a", t), ("b", t)]).await;
    let rules = Rules::hourly().plan(|task| {
        let (served, next) = match task.name.as_str() {
            "a" => (tick(task), Some(tick(task) + HOUR * 5)),
            _ => (tick(task) - HOUR, None),
        };
        DueDecision::Run(scheduled(served, next, Recovery::Never))
    });
    let out = claim(s, &["a", "b"], 5, &rules).await;
    assert_eq!(out.claimed.len(), 2);
    {
        let clocks = rules.clocks.lock().unwrap();
        assert!(
            clocks.iter().all(|c| *c == clocks[0]),
            "one clock per claim"
        );
        assert_near_now(clocks[0]);
        assert!(out.claimed.iter().all(|c| c.claimed_at == clocks[0]));
    }
    for c in &out.claimed {
        let row = row(s, &c.task_name).await;
        let run = run(s, c.run_id).await;
        assert_eq!(run.task_name, c.task_name);
        assert_eq!(run.status, RunStatus::Running);
        assert_eq!(run.node_id, NODE);
        assert_eq!(run.scheduled_at, c.scheduled_at);
        assert_eq!(run.finished_at, None);
        assert_eq!(run.ticks_collapsed, 0);
        assert_eq!(run.error, None);
        assert_near(run.started_at, c.claimed_at);
        assert_eq!(row.last_scheduled_at, Some(c.scheduled_at));
        match c.task_name.as_str() {
            "a" => {
                assert_eq!(c.scheduled_at, t);
                assert_eq!(row.next_run_at, Some(t + HOUR * 5));
            }
            _ => {
                assert_eq!(c.scheduled_at, t - HOUR);
                assert_eq!(row.next_run_at, None, "the schedule never fires again");
            }
        }
    }
    assert_eq!(s.recent_runs(None, 10).await.unwrap().len(), 2);
}

async fn a_left_task_is_untouched(s: &dyn Store, _: &Arrange) {
    let t = now_s();
    seed(s, &[("a", t - HOUR), ("b", t - HOUR * 2)]).await;
    let before = row(s, "a").await;
    let rules = Rules::hourly().plan(|task| {
        if task.name == "a" {
            DueDecision::Leave
        } else {
            stay_due(task)
        }
    });
    let out = claim(s, &["a", "b"], 5, &rules).await;
    assert_eq!(out.left, ["a"]);
    assert_eq!(out.claimed.len(), 1);
    assert_eq!(row(s, "a").await, before);
    assert!(s.recent_runs(Some("a"), 10).await.unwrap().is_empty());
    let wake = s.next_wake(&names(&["a"])).await.unwrap();
    assert_eq!(wake.due_at, Some(t - HOUR), "still due, still unlocked");
}

async fn an_expired_lock_the_policy_waits_for_is_left_alone(s: &dyn Store, arrange: &Arrange) {
    let t = now_s() - HOUR;
    seed(s, &[("a", t)]).await;
    let rules = Rules::hourly()
        .plan(|task| DueDecision::Run(scheduled(tick(task), Some(tick(task)), Recovery::Never)));
    let run = claim_one(s, "a", &rules).await;
    let rules = Rules::hourly();
    assert!(
        claim(s, &["a"], 1, &rules).await.waiting.is_empty(),
        "not expired yet"
    );

    arrange.expire_lock("a").await;
    let rules = Rules::hourly();
    let out = claim(s, &["a"], 1, &rules).await;
    assert!(out.rescued.is_empty() && out.claimed.is_empty(), "{out:?}");
    assert_eq!(out.waiting.len(), 1);
    let lock = &out.waiting[0];
    assert_eq!(lock.key, key(&run));
    assert_eq!(lock.owner, NODE);
    assert!(lock.expired_at < Utc::now());
    let locked = lock.run.as_ref().expect("its run is running");
    assert_eq!(locked.run_id, run.run_id);
    assert_eq!(locked.scheduled_at, t);
    assert_eq!(
        locked.recovery,
        Recovery::Never,
        "the claim's recovery rule"
    );
    assert_eq!(rules.expired().len(), 1);

    let record = self::run(s, run.run_id).await;
    assert_eq!(record.status, RunStatus::Running);
    assert_eq!(
        s.renew_locks(NODE, &held(&[key(&run)])).await.unwrap(),
        [key(&run)],
        "the lock is still its owner's"
    );
}

async fn a_released_lock_ends_its_run_as_decided_and_makes_the_tick_due_again(
    s: &dyn Store,
    arrange: &Arrange,
) {
    let t = now_s() - HOUR * 2;
    seed(s, &[("a", t), ("b", t), ("c", t), ("d", t)]).await;
    let rules = Rules::hourly().plan(|task| {
        let next = (task.name != "d").then_some(tick(task) + HOUR);
        DueDecision::Run(scheduled(tick(task), next, Recovery::Rerun))
    });
    let out = claim(s, &["a", "b", "c", "d"], 4, &rules).await;
    assert_eq!(out.claimed.len(), 4);
    let runs: std::collections::HashMap<String, ClaimedRun> = out
        .claimed
        .into_iter()
        .map(|r| (r.task_name.clone(), r))
        .collect();
    for name in ["a", "b", "c", "d"] {
        arrange.expire_lock(name).await;
    }

    let rules = Rules::hourly().rescue(|lock| match lock.key.task_name.as_str() {
        // Rerun the tick: earlier than the stored next run, so it wins.
        "a" => release(
            RunStatus::Lost,
            Some("its node went silent"),
            Some(Requeue::Tick(t)),
            FailureCount::Increment,
        ),
        // No rerun: the stored next run stays.
        "b" => release(RunStatus::Lost, None, None, FailureCount::Keep),
        // A rerun later than the stored next run does not postpone it.
        "c" => release(
            RunStatus::Lost,
            None,
            Some(Requeue::Tick(t + HOUR * 5)),
            FailureCount::Reset,
        ),
        // No stored next run: the rerun tick is the next run.
        _ => release(
            RunStatus::Lost,
            Some("gone"),
            Some(Requeue::Tick(t)),
            FailureCount::Keep,
        ),
    });
    let out = claim(s, &["a", "b", "c", "d"], 0, &rules).await;
    assert!(out.waiting.is_empty() && out.claimed.is_empty());
    let mut rescued: Vec<&str> = out.rescued.iter().map(|r| r.task_name.as_str()).collect();
    rescued.sort();
    assert_eq!(rescued, ["a", "b", "c", "d"]);
    let a = out.rescued.iter().find(|r| r.task_name == "a").unwrap();
    assert_eq!(a.previous_owner, NODE);
    assert_eq!(a.run_id, Some(runs["a"].run_id));
    assert_eq!(
        a.run_end,
        Some(RunEnd::new(
            RunStatus::Lost,
            Some("its node went silent".into())
        ))
    );
    assert_eq!(a.requeue, Some(Requeue::Tick(t)));

    let ra = run(s, runs["a"].run_id).await;
    assert_eq!(ra.status, RunStatus::Lost);
    assert_eq!(ra.error.as_deref(), Some("its node went silent"));
    assert_near_now(ra.finished_at.expect("ended"));
    let rb = run(s, runs["b"].run_id).await;
    assert_eq!((rb.status, rb.error), (RunStatus::Lost, None));

    assert_eq!(row(s, "a").await.next_run_at, Some(t));
    assert_eq!(row(s, "b").await.next_run_at, Some(t + HOUR));
    assert_eq!(row(s, "c").await.next_run_at, Some(t + HOUR));
    assert_eq!(row(s, "d").await.next_run_at, Some(t));
    assert_eq!(arrange.consecutive_failures("a").await, 1);
    assert_eq!(arrange.consecutive_failures("b").await, 0);

    // The old tokens are worth nothing now.
    let old: Vec<LockKey> = runs.values().map(key).collect();
    assert!(s.renew_locks(NODE, &held(&old)).await.unwrap().is_empty());
    // The tick made due again is claimed again, under a new token.
    let again = claim_one(s, "a", &Rules::hourly()).await;
    assert_eq!(again.scheduled_at, t);
    assert_ne!(again.lock_token, runs["a"].lock_token);
}

async fn a_rescued_tick_is_claimed_in_the_same_claim(s: &dyn Store, arrange: &Arrange) {
    let t = now_s() - HOUR;
    seed(s, &[("a", t)]).await;
    let first = claim_one(
        s,
        "a",
        &Rules::hourly().plan(|task| {
            DueDecision::Run(scheduled(
                tick(task),
                Some(tick(task) + HOUR * 24),
                Recovery::Rerun,
            ))
        }),
    )
    .await;
    arrange.expire_lock("a").await;
    let rules = Rules::hourly()
        .rescue(|lock| {
            release(
                RunStatus::Lost,
                None,
                lock.run.as_ref().map(|r| Requeue::Tick(r.scheduled_at)),
                FailureCount::Keep,
            )
        })
        .plan(stay_due);
    let out = claim(s, &["a"], 1, &rules).await;
    assert_eq!(out.rescued.len(), 1);
    assert_eq!(out.claimed.len(), 1, "{out:?}");
    assert_eq!(out.claimed[0].scheduled_at, first.scheduled_at);
    assert_ne!(out.claimed[0].lock_token, first.lock_token);
}

/// The release is fenced by token and expiry: an owner that renews its lock while another node
/// is deciding to rescue it keeps it. Either the renewal lands first and the release does
/// nothing, or the release lands first and the renewal fails; never both. (PostgreSQL lets the
/// renewal in beside the claim; SQLite's claim holds the write lock, so the renewal waits, gives
/// up here, and fails afterwards.)
async fn a_lock_renewed_during_its_rescue_is_not_released(s: &dyn Store, arrange: &Arrange) {
    let t = now_s() - HOUR;
    seed(s, &[("a", t)]).await;
    let run = claim_one(s, "a", &Rules::hourly()).await;
    arrange.expire_lock("a").await;
    let renewed_inside = AtomicBool::new(false);
    let rules = Rules::hourly().rescue(|lock| {
        // The owner renews while the rescuer decides (a policy must not do I/O; this test
        // breaks the rule on purpose to stand in for a concurrent node).
        let renewed = tokio::task::block_in_place(|| {
            tokio::runtime::Handle::current().block_on(async {
                tokio::time::timeout(
                    Duration::from_secs(1),
                    s.renew_locks(NODE, &held(std::slice::from_ref(&lock.key))),
                )
                .await
            })
        });
        if let Ok(Ok(keys)) = renewed {
            renewed_inside.store(!keys.is_empty(), Ordering::SeqCst);
        }
        release(RunStatus::Lost, None, None, FailureCount::Keep)
    });
    let out = claim(s, &["a"], 0, &rules).await;
    let released = !out.rescued.is_empty();
    let renewed_inside = renewed_inside.load(Ordering::SeqCst);
    assert!(
        released != renewed_inside,
        "released: {released}, renewed during the rescue: {renewed_inside}"
    );
    let renewed_after = !s
        .renew_locks(NODE, &held(&[key(&run)]))
        .await
        .unwrap()
        .is_empty();
    assert_eq!(
        renewed_after, !released,
        "the lock is the owner's iff not released"
    );
    assert_eq!(
        self::run(s, run.run_id).await.status,
        if released {
            RunStatus::Lost
        } else {
            RunStatus::Running
        }
    );
}

async fn a_lock_without_a_running_run_is_released_without_touching_runs(
    s: &dyn Store,
    arrange: &Arrange,
) {
    let t = now_s() - HOUR;
    seed(s, &[("a", t)]).await;
    let done = claim_one(s, "a", &Rules::hourly()).await;
    assert!(
        finish_one(
            s,
            finish(&done, RunStatus::Succeeded, None, FailureCount::Reset)
        )
        .await
    );
    let before = run(s, done.run_id).await;

    let ghost = Uuid::new_v4();
    arrange
        .plant_lock(
            "a",
            "ghost",
            ghost,
            Utc::now() - chrono::Duration::minutes(1),
        )
        .await;
    let rules = Rules::hourly()
        .rescue(|_| release(RunStatus::Lost, Some("ghost"), None, FailureCount::Keep));
    let out = claim(s, &["a"], 0, &rules).await;
    let offered = rules.expired();
    assert_eq!(offered.len(), 1);
    assert_eq!(offered[0].key, LockKey::new("a", ghost));
    assert_eq!(offered[0].owner, "ghost");
    assert!(offered[0].run.is_none(), "no run under the lock");
    assert_eq!(out.rescued.len(), 1);
    assert_eq!(out.rescued[0].run_id, None);
    assert_eq!(out.rescued[0].previous_owner, "ghost");

    let after = run(s, done.run_id).await;
    assert_eq!(
        (after.status, after.error, after.finished_at),
        (before.status, before.error, before.finished_at),
        "the earlier run is untouched"
    );
    assert_eq!(s.recent_runs(Some("a"), 10).await.unwrap().len(), 1);
    let wake = s.next_wake(&names(&["a"])).await.unwrap();
    assert_eq!(wake.due_at, Some(t + HOUR), "unlocked, next run unchanged");
    assert_eq!(wake.expiry_at, None);
}

async fn renewal_extends_only_locks_held_under_owner_and_token_also_after_expiry(
    s: &dyn Store,
    arrange: &Arrange,
) {
    let t = now_s() - HOUR;
    seed(s, &[("mine", t), ("stolen", t)]).await;
    let mine = claim_as(s, "me", &["mine"], 1, &Rules::hourly())
        .await
        .claimed
        .remove(0);
    let stolen = claim_as(s, "thief", &["stolen"], 1, &Rules::hourly())
        .await
        .claimed
        .remove(0);
    arrange.expire_lock("mine").await;
    let before = Utc::now();

    let hour = Duration::from_secs(3_600);
    let keys = [
        (key(&mine), hour),
        (LockKey::new("stolen", stolen.lock_token), hour),
        (LockKey::new("mine", Uuid::new_v4()), hour),
        (LockKey::new("missing", Uuid::new_v4()), hour),
    ];
    let renewed = s.renew_locks("me", &keys).await.unwrap();
    assert_eq!(renewed, [key(&mine)], "expired but not released: renewed");
    assert!(s.renew_locks("me", &[]).await.unwrap().is_empty());

    // "mine" is no longer expired; "stolen" kept the thief's (shorter) expiry.
    let rules = Rules::hourly();
    let out = claim(s, &[], 0, &rules).await;
    assert!(out.waiting.is_empty(), "{out:?}");
    let expiry = s.next_wake(&[]).await.unwrap().expiry_at.unwrap();
    assert!(
        expiry < before + chrono::Duration::seconds(120),
        "the thief's lock was not extended: {expiry}"
    );
    arrange.expire_lock("stolen").await;
    let out = claim(s, &[], 0, &Rules::hourly()).await;
    let waiting: Vec<&str> = out
        .waiting
        .iter()
        .map(|l| l.key.task_name.as_str())
        .collect();
    assert_eq!(waiting, ["stolen"]);
}

async fn a_finish_records_the_outcome_and_releases_only_its_own_lock(
    s: &dyn Store,
    arrange: &Arrange,
) {
    let t = now_s() - HOUR;
    seed(s, &[("a", t), ("b", t)]).await;
    let out = claim(s, &["a", "b"], 2, &Rules::hourly()).await;
    let a = out
        .claimed
        .iter()
        .find(|r| r.task_name == "a")
        .unwrap()
        .clone();
    let b = out
        .claimed
        .iter()
        .find(|r| r.task_name == "b")
        .unwrap()
        .clone();

    let mut forged = finish(
        &b,
        RunStatus::Failed,
        Some("forged"),
        FailureCount::Increment,
    );
    forged.lock = LockKey::new("b", Uuid::new_v4());
    let results = s
        .finish_runs(&[
            finish(&a, RunStatus::Succeeded, None, FailureCount::Reset),
            forged,
        ])
        .await
        .unwrap();
    let lock_held: Vec<(i64, bool)> = results.iter().map(|r| (r.run_id, r.lock_held)).collect();
    assert_eq!(lock_held, [(a.run_id, true), (b.run_id, false)]);

    let ra = run(s, a.run_id).await;
    assert_eq!(
        (ra.status, ra.error.as_deref()),
        (RunStatus::Succeeded, None)
    );
    let finished = ra.finished_at.expect("finished");
    assert!(finished >= ra.started_at);
    assert_near_now(finished);
    let rb = run(s, b.run_id).await;
    assert_eq!(
        rb.status,
        RunStatus::Running,
        "a run is fenced by its token too"
    );
    assert_eq!(rb.finished_at, None);

    let wake = s.next_wake(&names(&["a", "b"])).await.unwrap();
    assert_eq!(
        wake.due_at,
        Some(t + HOUR),
        "a is unlocked with its planned next run"
    );
    assert_eq!(
        s.renew_locks(NODE, &held(&[key(&b)])).await.unwrap(),
        [key(&b)]
    );
    assert!(
        s.renew_locks(NODE, &held(&[key(&a)]))
            .await
            .unwrap()
            .is_empty()
    );

    assert!(
        finish_one(
            s,
            finish(&b, RunStatus::Failed, Some("boom"), FailureCount::Increment)
        )
        .await
    );
    let rb = run(s, b.run_id).await;
    assert_eq!(
        (rb.status, rb.error.as_deref()),
        (RunStatus::Failed, Some("boom"))
    );
    assert_eq!(arrange.consecutive_failures("b").await, 1);
    assert!(s.finish_runs(&[]).await.unwrap().is_empty());

    // The next claim knows when the previous run ended.
    let next = claim_one(s, "a", &Rules::hourly()).await;
    assert_near(
        next.previous_finished_at.expect("a run ended before"),
        finished,
    );
}

async fn a_hand_over_makes_the_tick_due_at_once(s: &dyn Store, _: &Arrange) {
    let t = now_s() - HOUR;
    seed(s, &[("a", t), ("b", t), ("c", t)]).await;
    let rules = Rules::hourly().plan(|task| {
        let next = (task.name != "c").then_some(tick(task) + HOUR * 2);
        DueDecision::Run(scheduled(tick(task), next, Recovery::Rerun))
    });
    let out = claim(s, &["a", "b", "c"], 3, &rules).await;
    let by_name = |n: &str| out.claimed.iter().find(|r| r.task_name == n).unwrap();
    let mut finishes = Vec::new();
    for (name, hand_over) in [("a", t), ("b", t + HOUR * 3), ("c", t)] {
        let mut f = finish(
            by_name(name),
            RunStatus::Interrupted,
            Some("the node shut down"),
            FailureCount::Keep,
        );
        f.requeue = Some(Requeue::Tick(hand_over));
        finishes.push(f);
    }
    let results = s.finish_runs(&finishes).await.unwrap();
    assert!(results.iter().all(|r| r.lock_held));
    assert_eq!(row(s, "a").await.next_run_at, Some(t), "due again at once");
    assert_eq!(
        row(s, "b").await.next_run_at,
        Some(t + HOUR * 2),
        "the earlier wins"
    );
    assert_eq!(
        row(s, "c").await.next_run_at,
        Some(t),
        "no next run: the hand-over's"
    );
    let ra = run(s, by_name("a").run_id).await;
    assert_eq!(ra.status, RunStatus::Interrupted);
    let again = claim_one(s, "a", &Rules::hourly()).await;
    assert_eq!(again.scheduled_at, t, "the same tick runs again");
}

async fn failure_counts_reset_increment_and_keep(s: &dyn Store, arrange: &Arrange) {
    seed(s, &[("a", now_s() - HOUR)]).await;
    let rules = Rules::hourly().plan(stay_due);
    for (status, failures, expected) in [
        (RunStatus::Failed, FailureCount::Increment, 1),
        (RunStatus::Failed, FailureCount::Increment, 2),
        (RunStatus::Interrupted, FailureCount::Keep, 2),
        (RunStatus::Succeeded, FailureCount::Reset, 0),
        (RunStatus::Failed, FailureCount::Increment, 1),
    ] {
        let run = claim_one(s, "a", &rules).await;
        assert!(finish_one(s, finish(&run, status, None, failures)).await);
        assert_eq!(
            arrange.consecutive_failures("a").await,
            expected,
            "after {failures:?}"
        );
    }
}

async fn a_late_finish_over_a_lost_run_records_the_real_outcome(s: &dyn Store, arrange: &Arrange) {
    let t = now_s() - HOUR;
    seed(s, &[("a", t), ("b", t)]).await;
    let rules = Rules::hourly().plan(stay_due);
    let out = claim(s, &["a", "b"], 2, &rules).await;
    let a = out
        .claimed
        .iter()
        .find(|r| r.task_name == "a")
        .unwrap()
        .clone();
    let b = out
        .claimed
        .iter()
        .find(|r| r.task_name == "b")
        .unwrap()
        .clone();
    arrange.expire_lock("a").await;
    arrange.expire_lock("b").await;
    let rescue = Rules::hourly()
        .rescue(|_| {
            release(
                RunStatus::Lost,
                Some("its node went silent"),
                None,
                FailureCount::Keep,
            )
        })
        .plan(stay_due);
    // Rescued, and "a" claimed again by another node.
    let out = claim_as(s, "node-b", &["a"], 1, &rescue).await;
    assert_eq!(out.rescued.len(), 2);
    let a2 = out.claimed.into_iter().next().expect("a claimed again");

    let results = s
        .finish_runs(&[
            finish(&a, RunStatus::Succeeded, None, FailureCount::Reset),
            finish(&b, RunStatus::Failed, Some("boom"), FailureCount::Increment),
        ])
        .await
        .unwrap();
    assert!(results.iter().all(|r| !r.lock_held), "{results:?}");
    let ra = run(s, a.run_id).await;
    assert_eq!(ra.status, RunStatus::Succeeded, "the real outcome");
    assert_eq!(
        ra.error.as_deref(),
        Some("(recorded after another node released the lock)")
    );
    let rb = run(s, b.run_id).await;
    assert_eq!(rb.status, RunStatus::Failed);
    assert_eq!(
        rb.error.as_deref(),
        Some("boom (recorded after another node released the lock)")
    );
    assert_eq!(
        arrange.consecutive_failures("b").await,
        0,
        "the task row is not ours"
    );

    // The new holder is undisturbed.
    assert_eq!(
        s.renew_locks("node-b", &held(&[key(&a2)])).await.unwrap(),
        [key(&a2)]
    );
    assert_eq!(run(s, a2.run_id).await.status, RunStatus::Running);
    // A run already finished is not written again.
    assert!(
        !finish_one(
            s,
            finish(
                &a,
                RunStatus::Failed,
                Some("again"),
                FailureCount::Increment
            )
        )
        .await
    );
    let ra_again = run(s, a.run_id).await;
    assert_eq!(
        (ra_again.status, ra_again.error, ra_again.finished_at),
        (ra.status, ra.error, ra.finished_at)
    );
}

async fn a_finish_stores_its_skips_and_sums_their_ticks(s: &dyn Store, _: &Arrange) {
    let t = now_s() - HOUR;
    seed(s, &[("a", t)]).await;
    let run = claim_one(s, "a", &Rules::hourly()).await;
    let m = chrono::Duration::minutes;
    let mut misfire = skip("a", SkipReason::Misfire, t + m(10), t + m(30), 3);
    misfire.run_id = Some(run.run_id);
    let mut overlap = skip("a", SkipReason::Overlap, t + m(40), t + m(50), 2);
    overlap.run_id = Some(run.run_id);
    overlap.exact = false;
    let mut f = finish(&run, RunStatus::Succeeded, None, FailureCount::Reset);
    f.skips = vec![overlap.clone(), misfire.clone()];
    assert!(finish_one(s, f).await);

    assert_eq!(self::run(s, run.run_id).await.ticks_collapsed, 5);
    assert_eq!(s.skips("a", t).await.unwrap(), [misfire, overlap.clone()]);
    assert_eq!(s.skips("a", t + m(35)).await.unwrap(), [overlap]);
    assert!(s.skips("b", t).await.unwrap().is_empty());
}

async fn skip_records_are_listed_from_since_oldest_first(s: &dyn Store, _: &Arrange) {
    let t = now_s() - HOUR;
    let m = chrono::Duration::minutes;
    let late = skip("a", SkipReason::Misfire, t + m(30), t + m(40), 11);
    let mut early = skip("a", SkipReason::Overlap, t, t + m(10), 2);
    early.exact = false;
    let twin = skip("a", SkipReason::InvalidSchedule, t, t, 1);
    let other = skip("b", SkipReason::Misfire, t, t + m(50), 1);
    s.record_skips(&[late.clone(), early.clone(), other.clone()])
        .await
        .unwrap();
    s.record_skips(std::slice::from_ref(&twin)).await.unwrap();
    s.record_skips(&[]).await.unwrap();

    assert_eq!(
        s.skips("a", t - HOUR).await.unwrap(),
        [early.clone(), twin.clone(), late.clone()],
        "by first tick, then in the order recorded"
    );
    assert_eq!(
        s.skips("a", t + m(10)).await.unwrap(),
        [early, late.clone()],
        "ranges ending at or after since"
    );
    assert_eq!(s.skips("a", t + m(40)).await.unwrap(), [late]);
    assert!(s.skips("a", t + m(41)).await.unwrap().is_empty());
    assert_eq!(s.skips("b", t).await.unwrap(), [other]);
}

async fn reschedule_fills_only_enabled_unlocked_rows_without_a_next_run(
    s: &dyn Store,
    _: &Arrange,
) {
    let t = now_s();
    apply(
        s,
        vec![
            create("none", true, None),
            create("has", true, Some(t + HOUR)),
            create("off", false, None),
            create("locked", true, Some(t - HOUR)),
        ],
    )
    .await;
    // "locked" is claimed by a plan that never fires again: locked, with no next run.
    claim_one(
        s,
        "locked",
        &Rules::hourly()
            .plan(|task| DueDecision::Run(scheduled(tick(task), None, Recovery::Rerun))),
    )
    .await;
    assert_eq!(row(s, "locked").await.next_run_at, None);

    let next = t + HOUR * 2;
    let changed = s
        .reschedule(&["none", "has", "off", "locked", "missing"].map(|n| (n.to_owned(), next)))
        .await
        .unwrap();
    assert_eq!(changed, ["none"]);
    assert_eq!(row(s, "none").await.next_run_at, Some(next));
    assert_eq!(row(s, "has").await.next_run_at, Some(t + HOUR));
    assert_eq!(row(s, "off").await.next_run_at, None);
    assert_eq!(row(s, "locked").await.next_run_at, None);
    assert!(s.reschedule(&[]).await.unwrap().is_empty());
    assert!(
        s.reschedule(&[("none".into(), t)])
            .await
            .unwrap()
            .is_empty(),
        "has one now"
    );
}

async fn prune_history_deletes_old_finished_runs_skips_and_nodes_in_batches(
    s: &dyn Store,
    arrange: &Arrange,
) {
    let day = Duration::from_secs(24 * 3600);
    seed(s, &[("a", now_s() - HOUR)]).await;
    let rules = Rules::hourly().plan(stay_due);
    let mut finished = Vec::new();
    for _ in 0..3 {
        let run = claim_one(s, "a", &rules).await;
        assert!(
            finish_one(
                s,
                finish(&run, RunStatus::Succeeded, None, FailureCount::Reset)
            )
            .await
        );
        finished.push(run.run_id);
    }
    let running = claim_one(s, "a", &rules).await.run_id;
    arrange.age_run(finished[0], day * 20).await;
    arrange.age_run(finished[1], day * 15).await;
    arrange.age_run(running, day * 30).await;

    let t = now_s() - HOUR;
    s.record_skips(&[
        skip("old", SkipReason::Misfire, t, t, 1),
        skip("old", SkipReason::Overlap, t, t, 1),
        skip("new", SkipReason::Misfire, t, t, 1),
    ])
    .await
    .unwrap();
    arrange.age_skips("old", day * 20).await;

    for id in ["gone", "here"] {
        s.register_node(&NodeInfo::new(id, "host", 1, "test", vec![]))
            .await
            .unwrap();
    }
    arrange.age_node("gone", day * 20).await;

    let pruned = s.prune_history(day * 14, 1).await.unwrap();
    assert_eq!(pruned, 2, "one at a time, until none is left");
    let left: Vec<i64> = s
        .recent_runs(Some("a"), 10)
        .await
        .unwrap()
        .iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(
        left,
        [running, finished[2]],
        "the recent run and the unfinished one stay"
    );
    assert!(s.skips("old", t - HOUR).await.unwrap().is_empty());
    assert_eq!(s.skips("new", t - HOUR).await.unwrap().len(), 1);
    assert!(
        !s.heartbeat("gone", day).await.unwrap().registered,
        "forgotten"
    );
    assert!(s.heartbeat("here", day).await.unwrap().registered);
    assert_eq!(s.prune_history(day * 14, 1000).await.unwrap(), 0);
}

async fn apply_config_nothing_and_stale_write_nothing(s: &dyn Store, _: &Arrange) {
    let seen: Mutex<Vec<ConfigSnapshot>> = Mutex::default();
    let plan = s
        .apply_config(&|snapshot: &ConfigSnapshot| {
            seen.lock().unwrap().push(snapshot.clone());
            ConfigPlan::Nothing
        })
        .await
        .unwrap();
    assert_eq!(plan, ConfigPlan::Nothing);
    {
        let seen = seen.lock().unwrap();
        assert_eq!(seen[0].applied, None);
        assert!(seen[0].rows.is_empty());
        assert_near_now(seen[0].db_now);
    }
    assert_eq!(
        s.config_state().await.unwrap(),
        None,
        "Nothing writes no state"
    );

    let t = now_s();
    let state = ConfigState::new(Some(5), "d5", "node-a");
    let plan = s
        .apply_config(&|_: &ConfigSnapshot| ConfigPlan::Apply {
            changes: vec![create("b", true, Some(t)), create("a", false, None)],
            state: state.clone(),
            skips: Vec::new(),
        })
        .await
        .unwrap();
    assert!(matches!(plan, ConfigPlan::Apply { .. }));
    assert_eq!(s.config_state().await.unwrap(), Some(state.clone()));
    let (db_now, rows) = s.load_tasks().await.unwrap();
    assert_near_now(db_now);
    let mut a = TaskRow::new("a", "0 * * * *", "UTC", false);
    a.disabled_at = rows[0].disabled_at;
    assert_near_now(a.disabled_at.expect("created disabled: disabled since now"));
    let mut b = TaskRow::new("b", "0 * * * *", "UTC", true);
    b.next_run_at = Some(t);
    assert_eq!(rows, [a.clone(), b.clone()], "by name");

    let plan = s
        .apply_config(&|snapshot: &ConfigSnapshot| {
            seen.lock().unwrap().push(snapshot.clone());
            ConfigPlan::Stale { current: 5 }
        })
        .await
        .unwrap();
    assert_eq!(plan, ConfigPlan::Stale { current: 5 });
    {
        let seen = seen.lock().unwrap();
        assert_eq!(seen[1].applied, Some(state.clone()));
        assert_eq!(seen[1].rows, [a.clone(), b.clone()]);
    }
    assert_eq!(s.config_state().await.unwrap(), Some(state));
    assert_eq!(
        s.load_tasks().await.unwrap().1,
        [a, b],
        "Stale writes nothing"
    );
}

async fn apply_config_creates_without_overwriting_and_updates_in_place(s: &dyn Store, _: &Arrange) {
    let t = now_s();
    seed(s, &[("a", t), ("b", t)]).await;
    let update = |name: &str, next: Option<DateTime<Utc>>| TaskChange::Update {
        name: name.into(),
        cron: "*/5 * * * *".into(),
        timezone: "Europe/Paris".into(),
        enabled: false,
        next_run_at: next,
    };
    apply(
        s,
        vec![
            TaskChange::Create {
                name: "a".into(),
                cron: "1 1 1 1 *".into(),
                timezone: "Asia/Tokyo".into(),
                enabled: false,
                next_run_at: Some(t + HOUR),
            },
            update("b", None),
            update("missing", Some(t)),
        ],
    )
    .await;
    let a = row(s, "a").await;
    assert_eq!(
        (
            a.cron.as_str(),
            a.timezone.as_str(),
            a.enabled,
            a.next_run_at
        ),
        ("0 * * * *", "UTC", true, Some(t)),
        "never overwritten"
    );
    let b = row(s, "b").await;
    assert_eq!(
        (
            b.cron.as_str(),
            b.timezone.as_str(),
            b.enabled,
            b.next_run_at
        ),
        ("*/5 * * * *", "Europe/Paris", false, Some(t)),
        "updated in place, next run kept"
    );
    assert_eq!(
        s.load_tasks().await.unwrap().1.len(),
        2,
        "an update creates nothing"
    );
    apply(s, vec![update("b", Some(t + HOUR))]).await;
    assert_eq!(row(s, "b").await.next_run_at, Some(t + HOUR));

    // An update never touches the lock: the running run finishes undisturbed.
    let run = claim_one(s, "a", &Rules::hourly()).await;
    apply(s, vec![update("a", Some(t + HOUR * 9))]).await;
    assert_eq!(
        s.renew_locks(NODE, &held(&[key(&run)])).await.unwrap(),
        [key(&run)]
    );

    // Creates are written before updates, whatever their order in the plan.
    apply(s, vec![update("c", None), create("c", true, Some(t))]).await;
    let c = row(s, "c").await;
    assert_eq!(
        (c.cron.as_str(), c.enabled, c.next_run_at),
        ("*/5 * * * *", false, Some(t))
    );
}

async fn the_orphan_flag_keeps_its_first_instant_and_is_cleared(s: &dyn Store, _: &Arrange) {
    let t = now_s();
    seed(s, &[("a", t), ("b", t)]).await;
    let flag = |name: &str, orphaned: bool| TaskChange::Orphaned {
        name: name.into(),
        orphaned,
    };
    apply(
        s,
        vec![flag("a", true), flag("b", true), flag("missing", true)],
    )
    .await;
    let since = row(s, "a").await.orphaned_since.expect("flagged");
    assert_near_now(since);
    tokio::time::sleep(Duration::from_millis(20)).await;
    apply(s, vec![flag("a", true)]).await;
    assert_eq!(
        row(s, "a").await.orphaned_since,
        Some(since),
        "flagged since the first time"
    );
    apply(s, vec![flag("a", false)]).await;
    assert_eq!(row(s, "a").await.orphaned_since, None);
    apply(
        s,
        vec![TaskChange::Update {
            name: "b".into(),
            cron: "0 * * * *".into(),
            timezone: "UTC".into(),
            enabled: true,
            next_run_at: None,
        }],
    )
    .await;
    assert_eq!(
        row(s, "b").await.orphaned_since,
        None,
        "an update clears the flag"
    );
    assert_eq!(s.load_tasks().await.unwrap().1.len(), 2);
}

async fn a_document_without_a_version_keeps_the_applied_one(s: &dyn Store, _: &Arrange) {
    let apply_state = |state: ConfigState| async move {
        s.apply_config(&move |_: &ConfigSnapshot| ConfigPlan::Apply {
            changes: vec![],
            state: state.clone(),
            skips: Vec::new(),
        })
        .await
        .unwrap()
    };
    apply_state(ConfigState::new(Some(3), "d3", "n1")).await;
    apply_state(ConfigState::new(None, "d-unversioned", "n2")).await;
    assert_eq!(
        s.config_state().await.unwrap(),
        Some(ConfigState::new(Some(3), "d-unversioned", "n2"))
    );
    apply_state(ConfigState::new(Some(2), "d2", "n3")).await;
    assert_eq!(
        s.config_state().await.unwrap(),
        Some(ConfigState::new(Some(2), "d2", "n3")),
        "a versioned document replaces the version (staleness is the planner's call)"
    );

    // A state with an empty digest records no document: the next plan sees none applied.
    apply_state(ConfigState::new(None, "", "n4")).await;
    let seen: Mutex<Option<Option<ConfigState>>> = Mutex::default();
    s.apply_config(&|snapshot: &ConfigSnapshot| {
        *seen.lock().unwrap() = Some(snapshot.applied.clone());
        ConfigPlan::Nothing
    })
    .await
    .unwrap();
    assert_eq!(seen.lock().unwrap().clone(), Some(None));
}

async fn recent_runs_are_newest_first_and_filtered_by_task(s: &dyn Store, _: &Arrange) {
    seed(s, &[("a", now_s() - HOUR), ("b", now_s() - HOUR)]).await;
    let rules = Rules::hourly().plan(stay_due);
    let a1 = claim_one(s, "a", &rules).await;
    assert!(
        finish_one(
            s,
            finish(&a1, RunStatus::Succeeded, None, FailureCount::Reset)
        )
        .await
    );
    let b1 = claim_one(s, "b", &rules).await;
    assert!(
        finish_one(
            s,
            finish(&b1, RunStatus::Failed, Some("no"), FailureCount::Increment)
        )
        .await
    );
    let a2 = claim_one(s, "a", &rules).await;

    let ids = |runs: Vec<RunRecord>| runs.iter().map(|r| r.id).collect::<Vec<_>>();
    assert_eq!(
        ids(s.recent_runs(None, 10).await.unwrap()),
        [a2.run_id, b1.run_id, a1.run_id]
    );
    assert_eq!(
        ids(s.recent_runs(None, 2).await.unwrap()),
        [a2.run_id, b1.run_id]
    );
    assert_eq!(
        ids(s.recent_runs(Some("a"), 10).await.unwrap()),
        [a2.run_id, a1.run_id]
    );
    assert_eq!(ids(s.recent_runs(Some("a"), 1).await.unwrap()), [a2.run_id]);
    assert!(s.recent_runs(Some("missing"), 10).await.unwrap().is_empty());
    assert!(s.recent_runs(None, 0).await.unwrap().is_empty());
    let b = &s.recent_runs(Some("b"), 1).await.unwrap()[0];
    assert_eq!(
        (b.status, b.error.as_deref(), b.task_name.as_str()),
        (RunStatus::Failed, Some("no"), "b")
    );
    let error = s.recent_runs(None, -1).await.unwrap_err();
    assert!(matches!(error, StoreError::Rejected { .. }), "{error:?}");
}

/// How long a listener is watched to show it stays quiet.
const QUIET: Duration = Duration::from_millis(300);

async fn the_listener_wakes_after_a_released_lock_and_an_applied_config(
    s: &dyn Store,
    _: &Arrange,
) {
    let mut listener = s.listener().await.unwrap();
    let woke = |r: Result<scheduler::store::StoreResult<()>, tokio::time::error::Elapsed>| match r {
        Ok(Ok(())) => true,
        Ok(Err(e)) => panic!("listener failed: {e}"),
        Err(_) => false,
    };
    // Like a fresh connection: the first call returns at once (anything may have changed).
    assert!(woke(
        tokio::time::timeout(Duration::from_secs(10), listener.recv()).await
    ));
    assert!(
        !woke(tokio::time::timeout(QUIET, listener.recv()).await),
        "quiet"
    );

    s.apply_config(&|_: &ConfigSnapshot| ConfigPlan::Nothing)
        .await
        .unwrap();
    assert!(
        !woke(tokio::time::timeout(QUIET, listener.recv()).await),
        "nothing applied"
    );
    seed(s, &[("a", now_s() - HOUR)]).await;
    assert!(
        woke(tokio::time::timeout(Duration::from_secs(10), listener.recv()).await),
        "a config applied"
    );

    let run = claim_one(s, "a", &Rules::hourly()).await;
    let mut forged = finish(&run, RunStatus::Succeeded, None, FailureCount::Reset);
    forged.lock.token = Uuid::new_v4();
    assert!(!finish_one(s, forged).await);
    assert!(
        !woke(tokio::time::timeout(QUIET, listener.recv()).await),
        "no lock released"
    );
    assert!(
        finish_one(
            s,
            finish(&run, RunStatus::Succeeded, None, FailureCount::Reset)
        )
        .await
    );
    assert!(
        woke(tokio::time::timeout(Duration::from_secs(10), listener.recv()).await),
        "a lock released"
    );
}
