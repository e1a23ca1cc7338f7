//! The PostgreSQL store's smaller duties: node heartbeats and silent nodes, run-history pruning,
//! and concurrent migrations.

use crate::common;

use std::time::Duration;

use common::*;
use scheduler::store::{ClaimStore, HistoryStore, NodeStore, PgStore, Store};
use scheduler::testing::store::{LockKey, NodeInfo};
use scheduler_tests::TestSchema;

scheduler_tests::postgres_tests! {
    #[tokio::test]
    heartbeat_reports_silent_nodes_and_a_missing_row,
    old_runs_are_pruned_after_the_retention,
    renewal_extends_only_locks_still_held;
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    concurrent_migrations_apply_once,
}

fn node_info(id: &str) -> NodeInfo {
    NodeInfo::new(id, "host", 1, "test", vec!["a".into()])
}

async fn heartbeat_reports_silent_nodes_and_a_missing_row() {
    let db = migrated_schema("heartbeat").await;
    let s = store(&db);
    let beat = s.heartbeat("me", Duration::from_secs(30)).await.unwrap();
    assert!(!beat.registered, "no row yet");
    s.register_node(&node_info("me")).await.unwrap();
    s.register_node(&node_info("crashed")).await.unwrap();
    s.register_node(&node_info("stopped")).await.unwrap();
    s.deregister_node("stopped").await.unwrap();
    sqlx::query("UPDATE scheduler_nodes SET heartbeat_at = now() - interval '5 minutes' WHERE node_id <> 'me'")
        .execute(&db.pool)
        .await
        .unwrap();
    let beat = s.heartbeat("me", Duration::from_secs(30)).await.unwrap();
    assert!(beat.registered);
    assert_eq!(
        beat.silent,
        ["crashed"],
        "a cleanly stopped node is not silent"
    );
    db.cleanup().await;
}

async fn old_runs_are_pruned_after_the_retention() {
    let db = migrated_schema("prune").await;
    let s = store(&db);
    sqlx::query(
        "INSERT INTO scheduler_runs (task_name, scheduled_at, started_at, finished_at, status, node_id, lock_token)
         SELECT 't', now() - d, now() - d, now() - d, 'succeeded', 'n', gen_random_uuid()
         FROM (VALUES (interval '20 days'), (interval '15 days'), (interval '1 day')) AS v(d)",
    )
    .execute(&db.pool)
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO scheduler_runs (task_name, scheduled_at, started_at, status, node_id, lock_token)
         VALUES ('t', now() - interval '30 days', now() - interval '30 days', 'running', 'n', gen_random_uuid())",
    )
    .execute(&db.pool)
    .await
    .unwrap();
    let pruned = s
        .prune_history(Duration::from_secs(14 * 24 * 3600), 1)
        .await
        .unwrap();
    assert_eq!(pruned, 2);
    let left = s.recent_runs(Some("t"), 10).await.unwrap();
    assert_eq!(left.len(), 2, "the recent run and the unfinished one stay");
    db.cleanup().await;
}

/// Several nodes starting at once apply each migration exactly once.
async fn concurrent_migrations_apply_once() {
    let db = TestSchema::new("migrate").await;
    let mut nodes = tokio::task::JoinSet::new();
    for _ in 0..4 {
        let s: PgStore = store(&db);
        nodes.spawn(async move { s.migrate().await });
    }
    while let Some(result) = nodes.join_next().await {
        result.unwrap().unwrap();
    }
    let applied: i64 = sqlx::query_scalar("SELECT count(*) FROM scheduler_migrations")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    let files = std::fs::read_dir(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../migrations/postgres"
    ))
    .unwrap()
    .filter(|e| e.as_ref().unwrap().path().extension() == Some("sql".as_ref()))
    .count();
    assert_eq!(
        applied,
        i64::try_from(files).unwrap(),
        "one row per migration file"
    );
    db.cleanup().await;
}

/// Lock renewal is one write for all of a node's locks, fenced by owner and token.
async fn renewal_extends_only_locks_still_held() {
    let db = migrated_schema("renew_locks").await;
    let s = store(&db);
    sqlx::query(
        "INSERT INTO scheduler_tasks (name, cron, timezone, enabled, lock_owner, lock_token, lock_expires_at)
         VALUES ('mine', '* * * * *', 'UTC', true, 'me', '00000000-0000-0000-0000-000000000001', now()),
                ('stolen', '* * * * *', 'UTC', true, 'thief', '00000000-0000-0000-0000-000000000002', now()),
                ('retokened', '* * * * *', 'UTC', true, 'me', '00000000-0000-0000-0000-000000000009', now())",
    )
    .execute(&db.pool)
    .await
    .unwrap();
    let token = |n: u128| uuid::Uuid::from_u128(n);
    let minute = Duration::from_secs(60);
    let held = vec![
        (LockKey::new("mine", token(1)), minute),
        (LockKey::new("stolen", token(2)), minute),
        (LockKey::new("retokened", token(3)), minute),
    ];
    let renewed = s.renew_locks("me", &held).await.unwrap();
    assert_eq!(renewed.renewed, [LockKey::new("mine", token(1))]);
    assert!(renewed.busy.is_empty(), "a lock taken over is not busy");
    let extended: Vec<String> = sqlx::query_scalar(
        "SELECT name FROM scheduler_tasks WHERE lock_expires_at > now() + interval '50 seconds'",
    )
    .fetch_all(&db.pool)
    .await
    .unwrap();
    assert_eq!(extended, ["mine"]);
    db.cleanup().await;
}
