//! The database a test runs on, either backend, and the one place with backend SQL.
//!
//! Tests read what they judge through the public [`Store`] API ([`TestDb::runs`],
//! [`TestDb::task`], [`TestDb::skips`] ...). The few states the API cannot reach (a task row left
//! by an older cluster, an overdue schedule, a stolen lock, an outbox event made due) and the few
//! facts it does not report (a lock's token, the outbox's own columns, which rows a statement
//! wrote) are the methods below that hold SQL for each backend.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use scheduler::store::{PgStore, SqliteStore, Store};
use scheduler::testing::clock::TestClock;
use scheduler::testing::store::{RunQuery, RunRecord, RunStatus, SkipRecord, TaskRow, TaskState};
use scheduler_tests::TestSchema;

/// A migrated database for one test: a PostgreSQL schema of its own, or an SQLite file in a
/// temporary directory.
///
/// On PostgreSQL every node gets a store (and pool) of its own, sharing nothing but the database.
/// On SQLite one process may open a file once (its lock file), so every node of the test shares
/// one [`SqliteStore`] (clones share the pool, the writer queue and the in-process wake-ups):
/// several schedulers in one process are how SQLite runs "several nodes".
///
/// Time: on SQLite the store and the nodes ([`super::node`]) share a [`TestClock`] that flows
/// with the wall clock until a test moves it, so [`TestDb::elapse`] skips the time a test would
/// otherwise wait for (see `docs/testing.md`, "Time in the tests"). PostgreSQL decides by its own
/// `now()`, so there `elapse` waits on the wall clock.
pub enum TestDb {
    Postgres {
        schema: TestSchema,
        /// The store tests read through (nodes get stores of their own).
        store: PgStore,
    },
    Sqlite {
        store: SqliteStore,
        dir: tempfile::TempDir,
        /// The store's clock, shared with the nodes.
        clock: TestClock,
    },
}

impl TestDb {
    /// A fresh, migrated PostgreSQL schema named after `prefix`.
    pub async fn postgres(prefix: &str) -> Self {
        scheduler_tests::init_tracing();
        let schema = TestSchema::new(prefix).await;
        let store = PgStore::connect_lazy(&schema.url, &schema.schema, 2).unwrap();
        store.migrate().await.unwrap();
        TestDb::Postgres { schema, store }
    }

    /// A fresh, migrated SQLite file in a temporary directory.
    pub async fn sqlite(_prefix: &str) -> Self {
        scheduler_tests::init_tracing();
        let dir = tempfile::tempdir().unwrap();
        let clock = TestClock::new();
        let store = SqliteStore::builder(dir.path().join("scheduler.db"))
            .test_clock(clock.clone())
            .connect()
            .unwrap();
        store.migrate().await.unwrap();
        TestDb::Sqlite { store, dir, clock }
    }

    /// The clock the nodes on this database decide by (on PostgreSQL, none a test moves).
    pub fn clock(&self) -> Option<&TestClock> {
        match self {
            TestDb::Postgres { .. } => None,
            TestDb::Sqlite { clock, .. } => Some(clock),
        }
    }

    /// The time now, as the nodes on this database see it.
    pub fn now(&self) -> DateTime<Utc> {
        self.clock().map_or_else(Utc::now, TestClock::now)
    }

    /// Lets `time` pass for the nodes on this database. On SQLite: steps of the test clock, a
    /// second at most each (as the wall clock would pass them: each tick of an every-second
    /// cron falls due in turn, none is a misfire), each returning once every service of every
    /// node has made a pass at the new time (see `TestClock::step`): what was due by then has
    /// been claimed, what was missed judged, the locks of running handlers renewed. On
    /// PostgreSQL, whose `now()` a test does not move: `time` of wall time.
    pub async fn elapse(&self, time: Duration) {
        match self.clock() {
            None => tokio::time::sleep(time).await,
            Some(clock) => {
                let mut left = time;
                while !left.is_zero() {
                    let step = left.min(Duration::from_secs(1));
                    clock.step(step).await;
                    left -= step;
                }
            }
        }
    }

    /// Whether this is the SQLite file (for the rare behaviour sized per backend).
    pub fn is_sqlite(&self) -> bool {
        matches!(self, TestDb::Sqlite { .. })
    }

