//! Tests of the test support itself: schema isolation and cleanup, and a
//! throwaway cluster surviving stop / start_again / restart.

use std::time::Duration;

use scheduler_tests::{TempCluster, TestSchema, database_url, init_tracing};
use sqlx::postgres::PgPoolOptions;
use sqlx::{Connection, PgConnection, PgPool};

scheduler_tests::postgres_tests! {
    #[tokio::test]
    schemas_are_isolated_and_dropped_on_cleanup,
    dropping_without_cleanup_still_drops_the_schema,
    temp_cluster_applies_extra_settings;
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    temp_cluster_survives_stop_start_and_restart,
}

async fn schema_exists(schema: &str) -> bool {
    let mut conn = PgConnection::connect(&database_url()).await.unwrap();
    let exists: bool =
        sqlx::query_scalar("select exists (select 1 from pg_namespace where nspname = $1)")
            .bind(schema)
            .fetch_one(&mut conn)
            .await
            .unwrap();
    conn.close().await.unwrap();
    exists
}

async fn table_exists(pool: &PgPool, table: &str) -> bool {
    // to_regclass resolves through search_path, like the code under test will.
    sqlx::query_scalar::<_, bool>("select to_regclass($1) is not null")
        .bind(table)
        .fetch_one(pool)
        .await
        .unwrap()
}

async fn schemas_are_isolated_and_dropped_on_cleanup() {
    init_tracing();
    let a = TestSchema::new("iso_a").await;
    let b = TestSchema::new("iso_b").await;
    assert_ne!(a.schema, b.schema);

    let search_path: String = sqlx::query_scalar("show search_path")
        .fetch_one(&a.pool)
        .await
        .unwrap();
    assert_eq!(search_path, a.schema);

    sqlx::query("create table widgets (id int primary key)")
        .execute(&a.pool)
        .await
        .unwrap();
    sqlx::query("insert into widgets values (1)")
        .execute(&a.pool)
        .await
        .unwrap();
    assert!(table_exists(&a.pool, "widgets").await);
    assert!(!table_exists(&b.pool, "widgets").await);
    let qualified = format!("{}.widgets", a.schema);
    assert!(
        table_exists(&b.pool, &qualified).await,
        "created in a's schema"
    );

    // The URL alone lands in the schema too (what a child process gets).
    let via_url = PgPoolOptions::new()
        .max_connections(1)
        .connect(&a.url)
        .await
        .unwrap();
    assert!(table_exists(&via_url, "widgets").await);
    via_url.close().await;

    let (a_name, b_name) = (a.schema.clone(), b.schema.clone());
    a.cleanup().await;
    assert!(!schema_exists(&a_name).await, "cleanup drops the schema");
    assert!(schema_exists(&b_name).await, "other schemas are untouched");
    b.cleanup().await;
    assert!(!schema_exists(&b_name).await);
}

async fn dropping_without_cleanup_still_drops_the_schema() {
    let db = TestSchema::new("dropped").await;
    sqlx::query("create table t (id int)")
        .execute(&db.pool)
        .await
        .unwrap();
    let name = db.schema.clone();
    drop(db);
    assert!(!schema_exists(&name).await);
}

async fn temp_cluster_survives_stop_start_and_restart() {
    init_tracing();
    let cluster = TempCluster::start()
        .await
        .unwrap_or_else(|e| panic!("cannot start a throwaway PostgreSQL cluster: {e}"));
    let url = cluster.url();
    assert!(url.starts_with("postgres://postgres@127.0.0.1:"), "{url}");

    let one = |url: String| async move {
        let mut conn = PgConnection::connect(&url).await?;
        let v: i32 = sqlx::query_scalar("select 1").fetch_one(&mut conn).await?;
        conn.close().await?;
        Ok::<i32, sqlx::Error>(v)
    };
    assert_eq!(one(url.clone()).await.unwrap(), 1);

    // Data written before a stop survives it.
    let mut conn = PgConnection::connect(&url).await.unwrap();
    sqlx::query("create table survivor (v text)")
        .execute(&mut conn)
        .await
        .unwrap();
    sqlx::query("insert into survivor values ('still here')")
        .execute(&mut conn)
        .await
        .unwrap();

    cluster.stop().await.unwrap();
    // The open connection was killed by the fast shutdown...
    assert!(sqlx::query("select 1").execute(&mut conn).await.is_err());
    // ...and new ones are refused.
    let refused = tokio::time::timeout(Duration::from_secs(10), one(url.clone()))
        .await
        .expect("connecting to a stopped server fails fast");
    assert!(refused.is_err(), "query must fail while the server is down");

    cluster.start_again().await.unwrap();
    assert_eq!(cluster.url(), url, "same port after start_again");
    assert_eq!(one(url.clone()).await.unwrap(), 1);

    cluster.restart().await.unwrap();
    let mut conn = PgConnection::connect(&url).await.unwrap();
    let v: String = sqlx::query_scalar("select v from survivor")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(v, "still here");
    conn.close().await.unwrap();

    let data_dir = cluster.data_dir().to_path_buf();
    drop(cluster);
    assert!(!data_dir.exists(), "drop removes the cluster dir");
    assert!(one(url).await.is_err(), "drop stops the server");
}

async fn temp_cluster_applies_extra_settings() {
    let cluster = TempCluster::start_with(&[("work_mem", "7MB"), ("cluster_name", "it's ours")])
        .await
        .unwrap_or_else(|e| panic!("cannot start a throwaway PostgreSQL cluster: {e}"));
    let mut conn = PgConnection::connect(&cluster.url()).await.unwrap();
    for (setting, expected) in [
        ("fsync", "off"),
        ("work_mem", "7MB"),
        ("cluster_name", "it's ours"),
    ] {
        let value: String = sqlx::query_scalar("select current_setting($1)")
            .bind(setting)
            .fetch_one(&mut conn)
            .await
            .unwrap();
        assert_eq!(value, expected, "{setting}");
    }
    conn.close().await.unwrap();
}
