//! The store contract: every behaviour of [`Store`] written once, as an async fn taking
//! `&dyn Store`, and run against each backend (modelled on River's `riverdrivertest`): a migrated
//! PostgreSQL schema ([`TestSchema`]) and a fresh SQLite file per test. A backend is done when
//! this suite passes on it.
//!
//! Tests arrange state through the API wherever it can. The few states it cannot reach (an
//! expired lock, a lock with no run, old history, a database from a newer binary) are arranged by
//! [`Arrange`], the one place that holds backend SQL; a behaviour never reads a backend's tables
//! except for the consecutive-failure count and the size of the delivery log, which no API
//! reports.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use chrono::{DateTime, DurationRound, SubsecRound, Utc};
use scheduler::Recovery;
use scheduler::store::{
    Change, ChangeListener, PgStore, SkipReason, SqliteStore, Store, StoreError,
};
use scheduler::testing::backfill::BackfillRequest;
use scheduler::testing::operate::{self, Actor};
use scheduler::testing::store::BackfillCancel;
use scheduler::testing::store::{
    AlertFold, AlertMark, FoldDecision, FoldInput, IncidentClose, IncidentQuery, Snooze,
};
use scheduler::testing::store::{
    AuditEntry, CancelRequest, ClaimOutcome, ClaimPlan, ClaimRequest, ClaimRules, ClaimedRun,
    ConfigPlan, ConfigSnapshot, ConfigState, Delivery, DeliveryNext, DueDecision, DueTask,
    ExpiredLock, FailureCount, LastRun, LockKey, LogChunk, NewEvent, NextRun, NodeInfo, Pause,
    Requeue, RescueDecision, ResumePlan, RunEnd, RunFinish, RunQuery, RunRecord, RunRequest,
    RunStatus, SkipRecord, TaskChange, TaskRow, TaskState, Trigger,
};
use scheduler::testing::store::{
    InstanceFacts, InstancePlan, InstanceRecord, InstanceUpsert, InstanceWrite,
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

    /// Which of `rows` another transaction could lock right now (PostgreSQL: `FOR UPDATE SKIP
    /// LOCKED` from a connection of its own, rolled back); `None` on SQLite, whose claim holds
    /// the database's write lock whatever it reads.
    async fn lockable(&self, rows: &[&str]) -> Option<Vec<String>> {
        match self {
            Arrange::Postgres { db, .. } => {
                let mut tx = db.pool.begin().await.unwrap();
                let rows: Vec<String> = sqlx::query_scalar(
                    "SELECT name FROM scheduler_tasks WHERE name = ANY($1)
                     ORDER BY name FOR UPDATE SKIP LOCKED",
                )
                .bind(names(rows))
                .fetch_all(&mut *tx)
                .await
                .unwrap();
                tx.rollback().await.unwrap();
                Some(rows)
            }
            Arrange::Sqlite { .. } => None,
        }
    }

    /// Holds `task`'s row from a transaction of the test's own, as a statement of its owner's
    /// stuck or frozen mid-write would (PostgreSQL: `FOR NO KEY UPDATE`, what an `UPDATE`
    /// takes); `None` on SQLite, which has no row locks (a claim holds the whole file).
    async fn hold_row(&self, task: &str) -> Option<sqlx::Transaction<'static, sqlx::Postgres>> {
        match self {
            Arrange::Postgres { db, .. } => {
                let mut tx = db.pool.begin().await.unwrap();
                sqlx::query("SELECT 1 FROM scheduler_tasks WHERE name = $1 FOR NO KEY UPDATE")
                    .bind(task)
                    .execute(&mut *tx)
                    .await
                    .unwrap();
                Some(tx)
            }
            Arrange::Sqlite { .. } => None,
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

    /// Moves the creation time of outbox event `id` `by` into the past.
    async fn age_event(&self, id: i64, by: Duration) {
        match self {
            Arrange::Postgres { db, .. } => {
                sqlx::query(
                    "UPDATE scheduler_outbox SET created_at = created_at - $2 * interval '1 microsecond'
                     WHERE id = $1",
                )
                .bind(id)
                .bind(us(by))
                .execute(&db.pool)
                .await
                .unwrap();
            }
            Arrange::Sqlite { store, .. } => {
                sqlx::query(
                    "UPDATE scheduler_outbox SET created_at = created_at - ?2 WHERE id = ?1",
                )
                .bind(id)
                .bind(us(by))
                .execute(store.pool())
                .await
                .unwrap();
            }
        }
    }

    /// Moves the time of `task`'s audit entries `by` into the past.
    async fn age_audit(&self, task: &str, by: Duration) {
        match self {
            Arrange::Postgres { db, .. } => {
                sqlx::query(
                    "UPDATE scheduler_audit SET at = at - $2 * interval '1 microsecond' WHERE task = $1",
                )
                .bind(task)
                .bind(us(by))
                .execute(&db.pool)
                .await
                .unwrap();
            }
            Arrange::Sqlite { store, .. } => {
                sqlx::query("UPDATE scheduler_audit SET at = at - ?2 WHERE task = ?1")
                    .bind(task)
                    .bind(us(by))
                    .execute(store.pool())
                    .await
                    .unwrap();
            }
        }
    }

    /// How many delivery attempts are logged (the listing hides those of deleted events, so no
    /// API shows that pruning deleted them).
    async fn logged_deliveries(&self) -> i64 {
        let sql = "SELECT count(*) FROM scheduler_webhook_deliveries";
        match self {
            Arrange::Postgres { db, .. } => {
                sqlx::query_scalar(sql).fetch_one(&db.pool).await.unwrap()
            }
            Arrange::Sqlite { store, .. } => sqlx::query_scalar(sql)
                .fetch_one(store.pool())
                .await
                .unwrap(),
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

/// Generates one `#[tokio::test]` per behaviour and backend, in `mod on_postgres` and
/// `mod on_sqlite`.
macro_rules! contract {
    ($($behaviour:ident),* $(,)?) => {
        mod on_postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $behaviour() {
                    let arrange = super::Arrange::postgres(stringify!($behaviour)).await;
                    super::$behaviour(arrange.store(), &arrange).await;
                    arrange.cleanup().await;
                }
            )*
        }
        mod on_sqlite {
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
    a_node_reports_its_services_down_and_a_new_start_clears_them,
    a_node_reports_its_database_server_and_a_new_start_clears_it,
    next_wake_reports_the_earliest_claimable_tick_and_lock_expiry,
    claim_takes_due_enabled_unlocked_listed_tasks_oldest_first_up_to_the_limit,
    a_claim_records_what_the_plan_says,
    a_left_task_is_untouched,
    an_expired_lock_the_rules_wait_for_is_left_alone,
    a_released_lock_ends_its_run_as_decided_and_makes_the_tick_due_again,
    a_rescued_tick_is_claimed_in_the_same_claim,
    fencing_tokens_rise_with_every_claim_of_a_task_on_any_node,
    a_lock_renewed_during_its_rescue_is_not_released,
    a_lock_whose_row_another_transaction_holds_is_offered_busy_and_never_released,
    a_renewal_skips_a_row_another_transaction_holds_and_extends_the_others,
    a_lock_without_a_running_run_is_released_without_touching_runs,
    renewal_extends_only_locks_held_under_owner_and_token_also_after_expiry,
    a_finish_records_the_outcome_and_releases_only_its_own_lock,
    a_hand_over_makes_the_tick_due_at_once,
    a_run_that_is_not_the_rows_last_run_leaves_its_last_run_as_it_was,
    a_backfill_tick_handed_back_is_pending_again_unless_the_backfill_was_cancelled,
    failure_counts_reset_increment_and_keep,
    a_late_finish_over_a_lost_run_records_the_real_outcome,
    a_finish_stores_its_skips_and_sums_their_ticks,
    skip_records_are_listed_from_since_oldest_first,
    skip_records_of_every_task_are_listed_newest_first,
    skip_records_per_task_are_bounded_per_task,
    reschedule_fills_only_enabled_unlocked_rows_without_a_next_run,
    prune_history_deletes_old_finished_runs_skips_and_nodes_in_batches,
    apply_config_nothing_and_stale_write_nothing,
    apply_config_creates_without_overwriting_and_updates_in_place,
    jittered_next_runs_written_by_a_reconcile_or_the_upkeep_keep_their_tick,
    the_orphan_flag_keeps_its_first_instant_and_is_cleared,
    a_document_without_a_version_keeps_the_applied_one,
    recent_runs_are_newest_first_and_filtered_by_task,
    the_listener_wakes_after_a_released_lock_and_an_applied_config,
    a_due_retry_is_offered_first_by_its_time_and_served,
    a_retry_that_gives_way_is_dropped_and_recorded_by_the_claim,
    a_manual_run_is_offered_even_for_a_disabled_task_but_not_for_a_paused_one,
    an_expired_pause_is_offered_and_a_skip_ending_it_writes_its_skip_records,
    a_skip_moves_the_schedule_drops_the_retry_and_records_its_skips,
    a_claim_ends_the_missed_run_incident_and_reports_it,
    a_release_requeues_a_retry_a_manual_run_or_nothing,
    a_finish_requeues_a_retry_a_manual_run_or_a_tick_only_under_its_own_lock,
    each_lock_lives_as_long_as_its_plan_or_renewal_says,
    the_heartbeat_counts_overdue_tasks_without_an_incident,
    request_run_queues_once_audits_and_wakes_the_nodes,
    overdue_tasks_are_late_enabled_unpaused_and_without_an_incident_oldest_first,
    open_missed_opens_an_incident_once_and_only_while_the_tick_is_next,
    a_pause_holds_a_task_until_resumed_with_what_the_planner_decides,
    the_audit_log_pages_newest_first,
    runs_are_filtered_by_task_status_trigger_and_start_and_paged_by_id,
    run_finds_one_run_by_id,
    run_logs_are_appended_once_per_chunk_and_read_in_order,
    prune_history_also_deletes_old_run_logs_outbox_events_deliveries_and_audit,
    task_states_report_every_column_by_name,
    nodes_are_listed_with_the_runs_they_hold,
    apply_config_writes_the_skips_of_its_plan,
    disabling_records_since_when_and_enabling_clears_it,
    the_outbox_hands_out_due_pending_events_oldest_first_under_a_lease,
    the_outbox_backlog_is_bounded_by_giving_up_the_oldest,
    deliveries_are_logged_and_say_what_happens_to_each_event,
    a_gone_endpoint_stops_every_pending_event,
    each_channel_has_its_own_rows_claims_and_410,
    a_disabled_webhook_stays_disabled_with_its_first_reason,
    notify_wakes_every_listener,
    next_wake_counts_retries_manual_runs_and_the_ends_of_pauses,
    a_claim_ahead_takes_ticks_due_within_its_lead_and_starts_them_on_the_tick,
    next_wake_finds_this_nodes_task_behind_many_of_other_binaries,
    a_claim_finds_this_nodes_due_tasks_behind_a_page_of_other_binaries,
    a_task_due_in_every_way_at_once_is_offered_once,
    a_cancel_is_recorded_once_audited_and_heard_as_a_cancel,
    a_cancel_of_an_ended_or_unknown_run_changes_nothing,
    cancel_requests_name_the_runs_somebody_asked_to_stop,
    an_expired_lock_of_a_cancelled_run_says_who_cancelled_it,
    alerts_fold_into_one_open_incident_per_task_and_type_as_the_rule_decides,
    closing_incidents_reports_each_once,
    reminders_are_claimed_when_due_only_for_sent_unsnoozed_incidents,
    alert_marks_are_recorded_once,
    a_snooze_is_set_replaced_listed_and_lifted_with_its_audit,
    a_row_pinned_to_a_node_is_offered_and_woken_for_on_that_node_only,
    rows_left_out_of_a_claim_are_neither_offered_nor_locked,
    an_instance_is_planned_on_its_tasks_row_written_in_place_listed_and_audited,
    a_tasks_pause_holds_its_instances_and_its_resume_ends_theirs,
    an_instance_written_with_its_tasks_pause_holds_it_until_the_tasks_resume,
    a_resume_offers_each_row_its_jitter_window_and_writes_its_shifted_start,
    the_heartbeat_counts_the_instances,
    an_instance_is_claimed_with_its_task_and_its_runs_record_its_key,
    a_removed_instance_goes_at_once_or_once_its_run_releases_its_lock,
    an_instance_is_read_by_its_task_and_key,
    a_batch_of_instances_is_planned_in_order_written_and_audited_in_one_go,
    a_manual_runs_arguments_replace_its_rows_for_that_run_only,
    a_limit_admits_runs_up_to_its_size_and_the_others_wait_marked,
    an_undeclared_limit_admits_nothing_and_a_skip_ends_the_wait,
];

/// Behaviours of PostgreSQL's row locks (SQLite has none: a claim holds the whole file).
mod row_locks {
    mod on_postgres {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn another_claim_going_on_does_not_make_an_expired_lock_busy() {
            let arrange = super::super::Arrange::postgres("claim_beside_claim").await;
            super::super::another_claim_going_on_does_not_make_an_expired_lock_busy(
                arrange.store(),
                &arrange,
            )
            .await;
            arrange.cleanup().await;
        }
    }
}

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
        calendar: None,
        enabled,
        next_run_at: next,
        next_tick: None,
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

/// Claim rules made of two closures, recording what they were offered.
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

impl ClaimRules for Rules<'_> {
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

/// A renewal of locks no other transaction holds: what it extended.
async fn renew(
    s: &dyn Store,
    node: &str,
    held: &[(LockKey, Duration)],
) -> Result<Vec<LockKey>, StoreError> {
    let renewal = s.renew_locks(node, held).await?;
    assert!(renewal.busy.is_empty(), "no row is held: {renewal:?}");
    Ok(renewal.renewed)
}

async fn claim_as(
    s: &dyn Store,
    node: &str,
    tasks: &[&str],
    limit: usize,
    rules: &dyn ClaimRules,
) -> ClaimOutcome {
    let tasks = names(tasks);
    s.claim(ClaimRequest::new(node, &tasks, limit), rules)
        .await
        .unwrap()
}

async fn claim(
    s: &dyn Store,
    tasks: &[&str],
    limit: usize,
    rules: &dyn ClaimRules,
) -> ClaimOutcome {
    claim_as(s, NODE, tasks, limit, rules).await
}

/// Claims `task` (due now) with `rules` and returns its run.
async fn claim_one(s: &dyn Store, task: &str, rules: &dyn ClaimRules) -> ClaimedRun {
    let out = claim(s, &[task], 1, rules).await;
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
        Some(run.claimed_at),
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

/// What a node reports of its background services (`engine::health`) is what `nodes` shows, for
/// every node; registering again (a restart) clears it.
async fn a_node_reports_its_services_down_and_a_new_start_clears_them(s: &dyn Store, _: &Arrange) {
    async fn down(s: &dyn Store) -> Vec<String> {
        let nodes = s.nodes().await.unwrap();
        let node = nodes.iter().find(|n| n.node_id == "n1").unwrap();
        node.services_down.clone()
    }
    s.register_node(&NodeInfo::new("n1", "host", 7, "test", vec![]))
        .await
        .unwrap();
    assert!(down(s).await.is_empty());
    s.report_services("n1", &["sla".into(), "claimer".into()])
        .await
        .unwrap();
    assert_eq!(down(s).await, ["sla", "claimer"]);
    s.report_services("n1", &[]).await.unwrap();
    assert!(down(s).await.is_empty());
    s.report_services("n1", &["sla".into()]).await.unwrap();
    s.register_node(&NodeInfo::new("n1", "host", 8, "test", vec![]))
        .await
        .unwrap();
    assert!(down(s).await.is_empty(), "a new start runs every service");
}

/// The database server a node reports is what `nodes` shows (PostgreSQL: `host:port` of the
/// store's own server, which it knows without a query; SQLite: none); registering again
/// clears it. `replication` says how the server replicates (none on SQLite).
async fn a_node_reports_its_database_server_and_a_new_start_clears_it(
    s: &dyn Store,
    arrange: &Arrange,
) {
    async fn server(s: &dyn Store) -> Option<String> {
        let nodes = s.nodes().await.unwrap();
        let node = nodes.iter().find(|n| n.node_id == "n1").unwrap();
        node.database_server.clone()
    }
    s.register_node(&NodeInfo::new("n1", "host", 7, "test", vec![]))
        .await
        .unwrap();
    assert_eq!(server(s).await, None);
    let own = s.database_server();
    let replication = s.replication().await.unwrap();
    match arrange {
        Arrange::Postgres { .. } => {
            let own = own.expect("a PostgreSQL store is on a server");
            let (host, port) = own.address.rsplit_once(':').expect("host:port");
            assert!(!host.is_empty() && !host.contains('@'), "{own:?}");
            assert!(port.parse::<u16>().is_ok(), "{own:?}");
            assert_eq!(own.failovers, 0);
            let replication = replication.expect("PostgreSQL says how it replicates");
            assert_eq!(replication.hosts, 1);
            assert!(replication.standbys >= 0);
        }
        Arrange::Sqlite { .. } => {
            assert_eq!(own, None, "an SQLite store has no server");
            assert_eq!(replication, None);
        }
    }
    s.report_database_server("n1", Some("db2:5433"))
        .await
        .unwrap();
    assert_eq!(server(s).await.as_deref(), Some("db2:5433"));
    s.report_database_server("n1", None).await.unwrap();
    assert_eq!(server(s).await, None);
    s.report_database_server("n1", Some("db2:5433"))
        .await
        .unwrap();
    s.register_node(&NodeInfo::new("n1", "host", 8, "test", vec![]))
        .await
        .unwrap();
    assert_eq!(server(s).await, None, "a new start reports its server anew");
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
    assert_eq!(beat.live, 1, "neither a silent nor a stopped node is live");

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
    let beat = s.heartbeat("me", silent_after).await.unwrap();
    assert!(beat.silent.is_empty());
    assert_eq!(beat.live, 3, "every node beat just now");
    arrange.age_node("stopped", Duration::from_secs(300)).await;
    let beat = s.heartbeat("me", silent_after).await.unwrap();
    assert_eq!(beat.silent, ["stopped"]);
    assert_eq!(beat.live, 2);
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

/// More tasks of other binaries due first than the wake-time query reads per kind: this node's
/// own earliest is still found, and one of the others' when listed.
async fn next_wake_finds_this_nodes_task_behind_many_of_other_binaries(s: &dyn Store, _: &Arrange) {
    let t = now_s();
    let mut tasks: Vec<(String, DateTime<Utc>)> = (0..100)
        .map(|i| {
            (
                format!("other.{i:03}"),
                t + chrono::Duration::minutes(10 + i),
            )
        })
        .collect();
    tasks.push(("mine".into(), t + HOUR * 5));
    tasks.push(("mine.later".into(), t + HOUR * 6));
    let refs: Vec<(&str, DateTime<Utc>)> = tasks.iter().map(|(n, at)| (n.as_str(), *at)).collect();
    seed(s, &refs).await;
    for listed in [["mine.later", "mine"], ["mine", "mine.later"]] {
        let wake = s.next_wake("n", &names(&listed)).await.unwrap();
        assert_eq!(wake.due_at, Some(t + HOUR * 5), "{listed:?}");
    }
    let wake = s
        .next_wake("n", &names(&["mine", "other.099", "other.050"]))
        .await
        .unwrap();
    assert_eq!(wake.due_at, Some(t + chrono::Duration::minutes(60)));
    assert_eq!(
        s.next_wake("n", &names(&["absent"])).await.unwrap().due_at,
        None
    );
}

/// More due tasks of other binaries than one claim takes, all due before this node's own: the
/// claim still takes this node's, oldest first, and leaves the others as they were for their
/// own binary to claim.
async fn a_claim_finds_this_nodes_due_tasks_behind_a_page_of_other_binaries(
    s: &dyn Store,
    _: &Arrange,
) {
    let t = now_s() - HOUR;
    let mut tasks: Vec<(String, DateTime<Utc>)> = (0..40)
        .map(|i| {
            (
                format!("other.{i:03}"),
                t - chrono::Duration::minutes(60 - i),
            )
        })
        .collect();
    tasks.push(("mine.b".into(), t + chrono::Duration::minutes(2)));
    tasks.push(("mine.a".into(), t + chrono::Duration::minutes(1)));
    tasks.push(("mine.c".into(), t + chrono::Duration::minutes(3)));
    let refs: Vec<(&str, DateTime<Utc>)> = tasks.iter().map(|(n, at)| (n.as_str(), *at)).collect();
    seed(s, &refs).await;

    let rules = Rules::hourly();
    let out = claim(s, &["mine.a", "mine.b", "mine.c"], 2, &rules).await;
    assert_eq!(rules.offered(), ["mine.a", "mine.b"], "this node's oldest");
    assert_eq!(out.claimed.len(), 2);
    for (name, at) in &tasks[..40] {
        assert_eq!(
            row(s, name).await.next_run_at,
            Some(*at),
            "{name} is left as it was"
        );
    }
    let others: Vec<String> = (0..40).map(|i| format!("other.{i:03}")).collect();
    let listed: Vec<&str> = others.iter().map(String::as_str).collect();
    let rules = Rules::hourly();
    let out = claim(s, &listed, 3, &rules).await;
    assert_eq!(
        rules.offered(),
        ["other.000", "other.001", "other.002"],
        "the others' binary claims them, oldest first"
    );
    assert_eq!(out.claimed.len(), 3);
    let rules = Rules::hourly();
    let out = claim(s, &["mine.c", "mine.a"], 10, &rules).await;
    assert_eq!(rules.offered(), ["mine.c"], "the rest of this node's");
    assert_eq!(out.claimed.len(), 1);
}

/// A task whose tick, retry and manual run are all due is offered once, with all three.
async fn a_task_due_in_every_way_at_once_is_offered_once(s: &dyn Store, _: &Arrange) {
    let t = now_s();
    seed(
        s,
        &[
            ("all", t - HOUR * 3),
            ("next", t - chrono::Duration::minutes(90)),
        ],
    )
    .await;
    // "all" runs its tick, fails, and waits for a retry (due), its next tick due as well.
    let out = claim(s, &["all"], 1, &Rules::hourly().plan(run_then(t - HOUR))).await;
    let retry = with_requeue(
        finish(
            claimed(&out, "all"),
            RunStatus::Failed,
            Some("boom"),
            FailureCount::Increment,
        ),
        Requeue::Retry {
            tick: t - HOUR * 3,
            attempt: 2,
            at: t - HOUR * 2,
        },
    );
    assert!(finish_one(s, retry).await);
    s.request_run("all", "alice", None, &audit("trigger", "all"))
        .await
        .unwrap();

    let rules = Rules::hourly().plan(leave);
    claim(s, &["all", "next"], 10, &rules).await;
    assert_eq!(
        rules.offered(),
        ["all", "next"],
        "each task once, oldest first"
    );
    let offered = &rules.tasks()[0];
    assert_eq!(offered.next_run_at, Some(t - HOUR));
    assert!(offered.retry.is_some() && offered.manual.is_some());
    let rules = Rules::hourly().plan(leave);
    claim(s, &["all", "next"], 1, &rules).await;
    assert_eq!(rules.offered(), ["all"], "one task fills a page of one");
}

async fn next_wake_reports_the_earliest_claimable_tick_and_lock_expiry(s: &dyn Store, _: &Arrange) {
    let wake = s.next_wake("n", &names(&["a"])).await.unwrap();
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
    let wake = s.next_wake("n", &listed).await.unwrap();
    assert_eq!(wake.due_at, Some(t + chrono::Duration::minutes(10)));
    assert_eq!(wake.expiry_at, None);
    assert_eq!(s.next_wake("n", &[]).await.unwrap().due_at, None);

    let before = Utc::now();
    claim_one(s, "a", &Rules::hourly()).await;
    let after = Utc::now();
    let wake = s.next_wake("n", &listed).await.unwrap();
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
    assert_eq!(s.next_wake("n", &[]).await.unwrap().expiry_at, Some(expiry));
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
        assert_near(run.started_at.expect("planned at the claim"), c.claimed_at);
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
    let wake = s.next_wake("n", &names(&["a"])).await.unwrap();
    assert_eq!(wake.due_at, Some(t - HOUR), "still due, still unlocked");
}

async fn an_expired_lock_the_rules_wait_for_is_left_alone(s: &dyn Store, arrange: &Arrange) {
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
        renew(s, NODE, &held(&[key(&run)])).await.unwrap(),
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
    assert!(renew(s, NODE, &held(&old)).await.unwrap().is_empty());
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
    assert!(
        out.claimed[0].fencing_token > first.fencing_token,
        "the run that took over has the larger fencing token: {} after {}",
        out.claimed[0].fencing_token,
        first.fencing_token
    );
}

/// Every claim of a task takes the next fencing token, whichever node claims it and whatever
/// it serves; tokens of different tasks are counted apart.
async fn fencing_tokens_rise_with_every_claim_of_a_task_on_any_node(s: &dyn Store, _: &Arrange) {
    let t = now_s() - HOUR;
    seed(s, &[("a", t), ("b", t)]).await;
    let rules = Rules::hourly().plan(stay_due);
    let mut tokens = Vec::new();
    for node in ["x", "y", "x", "z"] {
        let out = claim_as(s, node, &["a"], 1, &rules).await;
        assert_eq!(out.claimed.len(), 1, "{out:?}");
        let run = &out.claimed[0];
        tokens.push(run.fencing_token);
        assert!(
            finish_one(
                s,
                finish(run, RunStatus::Succeeded, None, FailureCount::Reset)
            )
            .await
        );
    }
    assert_eq!(tokens, [1, 2, 3, 4], "one more per claim, on any node");
    let b = claim_one(s, "b", &rules).await;
    assert_eq!(b.fencing_token, 1, "another task counts its own");
}

/// A lock whose row another transaction holds (a statement of its owner's, stuck or frozen
/// mid-write: the owner may be alive, its renewals queued behind that statement) is offered
/// busy and is never released, whatever the rules decide: the claim neither waits behind the
/// row nor takes the lock. Once the row is free it is offered as any expired lock. SQLite has
/// no row locks, so no lock is ever busy there.
async fn a_lock_whose_row_another_transaction_holds_is_offered_busy_and_never_released(
    s: &dyn Store,
    arrange: &Arrange,
) {
    let t = now_s() - HOUR;
    seed(s, &[("a", t)]).await;
    let run = claim_one(s, "a", &Rules::hourly()).await;
    arrange.expire_lock("a").await;
    let lost =
        || Rules::hourly().rescue(|_| release(RunStatus::Lost, None, None, FailureCount::Keep));
    if let Some(holder) = arrange.hold_row("a").await {
        let rules = lost();
        let tasks = names(&["a"]);
        let out = tokio::time::timeout(
            Duration::from_secs(30),
            s.claim(ClaimRequest::new(NODE, &tasks, 1), &rules),
        )
        .await
        .expect("the claim returns while the row is held")
        .expect("the claim does not wait behind the held row");
        assert!(out.rescued.is_empty() && out.claimed.is_empty(), "{out:?}");
        assert_eq!(out.waiting.len(), 1, "{out:?}");
        assert!(out.waiting[0].busy, "offered busy: {:?}", out.waiting[0]);
        assert_eq!(out.waiting[0].key, key(&run));
        assert!(rules.expired().iter().all(|l| l.busy));
        holder.rollback().await.unwrap();
        assert_eq!(self::run(s, run.run_id).await.status, RunStatus::Running);
    }
    let rules = lost();
    let out = claim(s, &["a"], 0, &rules).await;
    assert!(
        rules.expired().iter().all(|l| !l.busy),
        "a row nobody holds is not busy"
    );
    assert_eq!(
        out.rescued.len(),
        1,
        "released as decided once free: {out:?}"
    );
    assert_eq!(self::run(s, run.run_id).await.status, RunStatus::Lost);
}

/// A renewal does not wait for a row another transaction holds (a statement of the node's own,
/// stuck: every other lock's renewal would wait with it): that lock comes back busy, still the
/// node's, and the others are extended. SQLite has no row locks: nothing is busy there.
async fn a_renewal_skips_a_row_another_transaction_holds_and_extends_the_others(
    s: &dyn Store,
    arrange: &Arrange,
) {
    let t = now_s() - HOUR;
    seed(s, &[("a", t), ("b", t)]).await;
    let out = claim_as(s, NODE, &["a", "b"], 2, &Rules::hourly()).await;
    let keys: Vec<LockKey> = ["a", "b"].map(|n| key(claimed(&out, n))).to_vec();
    if let Some(holder) = arrange.hold_row("a").await {
        let renewal =
            tokio::time::timeout(Duration::from_secs(30), s.renew_locks(NODE, &held(&keys)))
                .await
                .expect("the renewal returns while the row is held")
                .expect("the renewal does not wait behind the held row");
        assert_eq!(renewal.renewed, [keys[1].clone()]);
        assert_eq!(
            renewal.busy,
            [keys[0].clone()],
            "still the node's, not extended"
        );
        holder.rollback().await.unwrap();
    }
    let mut renewed = renew(s, NODE, &held(&keys)).await.unwrap();
    renewed.sort_by(|x, y| x.task_name.cmp(&y.task_name));
    assert_eq!(renewed, keys, "both extended once the row is free");
}

/// Another claim going on (another node's, deciding on the same expired locks) does not make
/// an expired lock busy: a claim holds no expired row while its rules decide. (PostgreSQL
/// only: SQLite's claim holds the whole file, so no second claim goes on beside it.)
async fn another_claim_going_on_does_not_make_an_expired_lock_busy(
    s: &dyn Store,
    arrange: &Arrange,
) {
    let t = now_s() - HOUR;
    seed(s, &[("a", t)]).await;
    claim_one(s, "a", &Rules::hourly()).await;
    arrange.expire_lock("a").await;
    let inner = Rules::hourly();
    let tasks = names(&["a"]);
    let outer = Rules::hourly().rescue(|_| {
        // The rules must not do I/O; this test breaks the rule on purpose to stand in for a
        // second node claiming while this one decides.
        tokio::task::block_in_place(|| {
            tokio::runtime::Handle::current().block_on(tokio::time::timeout(
                Duration::from_secs(10),
                s.claim(ClaimRequest::new("node-b", &tasks, 0), &inner),
            ))
        })
        .expect("the second claim does not wait for the first")
        .expect("the second claim");
        RescueDecision::Wait
    });
    claim(s, &["a"], 0, &outer).await;
    assert_eq!(inner.expired().len(), 1);
    assert!(outer.expired().iter().all(|l| !l.busy));
    assert!(
        inner.expired().iter().all(|l| !l.busy),
        "{:?}",
        inner.expired()
    );
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
        // The owner renews while the rescuer decides (the rules must not do I/O; this test
        // breaks the rule on purpose to stand in for a concurrent node).
        let renewed = tokio::task::block_in_place(|| {
            tokio::runtime::Handle::current().block_on(async {
                tokio::time::timeout(
                    Duration::from_secs(1),
                    renew(s, NODE, &held(std::slice::from_ref(&lock.key))),
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
        .renewed
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
    let wake = s.next_wake("n", &names(&["a"])).await.unwrap();
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
    let renewed = renew(s, "me", &keys).await.unwrap();
    assert_eq!(renewed, [key(&mine)], "expired but not released: renewed");
    assert!(renew(s, "me", &[]).await.unwrap().is_empty());

    // "mine" is no longer expired; "stolen" kept the thief's (shorter) expiry.
    let rules = Rules::hourly();
    let out = claim(s, &[], 0, &rules).await;
    assert!(out.waiting.is_empty(), "{out:?}");
    let expiry = s.next_wake("n", &[]).await.unwrap().expiry_at.unwrap();
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
    assert!(finished >= ra.started_at.expect("started"));
    assert_near_now(finished);
    let rb = run(s, b.run_id).await;
    assert_eq!(
        rb.status,
        RunStatus::Running,
        "a run is fenced by its token too"
    );
    assert_eq!(rb.finished_at, None);

    let wake = s.next_wake("n", &names(&["a", "b"])).await.unwrap();
    assert_eq!(
        wake.due_at,
        Some(t + HOUR),
        "a is unlocked with its planned next run"
    );
    assert_eq!(renew(s, NODE, &held(&[key(&b)])).await.unwrap(), [key(&b)]);
    assert!(renew(s, NODE, &held(&[key(&a)])).await.unwrap().is_empty());

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

/// A run handed back before it started ([`LastRun::Keep`]) gets its own record and releases
/// its lock with its requeue, and leaves the row's last start (which its claim wrote), status,
/// error and end as the run before left them; a run finished in the same batch is its row's
/// last run as usual.
async fn a_run_that_is_not_the_rows_last_run_leaves_its_last_run_as_it_was(
    s: &dyn Store,
    _: &Arrange,
) {
    let t = now_s() - HOUR;
    seed(s, &[("a", t), ("b", t)]).await;
    let rules = Rules::hourly().plan(stay_due);
    let first = claim_one(s, "a", &rules).await;
    assert!(
        finish_one(
            s,
            finish(
                &first,
                RunStatus::Failed,
                Some("boom"),
                FailureCount::Increment
            )
        )
        .await
    );
    let before = task_state(s, "a").await;
    assert_eq!(before.last_status, Some(RunStatus::Failed));

    let out = claim(s, &["a", "b"], 2, &rules).await;
    let (a, b) = (claimed(&out, "a"), claimed(&out, "b"));
    let mut handed_back = finish(
        a,
        RunStatus::Interrupted,
        Some("handed over before starting"),
        FailureCount::Keep,
    );
    handed_back.started_at = None;
    handed_back.last_run = LastRun::Keep;
    handed_back.requeue = Some(Requeue::Tick(a.scheduled_at));
    let ended = finish(b, RunStatus::Succeeded, None, FailureCount::Reset);
    let results = s.finish_runs(&[handed_back, ended]).await.unwrap();
    assert!(results.iter().all(|r| r.lock_held), "{results:?}");

    let ra = run(s, a.run_id).await;
    assert_eq!(ra.status, RunStatus::Interrupted, "its own record");
    assert_eq!(ra.started_at, None);
    let after = task_state(s, "a").await;
    assert_eq!(after.lock_owner, None, "released");
    assert_eq!(after.next_run_at, Some(a.scheduled_at), "due again");
    assert_eq!(after.last_status, Some(RunStatus::Failed), "{after:?}");
    assert_eq!(after.last_error.as_deref(), Some("boom"));
    assert_eq!(
        after.last_run_at, before.last_run_at,
        "its start is the run's before"
    );
    assert_eq!(after.last_finished_at, before.last_finished_at);
    assert_eq!(after.consecutive_failures, 1);
    let other = task_state(s, "b").await;
    assert_eq!(other.last_status, Some(RunStatus::Succeeded), "{other:?}");
    assert!(other.last_finished_at.is_some());
}

/// Runs the due backfill tick of a task, as the engine plans it.
fn backfill_plan(task: &DueTask) -> DueDecision {
    match &task.backfill {
        Some(b) => {
            let mut plan = scheduled(b.tick, None, Recovery::Rerun);
            plan.trigger = Trigger::Backfill;
            plan.next_run_at = NextRun::Keep;
            plan.backfill_id = Some(b.id);
            DueDecision::Run(plan)
        }
        None => DueDecision::Leave,
    }
}

/// A backfill's run handed back before it started, with [`Requeue::Backfill`]: its tick is
/// pending again and the row's backfill due again at once, so the next claim serves the same
/// tick; once the backfill is cancelled, a tick handed back is left unrun (the cancel's) and
/// the row waits for no backfill.
async fn a_backfill_tick_handed_back_is_pending_again_unless_the_backfill_was_cancelled(
    s: &dyn Store,
    _: &Arrange,
) {
    let base = Utc::now().duration_trunc(HOUR).unwrap() - HOUR * 5;
    seed(s, &[("a", base + HOUR * 30)]).await;
    let request = BackfillRequest::new("a", base, base + HOUR).pace(Duration::ZERO);
    let actor = Actor::new("tester", "contract");
    let id = operate::backfill(s, &request, &actor)
        .await
        .unwrap()
        .expect("accepted")
        .id
        .expect("recorded");
    let rules = Rules::hourly().plan(backfill_plan);
    let hand_back = |run: &ClaimedRun| {
        let mut f = finish(
            run,
            RunStatus::Interrupted,
            Some("handed over before starting"),
            FailureCount::Keep,
        );
        f.started_at = None;
        f.last_run = LastRun::Keep;
        f.requeue = Some(Requeue::Backfill(run.scheduled_at));
        f
    };

    let first = claim_one(s, "a", &rules).await;
    assert_eq!(
        (first.trigger, first.scheduled_at),
        (Trigger::Backfill, base)
    );
    assert!(finish_one(s, hand_back(&first)).await);
    let (record, _) = s.backfill(id).await.unwrap().unwrap();
    assert_eq!(record.progress.pending, 2, "{record:?}");
    let again = claim_one(s, "a", &rules).await;
    assert_eq!(again.scheduled_at, base, "the same tick, due again at once");
    assert!(
        finish_one(
            s,
            finish(&again, RunStatus::Succeeded, None, FailureCount::Reset)
        )
        .await
    );

    // The last tick: its claim leaves the row waiting for no backfill; a hand-back makes it wait
    // again.
    let last = claim_one(s, "a", &rules).await;
    assert_eq!(last.scheduled_at, base + HOUR);
    assert!(finish_one(s, hand_back(&last)).await);
    let last_again = claim_one(s, "a", &rules).await;
    assert_eq!(last_again.scheduled_at, base + HOUR, "due again");
    assert!(
        finish_one(
            s,
            finish(&last_again, RunStatus::Succeeded, None, FailureCount::Reset)
        )
        .await
    );
    let (record, _) = s.backfill(id).await.unwrap().unwrap();
    assert_eq!(record.state(), "done");
    assert_eq!((record.progress.total, record.progress.succeeded), (2, 2));

    // Another backfill, cancelled while its first run is claimed: the tick handed back is not
    // run again.
    let request = BackfillRequest::new("a", base + HOUR * 2, base + HOUR * 3).pace(Duration::ZERO);
    let id = operate::backfill(s, &request, &actor)
        .await
        .unwrap()
        .expect("accepted")
        .id
        .expect("recorded");
    let claimed_run = claim_one(s, "a", &rules).await;
    let cancel = s
        .cancel_backfill(id, "tester", &audit("backfill.cancel", "a"))
        .await
        .unwrap();
    assert!(
        matches!(cancel, BackfillCancel::Cancelled { dropped: 1, .. }),
        "{cancel:?}"
    );
    assert!(finish_one(s, hand_back(&claimed_run)).await);
    let out = claim(s, &["a"], 1, &rules).await;
    assert!(out.claimed.is_empty(), "no backfill waits: {out:?}");
    let (record, _) = s.backfill(id).await.unwrap().unwrap();
    assert_eq!(record.state(), "cancelled");
    assert_eq!(
        (
            record.progress.succeeded,
            record.progress.cancelled,
            record.progress.failed
        ),
        (0, 2, 0),
        "the tick handed back is left unrun: {record:?}"
    );
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
        renew(s, "node-b", &held(&[key(&a2)])).await.unwrap(),
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

async fn skip_records_of_every_task_are_listed_newest_first(s: &dyn Store, _: &Arrange) {
    let t = now_s() - HOUR;
    let m = chrono::Duration::minutes;
    let old = skip("a", SkipReason::Misfire, t - HOUR, t - m(30), 4);
    let a = skip("a", SkipReason::Paused, t, t + m(10), 2);
    let b = skip("b", SkipReason::Overlap, t + m(5), t + m(20), 1);
    s.record_skips(&[old.clone(), a.clone(), b.clone()])
        .await
        .unwrap();

    assert_eq!(
        s.skips_since(t - HOUR * 2, 100).await.unwrap(),
        [b.clone(), a.clone(), old],
        "every task's, latest-ending first"
    );
    assert_eq!(
        s.skips_since(t, 100).await.unwrap(),
        [b.clone(), a],
        "ranges ending at or after since"
    );
    assert_eq!(
        s.skips_since(t - HOUR * 2, 1).await.unwrap(),
        [b],
        "at most limit"
    );
    assert!(s.skips_since(t + m(21), 100).await.unwrap().is_empty());
}

async fn skip_records_per_task_are_bounded_per_task(s: &dyn Store, _: &Arrange) {
    let t = now_s() - HOUR;
    let m = chrono::Duration::minutes;
    let old = skip("a", SkipReason::Misfire, t - HOUR, t - m(30), 4);
    let a = skip("a", SkipReason::Paused, t, t + m(10), 2);
    let a2 = skip("a", SkipReason::Overlap, t + m(11), t + m(12), 1);
    let b = skip("b", SkipReason::Overlap, t + m(5), t + m(20), 1);
    let c = skip("c", SkipReason::Disabled, t, t + m(1), 1);
    s.record_skips(&[old.clone(), a.clone(), a2.clone(), b.clone(), c])
        .await
        .unwrap();
    let names = |n: &[&str]| n.iter().map(|x| x.to_string()).collect::<Vec<_>>();

    assert_eq!(
        s.latest_skips_per_task(&names(&["a", "b"]), 10, t - HOUR * 2)
            .await
            .unwrap(),
        [b.clone(), a2.clone(), a.clone(), old],
        "the tasks named, latest-ending first"
    );
    assert_eq!(
        s.latest_skips_per_task(&names(&["a", "b"]), 1, t - HOUR * 2)
            .await
            .unwrap(),
        [b.clone(), a2.clone()],
        "at most per_task of each: a busy task leaves the others their share"
    );
    assert_eq!(
        s.latest_skips_per_task(&names(&["a"]), 10, t + m(10))
            .await
            .unwrap(),
        [a2, a],
        "ranges ending at or after since"
    );
    assert!(
        s.latest_skips_per_task(&names(&["nope"]), 10, t - HOUR)
            .await
            .unwrap()
            .is_empty()
    );
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
        .reschedule(
            &["none", "has", "off", "locked", "missing"].map(|n| (n.to_owned(), next, None)),
        )
        .await
        .unwrap();
    assert_eq!(changed, ["none"]);
    assert_eq!(row(s, "none").await.next_run_at, Some(next));
    assert_eq!(row(s, "has").await.next_run_at, Some(t + HOUR));
    assert_eq!(row(s, "off").await.next_run_at, None);
    assert_eq!(row(s, "locked").await.next_run_at, None);
    assert!(s.reschedule(&[]).await.unwrap().is_empty());
    assert!(
        s.reschedule(&[("none".into(), t, None)])
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

/// A stored calendar, as the reconciler writes it (the store keeps it as text).
const CALENDAR: &str =
    r#"{"names":["weekends"],"on_blocked":"skip","rules":{"weekly":[{"days":["sat","sun"]}]}}"#;

/// A next run a reconcile or the upkeep writes with jitter is the start with its tick beside
/// it (`next_tick`, what operators' reads show as the tick), on a created row and on an updated
/// one; an update that keeps the next run keeps its tick, one without a shift clears it. A
/// task's window stored by a reconcile is read back with the row and by an instance upsert of
/// the task (its writer may know no config).
async fn jittered_next_runs_written_by_a_reconcile_or_the_upkeep_keep_their_tick(
    s: &dyn Store,
    _: &Arrange,
) {
    let t = now_s();
    let (tick, start) = (t + HOUR, t + HOUR + chrono::Duration::milliseconds(7_250));
    let change = |create: bool, next: Option<DateTime<Utc>>, tick: Option<DateTime<Utc>>| {
        let (name, cron, timezone) = ("j".to_owned(), "0 * * * *".to_owned(), "UTC".to_owned());
        if create {
            TaskChange::Create {
                name,
                cron,
                timezone,
                calendar: None,
                enabled: true,
                next_run_at: next,
                next_tick: tick,
            }
        } else {
            TaskChange::Update {
                name,
                cron,
                timezone,
                calendar: None,
                enabled: true,
                next_run_at: next,
                next_tick: tick,
            }
        }
    };
    let window = Duration::from_secs(30);
    apply(
        s,
        vec![
            change(true, Some(start), Some(tick)),
            TaskChange::Jitter {
                name: "j".into(),
                window: Some(window),
            },
        ],
    )
    .await;
    let read = |state: TaskState| (state.next_run_at, state.next_tick);
    assert_eq!(read(task_state(s, "j").await), (Some(start), Some(tick)));
    assert_eq!(row(s, "j").await.jitter, Some(window));
    // Kept: the tick stays.
    apply(s, vec![change(false, None, None)]).await;
    assert_eq!(read(task_state(s, "j").await), (Some(start), Some(tick)));
    // Moved with a shift, then without one (the start is the tick).
    let (tick2, start2) = (tick + HOUR, tick + HOUR + chrono::Duration::seconds(3));
    apply(s, vec![change(false, Some(start2), Some(tick2))]).await;
    assert_eq!(read(task_state(s, "j").await), (Some(start2), Some(tick2)));
    apply(s, vec![change(false, Some(tick2), None)]).await;
    assert_eq!(read(task_state(s, "j").await), (Some(tick2), Some(tick2)));

    // The task's window, offered to an instance upsert.
    let (facts, _, _) = upsert(s, &instance("j", "k", None), write_plan(Some(tick))).await;
    assert_eq!(facts.task.and_then(|task| task.jitter), Some(window));
    apply(
        s,
        vec![TaskChange::Jitter {
            name: "j".into(),
            window: None,
        }],
    )
    .await;
    assert_eq!(row(s, "j").await.jitter, None);

    // The upkeep's repair: the start and its tick.
    apply(s, vec![create("stuck", true, None)]).await;
    let changed = s
        .reschedule(&[("stuck".to_owned(), start, Some(tick))])
        .await
        .unwrap();
    assert_eq!(changed, ["stuck"]);
    let stuck = task_state(s, "stuck").await;
    assert_eq!(
        (stuck.next_run_at, stuck.next_tick),
        (Some(start), Some(tick))
    );
}

async fn apply_config_creates_without_overwriting_and_updates_in_place(s: &dyn Store, _: &Arrange) {
    let t = now_s();
    seed(s, &[("a", t), ("b", t)]).await;
    let update = |name: &str, next: Option<DateTime<Utc>>| TaskChange::Update {
        name: name.into(),
        cron: "*/5 * * * *".into(),
        timezone: "Europe/Paris".into(),
        calendar: Some(CALENDAR.into()),
        enabled: false,
        next_run_at: next,
        next_tick: None,
    };
    apply(
        s,
        vec![
            TaskChange::Create {
                name: "a".into(),
                cron: "1 1 1 1 *".into(),
                timezone: "Asia/Tokyo".into(),
                calendar: Some(CALENDAR.into()),
                enabled: false,
                next_run_at: Some(t + HOUR),
                next_tick: None,
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
        b.calendar.as_deref(),
        Some(CALENDAR),
        "the calendar is kept as given"
    );
    assert_eq!(a.calendar, None, "never overwritten");
    assert_eq!(
        task_state(s, "b").await.calendar.as_deref(),
        Some(CALENDAR),
        "operators' reads see it"
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
        renew(s, NODE, &held(&[key(&run)])).await.unwrap(),
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
            calendar: None,
            enabled: true,
            next_run_at: None,
            next_tick: None,
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
    let woke =
        |r: Result<scheduler::store::StoreResult<Change>, tokio::time::error::Elapsed>| match r {
            Ok(Ok(_)) => true,
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

// ---------------------------------------------------------------------------------------------
// Run policies and operations: retries, manual runs, pauses, missed runs, the audit trail, run
// queries and logs, the webhook outbox.
// ---------------------------------------------------------------------------------------------

const MINUTE: chrono::Duration = chrono::Duration::minutes(1);

/// An audit entry of the suite's operator.
fn audit(action: &str, task: &str) -> AuditEntry {
    AuditEntry::new(
        "alice",
        action,
        task,
        format!("{action} {task}"),
        "cli@host",
    )
}

/// `task`'s row as operators see it.
async fn task_state(s: &dyn Store, task: &str) -> TaskState {
    let mut states = s.task_states(Some(task)).await.unwrap();
    assert_eq!(states.len(), 1, "one row named {task}");
    states.remove(0)
}

/// Whether `listener` wakes within `within`.
async fn wakes(listener: &mut Box<dyn ChangeListener>, within: Duration) -> bool {
    match tokio::time::timeout(within, listener.recv()).await {
        Ok(Ok(_)) => true,
        Ok(Err(e)) => panic!("listener failed: {e}"),
        Err(_) => false,
    }
}

/// What `listener` hears within `within`, if anything.
async fn heard(listener: &mut Box<dyn ChangeListener>, within: Duration) -> Option<Change> {
    match tokio::time::timeout(within, listener.recv()).await {
        Ok(Ok(change)) => Some(change),
        Ok(Err(e)) => panic!("listener failed: {e}"),
        Err(_) => None,
    }
}

/// A listener past its first call (which returns at once, like a fresh connection).
async fn quiet_listener(s: &dyn Store) -> Box<dyn ChangeListener> {
    let mut listener = s.listener().await.unwrap();
    assert!(wakes(&mut listener, Duration::from_secs(10)).await);
    listener
}

/// Leaves every due task alone (to look at what is offered).
fn leave(_: &DueTask) -> DueDecision {
    DueDecision::Leave
}

/// Serves the due retry: its tick and attempt, the schedule kept, the retry cleared.
fn serve_retry(task: &DueTask) -> DueDecision {
    let retry = task.retry.as_ref().expect("a retry is due");
    let mut plan = scheduled(retry.tick, None, Recovery::Rerun);
    plan.trigger = Trigger::Retry;
    plan.attempt = retry.attempt;
    plan.next_run_at = NextRun::Keep;
    plan.clear_retry = true;
    DueDecision::Run(plan)
}

/// Serves the due manual run: the instant it was asked for, by whom, the schedule kept.
fn serve_manual(task: &DueTask) -> DueDecision {
    let manual = task.manual.as_ref().expect("a manual run is due");
    let mut plan = scheduled(manual.at, None, Recovery::Rerun);
    plan.trigger = Trigger::Manual;
    plan.triggered_by = manual.by.clone();
    plan.next_run_at = NextRun::Keep;
    DueDecision::Run(plan)
}

/// Runs each due tick, scheduling the next run at `next`.
fn run_then(next: DateTime<Utc>) -> impl Fn(&DueTask) -> DueDecision + Send + Sync + 'static {
    move |task| DueDecision::Run(scheduled(tick(task), Some(next), Recovery::Rerun))
}

fn with_requeue(mut f: RunFinish, requeue: Requeue) -> RunFinish {
    f.requeue = Some(requeue);
    f
}

/// The claimed run of `task` in `out`.
#[track_caller]
fn claimed<'a>(out: &'a ClaimOutcome, task: &str) -> &'a ClaimedRun {
    out.claimed
        .iter()
        .find(|r| r.task_name == task)
        .unwrap_or_else(|| panic!("{task} not claimed: {out:?}"))
}

/// `at` is `lifetime` after an instant between `from` and `to` (give or take the clocks).
#[track_caller]
fn assert_expires(
    at: Option<DateTime<Utc>>,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    lifetime: Duration,
) {
    let at = at.expect("locked");
    let lifetime = chrono::Duration::from_std(lifetime).unwrap();
    let slack = chrono::Duration::seconds(2);
    assert!(
        at >= from + lifetime - slack && at <= to + lifetime + slack,
        "{at} is not {lifetime} after {from}..{to}"
    );
}

fn sorted(mut names: Vec<String>) -> Vec<String> {
    names.sort();
    names
}

async fn a_due_retry_is_offered_first_by_its_time_and_served(s: &dyn Store, _: &Arrange) {
    let t = now_s();
    let far = t + HOUR * 24;
    seed(
        s,
        &[
            ("r", t - HOUR * 3),
            ("later", t - HOUR * 3),
            ("a-tick", t - HOUR),
        ],
    )
    .await;
    // "r" and "later" run their tick, fail, and wait for a retry (2 h ago, in an hour).
    let out = claim(s, &["r", "later"], 2, &Rules::hourly().plan(run_then(far))).await;
    let retry = |task: &str, at| {
        with_requeue(
            finish(
                claimed(&out, task),
                RunStatus::Failed,
                Some("boom"),
                FailureCount::Increment,
            ),
            Requeue::Retry {
                tick: t - HOUR * 4,
                attempt: 2,
                at,
            },
        )
    };
    let results = s
        .finish_runs(&[retry("r", t - HOUR * 2), retry("later", t + HOUR)])
        .await
        .unwrap();
    assert!(results.iter().all(|r| r.lock_held));
    assert_eq!(task_state(s, "r").await.retry_at, Some(t - HOUR * 2));
    assert_eq!(task_state(s, "later").await.retry_at, Some(t + HOUR));

    // Oldest first by the earliest due instant (not by name): "r"'s retry before "a-tick"'s tick.
    let rules = Rules::hourly().plan(leave);
    claim(s, &["a-tick", "later", "r"], 1, &rules).await;
    assert_eq!(rules.offered(), ["r"]);
    let rules = Rules::hourly().plan(leave);
    claim(s, &["a-tick", "later", "r"], 5, &rules).await;
    assert_eq!(
        rules.offered(),
        ["r", "a-tick"],
        "a retry not due yet is not offered"
    );
    let offered = &rules.tasks()[0];
    let pending = offered.retry.as_ref().expect("offered with its retry");
    assert_eq!(
        (pending.tick, pending.attempt, pending.at),
        (t - HOUR * 4, 2, t - HOUR * 2)
    );
    assert_eq!(offered.next_run_at, Some(far));
    assert!(offered.enabled);
    assert!(offered.manual.is_none() && offered.pause.is_none() && offered.missed_since.is_none());
    assert_near_now(offered.last_finished_at.expect("its run ended"));

    let run = claim_one(s, "r", &Rules::hourly().plan(serve_retry)).await;
    assert_eq!(
        (
            run.scheduled_at,
            run.attempt,
            run.trigger,
            run.triggered_by.as_deref()
        ),
        (t - HOUR * 4, 2, Trigger::Retry, None)
    );
    let record = self::run(s, run.run_id).await;
    assert_eq!(
        (record.scheduled_at, record.attempt, record.trigger),
        (t - HOUR * 4, 2, Trigger::Retry)
    );
    let r = task_state(s, "r").await;
    assert_eq!(r.retry_at, None, "served: cleared");
    assert_eq!(r.next_run_at, Some(far), "the schedule is kept");
    assert_eq!(
        row(s, "r").await.last_scheduled_at,
        Some(t - HOUR * 3),
        "a retry claims no new tick"
    );
    assert_eq!(task_state(s, "later").await.retry_at, Some(t + HOUR));
}

async fn a_claim_ahead_takes_ticks_due_within_its_lead_and_starts_them_on_the_tick(
    s: &dyn Store,
    _: &Arrange,
) {
    let t = now_s();
    let soon = t + chrono::Duration::seconds(3);
    let far = t + HOUR * 24;
    seed(s, &[("soon", soon), ("later", t + HOUR), ("r", t - HOUR)]).await;
    // "r" runs its tick, fails, and waits for a retry due as soon as "soon"'s tick.
    let out = claim(s, &["r"], 1, &Rules::hourly().plan(run_then(far))).await;
    let retry = with_requeue(
        finish(
            claimed(&out, "r"),
            RunStatus::Failed,
            Some("boom"),
            FailureCount::Increment,
        ),
        Requeue::Retry {
            tick: t - HOUR,
            attempt: 2,
            at: soon,
        },
    );
    assert!(finish_one(s, retry).await);

    let tasks = names(&["soon", "later", "r"]);
    let rules = Rules::hourly().plan(leave);
    s.claim(ClaimRequest::new(NODE, &tasks, 10), &rules)
        .await
        .unwrap();
    assert!(rules.offered().is_empty(), "nothing is due yet");

    let rules = Rules::hourly();
    let out = s
        .claim(
            ClaimRequest::new(NODE, &tasks, 10).ahead(Duration::from_secs(60)),
            &rules,
        )
        .await
        .unwrap();
    assert_eq!(
        rules.offered(),
        ["soon"],
        "a tick within the lead is offered; one beyond it is not, nor a retry not due yet"
    );
    let run = claimed(&out, "soon");
    assert_eq!(run.scheduled_at, soon);
    assert!(
        run.starts_in > Duration::ZERO && run.starts_in <= Duration::from_secs(3),
        "starts on its tick, {:?} from the claim's end",
        run.starts_in
    );
    let record = self::run(s, run.run_id).await;
    assert_eq!(
        record.started_at,
        Some(soon),
        "planned to start on its tick until it ends"
    );
    let state = task_state(s, "soon").await;
    assert_eq!(state.next_run_at, Some(soon + HOUR), "moved on as planned");
    assert_eq!(
        task_state(s, "r").await.retry_at,
        Some(soon),
        "left for later"
    );
}

async fn a_retry_that_gives_way_is_dropped_and_recorded_by_the_claim(s: &dyn Store, _: &Arrange) {
    let t = now_s();
    seed(s, &[("a", t - HOUR * 2)]).await;
    // The tick fails; its retry is due, and so is the next tick.
    let first = claim_one(s, "a", &Rules::hourly()).await;
    assert!(
        finish_one(
            s,
            with_requeue(
                finish(&first, RunStatus::Failed, None, FailureCount::Increment),
                Requeue::Retry {
                    tick: t - HOUR * 2,
                    attempt: 2,
                    at: t - MINUTE * 30,
                },
            )
        )
        .await
    );
    let gave_way = skip("a", SkipReason::RetryGaveWay, t - HOUR * 2, t - HOUR * 2, 1);
    let record = gave_way.clone();
    let rules = Rules::hourly().plan(move |task| {
        let mut plan = scheduled(tick(task), Some(tick(task) + HOUR), Recovery::Rerun);
        plan.clear_retry = true;
        plan.skips = vec![record.clone()];
        DueDecision::Run(plan)
    });
    let out = claim(s, &["a"], 1, &rules).await;
    let run = claimed(&out, "a");
    assert_eq!(
        (run.scheduled_at, run.attempt, run.trigger),
        (t - HOUR, 1, Trigger::Schedule)
    );
    assert_eq!(
        out.skipped,
        std::slice::from_ref(&gave_way),
        "the records written"
    );
    assert_eq!(s.skips("a", t - HOUR * 3).await.unwrap(), [gave_way]);
    let a = task_state(s, "a").await;
    assert_eq!((a.retry_at, a.next_run_at), (None, Some(t)));
    assert_eq!(row(s, "a").await.last_scheduled_at, Some(t - HOUR));
}

async fn a_manual_run_is_offered_even_for_a_disabled_task_but_not_for_a_paused_one(
    s: &dyn Store,
    _: &Arrange,
) {
    let t = now_s();
    apply(
        s,
        vec![
            create("off", false, None),
            create("on", true, Some(t + HOUR)),
            create("held", true, Some(t + HOUR)),
        ],
    )
    .await;
    for task in ["off", "on", "held"] {
        assert_eq!(
            s.request_run(task, "alice", None, &audit("trigger", task))
                .await
                .unwrap(),
            RunRequest::Queued
        );
    }
    let pause = Pause::new(t, "bob", "maintenance", None);
    assert!(
        s.pause_task("held", &pause, &audit("pause", "held"))
            .await
            .unwrap()
    );
    let asked = task_state(s, "off").await.manual_at.expect("queued");
    assert_near_now(asked);

    let rules = Rules::hourly().plan(leave);
    claim(s, &["off", "on", "held"], 5, &rules).await;
    assert_eq!(sorted(rules.offered()), ["off", "on"]);
    let off = rules.tasks().into_iter().find(|t| t.name == "off").unwrap();
    assert!(!off.enabled);
    assert_eq!(off.next_run_at, None);
    let manual = off.manual.clone().expect("offered with its request");
    assert_eq!((manual.at, manual.by.as_deref()), (asked, Some("alice")));

    let out = claim(
        s,
        &["off", "on", "held"],
        5,
        &Rules::hourly().plan(serve_manual),
    )
    .await;
    assert_eq!(out.claimed.len(), 2, "{out:?}");
    for run in &out.claimed {
        assert_eq!(
            (run.trigger, run.attempt, run.triggered_by.as_deref()),
            (Trigger::Manual, 1, Some("alice"))
        );
        let record = self::run(s, run.run_id).await;
        assert_eq!(
            (
                record.trigger,
                record.attempt,
                record.triggered_by.as_deref()
            ),
            (Trigger::Manual, 1, Some("alice"))
        );
        let state = task_state(s, &run.task_name).await;
        assert_eq!(state.manual_at, None, "served: cleared");
        assert_eq!(state.lock_owner.as_deref(), Some(NODE));
    }
    assert_eq!(claimed(&out, "off").scheduled_at, asked);
    assert_eq!(
        task_state(s, "on").await.next_run_at,
        Some(t + HOUR),
        "the schedule is kept"
    );
    assert_eq!(
        row(s, "on").await.last_scheduled_at,
        None,
        "a manual run claims no tick"
    );
    assert!(
        task_state(s, "held").await.manual_at.is_some(),
        "waiting for the pause to end"
    );
}

async fn an_expired_pause_is_offered_and_a_skip_ending_it_writes_its_skip_records(
    s: &dyn Store,
    _: &Arrange,
) {
    let t = now_s();
    seed(s, &[("ended", t - HOUR * 2), ("on", t - HOUR * 2)]).await;
    let expired = Pause::new(t, "bob", "deploy", Some(t - MINUTE));
    assert!(
        s.pause_task("ended", &expired, &audit("pause", "ended"))
            .await
            .unwrap()
    );
    let in_force = Pause::new(t, "bob", "deploy", Some(t + HOUR));
    assert!(
        s.pause_task("on", &in_force, &audit("pause", "on"))
            .await
            .unwrap()
    );
    let paused = skip("ended", SkipReason::Paused, t - HOUR * 2, t - HOUR, 2);
    let record = paused.clone();
    let rules = Rules::hourly().plan(move |_| DueDecision::Skip {
        next_run_at: NextRun::Set(Some(t + HOUR)),
        clear_retry: false,
        clear_pause: true,
        skips: vec![record.clone()],
    });
    let out = claim(s, &["ended", "on"], 5, &rules).await;
    assert_eq!(rules.offered(), ["ended"], "only the pause that ran out");
    let pause = rules.tasks()[0]
        .pause
        .clone()
        .expect("offered with its pause");
    assert_eq!(
        (pause.by.as_str(), pause.reason.as_str(), pause.until),
        ("bob", "deploy", Some(t - MINUTE))
    );
    assert_near_now(pause.at);
    assert!(out.claimed.is_empty() && out.left.is_empty(), "{out:?}");
    assert_eq!(out.skipped, std::slice::from_ref(&paused));
    assert_eq!(s.skips("ended", t - HOUR * 3).await.unwrap(), [paused]);
    let ended = task_state(s, "ended").await;
    assert_eq!(ended.pause, None, "ended");
    assert_eq!(ended.next_run_at, Some(t + HOUR));
    assert_eq!(ended.lock_owner, None, "a skip takes no lock");
    assert!(!row(s, "ended").await.paused);
    assert!(s.recent_runs(Some("ended"), 10).await.unwrap().is_empty());
    assert!(row(s, "on").await.paused, "still in force");
}

async fn a_skip_moves_the_schedule_drops_the_retry_and_records_its_skips(
    s: &dyn Store,
    _: &Arrange,
) {
    let t = now_s();
    seed(s, &[("moved", t - HOUR * 3), ("kept", t - HOUR * 2)]).await;
    // "kept" ran its tick (which stays due) and has a retry waiting besides.
    let first = claim_one(s, "kept", &Rules::hourly().plan(stay_due)).await;
    assert!(
        finish_one(
            s,
            with_requeue(
                finish(&first, RunStatus::Failed, None, FailureCount::Increment),
                Requeue::Retry {
                    tick: t - HOUR * 2,
                    attempt: 2,
                    at: t + HOUR,
                },
            )
        )
        .await
    );
    let misfire = skip("moved", SkipReason::Misfire, t - HOUR * 3, t - HOUR, 3);
    let overlap = skip("kept", SkipReason::Overlap, t - HOUR * 2, t - HOUR * 2, 1);
    let (m, o) = (misfire.clone(), overlap.clone());
    let rules = Rules::hourly().plan(move |task| match task.name.as_str() {
        "moved" => DueDecision::Skip {
            next_run_at: NextRun::Set(Some(t + HOUR * 2)),
            clear_retry: false,
            clear_pause: false,
            skips: vec![m.clone()],
        },
        _ => DueDecision::Skip {
            next_run_at: NextRun::Keep,
            clear_retry: true,
            clear_pause: false,
            skips: vec![o.clone()],
        },
    });
    let out = claim(s, &["moved", "kept"], 5, &rules).await;
    assert_eq!(rules.offered(), ["moved", "kept"]);
    assert!(out.claimed.is_empty(), "{out:?}");
    assert_eq!(out.skipped, [misfire.clone(), overlap.clone()]);
    assert_eq!(s.skips("moved", t - HOUR * 9).await.unwrap(), [misfire]);
    assert_eq!(s.skips("kept", t - HOUR * 9).await.unwrap(), [overlap]);
    let moved = task_state(s, "moved").await;
    assert_eq!(
        (moved.next_run_at, moved.lock_owner),
        (Some(t + HOUR * 2), None)
    );
    let kept = task_state(s, "kept").await;
    assert_eq!(
        (kept.next_run_at, kept.retry_at, kept.lock_owner),
        (Some(t - HOUR * 2), None, None),
        "next run kept, retry dropped, no lock"
    );
    assert!(s.recent_runs(Some("moved"), 10).await.unwrap().is_empty());

    // A skip to no next run: the schedule never fires again.
    let rules = Rules::hourly().plan(|_| DueDecision::Skip {
        next_run_at: NextRun::Set(None),
        clear_retry: false,
        clear_pause: false,
        skips: vec![],
    });
    let out = claim(s, &["kept"], 1, &rules).await;
    assert!(out.skipped.is_empty());
    assert_eq!(task_state(s, "kept").await.next_run_at, None);
}

async fn a_claim_ends_the_missed_run_incident_and_reports_it(s: &dyn Store, _: &Arrange) {
    let t = now_s() - HOUR;
    seed(s, &[("a", t)]).await;
    assert_eq!(s.open_missed(&[("a".into(), t)]).await.unwrap(), ["a"]);
    let rules = Rules::hourly().plan(stay_due);
    let run = claim_one(s, "a", &rules).await;
    assert_eq!(rules.tasks()[0].missed_since, Some(t), "offered with it");
    assert_eq!(run.missed_since, Some(t), "this run ends it");
    assert_eq!(task_state(s, "a").await.missed_since, None, "closed");
    assert!(
        finish_one(
            s,
            finish(&run, RunStatus::Succeeded, None, FailureCount::Reset)
        )
        .await
    );
    assert_eq!(claim_one(s, "a", &rules).await.missed_since, None);
}

async fn a_release_requeues_a_retry_a_manual_run_or_nothing(s: &dyn Store, arrange: &Arrange) {
    let t = now_s();
    let far = t + HOUR * 24;
    seed(s, &[("retry", t - HOUR), ("none", t - HOUR)]).await;
    apply(s, vec![create("manual", true, Some(far))]).await;
    assert_eq!(
        s.request_run("manual", "alice", None, &audit("trigger", "manual"))
            .await
            .unwrap(),
        RunRequest::Queued
    );
    let asked = task_state(s, "manual").await.manual_at.unwrap();
    let next = run_then(far);
    let rules = Rules::hourly().plan(move |task| {
        if task.manual.is_some() {
            serve_manual(task)
        } else {
            next(task)
        }
    });
    let all = ["retry", "none", "manual"];
    let out = claim(s, &all, 3, &rules).await;
    assert_eq!(out.claimed.len(), 3);
    for task in all {
        arrange.expire_lock(task).await;
    }

    let retry_at = t - MINUTE;
    let rescue = Rules::hourly().rescue(move |lock| match lock.key.task_name.as_str() {
        "retry" => release(
            RunStatus::Lost,
            None,
            Some(Requeue::Retry {
                tick: t - HOUR,
                attempt: 2,
                at: retry_at,
            }),
            FailureCount::Increment,
        ),
        "manual" => release(
            RunStatus::Lost,
            None,
            Some(Requeue::Manual {
                at: asked,
                by: Some("alice".into()),
            }),
            FailureCount::Keep,
        ),
        _ => release(RunStatus::Lost, None, None, FailureCount::Keep),
    });
    let out = claim(s, &all, 0, &rescue).await;
    assert_eq!(out.rescued.len(), 3, "{out:?}");
    // The rescuer saw how each run had started.
    let offered = rescue.expired();
    let run_of = |task: &str| {
        offered
            .iter()
            .find(|l| l.key.task_name == task)
            .and_then(|l| l.run.clone())
            .expect("a running run")
    };
    let manual = run_of("manual");
    assert_eq!(
        (
            manual.scheduled_at,
            manual.attempt,
            manual.trigger,
            manual.triggered_by.as_deref()
        ),
        (asked, 1, Trigger::Manual, Some("alice"))
    );
    let retry = run_of("retry");
    assert_eq!(
        (retry.attempt, retry.trigger, retry.triggered_by.as_deref()),
        (1, Trigger::Schedule, None)
    );
    let rescued = |task: &str| {
        out.rescued
            .iter()
            .find(|r| r.task_name == task)
            .unwrap()
            .requeue
            .clone()
    };
    assert_eq!(
        rescued("retry"),
        Some(Requeue::Retry {
            tick: t - HOUR,
            attempt: 2,
            at: retry_at
        })
    );
    assert_eq!(
        rescued("manual"),
        Some(Requeue::Manual {
            at: asked,
            by: Some("alice".into())
        })
    );
    assert_eq!(rescued("none"), None);

    let r = task_state(s, "retry").await;
    assert_eq!(
        (r.retry_at, r.manual_at, r.next_run_at, r.lock_owner),
        (Some(retry_at), None, Some(far), None)
    );
    let m = task_state(s, "manual").await;
    assert_eq!(
        (m.manual_at, m.retry_at, m.next_run_at),
        (Some(asked), None, Some(far))
    );
    let n = task_state(s, "none").await;
    assert_eq!(
        (n.retry_at, n.manual_at, n.next_run_at),
        (None, None, Some(far))
    );

    // Offered again as requeued.
    let rules = Rules::hourly().plan(leave);
    claim(s, &all, 5, &rules).await;
    assert_eq!(sorted(rules.offered()), ["manual", "retry"]);
    let tasks = rules.tasks();
    let retry = tasks
        .iter()
        .find(|t| t.name == "retry")
        .and_then(|t| t.retry.clone())
        .unwrap();
    assert_eq!(
        (retry.tick, retry.attempt, retry.at),
        (t - HOUR, 2, retry_at)
    );
    let manual = tasks
        .iter()
        .find(|t| t.name == "manual")
        .and_then(|t| t.manual.clone())
        .unwrap();
    assert_eq!((manual.at, manual.by.as_deref()), (asked, Some("alice")));
}

async fn a_finish_requeues_a_retry_a_manual_run_or_a_tick_only_under_its_own_lock(
    s: &dyn Store,
    _: &Arrange,
) {
    let t = now_s();
    let far = t + HOUR * 24;
    let all = ["retry", "manual", "tick", "taken"];
    seed(s, &all.map(|n| (n, t - HOUR))).await;
    let out = claim(s, &all, 4, &Rules::hourly().plan(run_then(far))).await;
    let failed = |task: &str, requeue: Requeue| {
        with_requeue(
            finish(
                claimed(&out, task),
                RunStatus::Failed,
                Some("boom"),
                FailureCount::Increment,
            ),
            requeue,
        )
    };
    let retry_at = t - MINUTE;
    let asked = t - MINUTE * 5;
    let retry = Requeue::Retry {
        tick: t - HOUR,
        attempt: 2,
        at: retry_at,
    };
    let mut taken = failed("taken", retry.clone());
    taken.lock.token = Uuid::new_v4();
    let results = s
        .finish_runs(&[
            failed("retry", retry.clone()),
            failed(
                "manual",
                Requeue::Manual {
                    at: asked,
                    by: Some("bob".into()),
                },
            ),
            failed("tick", Requeue::Tick(t - HOUR)),
            taken,
        ])
        .await
        .unwrap();
    let lock_held: Vec<bool> = results.iter().map(|r| r.lock_held).collect();
    assert_eq!(lock_held, [true, true, true, false]);

    let st = task_state(s, "retry").await;
    assert_eq!(
        (st.retry_at, st.manual_at, st.next_run_at),
        (Some(retry_at), None, Some(far))
    );
    let st = task_state(s, "manual").await;
    assert_eq!(
        (st.manual_at, st.retry_at, st.next_run_at),
        (Some(asked), None, Some(far))
    );
    let st = task_state(s, "tick").await;
    assert_eq!(
        (st.next_run_at, st.retry_at, st.manual_at),
        (Some(t - HOUR), None, None),
        "the earlier of the tick and the next run"
    );
    let st = task_state(s, "taken").await;
    assert_eq!(
        (st.retry_at, st.next_run_at, st.lock_owner.as_deref()),
        (None, Some(far), Some(NODE)),
        "not its lock: nothing requeued"
    );

    let rules = Rules::hourly().plan(leave);
    claim(s, &all, 5, &rules).await;
    assert_eq!(sorted(rules.offered()), ["manual", "retry", "tick"]);
    let tasks = rules.tasks();
    let pending = tasks
        .iter()
        .find(|t| t.name == "retry")
        .and_then(|t| t.retry.clone())
        .unwrap();
    assert_eq!(
        (pending.tick, pending.attempt, pending.at),
        (t - HOUR, 2, retry_at)
    );
    let manual = tasks
        .iter()
        .find(|t| t.name == "manual")
        .and_then(|t| t.manual.clone())
        .unwrap();
    assert_eq!((manual.at, manual.by.as_deref()), (asked, Some("bob")));

    // A retry replaces the one pending.
    let run = claim_one(s, "tick", &Rules::hourly().plan(run_then(far))).await;
    let later = Requeue::Retry {
        tick: t - HOUR,
        attempt: 3,
        at: t + HOUR,
    };
    let mut again = finish(&run, RunStatus::Failed, None, FailureCount::Increment);
    again.requeue = Some(later);
    assert!(finish_one(s, again).await);
    let run = claim_one(s, "retry", &Rules::hourly().plan(serve_retry)).await;
    assert_eq!(run.attempt, 2);
    assert!(
        finish_one(
            s,
            with_requeue(
                finish(&run, RunStatus::Failed, None, FailureCount::Increment),
                Requeue::Retry {
                    tick: t - HOUR,
                    attempt: 3,
                    at: t + HOUR * 2,
                },
            )
        )
        .await
    );
    assert_eq!(task_state(s, "retry").await.retry_at, Some(t + HOUR * 2));
    assert_eq!(task_state(s, "tick").await.retry_at, Some(t + HOUR));
}

async fn each_lock_lives_as_long_as_its_plan_or_renewal_says(s: &dyn Store, _: &Arrange) {
    let t = now_s() - HOUR;
    seed(s, &[("short", t), ("long", t)]).await;
    let (half_minute, hour) = (Duration::from_secs(30), Duration::from_secs(3_600));
    let rules = Rules::hourly().plan(move |task| {
        let mut plan = scheduled(tick(task), Some(tick(task) + HOUR * 24), Recovery::Rerun);
        plan.lock_lifetime = if task.name == "short" {
            half_minute
        } else {
            hour
        };
        DueDecision::Run(plan)
    });
    let before = Utc::now();
    let out = claim(s, &["short", "long"], 2, &rules).await;
    let after = Utc::now();
    assert_expires(
        task_state(s, "short").await.lock_expires_at,
        before,
        after,
        half_minute,
    );
    assert_expires(
        task_state(s, "long").await.lock_expires_at,
        before,
        after,
        hour,
    );

    let before = Utc::now();
    let renewed = s
        .renew_locks(
            NODE,
            &[
                (key(claimed(&out, "short")), hour * 2),
                (key(claimed(&out, "long")), Duration::from_secs(60)),
            ],
        )
        .await
        .unwrap();
    let after = Utc::now();
    let mut renewed: Vec<String> = renewed.renewed.into_iter().map(|k| k.task_name).collect();
    renewed.sort();
    assert_eq!(renewed, ["long", "short"]);
    assert_expires(
        task_state(s, "short").await.lock_expires_at,
        before,
        after,
        hour * 2,
    );
    assert_expires(
        task_state(s, "long").await.lock_expires_at,
        before,
        after,
        Duration::from_secs(60),
    );
}

async fn the_heartbeat_counts_overdue_tasks_without_an_incident(s: &dyn Store, _: &Arrange) {
    let t = now_s();
    let beat = || async { s.heartbeat("me", Duration::from_secs(30)).await.unwrap() };
    assert_eq!(beat().await.overdue, 0);
    apply(
        s,
        vec![
            create("late", true, Some(t - HOUR)),
            create("later", true, Some(t - HOUR * 2)),
            create("soon", true, Some(t + HOUR)),
            create("off", false, Some(t - HOUR)),
            create("paused", true, Some(t - HOUR)),
            create("missed", true, Some(t - HOUR)),
            create("none", true, None),
        ],
    )
    .await;
    assert!(
        s.pause_task(
            "paused",
            &Pause::new(t, "bob", "why", None),
            &audit("pause", "paused")
        )
        .await
        .unwrap()
    );
    assert_eq!(
        s.open_missed(&[("missed".into(), t - HOUR)]).await.unwrap(),
        ["missed"]
    );
    assert_eq!(beat().await.overdue, 2, "late and later");
    s.open_missed(&[("late".into(), t - HOUR)]).await.unwrap();
    assert_eq!(beat().await.overdue, 1);
}

async fn request_run_queues_once_audits_and_wakes_the_nodes(s: &dyn Store, _: &Arrange) {
    let t = now_s();
    seed(s, &[("a", t + HOUR), ("p", t + HOUR)]).await;
    let mut listener = quiet_listener(s).await;
    assert_eq!(
        s.request_run("missing", "alice", None, &audit("trigger", "missing"))
            .await
            .unwrap(),
        RunRequest::NotFound
    );
    assert!(s.audit_log(10, None).await.unwrap().is_empty());

    let entry = audit("trigger", "a");
    assert_eq!(
        s.request_run("a", "alice", None, &entry).await.unwrap(),
        RunRequest::Queued
    );
    assert!(
        wakes(&mut listener, Duration::from_secs(10)).await,
        "a queued run wakes the nodes"
    );
    let queued = task_state(s, "a").await.manual_at.expect("queued");
    assert_near_now(queued);
    let log = s.audit_log(10, None).await.unwrap();
    assert_eq!(log.len(), 1);
    assert!(log[0].id > 0);
    assert_near_now(log[0].at);
    assert_eq!(
        (
            &log[0].actor,
            &log[0].action,
            &log[0].task,
            &log[0].detail,
            &log[0].source
        ),
        (
            &entry.actor,
            &entry.action,
            &entry.task,
            &entry.detail,
            &entry.source
        )
    );

    assert_eq!(
        s.request_run("a", "bob", None, &audit("trigger", "a"))
            .await
            .unwrap(),
        RunRequest::AlreadyQueued
    );
    assert_eq!(
        task_state(s, "a").await.manual_at,
        Some(queued),
        "the first request stands"
    );
    assert_eq!(
        s.audit_log(10, None).await.unwrap().len(),
        1,
        "nothing done"
    );
    assert!(!wakes(&mut listener, QUIET).await, "nothing to wake for");

    assert!(
        s.pause_task(
            "p",
            &Pause::new(t, "bob", "broken", Some(t + HOUR)),
            &audit("pause", "p")
        )
        .await
        .unwrap()
    );
    let pause = task_state(s, "p").await.pause.expect("paused");
    assert_eq!(
        s.request_run("p", "alice", None, &audit("trigger", "p"))
            .await
            .unwrap(),
        RunRequest::Paused(pause)
    );
    assert_eq!(task_state(s, "p").await.manual_at, None);
    assert_eq!(s.audit_log(10, None).await.unwrap().len(), 2, "the pause");

    // Once served, another may be asked for.
    let run = claim_one(s, "a", &Rules::hourly().plan(serve_manual)).await;
    assert_eq!(run.triggered_by.as_deref(), Some("alice"));
    assert_eq!(
        s.request_run("a", "bob", None, &audit("trigger", "a"))
            .await
            .unwrap(),
        RunRequest::Queued
    );
}

async fn overdue_tasks_are_late_enabled_unpaused_and_without_an_incident_oldest_first(
    s: &dyn Store,
    _: &Arrange,
) {
    let t = now_s();
    apply(
        s,
        vec![
            create("old", true, Some(t - HOUR * 3)),
            create("mid", true, Some(t - HOUR * 2)),
            create("young", true, Some(t - HOUR)),
            create("recent", true, Some(t - MINUTE)),
            create("future", true, Some(t + HOUR)),
            create("off", false, Some(t - HOUR * 4)),
            create("paused", true, Some(t - HOUR * 5)),
            create("missed", true, Some(t - HOUR * 6)),
            create("none", true, None),
        ],
    )
    .await;
    assert!(
        s.pause_task(
            "paused",
            &Pause::new(t, "bob", "why", None),
            &audit("pause", "paused")
        )
        .await
        .unwrap()
    );
    s.open_missed(&[("missed".into(), t - HOUR * 6)])
        .await
        .unwrap();
    // "mid" ran once; its tick stays due.
    let run = claim_one(s, "mid", &Rules::hourly().plan(stay_due)).await;
    assert!(
        finish_one(
            s,
            finish(&run, RunStatus::Succeeded, None, FailureCount::Reset)
        )
        .await
    );

    let ten_minutes = Duration::from_secs(600);
    let listed = |late: Vec<scheduler::testing::store::OverdueTask>| {
        late.into_iter().map(|o| o.name).collect::<Vec<_>>()
    };
    let late = s.overdue_tasks(ten_minutes, 10).await.unwrap();
    assert_eq!(listed(late.clone()), ["old", "mid", "young"]);
    assert_eq!(
        (
            late[0].cron.as_str(),
            late[0].timezone.as_str(),
            late[0].next_run_at,
            late[0].last_run_at
        ),
        ("0 * * * *", "UTC", t - HOUR * 3, None)
    );
    assert_eq!(late[1].next_run_at, t - HOUR * 2);
    assert_near_now(late[1].last_run_at.expect("mid ran"));
    // The store's clock, which the missed-run check measures lateness against.
    assert!(late.iter().all(|o| o.checked_at == late[0].checked_at));
    assert_near_now(late[0].checked_at);
    assert_eq!(
        listed(s.overdue_tasks(ten_minutes, 2).await.unwrap()),
        ["old", "mid"]
    );
    assert_eq!(
        listed(s.overdue_tasks(Duration::ZERO, 10).await.unwrap()),
        ["old", "mid", "young", "recent"]
    );
    assert!(
        s.overdue_tasks(Duration::from_secs(4 * 3_600), 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(s.overdue_tasks(ten_minutes, 0).await.unwrap().is_empty());
}

async fn open_missed_opens_an_incident_once_and_only_while_the_tick_is_next(
    s: &dyn Store,
    _: &Arrange,
) {
    let t = now_s() - HOUR;
    seed(s, &[("a", t), ("b", t), ("c", t)]).await;
    let opened = s
        .open_missed(&[
            ("a".into(), t),
            ("b".into(), t + MINUTE),
            ("missing".into(), t),
        ])
        .await
        .unwrap();
    assert_eq!(opened, ["a"], "b's next run is another tick");
    assert!(
        s.open_missed(&[("a".into(), t)]).await.unwrap().is_empty(),
        "already open"
    );
    assert_eq!(task_state(s, "a").await.missed_since, Some(t));
    assert_eq!(task_state(s, "b").await.missed_since, None);
    assert!(s.open_missed(&[]).await.unwrap().is_empty());
    assert_eq!(
        s.open_missed(&[("c".into(), t), ("c".into(), t)])
            .await
            .unwrap(),
        ["c"],
        "opened once"
    );
}

async fn a_pause_holds_a_task_until_resumed_with_what_the_planner_decides(
    s: &dyn Store,
    _: &Arrange,
) {
    let t = now_s();
    seed(s, &[("a", t - HOUR * 2), ("b", t - HOUR)]).await;
    let mut listener = quiet_listener(s).await;
    let pause = Pause::new(t, "bob", "incident 42", None);
    assert!(
        !s.pause_task("missing", &pause, &audit("pause", "missing"))
            .await
            .unwrap()
    );
    assert!(s.audit_log(10, None).await.unwrap().is_empty());
    assert!(
        s.pause_task("a", &pause, &audit("pause", "a"))
            .await
            .unwrap()
    );
    let held = task_state(s, "a").await.pause.expect("paused");
    assert_eq!(
        (held.by.as_str(), held.reason.as_str(), held.until),
        ("bob", "incident 42", None)
    );
    assert_near_now(held.at);
    assert!(row(s, "a").await.paused);
    let rules = Rules::hourly().plan(leave);
    claim(s, &["a", "b"], 5, &rules).await;
    assert_eq!(rules.offered(), ["b"], "a paused task's tick waits");
    assert_eq!(s.next_wake("n", &names(&["a"])).await.unwrap().due_at, None);

    // A pause in force is replaced.
    let longer = Pause::new(t, "carol", "longer", Some(t + HOUR));
    assert!(
        s.pause_task("a", &longer, &audit("pause", "a"))
            .await
            .unwrap()
    );
    let held = task_state(s, "a").await.pause.expect("paused");
    assert_eq!(
        (held.by.as_str(), held.reason.as_str(), held.until),
        ("carol", "longer", Some(t + HOUR))
    );
    assert_eq!(s.audit_log(10, None).await.unwrap().len(), 2);

    // Resuming a task that is not paused, or does not exist, does nothing.
    let planned = AtomicBool::new(false);
    let never = |_: &TaskState, _: Duration, _: DateTime<Utc>| {
        planned.store(true, Ordering::SeqCst);
        ResumePlan::new(None, Vec::new())
    };
    assert_eq!(
        s.resume_task("b", &audit("resume", "b"), &never)
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        s.resume_task("missing", &audit("resume", "missing"), &never)
            .await
            .unwrap(),
        None
    );
    assert!(!planned.load(Ordering::SeqCst), "nothing to plan");
    assert_eq!(s.audit_log(10, None).await.unwrap().len(), 2);
    assert!(!wakes(&mut listener, QUIET).await, "nothing resumed");

    let paused = skip("a", SkipReason::Paused, t - HOUR * 2, t, 3);
    let before = task_state(s, "a").await;
    let seen: Mutex<Vec<(TaskState, DateTime<Utc>)>> = Mutex::default();
    let planner = |row: &TaskState, _: Duration, now: DateTime<Utc>| {
        seen.lock().unwrap().push((row.clone(), now));
        ResumePlan::new(Some(t + HOUR), vec![paused.clone()])
    };
    let ended = s
        .resume_task("a", &audit("resume", "a"), &planner)
        .await
        .unwrap();
    assert_eq!(ended, Some(held), "the pause that ended");
    {
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 1);
        assert_eq!(seen[0].0, before, "the planner sees the row");
        assert_near_now(seen[0].1);
    }
    let a = task_state(s, "a").await;
    assert_eq!((a.pause, a.next_run_at), (None, Some(t + HOUR)));
    assert!(!row(s, "a").await.paused);
    assert_eq!(s.skips("a", t - HOUR * 3).await.unwrap(), [paused]);
    let log = s.audit_log(10, None).await.unwrap();
    assert_eq!(log.len(), 3);
    assert_eq!(
        (log[0].action.as_str(), log[0].task.as_str()),
        ("resume", "a")
    );
    assert!(
        wakes(&mut listener, Duration::from_secs(10)).await,
        "a pause that ended wakes the nodes"
    );
    assert_eq!(
        s.resume_task("a", &audit("resume", "a"), &never)
            .await
            .unwrap(),
        None,
        "not paused any more"
    );
}

async fn the_audit_log_pages_newest_first(s: &dyn Store, _: &Arrange) {
    seed(s, &[("a", now_s() + HOUR)]).await;
    for i in 0..5 {
        let mut entry = audit("pause", "a");
        entry.detail = format!("pause {i}");
        let pause = Pause::new(now_s(), "alice", format!("reason {i}"), None);
        assert!(s.pause_task("a", &pause, &entry).await.unwrap());
    }
    let all = s.audit_log(10, None).await.unwrap();
    let details: Vec<&str> = all.iter().map(|e| e.detail.as_str()).collect();
    assert_eq!(
        details,
        ["pause 4", "pause 3", "pause 2", "pause 1", "pause 0"]
    );
    assert!(
        all.windows(2)
            .all(|w| w[0].id > w[1].id && w[0].at >= w[1].at)
    );
    for e in &all {
        assert_eq!(
            (
                e.actor.as_str(),
                e.action.as_str(),
                e.task.as_str(),
                e.source.as_str()
            ),
            ("alice", "pause", "a", "cli@host")
        );
        assert_near_now(e.at);
    }
    let first = s.audit_log(2, None).await.unwrap();
    assert_eq!(first, all[..2]);
    let second = s.audit_log(2, Some(first[1].id)).await.unwrap();
    assert_eq!(second, all[2..4]);
    let third = s.audit_log(2, Some(second[1].id)).await.unwrap();
    assert_eq!(third, all[4..]);
    assert!(s.audit_log(2, Some(third[0].id)).await.unwrap().is_empty());
    assert!(s.audit_log(0, None).await.unwrap().is_empty());
}

async fn runs_are_filtered_by_task_status_trigger_and_start_and_paged_by_id(
    s: &dyn Store,
    arrange: &Arrange,
) {
    let t = now_s() - HOUR;
    seed(s, &[("a", t), ("b", t)]).await;
    let started = |trigger: Trigger| {
        Rules::hourly().plan(move |task| {
            let mut plan = scheduled(tick(task), Some(tick(task)), Recovery::Rerun);
            plan.trigger = trigger;
            match trigger {
                Trigger::Retry => plan.attempt = 2,
                Trigger::Manual => plan.triggered_by = Some("alice".into()),
                _ => {}
            }
            DueDecision::Run(plan)
        })
    };
    let mut ids = Vec::new();
    for (task, trigger, status) in [
        ("a", Trigger::Schedule, Some(RunStatus::Succeeded)),
        ("b", Trigger::Schedule, Some(RunStatus::Failed)),
        ("a", Trigger::Retry, Some(RunStatus::Failed)),
        ("b", Trigger::Manual, Some(RunStatus::TimedOut)),
        ("a", Trigger::Schedule, None),
    ] {
        let run = claim_one(s, task, &started(trigger)).await;
        if let Some(status) = status {
            assert!(finish_one(s, finish(&run, status, None, FailureCount::Keep)).await);
        }
        ids.push(run.run_id);
    }
    let day = Duration::from_secs(24 * 3_600);
    arrange.age_run(ids[0], day * 2).await;

    let query = |f: &dyn Fn(&mut RunQuery)| {
        let mut q = RunQuery::latest(10);
        f(&mut q);
        async move {
            s.runs(&q)
                .await
                .unwrap()
                .iter()
                .map(|r| r.id)
                .collect::<Vec<_>>()
        }
    };
    let id = |i: usize| ids[i];
    assert_eq!(query(&|_| {}).await, [id(4), id(3), id(2), id(1), id(0)]);
    assert_eq!(
        query(&|q| q.task = Some("a".into())).await,
        [id(4), id(2), id(0)]
    );
    assert_eq!(
        query(&|q| q.status = Some(RunStatus::Failed)).await,
        [id(2), id(1)]
    );
    assert_eq!(
        query(&|q| q.status = Some(RunStatus::TimedOut)).await,
        [id(3)]
    );
    assert_eq!(
        query(&|q| q.status = Some(RunStatus::Running)).await,
        [id(4)]
    );
    assert_eq!(query(&|q| q.trigger = Some(Trigger::Retry)).await, [id(2)]);
    assert_eq!(query(&|q| q.trigger = Some(Trigger::Manual)).await, [id(3)]);
    assert_eq!(
        query(&|q| q.trigger = Some(Trigger::Schedule)).await,
        [id(4), id(1), id(0)]
    );
    let a_day_ago = Utc::now() - chrono::Duration::days(1);
    assert_eq!(
        query(&|q| q.since = Some(a_day_ago)).await,
        [id(4), id(3), id(2), id(1)]
    );
    assert_eq!(query(&|q| q.until = Some(a_day_ago)).await, [id(0)]);
    let first_started = self::run(s, id(0)).await.started_at;
    let first_started = first_started.expect("started");
    assert_eq!(
        query(&|q| q.since = Some(first_started)).await.last(),
        Some(&id(0)),
        "since is inclusive"
    );
    assert!(
        !query(&|q| q.until = Some(first_started))
            .await
            .contains(&id(0)),
        "until is exclusive"
    );
    assert_eq!(
        query(&|q| {
            q.task = Some("a".into());
            q.status = Some(RunStatus::Succeeded);
        })
        .await,
        [id(0)]
    );
    assert_eq!(
        query(&|q| {
            q.task = Some("b".into());
            q.trigger = Some(Trigger::Schedule);
        })
        .await,
        [id(1)]
    );
    assert!(query(&|q| q.task = Some("missing".into())).await.is_empty());

    // The latest runs of each named task, newest first.
    let per_task = |tasks: &'static [&'static str], n: u32, since: DateTime<Utc>| async move {
        let tasks: Vec<String> = tasks.iter().map(|t| t.to_string()).collect();
        s.latest_runs_per_task(&tasks, n, since)
            .await
            .unwrap()
            .iter()
            .map(|r| r.id)
            .collect::<Vec<_>>()
    };
    let epoch = DateTime::<Utc>::UNIX_EPOCH;
    assert_eq!(
        per_task(&["a", "b", "missing"], 1, epoch).await,
        [id(4), id(3)]
    );
    assert_eq!(
        per_task(&["a", "b"], 2, epoch).await,
        [id(4), id(3), id(2), id(1)]
    );
    assert_eq!(
        per_task(&["a", "b"], 10, a_day_ago).await,
        [id(4), id(3), id(2), id(1)],
        "started at or after since"
    );
    assert_eq!(per_task(&["b"], 10, epoch).await, [id(3), id(1)]);
    assert!(per_task(&[], 10, epoch).await.is_empty());

    // Pages of two, each after the last id of the previous one.
    let page = |before: Option<i64>| {
        query(&move |q| {
            q.limit = 2;
            q.before_id = before;
        })
    };
    assert_eq!(page(None).await, [id(4), id(3)]);
    assert_eq!(page(Some(id(3))).await, [id(2), id(1)]);
    assert_eq!(page(Some(id(1))).await, [id(0)]);
    assert!(page(Some(id(0))).await.is_empty());
    assert_eq!(
        query(&|q| q.limit = 0).await,
        [id(4)],
        "at least one per page"
    );

    let records = s.runs(&RunQuery::latest(10)).await.unwrap();
    let manual = records.iter().find(|r| r.id == id(3)).unwrap();
    assert_eq!(
        (
            manual.task_name.as_str(),
            manual.status,
            manual.trigger,
            manual.attempt,
            manual.triggered_by.as_deref()
        ),
        ("b", RunStatus::TimedOut, Trigger::Manual, 1, Some("alice"))
    );
    let retry = records.iter().find(|r| r.id == id(2)).unwrap();
    assert_eq!((retry.attempt, retry.trigger), (2, Trigger::Retry));
}

async fn run_finds_one_run_by_id(s: &dyn Store, _: &Arrange) {
    seed(s, &[("a", now_s() - HOUR)]).await;
    let rules = Rules::hourly().plan(stay_due);
    let done = claim_one(s, "a", &rules).await;
    assert!(
        finish_one(
            s,
            finish(
                &done,
                RunStatus::Failed,
                Some("no"),
                FailureCount::Increment
            )
        )
        .await
    );
    let going = claim_one(s, "a", &rules).await;
    for id in [done.run_id, going.run_id] {
        let one = s.run(id).await.unwrap().expect("recorded");
        assert_eq!(one, self::run(s, id).await);
    }
    let one = s.run(done.run_id).await.unwrap().unwrap();
    assert_eq!(
        (one.status, one.error.as_deref()),
        (RunStatus::Failed, Some("no"))
    );
    assert!(s.run(going.run_id + 1_000).await.unwrap().is_none());
}

async fn run_logs_are_appended_once_per_chunk_and_read_in_order(s: &dyn Store, _: &Arrange) {
    seed(s, &[("a", now_s() - HOUR)]).await;
    let rules = Rules::hourly().plan(stay_due);
    let first = claim_one(s, "a", &rules).await;
    assert!(
        finish_one(
            s,
            finish(&first, RunStatus::Succeeded, None, FailureCount::Reset)
        )
        .await
    );
    let second = claim_one(s, "a", &rules).await;
    let chunk = |run: &ClaimedRun, seq: i32, text: &str| {
        LogChunk::new(run.run_id, seq, text, text.lines().count() as i32)
    };
    let mut last = chunk(&first, 2, "cut\n");
    last.truncated = true;
    s.append_run_logs(&[
        chunk(&first, 1, "b1\nb2\n"),
        chunk(&second, 0, "other run\n"),
        last.clone(),
    ])
    .await
    .unwrap();
    s.append_run_logs(&[chunk(&first, 0, "a\n"), chunk(&first, 1, "written again\n")])
        .await
        .unwrap();
    s.append_run_logs(&[chunk(&second, 1, "kept\n"), chunk(&second, 1, "dropped\n")])
        .await
        .unwrap();
    s.append_run_logs(&[]).await.unwrap();
    assert_eq!(
        s.run_log(first.run_id).await.unwrap(),
        [chunk(&first, 0, "a\n"), chunk(&first, 1, "b1\nb2\n"), last],
        "by seq; a chunk already stored is kept"
    );
    assert_eq!(
        s.run_log(second.run_id).await.unwrap(),
        [
            chunk(&second, 0, "other run\n"),
            chunk(&second, 1, "kept\n")
        ]
    );
    assert!(s.run_log(second.run_id + 1_000).await.unwrap().is_empty());
}

async fn prune_history_also_deletes_old_run_logs_outbox_events_deliveries_and_audit(
    s: &dyn Store,
    arrange: &Arrange,
) {
    let day = Duration::from_secs(24 * 3_600);
    let old = day * 20;
    seed(s, &[("a", now_s() - HOUR), ("gone", now_s() + HOUR)]).await;
    let rules = Rules::hourly().plan(stay_due);
    let mut runs = Vec::new();
    for _ in 0..2 {
        let run = claim_one(s, "a", &rules).await;
        assert!(
            finish_one(
                s,
                finish(&run, RunStatus::Succeeded, None, FailureCount::Reset)
            )
            .await
        );
        s.append_run_logs(&[
            LogChunk::new(run.run_id, 0, "one\n", 1),
            LogChunk::new(run.run_id, 1, "two\n", 1),
        ])
        .await
        .unwrap();
        runs.push(run.run_id);
    }
    arrange.age_run(runs[0], old).await;

    // Outbox: one event disabled by a 410, then four more: delivered, failed, retrying (still
    // pending) and one delivered recently. All but the last are old.
    let event = |n: i32| NewEvent::new(format!("kind.{n}"), format!(r#"{{"n": {n}}}"#));
    s.enqueue_events(&[event(1)]).await.unwrap();
    let disabled = s
        .claim_outbox(NODE, &["webhook".to_owned()], 10, LIFETIME)
        .await
        .unwrap()[0]
        .id;
    s.record_deliveries(&[Delivery::new(disabled, 1, NODE, DeliveryNext::Disabled)])
        .await
        .unwrap();
    s.enqueue_events(&[event(2), event(3), event(4), event(5)])
        .await
        .unwrap();
    let ids: Vec<i64> = s
        .claim_outbox(NODE, &["webhook".to_owned()], 10, LIFETIME)
        .await
        .unwrap()
        .iter()
        .map(|e| e.id)
        .collect();
    let (delivered, failed, pending, recent) = (ids[0], ids[1], ids[2], ids[3]);
    s.record_deliveries(&[
        Delivery::new(delivered, 1, NODE, DeliveryNext::Delivered),
        Delivery::new(failed, 1, NODE, DeliveryNext::Failed),
        Delivery::new(pending, 1, NODE, DeliveryNext::RetryAt(Utc::now())),
        Delivery::new(recent, 1, NODE, DeliveryNext::Delivered),
    ])
    .await
    .unwrap();
    for id in [disabled, delivered, failed, pending] {
        arrange.age_event(id, old).await;
    }

    // Audit: two old entries, one recent.
    for task in ["gone", "gone", "a"] {
        assert!(
            s.pause_task(
                task,
                &Pause::new(now_s(), "bob", "x", None),
                &audit("pause", task)
            )
            .await
            .unwrap()
        );
    }
    arrange.age_audit("gone", old).await;
    assert_eq!(arrange.logged_deliveries().await, 5);

    assert_eq!(s.prune_history(day * 14, 1).await.unwrap(), 1, "one run");
    assert!(
        s.run_log(runs[0]).await.unwrap().is_empty(),
        "the old run's log went with it"
    );
    assert_eq!(s.run_log(runs[1]).await.unwrap().len(), 2);
    let logged: Vec<i64> = s
        .deliveries(10)
        .await
        .unwrap()
        .iter()
        .map(|d| d.outbox_id)
        .collect();
    assert_eq!(logged, [recent, pending], "the old finished events went");
    assert_eq!(
        arrange.logged_deliveries().await,
        2,
        "with their delivery log"
    );
    let due: Vec<i64> = s
        .claim_outbox(NODE, &["webhook".to_owned()], 10, LIFETIME)
        .await
        .unwrap()
        .iter()
        .map(|e| e.id)
        .collect();
    assert_eq!(due, [pending], "a pending event is never pruned");
    let audit_tasks: Vec<String> = s
        .audit_log(10, None)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.task)
        .collect();
    assert_eq!(audit_tasks, ["a"]);
    assert_eq!(s.prune_history(day * 14, 1_000).await.unwrap(), 0);
    assert_eq!(arrange.logged_deliveries().await, 2);
}

async fn task_states_report_every_column_by_name(s: &dyn Store, _: &Arrange) {
    let t = now_s();
    let far = t + HOUR * 24;
    apply(
        s,
        vec![
            create("full", true, Some(t - HOUR)),
            create("locked", true, Some(t - HOUR)),
            create("off", false, Some(t + HOUR)),
        ],
    )
    .await;
    // "full": ran and failed (a retry waits), a manual run asked for, a missed-run incident
    // open, paused, orphaned.
    let before = Utc::now();
    let out = claim(
        s,
        &["full", "locked"],
        2,
        &Rules::hourly().plan(run_then(far)),
    )
    .await;
    let after = Utc::now();
    assert!(
        finish_one(
            s,
            with_requeue(
                finish(
                    claimed(&out, "full"),
                    RunStatus::Failed,
                    Some("boom"),
                    FailureCount::Increment
                ),
                Requeue::Retry {
                    tick: t - HOUR,
                    attempt: 2,
                    at: t + HOUR,
                },
            )
        )
        .await
    );
    assert_eq!(
        s.request_run("full", "alice", None, &audit("trigger", "full"))
            .await
            .unwrap(),
        RunRequest::Queued
    );
    assert_eq!(
        s.open_missed(&[("full".into(), far)]).await.unwrap(),
        ["full"]
    );
    let pause = Pause::new(t, "bob", "flaky", Some(t + HOUR * 2));
    assert!(
        s.pause_task("full", &pause, &audit("pause", "full"))
            .await
            .unwrap()
    );
    apply(
        s,
        vec![TaskChange::Orphaned {
            name: "full".into(),
            orphaned: true,
        }],
    )
    .await;

    let states = s.task_states(None).await.unwrap();
    let listed: Vec<&str> = states.iter().map(|st| st.name.as_str()).collect();
    assert_eq!(listed, ["full", "locked", "off"]);

    let full = &states[0];
    assert_eq!(
        (
            full.cron.as_str(),
            full.timezone.as_str(),
            full.enabled,
            full.next_run_at
        ),
        ("0 * * * *", "UTC", true, Some(far))
    );
    assert_eq!((&full.lock_owner, full.lock_expires_at), (&None, None));
    let (ran, ended) = (full.last_run_at.unwrap(), full.last_finished_at.unwrap());
    assert_near_now(ran);
    assert!(ended >= ran);
    assert_eq!(
        (
            full.last_status,
            full.last_error.as_deref(),
            full.consecutive_failures
        ),
        (Some(RunStatus::Failed), Some("boom"), 1)
    );
    let held = full.pause.clone().expect("paused");
    assert_eq!(
        (held.by.as_str(), held.reason.as_str(), held.until),
        ("bob", "flaky", Some(t + HOUR * 2))
    );
    assert_eq!(full.retry_at, Some(t + HOUR));
    assert_near_now(full.manual_at.expect("asked for"));
    assert_eq!(full.missed_since, Some(far));
    assert_near_now(full.orphaned_since.expect("orphaned"));
    assert_eq!(full.disabled_at, None);

    let locked = &states[1];
    assert_eq!(locked.lock_owner.as_deref(), Some(NODE));
    assert_expires(locked.lock_expires_at, before, after, LIFETIME);
    assert_near_now(locked.last_run_at.expect("running"));
    assert_eq!(
        (
            locked.last_finished_at,
            locked.last_status,
            locked.last_error.clone(),
            locked.consecutive_failures
        ),
        (None, None, None, 0)
    );

    let off = &states[2];
    assert!(!off.enabled);
    assert_eq!(off.next_run_at, Some(t + HOUR));
    assert_near_now(off.disabled_at.expect("created disabled"));
    assert_eq!(
        (
            off.lock_owner.clone(),
            off.last_run_at,
            off.pause.clone(),
            off.retry_at,
            off.manual_at,
            off.missed_since,
            off.orphaned_since
        ),
        (None, None, None, None, None, None, None)
    );

    assert_eq!(
        s.task_states(Some("off")).await.unwrap(),
        std::slice::from_ref(off)
    );
    assert!(s.task_states(Some("missing")).await.unwrap().is_empty());
}

async fn nodes_are_listed_with_the_runs_they_hold(s: &dyn Store, _: &Arrange) {
    assert!(s.nodes().await.unwrap().is_empty());
    s.register_node(&NodeInfo::new("n2", "host-2", 22, "0.2.0", vec![]))
        .await
        .unwrap();
    s.register_node(&NodeInfo::new(
        "n1",
        "host-1",
        11,
        "0.1.0",
        names(&["a", "b"]),
    ))
    .await
    .unwrap();
    s.deregister_node("n2").await.unwrap();
    seed(
        s,
        &[
            ("a", now_s() - HOUR),
            ("b", now_s() - HOUR),
            ("c", now_s() - HOUR),
        ],
    )
    .await;
    let out = claim_as(s, "n1", &["a", "b"], 2, &Rules::hourly()).await;
    claim_as(s, "elsewhere", &["c"], 1, &Rules::hourly()).await;

    let nodes = s.nodes().await.unwrap();
    let listed: Vec<&str> = nodes.iter().map(|n| n.node_id.as_str()).collect();
    assert_eq!(listed, ["n1", "n2"], "by id; only registered nodes");
    let n1 = &nodes[0];
    assert_eq!(
        (
            n1.hostname.as_str(),
            n1.pid,
            n1.version.as_str(),
            n1.tasks.clone(),
            n1.stopped_at,
            n1.running
        ),
        ("host-1", 11, "0.1.0", names(&["a", "b"]), None, 2)
    );
    assert_near_now(n1.started_at);
    assert_near_now(n1.heartbeat_at);
    let n2 = &nodes[1];
    assert_eq!(
        (n2.hostname.as_str(), n2.pid, n2.tasks.clone(), n2.running),
        ("host-2", 22, vec![], 0)
    );
    assert_near_now(n2.stopped_at.expect("stopped"));

    assert!(
        finish_one(
            s,
            finish(
                claimed(&out, "a"),
                RunStatus::Succeeded,
                None,
                FailureCount::Reset
            )
        )
        .await
    );
    assert_eq!(s.nodes().await.unwrap()[0].running, 1);
}

async fn apply_config_writes_the_skips_of_its_plan(s: &dyn Store, _: &Arrange) {
    let t = now_s() - HOUR;
    let disabled = skip("a", SkipReason::Disabled, t - HOUR, t, 2);
    let record = disabled.clone();
    let plan = s
        .apply_config(&move |_: &ConfigSnapshot| ConfigPlan::Apply {
            changes: vec![create("a", true, Some(t + HOUR))],
            state: ConfigState::new(None, "with-skips", NODE),
            skips: vec![record.clone()],
        })
        .await
        .unwrap();
    assert!(matches!(plan, ConfigPlan::Apply { .. }));
    assert_eq!(s.skips("a", t - HOUR * 2).await.unwrap(), [disabled]);
    assert_eq!(row(s, "a").await.next_run_at, Some(t + HOUR));
}

async fn disabling_records_since_when_and_enabling_clears_it(s: &dyn Store, _: &Arrange) {
    let t = now_s();
    apply(
        s,
        vec![create("a", true, Some(t + HOUR)), create("b", false, None)],
    )
    .await;
    assert_eq!(row(s, "a").await.disabled_at, None);
    let b_since = row(s, "b").await.disabled_at.expect("created disabled");
    assert_near_now(b_since);
    let update = |name: &str, enabled: bool| TaskChange::Update {
        name: name.into(),
        cron: "0 * * * *".into(),
        timezone: "UTC".into(),
        calendar: None,
        enabled,
        next_run_at: None,
        next_tick: None,
    };
    tokio::time::sleep(Duration::from_millis(20)).await;
    apply(s, vec![update("a", false)]).await;
    let a_since = row(s, "a").await.disabled_at.expect("disabled now");
    assert_near_now(a_since);
    assert!(a_since > b_since);
    assert_eq!(task_state(s, "a").await.disabled_at, Some(a_since));
    tokio::time::sleep(Duration::from_millis(20)).await;
    apply(s, vec![update("a", false), update("b", false)]).await;
    assert_eq!(
        row(s, "a").await.disabled_at,
        Some(a_since),
        "disabled since the first time"
    );
    assert_eq!(row(s, "b").await.disabled_at, Some(b_since));
    apply(s, vec![update("a", true)]).await;
    assert_eq!(row(s, "a").await.disabled_at, None, "enabled again");

    // A reconcile never touches a pause; the rows report it.
    assert!(
        s.pause_task("b", &Pause::new(t, "bob", "x", None), &audit("pause", "b"))
            .await
            .unwrap()
    );
    apply(s, vec![update("b", true)]).await;
    let b = row(s, "b").await;
    assert!(b.paused && b.enabled && b.disabled_at.is_none());
    assert!(task_state(s, "b").await.pause.is_some());
    assert!(!row(s, "a").await.paused);
}

/// `trim_outbox(keep)` gives up the oldest pending events beyond the newest `keep` (failed,
/// with the reason), leaves delivered ones alone, and says how many it gave up.
async fn the_outbox_backlog_is_bounded_by_giving_up_the_oldest(s: &dyn Store, _: &Arrange) {
    let minute = Duration::from_secs(60);
    let payload = |n: i32| format!(r#"{{"data": {{"n": {n}}}, "type": "run.failed"}}"#);
    let events: Vec<NewEvent> = (0..6)
        .map(|n| NewEvent::new("run.failed", payload(n)))
        .collect();
    s.enqueue_events(&events).await.unwrap();
    // One delivered: not pending, not counted.
    let first = s
        .claim_outbox("n1", &["webhook".to_owned()], 1, minute)
        .await
        .unwrap();
    let mut done = Delivery::new(first[0].id, 1, "n1", DeliveryNext::Delivered);
    done.status = Some(200);
    s.record_deliveries(&[done]).await.unwrap();
    assert_eq!(s.trim_outbox(10, "over the bound").await.unwrap(), 0);
    assert_eq!(s.trim_outbox(3, "over the bound").await.unwrap(), 2);
    assert_eq!(s.trim_outbox(3, "over the bound").await.unwrap(), 0);
    // The newest three are still handed out, oldest first; the two before them never again.
    let left = s
        .claim_outbox("n1", &["webhook".to_owned()], 10, minute)
        .await
        .unwrap();
    let ns: Vec<String> = left.iter().map(|e| e.payload.clone()).collect();
    assert_eq!(ns, [payload(3), payload(4), payload(5)]);
    assert_eq!(s.trim_outbox(0, "over the bound").await.unwrap(), 3);
    assert!(
        s.claim_outbox("n2", &["webhook".to_owned()], 10, minute)
            .await
            .unwrap()
            .is_empty()
    );
}

async fn the_outbox_hands_out_due_pending_events_oldest_first_under_a_lease(
    s: &dyn Store,
    _: &Arrange,
) {
    let minute = Duration::from_secs(60);
    s.enqueue_events(&[]).await.unwrap();
    assert!(
        s.claim_outbox("n1", &["webhook".to_owned()], 10, minute)
            .await
            .unwrap()
            .is_empty()
    );
    // A payload in the form PostgreSQL's jsonb prints, so both stores return it as written.
    let payload = |n: i32| format!(r#"{{"data": {{"n": {n}}}, "type": "run.failed"}}"#);
    s.enqueue_events(&[
        NewEvent::new("run.failed", payload(1)),
        NewEvent::new("run.succeeded", payload(2)),
    ])
    .await
    .unwrap();
    s.enqueue_events(&[NewEvent::new("run.lost", payload(3))])
        .await
        .unwrap();

    let first = s
        .claim_outbox("n1", &["webhook".to_owned()], 2, minute)
        .await
        .unwrap();
    let kinds: Vec<&str> = first.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(kinds, ["run.failed", "run.succeeded"], "oldest first");
    assert!(first[0].id < first[1].id);
    assert_eq!(
        (first[0].payload.as_str(), first[0].attempts),
        (payload(1).as_str(), 0)
    );
    assert_near_now(first[0].created_at);
    let second = s
        .claim_outbox("n2", &["webhook".to_owned()], 10, minute)
        .await
        .unwrap();
    let kinds: Vec<&str> = second.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(kinds, ["run.lost"], "the others are leased");
    assert!(
        s.claim_outbox("n2", &["webhook".to_owned()], 10, minute)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        s.claim_outbox("n2", &["webhook".to_owned()], 0, minute)
            .await
            .unwrap()
            .is_empty()
    );

    // A lease that ends: the event is claimed again afterwards (judged by the claim, with a
    // generous deadline, not by a window of time).
    s.enqueue_events(&[NewEvent::new("run.timed_out", payload(4))])
        .await
        .unwrap();
    let short = s
        .claim_outbox(
            "n1",
            &["webhook".to_owned()],
            10,
            Duration::from_millis(200),
        )
        .await
        .unwrap();
    assert_eq!(short.len(), 1, "{short:?}");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let again = loop {
        let claimed = s
            .claim_outbox("n2", &["webhook".to_owned()], 10, minute)
            .await
            .unwrap();
        if !claimed.is_empty() || std::time::Instant::now() > deadline {
            break claimed;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(again, short, "after its lease an event is claimed again");

    let error = s
        .enqueue_events(&[NewEvent::new("run.failed", "not json")])
        .await
        .unwrap_err();
    assert!(matches!(error, StoreError::Rejected { .. }), "{error:?}");
}

async fn deliveries_are_logged_and_say_what_happens_to_each_event(s: &dyn Store, _: &Arrange) {
    let minute = Duration::from_secs(60);
    let event = |n: i32| NewEvent::new(format!("kind.{n}"), format!(r#"{{"n": {n}}}"#));
    s.enqueue_events(&[event(1), event(2), event(3), event(4)])
        .await
        .unwrap();
    let ids: Vec<i64> = s
        .claim_outbox("n1", &["webhook".to_owned()], 10, minute)
        .await
        .unwrap()
        .iter()
        .map(|e| e.id)
        .collect();
    let t = now_s();
    let delivery = |id: i64, next: DeliveryNext, status: Option<u16>, error: Option<&str>| {
        let mut d = Delivery::new(id, 1, "n1", next);
        d.status = status;
        d.error = error.map(str::to_owned);
        d.duration_ms = 12;
        d
    };
    s.record_deliveries(&[
        delivery(ids[0], DeliveryNext::Delivered, Some(200), None),
        delivery(
            ids[1],
            DeliveryNext::RetryAt(t + HOUR),
            Some(503),
            Some("unavailable"),
        ),
        delivery(ids[2], DeliveryNext::Failed, Some(400), Some("bad request")),
        delivery(
            ids[3],
            DeliveryNext::RetryAt(t - MINUTE),
            None,
            Some("connection refused"),
        ),
    ])
    .await
    .unwrap();
    s.record_deliveries(&[]).await.unwrap();

    // Only the retry that is due comes back (its lease ended with the record), its attempt
    // counted.
    let due = s
        .claim_outbox("n2", &["webhook".to_owned()], 10, minute)
        .await
        .unwrap();
    let due: Vec<(i64, i32)> = due.iter().map(|e| (e.id, e.attempts)).collect();
    assert_eq!(due, [(ids[3], 1)]);

    let log = s.deliveries(10).await.unwrap();
    let order: Vec<i64> = log.iter().map(|d| d.outbox_id).collect();
    assert_eq!(order, [ids[3], ids[2], ids[1], ids[0]], "newest first");
    let first = &log[3];
    assert_eq!(
        (
            first.kind.as_str(),
            first.attempt,
            first.node_id.as_str(),
            first.status,
            first.error.as_deref(),
            first.duration_ms
        ),
        ("kind.1", 1, "n1", Some(200), None, 12)
    );
    assert_near_now(first.at);
    assert_eq!(
        (log[0].status, log[0].error.as_deref()),
        (None, Some("connection refused"))
    );
    assert_eq!(s.deliveries(2).await.unwrap(), log[..2]);

    let mut again = delivery(ids[3], DeliveryNext::Delivered, Some(204), None);
    again.attempt = 2;
    s.record_deliveries(&[again]).await.unwrap();
    let newest = &s.deliveries(1).await.unwrap()[0];
    assert_eq!(
        (newest.outbox_id, newest.attempt, newest.status),
        (ids[3], 2, Some(204))
    );
    assert!(
        s.claim_outbox("n2", &["webhook".to_owned()], 10, minute)
            .await
            .unwrap()
            .is_empty()
    );
}

async fn a_gone_endpoint_stops_every_pending_event(s: &dyn Store, _: &Arrange) {
    let minute = Duration::from_secs(60);
    let event = |n: i32| NewEvent::new("run.failed", format!(r#"{{"n": {n}}}"#));
    s.enqueue_events(&[event(1), event(2), event(3)])
        .await
        .unwrap();
    let claimed = s
        .claim_outbox("n1", &["webhook".to_owned()], 2, minute)
        .await
        .unwrap();
    let mut gone = Delivery::new(claimed[0].id, 1, "n1", DeliveryNext::Disabled);
    gone.status = Some(410);
    s.record_deliveries(&[gone]).await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(
        s.claim_outbox("n2", &["webhook".to_owned()], 10, Duration::from_millis(1))
            .await
            .unwrap()
            .is_empty(),
        "every pending event is stopped, leased or not"
    );
    let log = s.deliveries(10).await.unwrap();
    assert_eq!(log.len(), 1);
    assert_eq!(log[0].status, Some(410));

    // Events written afterwards are pending again (whether to write them is the caller's).
    s.enqueue_events(&[event(4)]).await.unwrap();
    let later = s
        .claim_outbox("n2", &["webhook".to_owned()], 10, minute)
        .await
        .unwrap();
    assert_eq!(later.len(), 1);
    assert!(later[0].id > claimed[1].id);
}

/// One row per (event, channel): a node claims only the channels it names, the delivery log
/// says which channel, and a 410 from one channel stops that channel's pending rows only.
async fn each_channel_has_its_own_rows_claims_and_410(s: &dyn Store, _: &Arrange) {
    let minute = Duration::from_secs(60);
    let names = |list: &[&str]| list.iter().map(|n| n.to_string()).collect::<Vec<_>>();
    let event = |n: i32, channel: &str| {
        NewEvent::new("run.failed", format!(r#"{{"n": {n}}}"#)).to_channel(channel)
    };
    s.enqueue_events(&[
        event(1, "slack"),
        event(1, "mail"),
        event(2, "slack"),
        event(2, "mail"),
    ])
    .await
    .unwrap();
    assert!(
        s.claim_outbox("n1", &names(&["webhook"]), 10, minute)
            .await
            .unwrap()
            .is_empty(),
        "no row for a channel not named"
    );
    let slack = s
        .claim_outbox("n1", &names(&["slack"]), 1, minute)
        .await
        .unwrap();
    assert_eq!(slack.len(), 1);
    assert_eq!(slack[0].channel, "slack");
    let mut gone = Delivery::new(slack[0].id, 1, "n1", DeliveryNext::Disabled);
    gone.status = Some(410);
    s.record_deliveries(&[gone]).await.unwrap();
    let log = s.deliveries(10).await.unwrap();
    assert_eq!(
        (log[0].channel.as_str(), log[0].status),
        ("slack", Some(410))
    );
    let left = s
        .claim_outbox("n2", &names(&["slack", "mail"]), 10, minute)
        .await
        .unwrap();
    let channels: Vec<&str> = left.iter().map(|r| r.channel.as_str()).collect();
    assert_eq!(
        channels,
        ["mail", "mail"],
        "slack's pending rows stopped, mail's not"
    );
}

async fn a_disabled_webhook_stays_disabled_with_its_first_reason(s: &dyn Store, _: &Arrange) {
    assert_eq!(s.webhook_disabled("digest-a").await.unwrap(), None);
    s.disable_webhook("digest-a", "410 Gone").await.unwrap();
    s.disable_webhook("digest-a", "said again").await.unwrap();
    assert_eq!(
        s.webhook_disabled("digest-a").await.unwrap().as_deref(),
        Some("410 Gone")
    );
    assert_eq!(s.webhook_disabled("digest-b").await.unwrap(), None);
}

async fn notify_wakes_every_listener(s: &dyn Store, _: &Arrange) {
    let mut one = quiet_listener(s).await;
    let mut two = quiet_listener(s).await;
    assert!(!wakes(&mut one, QUIET).await);
    s.notify().await.unwrap();
    assert!(wakes(&mut one, Duration::from_secs(10)).await);
    assert!(wakes(&mut two, Duration::from_secs(10)).await);
}

async fn next_wake_counts_retries_manual_runs_and_the_ends_of_pauses(s: &dyn Store, _: &Arrange) {
    let t = now_s();
    let far = t + HOUR * 24;
    apply(
        s,
        vec![
            create("retry", true, Some(t - HOUR)),
            create("manual", false, None),
            create("paused", true, Some(t + HOUR)),
            create("held", true, Some(t + HOUR)),
            create("off", false, Some(t - HOUR * 3)),
        ],
    )
    .await;
    let wake =
        |task: &'static str| async move { s.next_wake("n", &names(&[task])).await.unwrap().due_at };
    // "retry": its tick ran and failed; the retry in an hour comes before the next run.
    let run = claim_one(s, "retry", &Rules::hourly().plan(run_then(far))).await;
    assert!(
        finish_one(
            s,
            with_requeue(
                finish(&run, RunStatus::Failed, None, FailureCount::Increment),
                Requeue::Retry {
                    tick: t - HOUR,
                    attempt: 2,
                    at: t + HOUR,
                },
            )
        )
        .await
    );
    assert_eq!(wake("retry").await, Some(t + HOUR));
    // "manual": disabled, nothing scheduled, a manual run asked for.
    s.request_run("manual", "alice", None, &audit("trigger", "manual"))
        .await
        .unwrap();
    let asked = task_state(s, "manual").await.manual_at;
    assert!(asked.is_some());
    assert_eq!(wake("manual").await, asked);
    // "paused": until two hours from now; the end of the pause comes after its tick, and is
    // the wake.
    let until = Pause::new(t, "bob", "x", Some(t + HOUR * 2));
    s.pause_task("paused", &until, &audit("pause", "paused"))
        .await
        .unwrap();
    assert_eq!(wake("paused").await, Some(t + HOUR * 2));
    // "held": paused until resumed, a manual run waiting: nothing to wake for.
    s.request_run("held", "alice", None, &audit("trigger", "held"))
        .await
        .unwrap();
    s.pause_task(
        "held",
        &Pause::new(t, "bob", "x", None),
        &audit("pause", "held"),
    )
    .await
    .unwrap();
    assert_eq!(wake("held").await, None);
    // "off": a disabled task's tick is no wake.
    assert_eq!(wake("off").await, None);
    let all = names(&["retry", "manual", "paused", "held", "off"]);
    assert_eq!(s.next_wake("n", &all).await.unwrap().due_at, asked);
}

// ---------------------------------------------------------------------------------------------
// Cancelling a running run.
// ---------------------------------------------------------------------------------------------

async fn a_cancel_is_recorded_once_audited_and_heard_as_a_cancel(s: &dyn Store, _: &Arrange) {
    let t = now_s() - HOUR;
    seed(s, &[("a", t)]).await;
    let running = claim_one(s, "a", &Rules::hourly()).await;
    let mut listener = quiet_listener(s).await;
    let fresh = run(s, running.run_id).await;
    assert_eq!(
        (fresh.cancel_requested_at, fresh.cancel_requested_by),
        (None, None)
    );

    let entry = audit("cancel", "a");
    let CancelRequest::Requested(asked) =
        s.cancel_run(running.run_id, "alice", &entry).await.unwrap()
    else {
        panic!("a running run is asked to stop")
    };
    assert_eq!(asked.id, running.run_id);
    assert_eq!(asked.status, RunStatus::Running);
    assert_eq!(asked.node_id, NODE);
    assert_eq!(asked.cancel_requested_by.as_deref(), Some("alice"));
    assert_near_now(asked.cancel_requested_at.expect("when"));
    assert_eq!(
        heard(&mut listener, Duration::from_secs(10)).await,
        Some(Change::CancelRequested),
        "every node hears of the cancel"
    );
    assert_eq!(
        run(s, running.run_id).await,
        asked,
        "the run reads as returned"
    );
    let log = s.audit_log(10, None).await.unwrap();
    assert_eq!(log.len(), 1);
    assert_eq!(
        (
            log[0].actor.as_str(),
            log[0].action.as_str(),
            log[0].task.as_str()
        ),
        ("alice", "cancel", "a")
    );

    // Asked again: the first request stands, nothing is written, nobody is woken.
    let CancelRequest::AlreadyRequested(again) = s
        .cancel_run(running.run_id, "bob", &audit("cancel", "a"))
        .await
        .unwrap()
    else {
        panic!("asked before")
    };
    assert_eq!(again.cancel_requested_by.as_deref(), Some("alice"));
    assert_eq!(again.cancel_requested_at, asked.cancel_requested_at);
    assert_eq!(
        s.audit_log(10, None).await.unwrap().len(),
        1,
        "nothing done"
    );
    assert_eq!(
        heard(&mut listener, QUIET).await,
        None,
        "nothing to wake for"
    );

    // The run's end is recorded as the engine decides; the request stays on the record.
    assert!(
        finish_one(
            s,
            finish(
                &running,
                RunStatus::Cancelled,
                Some("cancelled by alice"),
                FailureCount::Keep
            )
        )
        .await
    );
    let ended = run(s, running.run_id).await;
    assert_eq!(ended.status, RunStatus::Cancelled);
    assert_eq!(ended.cancel_requested_by.as_deref(), Some("alice"));
    let listed = s
        .runs(&RunQuery::latest(10).status(RunStatus::Cancelled))
        .await
        .unwrap();
    assert_eq!(listed, vec![ended.clone()]);
    assert_eq!(s.recent_runs(Some("a"), 10).await.unwrap(), vec![ended]);
}

async fn a_cancel_of_an_ended_or_unknown_run_changes_nothing(s: &dyn Store, _: &Arrange) {
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
    let mut listener = quiet_listener(s).await;
    let CancelRequest::Ended(ended) = s
        .cancel_run(done.run_id, "alice", &audit("cancel", "a"))
        .await
        .unwrap()
    else {
        panic!("an ended run is not cancelled")
    };
    assert_eq!(ended.status, RunStatus::Succeeded);
    assert_eq!(ended.cancel_requested_by, None);
    assert_eq!(run(s, done.run_id).await, ended);
    assert_eq!(
        s.cancel_run(done.run_id + 1000, "alice", &audit("cancel", "a"))
            .await
            .unwrap(),
        CancelRequest::NotFound
    );
    assert!(s.audit_log(10, None).await.unwrap().is_empty());
    assert_eq!(heard(&mut listener, QUIET).await, None);
}

async fn cancel_requests_name_the_runs_somebody_asked_to_stop(s: &dyn Store, _: &Arrange) {
    let t = now_s() - HOUR;
    seed(s, &[("a", t), ("b", t), ("c", t)]).await;
    let out = claim(s, &["a", "b", "c"], 3, &Rules::hourly()).await;
    let (a, b, c) = (
        claimed(&out, "a").run_id,
        claimed(&out, "b").run_id,
        claimed(&out, "c").run_id,
    );
    assert!(s.cancel_requests(&[a, b, c]).await.unwrap().is_empty());
    assert!(s.cancel_requests(&[]).await.unwrap().is_empty());
    s.cancel_run(b, "alice", &audit("cancel", "b"))
        .await
        .unwrap();
    s.cancel_run(c, "bob", &audit("cancel", "c")).await.unwrap();
    let mut found = s.cancel_requests(&[a, b]).await.unwrap();
    assert_eq!(found.len(), 1, "only the runs asked about: {found:?}");
    let request = found.remove(0);
    assert_eq!((request.run_id, request.by.as_str()), (b, "alice"));
    assert_eq!(
        Some(request.at),
        run(s, b).await.cancel_requested_at,
        "when, as recorded"
    );
    let mut both: Vec<(i64, String)> = s
        .cancel_requests(&[a, b, c, c + 1000])
        .await
        .unwrap()
        .into_iter()
        .map(|r| (r.run_id, r.by))
        .collect();
    both.sort();
    assert_eq!(both, vec![(b, "alice".to_owned()), (c, "bob".to_owned())]);
}

async fn an_expired_lock_of_a_cancelled_run_says_who_cancelled_it(
    s: &dyn Store,
    arrange: &Arrange,
) {
    let t = now_s() - HOUR;
    seed(s, &[("a", t), ("b", t)]).await;
    let out = claim(s, &["a", "b"], 2, &Rules::hourly()).await;
    let cancelled = claimed(&out, "a").run_id;
    s.cancel_run(cancelled, "alice", &audit("cancel", "a"))
        .await
        .unwrap();
    arrange.expire_lock("a").await;
    arrange.expire_lock("b").await;
    let rules = Rules::hourly();
    claim(s, &["a", "b"], 0, &rules).await;
    let offered = rules.expired();
    let by = |task: &str| {
        offered
            .iter()
            .find(|l| l.key.task_name == task)
            .and_then(|l| l.run.as_ref())
            .map(|r| r.cancel_requested_by.clone())
            .expect("offered with its run")
    };
    assert_eq!(by("a").as_deref(), Some("alice"));
    assert_eq!(by("b"), None);
}

// ---------------------------------------------------------------------------------------------
// Incidents, alert marks and snoozes.
// ---------------------------------------------------------------------------------------------

/// The rule of these behaviours: the same key twice counts once; the first alert is sent.
fn first_is_sent(input: &FoldInput<'_>) -> FoldDecision {
    if let (Some(open), Some(key)) = (input.open, &input.fold.key)
        && open.last_key.as_ref() == Some(key)
    {
        return FoldDecision::Duplicate;
    }
    FoldDecision::Record {
        notify: input.open.is_none() && input.snoozed.is_none(),
    }
}

fn fold(task: &str, kind: &str, key: &str) -> AlertFold {
    AlertFold::new(task, kind, format!(r#"{{"key": "{key}"}}"#)).key(key)
}

async fn open_incidents(s: &dyn Store) -> Vec<scheduler::testing::store::IncidentRecord> {
    s.incidents(&IncidentQuery::new(100).open(true))
        .await
        .unwrap()
}

async fn alerts_fold_into_one_open_incident_per_task_and_type_as_the_rule_decides(
    s: &dyn Store,
    _: &Arrange,
) {
    let t = now_s();
    seed(s, &[("a", t + HOUR), ("b", t + HOUR)]).await;
    let folded = s
        .fold_alerts(
            &[
                fold("a", "run.failed", "run 1"),
                fold("a", "run.failed", "run 2"),
                fold("a", "run.failed", "run 2"),
                fold("a", "task.late", "tick"),
                fold("b", "run.failed", "run 3"),
            ],
            &first_is_sent,
        )
        .await
        .unwrap();
    let seen: Vec<(bool, bool, Option<i64>)> = folded
        .iter()
        .map(|f| (f.opened, f.notify, f.incident.as_ref().map(|i| i.count)))
        .collect();
    assert_eq!(
        seen,
        [
            (true, true, Some(1)),
            (false, false, Some(2)),
            (false, false, Some(2)), // a duplicate writes nothing
            (true, true, Some(1)),
            (true, true, Some(1)),
        ]
    );
    let open = open_incidents(s).await;
    assert_eq!(open.len(), 3, "{open:?}");
    let failed = open
        .iter()
        .find(|i| i.task_name == "a" && i.kind == "run.failed")
        .unwrap();
    assert_eq!(failed.count, 2);
    assert_eq!(failed.last_key.as_deref(), Some("run 2"));
    assert_eq!(failed.summary, r#"{"key": "run 2"}"#);
    assert!(failed.notified_at.is_some() && failed.closed_at.is_none());
    assert!(failed.last_seen_at >= failed.opened_at);
    let only_b = s
        .incidents(&IncidentQuery::new(100).task("b"))
        .await
        .unwrap();
    assert_eq!(only_b.len(), 1);
    // The rule sees the task's snooze in force.
    s.snooze_task(
        &Snooze::new("a", t + HOUR, "maintenance", "bob"),
        &audit("snooze", "a"),
    )
    .await
    .unwrap();
    let held = s
        .fold_alerts(&[fold("a", "run.timed_out", "run 4")], &first_is_sent)
        .await
        .unwrap();
    assert!(held[0].opened && !held[0].notify, "{held:?}");
    assert!(held[0].incident.as_ref().unwrap().notified_at.is_none());
}

async fn closing_incidents_reports_each_once(s: &dyn Store, _: &Arrange) {
    let t = now_s();
    seed(s, &[("a", t + HOUR)]).await;
    s.fold_alerts(
        &[
            fold("a", "run.failed", "run 1"),
            fold("a", "task.slow", "run 1"),
        ],
        &first_is_sent,
    )
    .await
    .unwrap();
    let close = IncidentClose::new("a", ["run.failed", "run.lost"], "run 2 succeeded");
    let closed = s
        .close_incidents(std::slice::from_ref(&close))
        .await
        .unwrap();
    assert_eq!(closed.len(), 1, "{closed:?}");
    assert_eq!(closed[0].kind, "run.failed");
    assert_eq!(closed[0].closed_by.as_deref(), Some("run 2 succeeded"));
    assert!(closed[0].closed_at.is_some());
    assert!(
        s.close_incidents(&[close]).await.unwrap().is_empty(),
        "once"
    );
    let open = open_incidents(s).await;
    assert_eq!(open.len(), 1);
    assert_eq!(open[0].kind, "task.slow");
    let done = s
        .incidents(&IncidentQuery::new(100).open(false))
        .await
        .unwrap();
    assert_eq!(done.len(), 1);
    // The next alert of that type opens a new incident.
    let again = s
        .fold_alerts(&[fold("a", "run.failed", "run 3")], &first_is_sent)
        .await
        .unwrap();
    assert!(again[0].opened && again[0].notify);
    assert_ne!(again[0].incident.as_ref().unwrap().id, closed[0].id);
}

async fn reminders_are_claimed_when_due_only_for_sent_unsnoozed_incidents(
    s: &dyn Store,
    _: &Arrange,
) {
    let t = now_s();
    seed(s, &[("a", t + HOUR), ("b", t + HOUR), ("c", t + HOUR)]).await;
    let soon = Some(Duration::from_millis(1));
    let held_back = |input: &FoldInput<'_>| FoldDecision::Record {
        notify: input.fold.task != "b",
    };
    s.snooze_task(
        &Snooze::new("c", t + HOUR, "maintenance", "bob"),
        &audit("snooze", "c"),
    )
    .await
    .unwrap();
    s.fold_alerts(
        &[
            fold("a", "run.failed", "1").policy(1, soon),
            fold("a", "task.late", "1").policy(1, Some(Duration::from_secs(3600))),
            fold("b", "run.failed", "1").policy(1, soon),
            fold("c", "run.failed", "1").policy(1, soon),
            fold("c", "task.late", "1"),
        ],
        &held_back,
    )
    .await
    .unwrap();
    // The store's clock moves past the 1 ms interval (the writes above took longer already).
    tokio::time::sleep(Duration::from_millis(20)).await;
    let reminded = s.claim_reminders(100).await.unwrap();
    let which: Vec<(&str, &str, i64)> = reminded
        .iter()
        .map(|i| (i.task_name.as_str(), i.kind.as_str(), i.reminders))
        .collect();
    assert_eq!(
        which,
        [("a", "run.failed", 1)],
        "not due yet, never sent, snoozed, or without reminders: none"
    );
    assert!(reminded[0].reminded_at.is_some());
}

async fn alert_marks_are_recorded_once(s: &dyn Store, _: &Arrange) {
    let m1 = AlertMark::new("a", "task.late", "2026-01-01T00:00:00Z");
    let m2 = AlertMark::new("a", "task.deadline_missed", "2026-01-01T00:00:00Z");
    let m3 = AlertMark::new("b", "task.late", "2026-01-01T00:00:00Z");
    let won = s.mark_alerts(&[m1.clone(), m2.clone()]).await.unwrap();
    assert_eq!(won.len(), 2, "{won:?}");
    let won = s.mark_alerts(&[m1, m3.clone(), m2]).await.unwrap();
    assert_eq!(won, [m3], "recorded once");
}

async fn a_snooze_is_set_replaced_listed_and_lifted_with_its_audit(s: &dyn Store, _: &Arrange) {
    let t = now_s();
    seed(s, &[("a", t + HOUR)]).await;
    assert!(
        !s.snooze_task(
            &Snooze::new("missing", t + HOUR, "x", "bob"),
            &audit("snooze", "missing")
        )
        .await
        .unwrap()
    );
    assert!(s.audit_log(10, None).await.unwrap().is_empty());
    assert!(
        s.snooze_task(
            &Snooze::new("a", t + HOUR, "maintenance", "bob"),
            &audit("snooze", "a")
        )
        .await
        .unwrap()
    );
    assert!(
        s.snooze_task(
            &Snooze::new("a", t + HOUR * 2, "longer maintenance", "carol"),
            &audit("snooze", "a")
        )
        .await
        .unwrap()
    );
    let snoozes = s.snoozes().await.unwrap();
    assert_eq!(snoozes.len(), 1, "replaced: {snoozes:?}");
    assert_eq!(
        (
            snoozes[0].task_name.as_str(),
            snoozes[0].reason.as_str(),
            snoozes[0].by.as_str(),
            snoozes[0].until
        ),
        ("a", "longer maintenance", "carol", t + HOUR * 2)
    );
    let lifted = s.unsnooze_task("a", &audit("unsnooze", "a")).await.unwrap();
    assert_eq!(lifted.map(|l| l.reason), Some("longer maintenance".into()));
    assert!(s.snoozes().await.unwrap().is_empty());
    assert_eq!(
        s.unsnooze_task("a", &audit("unsnooze", "a")).await.unwrap(),
        None
    );
    let actions: Vec<String> = s
        .audit_log(10, None)
        .await
        .unwrap()
        .into_iter()
        .map(|a| a.action)
        .collect();
    assert_eq!(actions, ["unsnooze", "snooze", "snooze"], "newest first");
    // A snooze that has ended is not in force.
    s.snooze_task(
        &Snooze::new("a", t - HOUR, "over", "bob"),
        &audit("snooze", "a"),
    )
    .await
    .unwrap();
    assert!(s.snoozes().await.unwrap().is_empty());
    assert_eq!(
        s.unsnooze_task("a", &audit("unsnooze", "a")).await.unwrap(),
        None
    );
}

/// A broadcast task's rows (see `scheduler::shard`): its own row, pinned to no node, is offered
/// to any node's claim and only moved on (never run); a node's row is offered to, and wakes,
/// that node only; a node's row whose node was not alive at the tick is moved past it.
async fn a_row_pinned_to_a_node_is_offered_and_woken_for_on_that_node_only(
    s: &dyn Store,
    _: &Arrange,
) {
    let t = now_s();
    let pin = |name: &str, node: &str| TaskChange::Shards {
        name: name.into(),
        shards: 1,
        node_pin: Some(node.into()),
    };
    apply(
        s,
        vec![
            create("b", true, Some(t - HOUR / 2)),
            create("b[@node-a]", true, Some(t - HOUR)),
            create("b[@node-b]", true, Some(t - HOUR)),
            pin("b", ""),
            pin("b[@node-a]", "node-a"),
            pin("b[@node-b]", "node-b"),
        ],
    )
    .await;
    assert_eq!(
        row(s, "b[@node-a]").await.node_pin.as_deref(),
        Some("node-a")
    );
    assert_eq!(row(s, "b").await.node_pin.as_deref(), Some(""));
    let listed = names(&["b"]);
    let wake = s.next_wake("node-c", &listed).await.unwrap();
    assert_eq!(wake.due_at, Some(t - HOUR / 2), "only the task's own row");
    let wake = s.next_wake("node-a", &listed).await.unwrap();
    assert_eq!(wake.due_at, Some(t - HOUR), "its own node's row");

    let rules = Rules::hourly();
    let out = claim_as(s, "node-c", &["b"], 10, &rules).await;
    assert_eq!(rules.offered(), ["b"]);
    assert!(
        out.claimed.is_empty(),
        "the task's own row never runs: {out:?}"
    );
    assert_eq!(row(s, "b").await.next_run_at, Some(t - HOUR / 2 + HOUR));

    let rules = Rules::hourly();
    let out = claim_as(s, "node-a", &["b"], 10, &rules).await;
    assert_eq!(rules.offered(), ["b[@node-a]"]);
    // node-a is not registered: not alive at the tick, so its row moves past it.
    assert!(out.claimed.is_empty(), "{out:?}");
    assert_eq!(row(s, "b[@node-a]").await.next_run_at, Some(t));
    assert_eq!(row(s, "b[@node-b]").await.next_run_at, Some(t - HOUR));
    assert!(s.recent_runs(None, 10).await.unwrap().is_empty());
}

/// A claim leaving a task out (a node that holds its whole share of a sharded tick, see
/// `scheduler::testing::shard::ShardFacts::share_complete`) neither offers nor locks that task's rows or
/// its shards' rows, even when they are due before everything it claims: another node's claim
/// of them goes on meanwhile. Without leaving them out, the claim's page locks them.
async fn rows_left_out_of_a_claim_are_neither_offered_nor_locked(s: &dyn Store, arrange: &Arrange) {
    let t = now_s();
    let shard = |name: &str| TaskChange::Shards {
        name: name.into(),
        shards: 2,
        node_pin: None,
    };
    apply(
        s,
        vec![
            create("held", true, Some(t - HOUR)),
            create("held[1]", true, Some(t - HOUR)),
            shard("held"),
            shard("held[1]"),
        ],
    )
    .await;
    seed(s, &[("mine.a", t - HOUR / 2), ("mine.b", t - HOUR / 2)]).await;
    let held_rows = ["held", "held[1]"];
    // What another transaction could lock of the held task's rows while the claim plans.
    let seen: Mutex<Vec<Option<Vec<String>>>> = Mutex::new(Vec::new());
    let look = |_: &DueTask| {
        let lockable = tokio::task::block_in_place(|| {
            tokio::runtime::Handle::current().block_on(arrange.lockable(&held_rows))
        });
        seen.lock().unwrap().push(lockable);
        DueDecision::Leave
    };

    // Without leaving it out: its rows are in the claim's page, locked until the claim ends.
    let rules = Rules::hourly().plan(look);
    let tasks = names(&["mine.a"]);
    let out = s
        .claim(ClaimRequest::new(NODE, &tasks, 10), &rules)
        .await
        .unwrap();
    assert_eq!(rules.offered(), ["mine.a"], "{out:?}");
    let first = std::mem::take(&mut *seen.lock().unwrap());
    if matches!(arrange, Arrange::Postgres { .. }) {
        assert_eq!(first, [Some(Vec::new())], "the page locked them");
    }

    let rules = Rules::hourly().plan(look);
    let left_out = names(&["held"]);
    let tasks = names(&["mine.a", "mine.b"]);
    let out = s
        .claim(
            ClaimRequest::new(NODE, &tasks, 10).leaving_out(&left_out),
            &rules,
        )
        .await
        .unwrap();
    assert_eq!(rules.offered(), ["mine.a", "mine.b"], "{out:?}");
    let second = std::mem::take(&mut *seen.lock().unwrap());
    assert_eq!(second.len(), 2, "looked while planning each");
    for rows in second.iter().flatten() {
        assert_eq!(rows, &held_rows, "left out: not locked");
    }
    assert_eq!(row(s, "held").await.next_run_at, Some(t - HOUR));
    assert_eq!(row(s, "held[1]").await.next_run_at, Some(t - HOUR));
}

// ---- instances of a task -------------------------------------------------------------------

/// Instance `key` of `task`, every hour, with `args`.
fn instance(task: &str, key: &str, args: Option<&str>) -> InstanceWrite {
    InstanceWrite::new(task, key, "0 * * * *", "UTC", args.map(str::to_owned))
}

fn instance_audit(action: &str, task: &str, detail: &str) -> AuditEntry {
    AuditEntry::new("tester", action, task, detail, "contract")
}

/// Upserts `write` with `plan`, and returns what the planner was offered and what was done.
async fn upsert(
    s: &dyn Store,
    write: &InstanceWrite,
    plan: InstancePlan,
) -> (InstanceFacts, DateTime<Utc>, InstanceUpsert) {
    let seen = Mutex::new(None);
    let done = s
        .upsert_instance(
            write,
            &instance_audit("instance upsert", &write.task, &write.key),
            &|facts: &InstanceFacts, now: DateTime<Utc>| {
                *seen.lock().unwrap() = Some((facts.clone(), now));
                plan.clone()
            },
        )
        .await
        .unwrap();
    let (facts, now) = seen.into_inner().unwrap().expect("the planner was asked");
    (facts, now, done)
}

fn written(done: InstanceUpsert) -> InstanceRecord {
    match done {
        InstanceUpsert::Written(record) => record,
        other => panic!("not written: {other:?}"),
    }
}

fn write_plan(next: Option<DateTime<Utc>>) -> InstancePlan {
    InstancePlan::Write {
        enabled: true,
        next_run_at: next,
        next_tick: None,
        pause: None,
    }
}

/// A task's pause holds its instances with it (each takes the task's pause), a pause replaced
/// is replaced on them too, and the task's resume ends theirs, each planned on its own row; an
/// instance paused on its own keeps its own pause through all of it.
async fn a_tasks_pause_holds_its_instances_and_its_resume_ends_theirs(s: &dyn Store, _: &Arrange) {
    let t = now_s() + HOUR;
    seed(s, &[("rep", t), ("other", t)]).await;
    for (task, key) in [("rep", "a"), ("rep", "b"), ("other", "a")] {
        written(
            upsert(s, &instance(task, key, None), write_plan(Some(t)))
                .await
                .2,
        );
    }
    let pause_of = |state: TaskState| state.pause.map(|p| (p.by, p.reason, p.until));
    let own = Pause::new(now_s(), "ann", "tenant b on hold", None);
    assert!(
        s.pause_task("rep/b", &own, &audit("pause", "rep/b"))
            .await
            .unwrap()
    );
    let pause = Pause::new(now_s(), "bob", "incident 42", None);
    assert!(
        s.pause_task("rep", &pause, &audit("pause", "rep"))
            .await
            .unwrap()
    );
    let inherited = Some(("bob".to_owned(), "incident 42".to_owned(), None));
    let kept = Some(("ann".to_owned(), "tenant b on hold".to_owned(), None));
    assert_eq!(pause_of(task_state(s, "rep/a").await), inherited);
    assert_eq!(pause_of(task_state(s, "rep/b").await), kept);
    assert_eq!(
        pause_of(task_state(s, "other/a").await),
        None,
        "another task's"
    );
    assert!(row(s, "rep/a").await.paused);

    // A pause in force replaced: on the instances that hold it too.
    let longer = Pause::new(now_s(), "carol", "longer", Some(t + HOUR));
    assert!(
        s.pause_task("rep", &longer, &audit("pause", "rep"))
            .await
            .unwrap()
    );
    let inherited = Some(("carol".to_owned(), "longer".to_owned(), Some(t + HOUR)));
    assert_eq!(pause_of(task_state(s, "rep/a").await), inherited);
    assert_eq!(pause_of(task_state(s, "rep/b").await), kept);

    // The task's resume plans the task's row and each instance that held its pause.
    let seen: Mutex<Vec<String>> = Mutex::default();
    let planner = |row: &TaskState, _: Duration, _: DateTime<Utc>| {
        seen.lock().unwrap().push(row.name.clone());
        let next = if row.name == "rep" { t } else { t + HOUR * 2 };
        ResumePlan::new(
            Some(next),
            vec![skip(&row.name, SkipReason::Paused, t - HOUR, t, 1)],
        )
    };
    let ended = s
        .resume_task("rep", &audit("resume", "rep"), &planner)
        .await
        .unwrap()
        .expect("the task's pause ended");
    assert_eq!(
        (ended.by.as_str(), ended.reason.as_str()),
        ("carol", "longer")
    );
    assert_eq!(*seen.lock().unwrap(), ["rep", "rep/a"]);
    let a = task_state(s, "rep/a").await;
    assert_eq!(
        (a.pause.is_none(), a.next_run_at),
        (true, Some(t + HOUR * 2))
    );
    assert_eq!(pause_of(task_state(s, "rep/b").await), kept);
    let paused = skip("rep/a", SkipReason::Paused, t - HOUR, t, 1);
    assert_eq!(s.skips("rep/a", t - HOUR * 2).await.unwrap(), [paused]);
}

/// The task's pause is offered to an instance's upsert with the task's row; written with the
/// plan, a new instance takes it exactly (the task's resume ends it with the task's, planned on
/// its own row), and an instance paused on its own keeps its own pause through the write and
/// the task's resume.
async fn an_instance_written_with_its_tasks_pause_holds_it_until_the_tasks_resume(
    s: &dyn Store,
    _: &Arrange,
) {
    let t = now_s() + HOUR;
    seed(s, &[("rep", t)]).await;
    written(
        upsert(s, &instance("rep", "b", None), write_plan(Some(t)))
            .await
            .2,
    );
    let own = Pause::new(now_s(), "ann", "tenant b on hold", None);
    assert!(
        s.pause_task("rep/b", &own, &audit("pause", "rep/b"))
            .await
            .unwrap()
    );
    let pause = Pause::new(now_s(), "bob", "incident 42", Some(t + HOUR));
    assert!(
        s.pause_task("rep", &pause, &audit("pause", "rep"))
            .await
            .unwrap()
    );
    let task_pause = task_state(s, "rep")
        .await
        .pause
        .expect("the task is paused");
    let with_pause = |p: Option<Pause>| InstancePlan::Write {
        enabled: true,
        next_run_at: Some(t),
        next_tick: None,
        pause: p,
    };
    // Offered with the task's row, then written.
    let (facts, _, done) = upsert(
        s,
        &instance("rep", "a", None),
        with_pause(Some(task_pause.clone())),
    )
    .await;
    written(done);
    let offered = facts.task.expect("the task's row").pause;
    assert_eq!(offered.as_ref(), Some(&task_pause));
    assert_eq!(
        task_state(s, "rep/a").await.pause.as_ref(),
        Some(&task_pause)
    );
    assert!(row(s, "rep/a").await.paused);
    // Paused on its own: kept.
    written(
        upsert(
            s,
            &instance("rep", "b", Some("{}")),
            with_pause(Some(task_pause.clone())),
        )
        .await
        .2,
    );
    let kept = |state: TaskState| state.pause.map(|p| (p.by, p.reason));
    let ann = Some(("ann".to_owned(), "tenant b on hold".to_owned()));
    assert_eq!(kept(task_state(s, "rep/b").await), ann);

    let seen: Mutex<Vec<String>> = Mutex::default();
    let planner = |row: &TaskState, _: Duration, _: DateTime<Utc>| {
        seen.lock().unwrap().push(row.name.clone());
        ResumePlan::new(Some(t), Vec::new())
    };
    s.resume_task("rep", &audit("resume", "rep"), &planner)
        .await
        .unwrap()
        .expect("the task's pause ended");
    assert_eq!(*seen.lock().unwrap(), ["rep", "rep/a"]);
    assert_eq!(task_state(s, "rep/a").await.pause, None);
    assert_eq!(kept(task_state(s, "rep/b").await), ann);
}

/// A resume offers the planner each row's jitter window (an instance's own, else its task's as
/// the reconcile stored it; none: zero), for the task's resume and for an instance's own, and
/// writes the start it plans with its tick beside it; a next run kept keeps its tick.
async fn a_resume_offers_each_row_its_jitter_window_and_writes_its_shifted_start(
    s: &dyn Store,
    _: &Arrange,
) {
    let t = now_s() + HOUR;
    seed(s, &[("rep", t), ("bare", t)]).await;
    let task_window = Duration::from_secs(4);
    apply(
        s,
        vec![TaskChange::Jitter {
            name: "rep".into(),
            window: Some(task_window),
        }],
    )
    .await;
    let own_window = Duration::from_secs(6);
    for write in [
        instance("rep", "a", None),
        instance("rep", "b", None).jitter(Some(own_window)),
        instance("rep", "c", None),
    ] {
        written(upsert(s, &write, write_plan(Some(t))).await.2);
    }
    let pause = |by: &str| Pause::new(now_s(), by, "hold", None);
    for (row, by) in [("rep/c", "ann"), ("rep", "bob"), ("bare", "bob")] {
        assert!(
            s.pause_task(row, &pause(by), &audit("pause", row))
                .await
                .unwrap()
        );
    }
    let seen: Mutex<Vec<(String, Duration)>> = Mutex::default();
    let (tick, start) = (t + HOUR, t + HOUR + chrono::Duration::seconds(3));
    let planner = |row: &TaskState, window: Duration, _: DateTime<Utc>| {
        seen.lock().unwrap().push((row.name.clone(), window));
        if row.name == "rep/a" {
            // Kept: the tick it had stays.
            ResumePlan::new(row.next_run_at, Vec::new())
        } else {
            ResumePlan::new(Some(start), Vec::new()).with_tick(Some(tick))
        }
    };
    for row in ["rep", "rep/c", "bare"] {
        s.resume_task(row, &audit("resume", row), &planner)
            .await
            .unwrap()
            .expect("paused");
    }
    assert_eq!(
        *seen.lock().unwrap(),
        [
            ("rep".to_owned(), task_window),
            ("rep/a".to_owned(), task_window),
            ("rep/b".to_owned(), own_window),
            ("rep/c".to_owned(), task_window),
            ("bare".to_owned(), Duration::ZERO),
        ]
    );
    let next = |state: TaskState| (state.next_run_at, state.next_tick);
    for row in ["rep", "rep/b", "rep/c", "bare"] {
        assert_eq!(
            next(task_state(s, row).await),
            (Some(start), Some(tick)),
            "{row}"
        );
    }
    assert_eq!(
        next(task_state(s, "rep/a").await),
        (Some(t), Some(t)),
        "kept"
    );
}

/// The heartbeat counts every instance in the store, enabled or not, and no task's own row or
/// shard: the engine sizes its claims by it (10,000 instances of one task are 10,000 rows).
async fn the_heartbeat_counts_the_instances(s: &dyn Store, _: &Arrange) {
    s.register_node(&NodeInfo::new("me", "host", 7, "test", vec![]))
        .await
        .unwrap();
    let beat = || async { s.heartbeat("me", Duration::from_secs(30)).await.unwrap() };
    assert_eq!(beat().await.instances, 0);
    let t = now_s() + HOUR;
    seed(s, &[("rep", t), ("other", t)]).await;
    assert_eq!(
        beat().await.instances,
        0,
        "tasks' own rows are not instances"
    );
    for key in ["a", "b", "c"] {
        written(
            upsert(s, &instance("rep", key, None), write_plan(Some(t)))
                .await
                .2,
        );
    }
    let disabled = InstancePlan::Write {
        enabled: false,
        next_run_at: None,
        next_tick: None,
        pause: None,
    };
    written(upsert(s, &instance("other", "d", None), disabled).await.2);
    assert_eq!(beat().await.instances, 4);
    let audit = instance_audit("instance remove", "rep", "a");
    assert!(s.remove_instance("rep", "a", &audit).await.unwrap());
    assert_eq!(beat().await.instances, 3, "a removed instance is gone");
}

async fn an_instance_is_planned_on_its_tasks_row_written_in_place_listed_and_audited(
    s: &dyn Store,
    _: &Arrange,
) {
    let t = now_s() + HOUR;
    let write = instance("rep", "t-1", Some(r#"{"tenant":1}"#));
    // No task row: the planner sees none, and its refusal writes nothing.
    let (facts, now, done) = upsert(s, &write, InstancePlan::NoTask).await;
    assert_eq!(facts, InstanceFacts::default());
    assert_near_now(now);
    assert_eq!(done, InstanceUpsert::NoTask);
    seed(s, &[("rep", t)]).await;
    let (facts, _, done) = upsert(s, &write, InstancePlan::Sharded).await;
    let task = facts.task.expect("the task's row");
    assert_eq!(
        (task.enabled, task.shards, task.node_pin.as_deref()),
        (true, 1, None),
        "{task:?}"
    );
    assert_eq!(facts.existing, None);
    assert_eq!(done, InstanceUpsert::Sharded);
    assert!(s.instances("rep").await.unwrap().is_empty());
    assert!(
        s.audit_log(10, None).await.unwrap().is_empty(),
        "no refusal audited"
    );

    // Written as planned.
    let record = written(upsert(s, &write, write_plan(Some(t))).await.2);
    assert_eq!(
        (
            record.task.as_str(),
            record.key.as_str(),
            record.cron.as_str()
        ),
        ("rep", "t-1", "0 * * * *")
    );
    assert_eq!(record.args.as_deref(), Some(r#"{"tenant":1}"#));
    assert_eq!((record.enabled, record.next_run_at), (true, Some(t)));
    assert!(!record.removed);
    // In place: the planner sees it; the write replaces schedule and arguments.
    let changed = InstanceWrite::new("rep", "t-1", "*/5 * * * *", "Asia/Shanghai", None);
    let (facts, _, done) = upsert(s, &changed, write_plan(Some(t + HOUR))).await;
    assert_eq!(facts.existing, Some(record.clone()));
    let record = written(done);
    assert_eq!(
        (
            record.cron.as_str(),
            record.timezone.as_str(),
            record.args.as_deref()
        ),
        ("*/5 * * * *", "Asia/Shanghai", None)
    );
    assert_eq!(record.next_run_at, Some(t + HOUR));
    let (_, _, done) = upsert(
        s,
        &instance("rep", "t-0", None),
        InstancePlan::Write {
            enabled: false,
            next_run_at: None,
            next_tick: None,
            pause: None,
        },
    )
    .await;
    assert!(!written(done).enabled);
    // Listed by key, the task's own row apart; the task's row untouched.
    let keys: Vec<String> = s
        .instances("rep")
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.key)
        .collect();
    assert_eq!(keys, ["t-0", "t-1"]);
    assert!(s.instances("other").await.unwrap().is_empty());
    assert_eq!(row(s, "rep").await.next_run_at, Some(t));
    let instance_row = row(s, "rep/t-1").await;
    assert_eq!(instance_row.cron, "*/5 * * * *");
    assert!(!instance_row.removed);
    let log = s.audit_log(10, None).await.unwrap();
    assert_eq!(log.len(), 3, "{log:?}");
    assert!(
        log.iter()
            .all(|a| a.action == "instance upsert" && a.task == "rep")
    );
}

async fn an_instance_is_claimed_with_its_task_and_its_runs_record_its_key(
    s: &dyn Store,
    _: &Arrange,
) {
    let t = now_s() - HOUR;
    seed(s, &[("rep", t + HOUR * 10)]).await;
    written(
        upsert(
            s,
            &instance("rep", "t-1", Some(r#"{"tenant":1}"#)),
            write_plan(Some(t)),
        )
        .await
        .2,
    );
    // Woken for, and offered, as the task's: a node registering only "rep" claims it.
    let wake = s.next_wake(NODE, &names(&["rep"])).await.unwrap();
    assert_eq!(wake.due_at, Some(t));
    assert_eq!(
        s.next_wake(NODE, &names(&["other"])).await.unwrap().due_at,
        None
    );
    let rules = Rules::hourly();
    let run = claim_one(s, "rep", &rules).await;
    assert_eq!(rules.offered(), ["rep/t-1"]);
    assert_eq!(rules.tasks()[0].args.as_deref(), Some(r#"{"tenant":1}"#));
    assert_eq!(run.task_name, "rep/t-1");
    assert_eq!(run.args.as_deref(), Some(r#"{"tenant":1}"#));
    assert_eq!(run.fencing_token, 1, "its own fence");
    let record = run_record_of(s, run.run_id).await;
    assert_eq!(record.task_name, "rep", "recorded under its task");
    assert_eq!(record.instance_key.as_deref(), Some("t-1"));
    assert_eq!(row(s, "rep/t-1").await.next_run_at, Some(t + HOUR));
    assert_eq!(
        row(s, "rep").await.next_run_at,
        Some(t + HOUR * 10),
        "the task's row apart"
    );
    assert!(
        finish_one(
            s,
            finish(&run, RunStatus::Succeeded, None, FailureCount::Reset)
        )
        .await
    );
    let runs = s.runs(&RunQuery::latest(10).task("rep")).await.unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].instance_key.as_deref(), Some("t-1"));
    assert_eq!(runs[0].status, RunStatus::Succeeded);
}

/// A manual run asked with arguments: offered with them, claimed with them in place of the
/// instance's own, recorded with the run (`args_override`); the request's arguments go with it,
/// so the next scheduled run, and a manual run asked without, read the row's own.
async fn a_manual_runs_arguments_replace_its_rows_for_that_run_only(s: &dyn Store, _: &Arrange) {
    let t = now_s() - HOUR;
    seed(s, &[("rep", t + HOUR * 10)]).await;
    let own = r#"{"tenant":1}"#;
    let other = r#"{"tenant":2,"token":"x"}"#;
    written(
        upsert(
            s,
            &instance("rep", "t-1", Some(own)),
            write_plan(Some(t + HOUR * 5)),
        )
        .await
        .2,
    );
    assert_eq!(
        s.request_run("rep/t-1", "alice", Some(other), &audit("trigger", "rep"))
            .await
            .unwrap(),
        RunRequest::Queued
    );
    let rules = Rules::hourly().plan(serve_manual);
    let run = claim_one(s, "rep", &rules).await;
    assert_eq!(rules.tasks()[0].manual_args.as_deref(), Some(other));
    assert_eq!(rules.tasks()[0].args.as_deref(), Some(own), "its own kept");
    assert_eq!(run.trigger, Trigger::Manual);
    assert_eq!(
        run.args.as_deref(),
        Some(other),
        "the run reads the override"
    );
    let record = run_record_of(s, run.run_id).await;
    assert_eq!(record.args_override.as_deref(), Some(other));
    assert_eq!(record.instance_key.as_deref(), Some("t-1"));
    // Handed back before it started (its node stopped, or it was lost and is run again): the
    // manual run requeued is the same request, offered and claimed again with its arguments.
    let mut handed_back = finish(&run, RunStatus::Interrupted, None, FailureCount::Keep);
    handed_back.requeue = Some(Requeue::Manual {
        at: run.scheduled_at,
        by: Some("alice".into()),
    });
    assert!(finish_one(s, handed_back).await);
    let rules = Rules::hourly().plan(serve_manual);
    let run = claim_one(s, "rep", &rules).await;
    assert_eq!(rules.tasks()[0].manual_args.as_deref(), Some(other));
    assert_eq!(
        (run.trigger, run.args.as_deref()),
        (Trigger::Manual, Some(other)),
        "the requeued run reads the override again"
    );
    assert_eq!(
        run_record_of(s, run.run_id).await.args_override.as_deref(),
        Some(other)
    );
    assert!(
        finish_one(
            s,
            finish(&run, RunStatus::Succeeded, None, FailureCount::Reset)
        )
        .await
    );
    // Asked again without: its own.
    assert_eq!(
        s.request_run("rep/t-1", "alice", None, &audit("trigger", "rep"))
            .await
            .unwrap(),
        RunRequest::Queued
    );
    let rules = Rules::hourly().plan(serve_manual);
    let run = claim_one(s, "rep", &rules).await;
    assert_eq!(
        rules.tasks()[0].manual_args,
        None,
        "taken with the first request"
    );
    assert_eq!(run.args.as_deref(), Some(own));
    assert_eq!(run_record_of(s, run.run_id).await.args_override, None);
    assert!(
        finish_one(
            s,
            finish(&run, RunStatus::Succeeded, None, FailureCount::Reset)
        )
        .await
    );
    // The task's own row takes an override too (it has no arguments of its own).
    assert_eq!(
        s.request_run("rep", "alice", Some(other), &audit("trigger", "rep"))
            .await
            .unwrap(),
        RunRequest::Queued
    );
    let run = claim_one(s, "rep", &rules).await;
    assert_eq!(run.task_name, "rep");
    assert_eq!(run.args.as_deref(), Some(other));
    let record = run_record_of(s, run.run_id).await;
    assert_eq!(record.args_override.as_deref(), Some(other));
    assert_eq!(record.instance_key, None);
}

async fn run_record_of(s: &dyn Store, id: i64) -> RunRecord {
    run(s, id).await
}

async fn a_removed_instance_goes_at_once_or_once_its_run_releases_its_lock(
    s: &dyn Store,
    _: &Arrange,
) {
    let t = now_s() - HOUR;
    seed(s, &[("rep", t + HOUR * 10)]).await;
    for key in ["busy", "idle"] {
        written(
            upsert(s, &instance("rep", key, None), write_plan(Some(t)))
                .await
                .2,
        );
    }
    let rules = Rules::hourly().plan(stay_due);
    let out = claim(s, &["rep"], 1, &rules).await;
    let run = out.claimed.into_iter().next().expect("one claimed");
    assert_eq!(run.task_name, "rep/busy");
    let removal = |key: &'static str| async move {
        s.remove_instance("rep", key, &instance_audit("instance remove", "rep", key))
            .await
            .unwrap()
    };
    // Unlocked: gone at once.
    assert!(removal("idle").await);
    assert!(!removal("idle").await, "removed once");
    assert!(
        s.load_tasks()
            .await
            .unwrap()
            .1
            .iter()
            .all(|r| r.name != "rep/idle")
    );
    // Locked: kept for its run, nothing of it due again, out of the list.
    assert!(removal("busy").await);
    assert!(!removal("busy").await, "removed once");
    assert!(s.instances("rep").await.unwrap().is_empty());
    assert_eq!(
        s.instance("rep", "busy").await.unwrap(),
        None,
        "a removed one is not read"
    );
    let kept = row(s, "rep/busy").await;
    assert!(kept.removed && !kept.enabled, "{kept:?}");
    assert_eq!(kept.next_run_at, None);
    let again = claim(s, &["rep"], 5, &Rules::hourly()).await;
    assert!(again.claimed.is_empty(), "{again:?}");
    assert_eq!(
        s.next_wake(NODE, &names(&["rep"])).await.unwrap().due_at,
        Some(t + HOUR * 10)
    );
    // Its run still renews, ends and is recorded.
    assert_eq!(renew(s, NODE, &held(&[key(&run)])).await.unwrap().len(), 1);
    assert!(
        finish_one(
            s,
            finish(&run, RunStatus::Succeeded, None, FailureCount::Reset)
        )
        .await
    );
    assert_eq!(
        run_record_of(s, run.run_id).await.status,
        RunStatus::Succeeded
    );
    // Its row goes with the next prune, the history stays.
    s.prune_history(Duration::from_secs(86_400), 100)
        .await
        .unwrap();
    assert!(
        s.load_tasks()
            .await
            .unwrap()
            .1
            .iter()
            .all(|r| r.name != "rep/busy")
    );
    assert_eq!(
        run_record_of(s, run.run_id).await.instance_key.as_deref(),
        Some("busy")
    );
    // A removed key may be made again.
    written(
        upsert(s, &instance("rep", "busy", None), write_plan(Some(t)))
            .await
            .2,
    );
    assert_eq!(s.instances("rep").await.unwrap().len(), 1);
    let log = s.audit_log(10, None).await.unwrap();
    let removals: Vec<&str> = log
        .iter()
        .filter(|a| a.action == "instance remove")
        .map(|a| a.detail.as_str())
        .collect();
    assert_eq!(removals, ["busy", "idle"], "newest first, each once");
}

// ---------------------------------------------------------------------------------------------
// Limits shared by tasks.
// ---------------------------------------------------------------------------------------------

/// Names `limit` on each of `rows` (as a reconcile does).
async fn name_limit(s: &dyn Store, rows: &[&str], limit: Option<&str>) {
    apply(
        s,
        rows.iter()
            .map(|r| TaskChange::Limit {
                name: (*r).to_owned(),
                limit: limit.map(str::to_owned),
            })
            .collect(),
    )
    .await;
}

async fn a_limit_admits_runs_up_to_its_size_and_the_others_wait_marked(s: &dyn Store, _: &Arrange) {
    let t = now_s() - HOUR;
    assert_eq!(
        s.save_limits(&[("db".to_owned(), 2)]).await.unwrap(),
        ["db"]
    );
    assert!(
        s.save_limits(&[("db".to_owned(), 2)])
            .await
            .unwrap()
            .is_empty(),
        "an unchanged size writes nothing"
    );
    seed(
        s,
        &[
            ("a", t),
            ("b", t + chrono::Duration::seconds(1)),
            ("c", t + chrono::Duration::seconds(2)),
            ("free", t),
        ],
    )
    .await;
    name_limit(s, &["a", "b", "c"], Some("db")).await;
    assert_eq!(row(s, "a").await.limit.as_deref(), Some("db"));
    let limits = s.limits().await.unwrap();
    assert_eq!(limits.len(), 1);
    assert_eq!((limits[0].name.as_str(), limits[0].size), ("db", Some(2)));
    assert!(limits[0].holders.is_empty() && limits[0].waiting.is_empty());

    let rules = Rules::hourly().plan(stay_due);
    let out = claim(s, &["a", "b", "c", "free"], 10, &rules).await;
    let mut claimed: Vec<&str> = out.claimed.iter().map(|c| c.task_name.as_str()).collect();
    claimed.sort_unstable();
    assert_eq!(
        claimed,
        ["a", "b", "free"],
        "two of db, oldest first, and the free one"
    );
    assert_eq!(out.limit_waiting, [("c".to_owned(), "db".to_owned())]);
    assert_eq!(out.left, ["c"]);
    let first = out.claimed.clone();
    let limits = s.limits().await.unwrap();
    let mut holders: Vec<(&str, &str)> = limits[0]
        .holders
        .iter()
        .map(|h| (h.row.as_str(), h.node.as_str()))
        .collect();
    holders.sort_unstable();
    assert_eq!(holders, [("a", NODE), ("b", NODE)]);
    assert!(
        limits[0]
            .holders
            .iter()
            .all(|h| h.run_id.is_some() && h.started_at.is_some())
    );
    assert_eq!(limits[0].waiting.len(), 1);
    assert_eq!(limits[0].waiting[0].row, "c");
    assert_eq!(
        limits[0].waiting[0].due_at,
        Some(t + chrono::Duration::seconds(2))
    );
    let since = limits[0].waiting[0].since;
    assert_near_now(since);
    let wake = s.next_wake("n", &names(&["c"])).await.unwrap();
    assert_eq!(
        wake.due_at,
        Some(t + chrono::Duration::seconds(2)),
        "c keeps its tick, unlocked"
    );

    // Still full: c waits, since when it first waited.
    let out = claim_as(s, "node-b", &["c"], 10, &rules).await;
    assert!(out.claimed.is_empty());
    assert_eq!(s.limits().await.unwrap()[0].waiting[0].since, since);

    // A holder ends: its share is back, c runs and waits no more.
    let a = first.iter().find(|c| c.task_name == "a").unwrap();
    assert!(
        finish_one(
            s,
            finish(a, RunStatus::Succeeded, None, FailureCount::Reset)
        )
        .await
    );
    let out = claim_as(s, "node-b", &["c"], 10, &rules).await;
    assert_eq!(out.claimed.len(), 1);
    let limits = s.limits().await.unwrap();
    let mut holders: Vec<(&str, &str)> = limits[0]
        .holders
        .iter()
        .map(|h| (h.row.as_str(), h.node.as_str()))
        .collect();
    holders.sort_unstable();
    assert_eq!(holders, [("b", NODE), ("c", "node-b")]);
    assert!(limits[0].waiting.is_empty());

    // A larger size is written and counts at the next claim.
    assert_eq!(
        s.save_limits(&[("db".to_owned(), 3)]).await.unwrap(),
        ["db"]
    );
    assert_eq!(s.limits().await.unwrap()[0].size, Some(3));
}

async fn an_undeclared_limit_admits_nothing_and_a_skip_ends_the_wait(s: &dyn Store, _: &Arrange) {
    let t = now_s() - HOUR;
    seed(s, &[("a", t)]).await;
    name_limit(s, &["a"], Some("nobody")).await;
    let out = claim(s, &["a"], 10, &Rules::hourly().plan(stay_due)).await;
    assert!(out.claimed.is_empty());
    assert_eq!(out.limit_waiting, [("a".to_owned(), "nobody".to_owned())]);
    let limits = s.limits().await.unwrap();
    assert_eq!(limits.len(), 1);
    assert_eq!((limits[0].name.as_str(), limits[0].size), ("nobody", None));
    assert_eq!(limits[0].waiting[0].row, "a");
    // The rules skip the tick (too late): the row waits no more.
    let rules = Rules::hourly().plan(|task| {
        assert!(task.limit_waiting_since.is_some(), "offered as waiting");
        DueDecision::Skip {
            next_run_at: NextRun::Set(Some(tick(task) + HOUR * 2)),
            clear_retry: false,
            clear_pause: false,
            skips: vec![skip(
                &task.name,
                SkipReason::Misfire,
                tick(task),
                tick(task),
                1,
            )],
        }
    });
    let out = claim(s, &["a"], 10, &rules).await;
    assert_eq!(out.skipped.len(), 1);
    assert_eq!(
        out.skipped[0].reason,
        SkipReason::Limit,
        "the skip names the limit"
    );
    // Undeclared, with nobody waiting for it or holding it: not listed.
    assert!(s.limits().await.unwrap().is_empty());
    assert_eq!(row(s, "a").await.next_run_at, Some(t + HOUR * 2));
}

/// One instance is read by its task and key: as written, as the list has it; none for a key
/// the task has not, another task's key, the task's own row or a removed one.
async fn an_instance_is_read_by_its_task_and_key(s: &dyn Store, _: &Arrange) {
    let t = now_s() + HOUR;
    seed(s, &[("rep", t), ("other", t)]).await;
    assert_eq!(s.instance("rep", "t-1").await.unwrap(), None, "none yet");
    let one = written(
        upsert(
            s,
            &instance("rep", "t-1", Some(r#"{"tenant":1}"#)),
            write_plan(Some(t)),
        )
        .await
        .2,
    );
    written(
        upsert(s, &instance("rep", "t-2", None), write_plan(Some(t)))
            .await
            .2,
    );
    written(
        upsert(s, &instance("other", "t-3", None), write_plan(Some(t)))
            .await
            .2,
    );
    let read = s.instance("rep", "t-1").await.unwrap();
    assert_eq!(read.as_ref(), Some(&one));
    let listed = s.instances("rep").await.unwrap();
    assert_eq!(read.as_ref(), listed.iter().find(|r| r.key == "t-1"));
    assert_eq!(
        s.instance("rep", "t-3").await.unwrap(),
        None,
        "another task's"
    );
    assert_eq!(s.instance("other", "t-1").await.unwrap(), None);
    assert_eq!(s.instance("rep", "nope").await.unwrap(), None);
    assert_eq!(s.instance("rep", "").await.unwrap(), None);
    let audit = instance_audit("instance remove", "rep", "t-1");
    assert!(s.remove_instance("rep", "t-1", &audit).await.unwrap());
    assert_eq!(s.instance("rep", "t-1").await.unwrap(), None, "removed");
    assert!(s.instance("rep", "t-2").await.unwrap().is_some());
}

/// A batch is planned instance by instance in the order of their rows' names (a key given twice
/// in the batch's order: two batches lock the rows they share in one order), on one clock, each
/// planner seeing the batch's earlier writes of its key, and answered in the batch's order; each
/// written instance is audited, a refused one neither written nor audited; an empty batch does
/// nothing.
async fn a_batch_of_instances_is_planned_in_order_written_and_audited_in_one_go(
    s: &dyn Store,
    _: &Arrange,
) {
    let t = now_s() + HOUR;
    seed(s, &[("rep", t)]).await;
    assert!(
        s.upsert_instances(&[], &|_, _, _| unreachable!())
            .await
            .unwrap()
            .is_empty()
    );
    let writes = [
        instance("rep", "t-1", Some(r#"{"tenant":1}"#)),
        instance("rep", "t-2", None),
        instance("gone", "t-3", None),
        InstanceWrite::new("rep", "t-1", "*/5 * * * *", "UTC", None),
        instance("rep", "t-4", None),
    ];
    let batch: Vec<(InstanceWrite, AuditEntry)> = writes
        .iter()
        .map(|w| {
            (
                w.clone(),
                instance_audit("instance upsert", &w.task, &w.key),
            )
        })
        .collect();
    let seen = Mutex::new(Vec::new());
    let done = s
        .upsert_instances(&batch, &|index, facts: &InstanceFacts, now| {
            seen.lock().unwrap().push((index, facts.clone(), now));
            match index {
                1 => InstancePlan::ConfigOwned,
                2 => InstancePlan::NoTask,
                3 => write_plan(Some(t + HOUR)),
                _ => write_plan(Some(t)),
            }
        })
        .await
        .unwrap();
    let mut seen = seen.into_inner().unwrap();
    assert_eq!(
        seen.iter().map(|(i, _, _)| *i).collect::<Vec<_>>(),
        [2, 0, 3, 1, 4],
        "by name: gone/t-3, rep/t-1 twice in the batch's order, rep/t-2, rep/t-4"
    );
    seen.sort_by_key(|(i, _, _)| *i);
    assert_near_now(seen[0].2);
    assert!(
        seen.iter().all(|(_, _, now)| *now == seen[0].2),
        "one clock"
    );
    assert!(seen[0].1.task.is_some() && seen[0].1.existing.is_none());
    assert_eq!(seen[2].1, InstanceFacts::default(), "no task row");
    assert_eq!(done.len(), 5);
    let first = written(done[0].clone());
    assert_eq!(done[1], InstanceUpsert::ConfigOwned);
    assert_eq!(done[2], InstanceUpsert::NoTask);
    assert_eq!(
        seen[3].1.existing,
        Some(first),
        "the batch's earlier write seen"
    );
    let again = written(done[3].clone());
    assert_eq!(
        (again.cron.as_str(), again.args.as_deref()),
        ("*/5 * * * *", None)
    );
    assert_eq!(again.next_run_at, Some(t + HOUR));
    written(done[4].clone());
    let keys: Vec<String> = s
        .instances("rep")
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.key)
        .collect();
    assert_eq!(keys, ["t-1", "t-4"], "the refused are not written");
    assert!(s.instances("gone").await.unwrap().is_empty());
    let log = s.audit_log(10, None).await.unwrap();
    let mut audited: Vec<&str> = log.iter().map(|a| a.detail.as_str()).collect();
    audited.sort_unstable();
    assert_eq!(audited, ["t-1", "t-1", "t-4"], "each written one: {log:?}");
}