    /// The store tests read and operate through.
    pub fn api(&self) -> &dyn Store {
        match self {
            TestDb::Postgres { store, .. } => store,
            TestDb::Sqlite { store, .. } => store,
        }
    }

    /// A store for a node (or a reconciler) with `connections` in its pool: a new PostgreSQL
    /// pool, or the shared SQLite store.
    pub fn node_store(&self, connections: u32) -> Arc<dyn Store> {
        match self {
            TestDb::Postgres { schema, .. } => {
                Arc::new(PgStore::connect_lazy(&schema.url, &schema.schema, connections).unwrap())
            }
            TestDb::Sqlite { store, .. } => Arc::new(store.clone()),
        }
    }

    /// The operator commands' arguments that point them at this database (`--database-url`,
    /// and `--schema` on PostgreSQL).
    pub fn cli_store_args(&self) -> Vec<String> {
        match self {
            TestDb::Postgres { schema, .. } => vec![
                "--database-url".into(),
                schema.url.clone(),
                "--schema".into(),
                schema.schema.clone(),
            ],
            TestDb::Sqlite { dir, .. } => vec![
                "--database-url".into(),
                format!("sqlite://{}", dir.path().join("scheduler.db").display()),
            ],
        }
    }

    /// The PostgreSQL schema, for tests of PostgreSQL-only behaviour.
    pub fn pg(&self) -> &TestSchema {
        match self {
            TestDb::Postgres { schema, .. } => schema,
            TestDb::Sqlite { .. } => panic!("a PostgreSQL-only test ran on SQLite"),
        }
    }

    /// A pool whose connections see the scheduler tables (PostgreSQL-only tests).
    pub fn pg_pool(&self) -> sqlx::PgPool {
        match self {
            TestDb::Postgres { store, .. } => store.pool().clone(),
            TestDb::Sqlite { .. } => panic!("a PostgreSQL-only test ran on SQLite"),
        }
    }

    /// A PostgreSQL store of its own (PostgreSQL-only tests).
    pub fn pg_store(&self) -> PgStore {
        super::store(self.pg())
    }

    pub async fn cleanup(self) {
        match self {
            TestDb::Postgres { schema, store } => {
                store.pool().close().await;
                schema.cleanup().await;
            }
            TestDb::Sqlite { store, dir, .. } => {
                store.pool().close().await;
                drop(store);
                drop(dir);
            }
        }
    }

    // ---- reading, through the API ------------------------------------------------------------

    /// Every run (of `task`, or of all tasks), oldest first.
    pub async fn runs(&self, task: Option<&str>) -> Vec<RunRecord> {
        let mut all = Vec::new();
        let mut before = None;
        loop {
            let mut q = RunQuery::latest(1000);
            if let Some(t) = task {
                q = q.task(t);
            }
            if let Some(id) = before {
                q = q.before(id);
            }
            let page = self.api().runs(&q).await.unwrap();
            let done = page.len() < 1000;
            before = page.last().map(|r| r.id);
            all.extend(page);
            if done {
                break;
            }
        }
        all.reverse();
        all
    }

    /// `(status, count)` of a task's runs.
    pub async fn run_statuses(&self, task: &str) -> HashMap<RunStatus, i64> {
        let mut by = HashMap::new();
        for r in self.runs(Some(task)).await {
            *by.entry(r.status).or_default() += 1;
        }
        by
    }

    pub async fn count_runs(&self, task: &str, status: RunStatus) -> i64 {
        self.run_statuses(task)
            .await
            .get(&status)
            .copied()
            .unwrap_or(0)
    }

    /// The state of every task row, by name.
    pub async fn tasks(&self) -> Vec<TaskState> {
        self.api().task_states(None).await.unwrap()
    }

    /// The state of `name`'s row; panics if there is none.
    pub async fn task(&self, name: &str) -> TaskState {
        self.try_task(name)
            .await
            .unwrap_or_else(|| panic!("no row for task {name}"))
    }

    pub async fn try_task(&self, name: &str) -> Option<TaskState> {
        self.api().task_states(Some(name)).await.unwrap().pop()
    }

