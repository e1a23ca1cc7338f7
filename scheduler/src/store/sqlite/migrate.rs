//! Schema migrations: the steps of the one list both backends follow (`store::migrations`),
//! SQLite's part embedded from `scheduler/migrations/sqlite/` (shipped with the crate) and
//! applied in order in one `BEGIN IMMEDIATE` transaction, so a migration is applied exactly once
//! and a failed one leaves nothing behind. A database migrated by a newer binary (a version this
//! one does not know) is refused rather than half-understood; one whose record carries SQLite's
//! numbering before the alignment is carried over to the list's in the same transaction.

use sqlx::SqliteConnection;

use super::operations::micros;
use crate::store::StoreError;
use crate::store::migrations::{self, Plan, SQLITE_BEFORE_ALIGNMENT};

/// Applies the migrations `conn` (inside a write transaction) lacks, after carrying its record
/// over from SQLite's older numbering if it has it. `Ok(Err(_))`: the database is newer than
/// this binary (or its record unreadable); the caller rolls back. `Ok(Ok(_))`: the versions
/// applied, in order.
pub(super) async fn apply_all(
    conn: &mut SqliteConnection,
    now: chrono::DateTime<chrono::Utc>,
    path: &std::path::Path,
) -> Result<Result<Vec<i64>, StoreError>, sqlx::Error> {
    sqlx::query(include_str!("queries/migrate_table.sql"))
        .execute(&mut *conn)
        .await?;
    let recorded: Vec<(i64, String)> = sqlx::query_as(shared_query!("migrate_applied"))
        .fetch_all(&mut *conn)
        .await?;
    let Plan { renumber, pending } = match migrations::plan(&recorded, SQLITE_BEFORE_ALIGNMENT) {
        Ok(plan) => plan,
        Err(refusal) => {
            let place = format!("the SQLite database `{}`", path.display());
            return Ok(Err(refusal.into_error(&place)));
        }
    };
    if !renumber.is_empty() {
        // Logged before the commit: a failure after it rolls the carrying over back too, and
        // is logged and returned as the migration's.
        tracing::info!(
            path = %path.display(),
            versions = ?renumber.iter().map(|&(from, to, _)| (from, to)).collect::<Vec<_>>(),
            "carrying the migration record over to the aligned numbering"
        );
    }
    for &(from, to, description) in &renumber {
        sqlx::query(shared_query!("migrate_renumber"))
            .bind(from)
            .bind(to)
            .bind(description)
            .execute(&mut *conn)
            .await?;
    }
    let mut applied = Vec::new();
    for step in pending {
        if let Some(sql) = step.sqlite.sql() {
            sqlx::raw_sql(sql).execute(&mut *conn).await?;
        }
        sqlx::query(include_str!("queries/migrate_record.sql"))
            .bind(step.version)
            .bind(step.description)
            .bind(micros(now))
            .execute(&mut *conn)
            .await?;
        applied.push(step.version);
    }
    Ok(Ok(applied))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use chrono::{DateTime, SubsecRound, TimeDelta, Utc};
    use sqlx::sqlite::SqliteConnectOptions;
    use sqlx::{Connection, Row, SqliteConnection};

    use crate::store::migrations::MIGRATIONS;
    use crate::store::{
        ClaimPlan, ClaimRequest, ClaimRules, ClaimStore, ConfigStore, DueDecision, DueTask,
        ExpiredLock, FailureCount, HistoryStore, LockKey, NodeStore, Recovery, RescueDecision,
        RunEnd, RunFinish, RunStatus, SkipReason, SqliteStore, Store, Trigger,
    };

    /// Runs every due tick once, scheduling nothing after it.
    struct Once;

    impl ClaimRules for Once {
        fn rescue(&self, _: &ExpiredLock, _: DateTime<Utc>) -> RescueDecision {
            RescueDecision::Wait
        }

        fn plan(&self, task: &DueTask, _: DateTime<Utc>) -> DueDecision {
            DueDecision::Run(ClaimPlan::scheduled(
                task.next_run_at.expect("a tick is due"),
                None,
                Recovery::Rerun,
                Duration::from_secs(60),
            ))
        }
    }

    fn us(t: DateTime<Utc>) -> i64 {
        t.timestamp_micros()
    }

    /// A database written by a binary that knew only migration 1 (runs, a pruned run's id, a
    /// locked task, skips, a node, the config state) is upgraded by migration 2 in place: every
    /// row reads back as it was, with the new columns at their defaults, and the rebuilt run
    /// table keeps its indexes and never hands out an id again.
    #[tokio::test]
    async fn a_database_of_migration_1_upgrades_with_its_rows_intact() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.db");
        let now = Utc::now().trunc_subsecs(6);
        let hour = TimeDelta::hours(1);
        let token = uuid::Uuid::new_v4();
        {
            let options = SqliteConnectOptions::new()
                .filename(&path)
                .create_if_missing(true);
            let mut conn = SqliteConnection::connect_with(&options).await.unwrap();
            sqlx::query(include_str!("queries/migrate_table.sql"))
                .execute(&mut conn)
                .await
                .unwrap();
            let (version, description) = (MIGRATIONS[0].version, MIGRATIONS[0].description);
            let sql = MIGRATIONS[0].sqlite.sql().unwrap();
            sqlx::raw_sql(sql).execute(&mut conn).await.unwrap();
            sqlx::query(include_str!("queries/migrate_record.sql"))
                .bind(version)
                .bind(description)
                .bind(us(now))
                .execute(&mut conn)
                .await
                .unwrap();
            for (name, enabled, next, owner) in [
                ("due", 1, Some(now - hour), None),
                ("locked", 1, Some(now + hour), Some("old-node")),
                ("off", 0, None, None),
            ] {
                sqlx::query(
                    "INSERT INTO scheduler_tasks (name, cron, timezone, enabled, next_run_at,
                         lock_owner, lock_token, lock_expires_at, last_status, last_error,
                         consecutive_failures, last_scheduled_at, created_at, updated_at)
                     VALUES (?1, '0 * * * *', 'Europe/Paris', ?2, ?3, ?4, ?5, ?6, 'failed', 'boom',
                             2, ?7, ?7, ?7)",
                )
                .bind(name)
                .bind(enabled)
                .bind(next.map(us))
                .bind(owner)
                .bind(owner.map(|_| token.hyphenated().to_string()))
                .bind(owner.map(|_| us(now + hour)))
                .bind(us(now - hour * 2))
                .execute(&mut conn)
                .await
                .unwrap();
            }
            for (id, status, finished, lock) in [
                (3, "succeeded", Some(now - hour), uuid::Uuid::new_v4()),
                (5, "interrupted", Some(now - hour), uuid::Uuid::new_v4()),
                (8, "running", None, token),
                (9, "failed", Some(now), uuid::Uuid::new_v4()),
            ] {
                sqlx::query(
                    "INSERT INTO scheduler_runs (id, task_name, scheduled_at, started_at,
                         finished_at, status, node_id, lock_token, ticks_collapsed, error, recovery)
                     VALUES (?1, 'locked', ?2, ?2, ?3, ?4, 'old-node', ?5, 4, 'an error', 'never')",
                )
                .bind(id)
                .bind(us(now - hour * 2))
                .bind(finished.map(us))
                .bind(status)
                .bind(lock.hyphenated().to_string())
                .execute(&mut conn)
                .await
                .unwrap();
            }
            // Run 9 was pruned: its id is spent.
            sqlx::query("DELETE FROM scheduler_runs WHERE id = 9")
                .execute(&mut conn)
                .await
                .unwrap();
            sqlx::query(
                "INSERT INTO scheduler_skips (task_name, reason, first_tick, last_tick, ticks,
                     exact, run_id, recorded_at)
                 VALUES ('due', 'misfire', ?1, ?2, 3, 0, 3, ?2)",
            )
            .bind(us(now - hour * 3))
            .bind(us(now - hour))
            .execute(&mut conn)
            .await
            .unwrap();
            sqlx::query(
                "INSERT INTO scheduler_nodes (node_id, hostname, pid, version, tasks, started_at,
                     heartbeat_at)
                 VALUES ('old-node', 'host', 42, '0.1.0', '[\"locked\",\"due\"]', ?1, ?1)",
            )
            .bind(us(now))
            .execute(&mut conn)
            .await
            .unwrap();
            sqlx::query(
                "INSERT INTO scheduler_config_state (id, version, digest, applied_by, applied_at)
                 VALUES (1, 7, 'd7', 'old-node', ?1)",
            )
            .bind(us(now))
            .execute(&mut conn)
            .await
            .unwrap();
            conn.close().await.unwrap();
        }

        let store = SqliteStore::builder(&path).connect().unwrap();
        store.migrate().await.unwrap();
        store.migrate().await.unwrap();

        let runs = store.recent_runs(None, 10).await.unwrap();
        let seen: Vec<(i64, RunStatus, Option<DateTime<Utc>>)> = runs
            .iter()
            .map(|r| (r.id, r.status, r.finished_at))
            .collect();
        assert_eq!(
            seen,
            [
                (8, RunStatus::Running, None),
                (5, RunStatus::Interrupted, Some(now - hour)),
                (3, RunStatus::Succeeded, Some(now - hour)),
            ]
        );
        for r in &runs {
            assert_eq!(
                (
                    r.task_name.as_str(),
                    r.scheduled_at,
                    r.started_at,
                    r.node_id.as_str(),
                    r.ticks_collapsed,
                    r.error.as_deref()
                ),
                (
                    "locked",
                    now - hour * 2,
                    Some(now - hour * 2),
                    "old-node",
                    4,
                    Some("an error")
                )
            );
            assert_eq!(
                (r.attempt, r.trigger, r.triggered_by.as_deref()),
                (1, Trigger::Schedule, None)
            );
        }

        let (_, rows) = store.load_tasks().await.unwrap();
        let names: Vec<&str> = rows.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["due", "locked", "off"]);
        assert!(rows.iter().all(|r| !r.paused && r.disabled_at.is_none()));
        assert_eq!(rows[0].next_run_at, Some(now - hour));
        assert_eq!(rows[0].last_scheduled_at, Some(now - hour * 2));
        assert!(!rows[2].enabled);
        let states = store.task_states(Some("locked")).await.unwrap();
        let locked = &states[0];
        assert_eq!(locked.lock_owner.as_deref(), Some("old-node"));
        assert_eq!(locked.lock_expires_at, Some(now + hour));
        assert_eq!(
            (
                locked.last_status,
                locked.last_error.as_deref(),
                locked.consecutive_failures
            ),
            (Some(RunStatus::Failed), Some("boom"), 2)
        );
        assert_eq!(
            (
                locked.pause.clone(),
                locked.retry_at,
                locked.manual_at,
                locked.missed_since
            ),
            (None, None, None, None)
        );
        let skips = store.skips("due", now - hour * 9).await.unwrap();
        assert_eq!(skips.len(), 1);
        assert_eq!(
            (
                skips[0].reason,
                skips[0].ticks,
                skips[0].exact,
                skips[0].run_id
            ),
            (SkipReason::Misfire, 3, false, Some(3))
        );
        let nodes = store.nodes().await.unwrap();
        assert_eq!(nodes.len(), 1);
        assert_eq!(
            (nodes[0].pid, nodes[0].tasks.clone(), nodes[0].running),
            (42, vec!["locked".to_owned(), "due".to_owned()], 1)
        );
        let config = store.config_state().await.unwrap().unwrap();
        assert_eq!((config.version, config.digest.as_str()), (Some(7), "d7"));

        // The rebuilt table: its indexes are back, and so is every check.
        let mut indexes: Vec<String> = sqlx::query_scalar(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'scheduler_runs'
                 AND name NOT LIKE 'sqlite_%'",
        )
        .fetch_all(store.pool())
        .await
        .unwrap();
        indexes.sort();
        assert_eq!(
            indexes,
            [
                "scheduler_runs_cancel_requested_idx",
                "scheduler_runs_finished_idx",
                "scheduler_runs_instance_idx",
                "scheduler_runs_running_idx",
                "scheduler_runs_started_idx",
                "scheduler_runs_status_id_idx",
                "scheduler_runs_task_id_idx",
                "scheduler_runs_task_idx",
                "scheduler_runs_trigger_id_idx",
            ]
        );
        let bad = sqlx::query("UPDATE scheduler_runs SET status = 'exploded' WHERE id = 3")
            .execute(store.pool())
            .await;
        assert!(bad.is_err(), "the status check survived the rebuild");
        let integrity: String = sqlx::query("PRAGMA integrity_check")
            .fetch_one(store.pool())
            .await
            .unwrap()
            .get(0);
        assert_eq!(integrity, "ok");

        // The new schema at work: a run that times out, under an id never used before.
        let tasks = vec!["due".to_owned()];
        let out = store
            .claim(ClaimRequest::new("new-node", &tasks, 1), &Once)
            .await
            .unwrap();
        let run = &out.claimed[0];
        assert_eq!(run.run_id, 10, "ids are not reused after the rebuild");
        let finish = RunFinish::new(
            run.run_id,
            LockKey::new("due", run.lock_token),
            Some(run.claimed_at),
            RunEnd::new(RunStatus::TimedOut, Some("too slow".into())),
            FailureCount::Increment,
        );
        assert!(store.finish_runs(&[finish]).await.unwrap()[0].lock_held);
        let record = store.run(run.run_id).await.unwrap().unwrap();
        assert_eq!(record.status, RunStatus::TimedOut);
    }
}
