//! Migrations numbered alike on both backends (`scheduler::store`'s one list): a database
//! migrated before the alignment, built here the way the binaries of then built it (from the
//! files on disk, under the numbers and descriptions they recorded), is recognised and goes on
//! migrating to the same schema, with the same record, as a new database; carried over once,
//! however many migrators run at once.

use crate::common;

use common::*;
use scheduler::store::{NodeStore, SqliteStore, Store};
use scheduler_tests::TestSchema;
use sqlx::{Connection, Row};

scheduler_tests::postgres_tests! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    a_postgres_schema_migrated_before_the_alignment_goes_on_migrating,
}

/// The one list, as every database records it from now on.
const ALIGNED: [(i64, &str); 27] = [
    (1, "init"),
    (2, "guarantees"),
    (3, "policies"),
    (4, "operations"),
    (5, "run query indexes"),
    (6, "hot renewals"),
    (7, "drop an unread run index"),
    (8, "cancel requests"),
    (9, "run start unknown"),
    (10, "fencing tokens"),
    (11, "incidents"),
    (12, "backfills"),
    (13, "calendars"),
    (14, "outbox channels"),
    (15, "shards"),
    (16, "broadcast"),
    (17, "node services"),
    (18, "node database server"),
    (19, "instances"),
    (20, "run args override"),
    (21, "instance sources"),
    (22, "jitter"),
    (23, "limits"),
    (24, "instance tags"),
    (25, "instance sla calendar"),
    (26, "backfill rows"),
    (27, "prior run"),
];

/// The last step of before the alignment; the steps after it have files numbered alike on both
/// backends.
const LAST_BEFORE_ALIGNMENT: usize = 18;

/// What SQLite databases recorded before the alignment: step N ran the Nth file of
/// `migrations/sqlite/`, recorded as version N under this description.
const SQLITE_BEFORE: [(i64, &str); 14] = [
    (1, "init"),
    (2, "policies and operations"),
    (3, "run query indexes"),
    (4, "cancel requests"),
    (5, "run start unknown"),
    (6, "fencing tokens"),
    (7, "incidents"),
    (8, "backfills"),
    (9, "calendars"),
    (10, "outbox channels"),
    (11, "shards"),
    (12, "broadcast"),
    (13, "node services"),
    (14, "node database server"),
];

/// Where each older SQLite version lands in the list.
const SQLITE_TO_ALIGNED: [i64; 14] = [1, 3, 5, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18];

/// The migration files of `backend`, in the order of their names.
fn files(backend: &str) -> Vec<String> {
    let dir = format!("{}/../migrations/{backend}", env!("CARGO_MANIFEST_DIR"));
    let mut paths: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension() == Some("sql".as_ref()))
        .collect();
    paths.sort();
    paths
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect()
}

async fn sqlite_record(store: &SqliteStore) -> Vec<(i64, String, i64)> {
    sqlx::query(
        "SELECT version, description, applied_at FROM scheduler_migrations ORDER BY version",
    )
    .fetch_all(store.pool())
    .await
    .unwrap()
    .iter()
    .map(|r| (r.get(0), r.get(1), r.get(2)))
    .collect()
}

async fn sqlite_schema(store: &SqliteStore) -> Vec<(String, String, Option<String>)> {
    sqlx::query(
        "SELECT type, name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'
         ORDER BY type, name",
    )
    .fetch_all(store.pool())
    .await
    .unwrap()
    .iter()
    .map(|r| (r.get(0), r.get(1), r.get(2)))
    .collect()
}

/// A SQLite file migrated by a binary of before the alignment, up to its step `upto` (each
/// step's `applied_at` is `1000 + step`), then opened by this one: it is carried over once (two
/// migrations at once, then a third), the steps it lacks are applied, and it ends with the
/// record and the schema of a new database. Run for a database fully migrated then (14) and
/// for one a few steps behind (8).
#[tokio::test]
async fn a_sqlite_database_numbered_before_the_alignment_is_carried_over_once() {
    scheduler_tests::init_tracing();
    let dir = tempfile::tempdir().unwrap();
    let fresh = SqliteStore::builder(dir.path().join("fresh.db"))
        .connect()
        .unwrap();
    fresh.migrate().await.unwrap();
    let fresh_record = sqlite_record(&fresh).await;
    let described: Vec<(i64, &str)> = fresh_record
        .iter()
        .map(|(v, d, _)| (*v, d.as_str()))
        .collect();
    assert_eq!(described, ALIGNED, "a new database records the list");
    let fresh_schema = sqlite_schema(&fresh).await;

    let files = files("sqlite");
    assert_eq!(
        files.len(),
        SQLITE_BEFORE.len() + ALIGNED.len() - LAST_BEFORE_ALIGNMENT,
        "SQLite's files are those of then and one per step since"
    );
    for upto in [14, 8] {
        let path = dir.path().join(format!("before-{upto}.db"));
        {
            let options = sqlx::sqlite::SqliteConnectOptions::new()
                .filename(&path)
                .create_if_missing(true);
            let mut conn = sqlx::SqliteConnection::connect_with(&options)
                .await
                .unwrap();
            // The record's table as those binaries made it (its statement has not changed).
            sqlx::raw_sql(include_str!(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../scheduler/src/store/sqlite/queries/migrate_table.sql"
            )))
            .execute(&mut conn)
            .await
            .unwrap();
            for (&(version, description), sql) in SQLITE_BEFORE.iter().zip(&files).take(upto) {
                let mut tx = conn.begin().await.unwrap();
                sqlx::raw_sql(sqlx::AssertSqlSafe(sql.clone()))
                    .execute(&mut *tx)
                    .await
                    .unwrap();
                sqlx::query(
                    "INSERT INTO scheduler_migrations (version, description, applied_at)
                     VALUES (?1, ?2, ?3)",
                )
                .bind(version)
                .bind(description)
                .bind(1000 + version)
                .execute(&mut *tx)
                .await
                .unwrap();
                tx.commit().await.unwrap();
            }
            conn.close().await.unwrap();
        }

        let store = SqliteStore::builder(&path).connect().unwrap();
        let (a, b) = tokio::join!(store.migrate(), store.migrate());
        a.unwrap();
        b.unwrap();
        let record = sqlite_record(&store).await;
        let described: Vec<(i64, &str)> = record.iter().map(|(v, d, _)| (*v, d.as_str())).collect();
        assert_eq!(described, ALIGNED, "{upto}: the record is the list's");
        for (old, &to) in SQLITE_TO_ALIGNED.iter().enumerate().take(upto) {
            let kept = record.iter().find(|r| r.0 == to).unwrap().2;
            assert_eq!(
                kept,
                1000 + old as i64 + 1,
                "{upto}: step {to} keeps when it ran"
            );
        }
        let carried: Vec<i64> = SQLITE_TO_ALIGNED[..upto].to_vec();
        for (version, _, at) in &record {
            if !carried.contains(version) {
                assert!(*at > 1_000_000, "{upto}: step {version} recorded now");
            }
        }
        assert_eq!(
            sqlite_schema(&store).await,
            fresh_schema,
            "{upto}: a new database's schema"
        );

        // Carried over once: a later start changes nothing, and the schema works.
        store.migrate().await.unwrap();
        assert_eq!(sqlite_record(&store).await, record);
        assert!(store.nodes().await.unwrap().is_empty());
        store.pool().close().await;
    }
}