    /// Every task row as the engine loads it (with the last claimed tick), by name.
    pub async fn task_rows(&self) -> Vec<TaskRow> {
        let mut rows = self.api().load_tasks().await.unwrap().1;
        rows.sort_by(|a, b| a.name.cmp(&b.name));
        rows
    }

    /// Every skip record of `task`, oldest first.
    pub async fn skips(&self, task: &str) -> Vec<SkipRecord> {
        self.api()
            .skips(task, DateTime::<Utc>::UNIX_EPOCH)
            .await
            .unwrap()
    }

    // ---- arranging and reading what the API does not reach: backend SQL ----------------------

    /// Inserts an enabled UTC task row as a cluster that went down left it.
    pub async fn insert_task(&self, name: &str, cron: &str, next_run_at: Option<DateTime<Utc>>) {
        match self {
            TestDb::Postgres { store, .. } => {
                sqlx::query(
                    "INSERT INTO scheduler_tasks (name, cron, timezone, enabled, next_run_at)
                     VALUES ($1, $2, 'UTC', true, $3)",
                )
                .bind(name)
                .bind(cron)
                .bind(next_run_at)
                .execute(store.pool())
                .await
                .unwrap();
            }
            TestDb::Sqlite { store, .. } => {
                let now = Utc::now().timestamp_micros();
                sqlx::query(
                    "INSERT INTO scheduler_tasks
                         (name, cron, timezone, enabled, next_run_at, created_at, updated_at)
                     VALUES (?1, ?2, 'UTC', 1, ?3, ?4, ?4)",
                )
                .bind(name)
                .bind(cron)
                .bind(next_run_at.map(|t| t.timestamp_micros()))
                .bind(now)
                .execute(store.pool())
                .await
                .unwrap();
            }
        }
    }

    /// Gives every task row a lock held by `owner` until `expires_at`, under a new token (a
    /// lock taken over by hand, or left by a node that died).
    pub async fn set_locks(&self, owner: &str, expires_at: DateTime<Utc>) {
        let token = uuid::Uuid::new_v4();
        match self {
            TestDb::Postgres { store, .. } => {
                sqlx::query(
                    "UPDATE scheduler_tasks SET lock_owner = $1, lock_token = $2, lock_expires_at = $3",
                )
                .bind(owner)
                .bind(token)
                .bind(expires_at)
                .execute(store.pool())
                .await
                .unwrap();
            }
            TestDb::Sqlite { store, .. } => {
                sqlx::query(
                    "UPDATE scheduler_tasks SET lock_owner = ?1, lock_token = ?2, lock_expires_at = ?3",
                )
                .bind(owner)
                .bind(token.hyphenated().to_string())
                .bind(expires_at.timestamp_micros())
                .execute(store.pool())
                .await
                .unwrap();
            }
        }
    }

    /// The token of `task`'s lock, if it is locked.
    pub async fn lock_token(&self, task: &str) -> Option<String> {
        match self {
            TestDb::Postgres { store, .. } => sqlx::query_scalar::<_, Option<uuid::Uuid>>(
                "SELECT lock_token FROM scheduler_tasks WHERE name = $1",
            )
            .bind(task)
            .fetch_one(store.pool())
            .await
            .unwrap()
            .map(|t| t.hyphenated().to_string()),
            TestDb::Sqlite { store, .. } => {
                sqlx::query_scalar("SELECT lock_token FROM scheduler_tasks WHERE name = ?1")
                    .bind(task)
                    .fetch_one(store.pool())
                    .await
                    .unwrap()
            }
        }
    }

    /// Sets the next run of `task`, or of every task when `None`.
    pub async fn set_next_run(&self, task: Option<&str>, at: Option<DateTime<Utc>>) {
        match self {
            TestDb::Postgres { store, .. } => {
                sqlx::query(
                    "UPDATE scheduler_tasks SET next_run_at = $2 WHERE $1::text IS NULL OR name = $1",
                )
                .bind(task)
                .bind(at)
                .execute(store.pool())
                .await
                .unwrap();
            }
            TestDb::Sqlite { store, .. } => {
                sqlx::query(
                    "UPDATE scheduler_tasks SET next_run_at = ?2 WHERE ?1 IS NULL OR name = ?1",
                )
                .bind(task)
                .bind(at.map(|t| t.timestamp_micros()))
                .execute(store.pool())
                .await
                .unwrap();
            }
        }
    }

