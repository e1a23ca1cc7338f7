//! Config hot reload on running nodes: a file rewritten on disk, an HTTP source served by a real
//! local server, and two nodes seeing different document versions during a rollout. Every
//! behaviour runs on a fresh PostgreSQL schema and a fresh SQLite file (`on_postgres::...` and
//! `on_sqlite::...`).

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use common::*;
use scheduler::{TaskContext, task};

on_both_backends!(
    threads = 2;
    file_rewritten_on_disk_applies_live,
    http_source_applies_live_and_survives_server_errors,
    two_nodes_with_different_versions_do_not_flip_flop,
);

#[task(name = "reload.file")]
async fn reload_file(ctx: TaskContext) {
    let _guard = recorder(&ctx).enter(&ctx);
}

#[task(name = "reload.http")]
async fn reload_http(ctx: TaskContext) {
    let _guard = recorder(&ctx).enter(&ctx);
}

#[task(name = "reload.versions")]
async fn reload_versions(ctx: TaskContext) {
    let _guard = recorder(&ctx).enter(&ctx);
}

fn tmp_dir() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("scheduler-reload-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Replaces `path` atomically (write a temp file, rename), as config agents do.
fn replace(path: &std::path::Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

async fn task_row(db: &TestDb, name: &str) -> Option<(String, bool)> {
    db.try_task(name).await.map(|t| (t.cron, t.enabled))
}

/// A config file rewritten while the node runs: enabling, a garbage rewrite (ignored, last good
/// state kept), a typo'd field (refused whole), then disabling.
async fn file_rewritten_on_disk_applies_live(db: &TestDb) {
    let dir = tmp_dir();
    let path = dir.join("tasks.json");
    let entry = |enabled: bool, cron: &str| {
        format!(r#"{{"tasks":[{{"name":"reload.file","enabled":{enabled},"cron":"{cron}"}}]}}"#)
    };
    replace(&path, &entry(false, "* * * * * *"));
    let rec = Arc::new(Recorder::default());
    let n = start(
        node(db, "a", tasks("reload.file"))
            .config(path.to_str().unwrap())
            .config_poll_interval(Duration::from_millis(200))
            .state(Arc::clone(&rec))
            .build()
            .unwrap(),
    );
    wait_until(Duration::from_secs(20), "the disabled row", || async {
        task_row(db, "reload.file").await == Some(("* * * * * *".into(), false))
    })
    .await;
    assert_eq!(rec.starts_of("reload.file"), 0);

    replace(&path, &entry(true, "* * * * * *"));
    wait_until(Duration::from_secs(20), "runs after enabling", || async {
        rec.starts_of("reload.file") >= 2
    })
    .await;

    // Garbage and a typo'd field change nothing: the task keeps running.
    std::fs::write(&path, "{\"tasks\": [ this is not json").unwrap();
    tokio::time::sleep(Duration::from_millis(600)).await;
    replace(
        &path,
        r#"{"tasks":[{"name":"reload.file","enable":false,"cron":"* * * * * *"}]}"#,
    );
    let before = rec.starts_of("reload.file");
    wait_until(
        Duration::from_secs(20),
        "runs continue on the last good config",
        || async { rec.starts_of("reload.file") >= before + 2 },
    )
    .await;
    assert_eq!(
        task_row(db, "reload.file").await,
        Some(("* * * * * *".into(), true))
    );

    replace(&path, &entry(false, "* * * * * *"));
    wait_until(Duration::from_secs(20), "disabled again", || async {
        task_row(db, "reload.file").await == Some(("* * * * * *".into(), false))
    })
    .await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let stopped_at = rec.starts_of("reload.file");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        rec.starts_of("reload.file"),
        stopped_at,
        "no runs after disabling"
    );
    n.stop().await;
    assert_eq!(rec.max_overlap.load(std::sync::atomic::Ordering::SeqCst), 1);
    let _ = std::fs::remove_dir_all(dir);
}

/// What the local config server answers.
#[derive(Clone)]
struct Served {
    status: StatusCode,
    body: String,
    etag: String,
}

/// An HTTP config source on a real local server: conditional requests answered 304, a 500 and
/// a garbage body leave the running schedule alone, a new document applies.
async fn http_source_applies_live_and_survives_server_errors(db: &TestDb) {
    let doc = |cron: &str| {
        format!(r#"{{"tasks":[{{"name":"reload.http","enabled":true,"cron":"{cron}"}}]}}"#)
    };
    let served = Arc::new(Mutex::new(Served {
        status: StatusCode::OK,
        body: doc("0 0 1 1 *"),
        etag: "\"v1\"".into(),
    }));
    let conditional_hits = Arc::new(Mutex::new(0usize));
    let app = {
        let served = Arc::clone(&served);
        let hits = Arc::clone(&conditional_hits);
        axum::Router::new().route(
            "/tasks.json",
            get(move |headers: HeaderMap| {
                let served = served.lock().unwrap().clone();
                let hits = Arc::clone(&hits);
                async move {
                    if headers
                        .get(header::AUTHORIZATION)
                        .and_then(|v| v.to_str().ok())
                        != Some("Bearer s3cret")
                    {
                        return StatusCode::UNAUTHORIZED.into_response();
                    }
                    if served.status == StatusCode::OK
                        && headers
                            .get(header::IF_NONE_MATCH)
                            .and_then(|v| v.to_str().ok())
                            == Some(served.etag.as_str())
                    {
                        *hits.lock().unwrap() += 1;
                        return StatusCode::NOT_MODIFIED.into_response();
                    }
                    Response::builder()
                        .status(served.status)
                        .header(header::ETAG, served.etag)
                        .header(header::CONTENT_TYPE, "application/json")
                        .body(axum::body::Body::from(served.body))
                        .unwrap()
                }
            }),
        )
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/tasks.json", listener.local_addr().unwrap());
    let server = tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let mut settings = scheduler::config::ConfigSettings::new(url);
    settings.token = Some("s3cret".into());
    let rec = Arc::new(Recorder::default());
    let n = start(
        node(db, "a", tasks("reload.http"))
            .config_settings(settings)
            .config_poll_interval(Duration::from_millis(200))
            .state(Arc::clone(&rec))
            .build()
            .unwrap(),
    );
    wait_until(Duration::from_secs(20), "the first document", || async {
        task_row(db, "reload.http").await == Some(("0 0 1 1 *".into(), true))
    })
    .await;
    wait_until(
        Duration::from_secs(20),
        "conditional requests answered 304",
        || async { *conditional_hits.lock().unwrap() >= 2 },
    )
    .await;

    *served.lock().unwrap() = Served {
        status: StatusCode::OK,
        body: doc("* * * * * *"),
        etag: "\"v2\"".into(),
    };
    wait_until(
        Duration::from_secs(20),
        "runs on the new schedule",
        || async { rec.starts_of("reload.http") >= 2 },
    )
    .await;

    for bad in [
        Served {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            body: "oops".into(),
            etag: "\"e\"".into(),
        },
        Served {
            status: StatusCode::OK,
            body: "<html>login</html>".into(),
            etag: "\"g\"".into(),
        },
    ] {
        *served.lock().unwrap() = bad;
        let before = rec.starts_of("reload.http");
        wait_until(
            Duration::from_secs(20),
            "runs continue on the last good config",
            || async { rec.starts_of("reload.http") >= before + 2 },
        )
        .await;
        assert_eq!(
            task_row(db, "reload.http").await,
            Some(("* * * * * *".into(), true))
        );
    }
    n.stop().await;
    server.abort();
}

/// During a rollout two nodes read different config files: the node with the newer version wins
/// and the lagging node never rolls the database back, however often it polls.
async fn two_nodes_with_different_versions_do_not_flip_flop(db: &TestDb) {
    let dir = tmp_dir();
    let v = |version: i64, cron: &str| {
        format!(
            r#"{{"version":{version},"tasks":[{{"name":"reload.versions","enabled":true,"cron":"{cron}"}}]}}"#
        )
    };
    let old = dir.join("old.json");
    let new = dir.join("new.json");
    replace(&old, &v(1, "0 0 1 1 *"));
    replace(&new, &v(2, "0 0 2 1 *"));
    let rec = Arc::new(Recorder::default());
    let build = |id: &str, path: &std::path::Path| {
        node(db, id, tasks("reload.versions"))
            .config(path.to_str().unwrap())
            .config_poll_interval(Duration::from_millis(100))
            .state(Arc::clone(&rec))
            .build()
            .unwrap()
    };
    let a = start(build("old", &old));
    wait_until(Duration::from_secs(20), "version 1 applied", || async {
        task_row(db, "reload.versions").await.map(|r| r.0) == Some("0 0 1 1 *".into())
    })
    .await;
    let b = start(build("new", &new));
    wait_until(Duration::from_secs(20), "version 2 applied", || async {
        task_row(db, "reload.versions").await.map(|r| r.0) == Some("0 0 2 1 *".into())
    })
    .await;
    // The old node rewrites its (unchanged) file and polls many times meanwhile.
    for _ in 0..5 {
        replace(&old, &v(1, "0 0 1 1 *"));
        tokio::time::sleep(Duration::from_millis(250)).await;
        assert_eq!(
            task_row(db, "reload.versions").await.map(|r| r.0),
            Some("0 0 2 1 *".into()),
            "the lagging node rolled the schedule back"
        );
    }
    // Its own document changing to an older version than applied is refused too.
    replace(&old, &v(1, "0 0 3 1 *"));
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(
        task_row(db, "reload.versions").await.map(|r| r.0),
        Some("0 0 2 1 *".into())
    );
    let applied = db
        .api()
        .config_state()
        .await
        .unwrap()
        .and_then(|c| c.version);
    assert_eq!(applied, Some(2));
    a.stop().await;
    b.stop().await;
    let _ = std::fs::remove_dir_all(dir);
}