async fn pg_record(db: &TestSchema) -> Vec<(i64, String, chrono::DateTime<chrono::Utc>)> {
    sqlx::query_as(
        "SELECT version, description, applied_at FROM scheduler_migrations ORDER BY version",
    )
    .fetch_all(&db.pool)
    .await
    .unwrap()
}

/// The columns and indexes of `db`'s schema, its name left out.
async fn pg_schema(db: &TestSchema) -> Vec<String> {
    let columns: Vec<(String, String, String, String, Option<String>)> = sqlx::query_as(
        "SELECT table_name::text, column_name::text, data_type::text, is_nullable::text,
                column_default::text
         FROM information_schema.columns WHERE table_schema = $1
         ORDER BY table_name, column_name",
    )
    .bind(&db.schema)
    .fetch_all(&db.pool)
    .await
    .unwrap();
    let indexes: Vec<(String, String)> = sqlx::query_as(
        "SELECT indexname::text, indexdef FROM pg_indexes WHERE schemaname = $1 ORDER BY indexname",
    )
    .bind(&db.schema)
    .fetch_all(&db.pool)
    .await
    .unwrap();
    columns
        .iter()
        .map(|c| format!("{c:?}"))
        .chain(indexes.iter().map(|i| format!("{i:?}")))
        .map(|s| s.replace(&db.schema, "<schema>"))
        .collect()
}

/// PostgreSQL's numbering was the list's already: a schema migrated to step 12 by a binary of
/// before the alignment (each step recorded at a known time) is left as recorded, and four
/// nodes starting at once bring it to the last step, each step once, with a new schema's record and
/// columns and indexes.
async fn a_postgres_schema_migrated_before_the_alignment_goes_on_migrating() {
    let fresh = migrated_schema("aligned_fresh").await;
    let fresh_record: Vec<(i64, String)> = pg_record(&fresh)
        .await
        .into_iter()
        .map(|(v, d, _)| (v, d))
        .collect();
    let expected: Vec<(i64, String)> = ALIGNED.iter().map(|&(v, d)| (v, d.to_owned())).collect();
    assert_eq!(fresh_record, expected, "a new schema records the list");

    let db = TestSchema::new("aligned_before").await;
    let files = files("postgres");
    assert_eq!(files.len(), ALIGNED.len());
    // The record's table as those binaries made it (its statement has not changed).
    sqlx::raw_sql(include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../scheduler/src/store/postgres/queries/migrate_table.sql"
    )))
    .execute(&db.pool)
    .await
    .unwrap();
    let then = |version: i64| chrono::DateTime::from_timestamp(1_700_000_000 + version, 0).unwrap();
    for (&(version, description), sql) in ALIGNED.iter().zip(&files).take(12) {
        let mut tx = db.pool.begin().await.unwrap();
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql.clone()))
            .execute(&mut *tx)
            .await
            .unwrap();
        sqlx::query(
            "INSERT INTO scheduler_migrations (version, description, applied_at) VALUES ($1, $2, $3)",
        )
        .bind(version)
        .bind(description)
        .bind(then(version))
        .execute(&mut *tx)
        .await
        .unwrap();
        tx.commit().await.unwrap();
    }

    let mut nodes = tokio::task::JoinSet::new();
    for _ in 0..4 {
        let s = store(&db);
        nodes.spawn(async move { s.migrate().await });
    }
    while let Some(result) = nodes.join_next().await {
        result.unwrap().unwrap();
    }
    let record = pg_record(&db).await;
    let described: Vec<(i64, String)> = record.iter().map(|(v, d, _)| (*v, d.clone())).collect();
    assert_eq!(
        described, expected,
        "the record is the list's, each step once"
    );
    for (version, _, at) in &record[..12] {
        assert_eq!(*at, then(*version), "step {version} is left as recorded");
    }
    assert_eq!(pg_schema(&db).await, pg_schema(&fresh).await);
    fresh.cleanup().await;
    db.cleanup().await;
}