    /// Records `tick` as `task`'s most recently claimed tick, with `next` after it (what a claim
    /// leaves).
    pub async fn set_claimed(&self, task: &str, tick: DateTime<Utc>, next: DateTime<Utc>) {
        match self {
            TestDb::Postgres { store, .. } => {
                sqlx::query(
                    "UPDATE scheduler_tasks SET last_scheduled_at = $2, next_run_at = $3 WHERE name = $1",
                )
                .bind(task)
                .bind(tick)
                .bind(next)
                .execute(store.pool())
                .await
                .unwrap();
            }
            TestDb::Sqlite { store, .. } => {
                sqlx::query(
                    "UPDATE scheduler_tasks SET last_scheduled_at = ?2, next_run_at = ?3 WHERE name = ?1",
                )
                .bind(task)
                .bind(tick.timestamp_micros())
                .bind(next.timestamp_micros())
                .execute(store.pool())
                .await
                .unwrap();
            }
        }
    }

    /// Moves the instant `task` was disabled to `at`.
    pub async fn set_disabled_at(&self, task: &str, at: DateTime<Utc>) {
        match self {
            TestDb::Postgres { store, .. } => {
                sqlx::query("UPDATE scheduler_tasks SET disabled_at = $2 WHERE name = $1")
                    .bind(task)
                    .bind(at)
                    .execute(store.pool())
                    .await
                    .unwrap();
            }
            TestDb::Sqlite { store, .. } => {
                sqlx::query("UPDATE scheduler_tasks SET disabled_at = ?2 WHERE name = ?1")
                    .bind(task)
                    .bind(at.timestamp_micros())
                    .execute(store.pool())
                    .await
                    .unwrap();
            }
        }
    }

    /// Stores `pace_ms` as backfill `id`'s pace, bypassing every check (a row written before
    /// the range of the pace existed).
    pub async fn set_backfill_pace_ms(&self, id: i64, pace_ms: i64) {
        let sql = match self {
            TestDb::Postgres { .. } => "UPDATE scheduler_backfills SET pace_ms = $2 WHERE id = $1",
            TestDb::Sqlite { .. } => "UPDATE scheduler_backfills SET pace_ms = ?2 WHERE id = ?1",
        };
        let done = match self {
            TestDb::Postgres { store, .. } => sqlx::query(sql)
                .bind(id)
                .bind(pace_ms)
                .execute(store.pool())
                .await
                .unwrap()
                .rows_affected(),
            TestDb::Sqlite { store, .. } => sqlx::query(sql)
                .bind(id)
                .bind(pace_ms)
                .execute(store.pool())
                .await
                .unwrap()
                .rows_affected(),
        };
        assert_eq!(done, 1, "backfill {id} exists");
    }

    /// Stores `ms` as the reminder interval of `task`'s open incidents, bypassing every check (a
    /// row written before the range of the interval existed).
    pub async fn set_remind_every_ms(&self, task: &str, ms: i64) {
        let sql = match self {
            TestDb::Postgres { .. } => {
                "UPDATE scheduler_incidents SET remind_every_ms = $2 \
                 WHERE task_name = $1 AND closed_at IS NULL"
            }
            TestDb::Sqlite { .. } => {
                "UPDATE scheduler_incidents SET remind_every_ms = ?2 \
                 WHERE task_name = ?1 AND closed_at IS NULL"
            }
        };
        let done = match self {
            TestDb::Postgres { store, .. } => sqlx::query(sql)
                .bind(task)
                .bind(ms)
                .execute(store.pool())
                .await
                .unwrap()
                .rows_affected(),
            TestDb::Sqlite { store, .. } => sqlx::query(sql)
                .bind(task)
                .bind(ms)
                .execute(store.pool())
                .await
                .unwrap()
                .rows_affected(),
        };
        assert!(done > 0, "{task} has an open incident");
    }

    /// `(attempts, state)` of every outbox event, oldest first.
    pub async fn outbox(&self) -> Vec<(i64, String)> {
        match self {
            TestDb::Postgres { store, .. } => sqlx::query_as::<_, (i32, String)>(
                "SELECT attempts, state FROM scheduler_outbox ORDER BY id",
            )
            .fetch_all(store.pool())
            .await
            .unwrap()
            .into_iter()
            .map(|(a, s)| (i64::from(a), s))
            .collect(),
            TestDb::Sqlite { store, .. } => {
                sqlx::query_as("SELECT attempts, state FROM scheduler_outbox ORDER BY id")
                    .fetch_all(store.pool())
                    .await
                    .unwrap()
            }
        }
    }

    /// Makes every outbox event's next delivery attempt due now.
    pub async fn outbox_due_now(&self) {
        let now = Utc::now();
        match self {
            TestDb::Postgres { store, .. } => {
                sqlx::query("UPDATE scheduler_outbox SET deliver_after = $1")
                    .bind(now)
                    .execute(store.pool())
                    .await
                    .unwrap();
            }
            TestDb::Sqlite { store, .. } => {
                sqlx::query("UPDATE scheduler_outbox SET deliver_after = ?1")
                    .bind(now.timestamp_micros())
                    .execute(store.pool())
                    .await
                    .unwrap();
            }
        }
    }

    /// One `name:version` per task row, by name; a version changes whenever a statement writes
    /// the row, even with the values it had. PostgreSQL: the writing transaction (`xmin`).
    /// SQLite: a count kept by triggers this installs on its first call (so call it once before
    /// the writes it is to see).
    pub async fn row_versions(&self) -> Vec<String> {
        match self {
            TestDb::Postgres { store, .. } => sqlx::query_scalar(
                "SELECT name || ':' || xmin::text FROM scheduler_tasks ORDER BY name",
            )
            .fetch_all(store.pool())
            .await
            .unwrap(),
            TestDb::Sqlite { store, .. } => {
                sqlx::raw_sql(
                    "CREATE TABLE IF NOT EXISTS test_row_writes (name TEXT PRIMARY KEY, n INTEGER NOT NULL);
                     CREATE TRIGGER IF NOT EXISTS test_row_inserted AFTER INSERT ON scheduler_tasks BEGIN
                         INSERT INTO test_row_writes VALUES (NEW.name, 1)
                         ON CONFLICT (name) DO UPDATE SET n = n + 1;
                     END;
                     CREATE TRIGGER IF NOT EXISTS test_row_updated AFTER UPDATE ON scheduler_tasks BEGIN
                         INSERT INTO test_row_writes VALUES (NEW.name, 1)
                         ON CONFLICT (name) DO UPDATE SET n = n + 1;
                     END;",
                )
                .execute(store.pool())
                .await
                .unwrap();
                sqlx::query_scalar(
                    "SELECT t.name || ':' || coalesce(w.n, 0) FROM scheduler_tasks t
                     LEFT JOIN test_row_writes w ON w.name = t.name ORDER BY t.name",
                )
                .fetch_all(store.pool())
                .await
                .unwrap()
            }
        }
    }
}

/// Generates one test per behaviour and backend, in `mod on_postgres` and `mod on_sqlite`: each
/// behaviour is an `async fn(&TestDb)` of the including file, run on a fresh database. Invoke once
/// per file; `threads` is the Tokio runtime's worker count. The file's PostgreSQL-only tests
/// (plain `async fn()`s without a test attribute) are listed after `postgres_only:`, so every
/// test that needs PostgreSQL is named `on_postgres::...`, the one name
/// `scripts/test --sqlite-only` skips.
#[macro_export]
macro_rules! on_both_backends {
    (
        threads = $threads:literal;
        $($behaviour:ident),* $(,)?
        $(; postgres_only: $($pg_only:ident),* $(,)?)?
    ) => {
        mod on_postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = $threads)]
                async fn $behaviour() {
                    let db = $crate::common::TestDb::postgres(stringify!($behaviour)).await;
                    super::$behaviour(&db).await;
                    db.cleanup().await;
                }
            )*
            $($(
                #[tokio::test(flavor = "multi_thread", worker_threads = $threads)]
                async fn $pg_only() {
                    super::$pg_only().await;
                }
            )*)?
        }
        mod on_sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = $threads)]
                async fn $behaviour() {
                    let db = $crate::common::TestDb::sqlite(stringify!($behaviour)).await;
                    super::$behaviour(&db).await;
                    db.cleanup().await;
                }
            )*
        }
    };
}
