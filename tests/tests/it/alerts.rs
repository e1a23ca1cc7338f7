//! Alerts that always arrive, and never carry a secret: real nodes on each store post to a real
//! webhook receiver (an HTTP server on 127.0.0.1), and what reaches it, the delivery log and the
//! outbox is judged.

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use scheduler::{TaskContext, task};

on_both_backends!(
    threads = 2;
    a_webhook_url_s_secrets_never_reach_the_delivery_log,
    a_document_whose_only_news_is_a_refused_entry_reaches_the_webhook,
    a_task_removed_from_the_config_reaches_the_webhook_once,
    a_hanging_endpoint_keeps_the_outbox_bounded_and_is_sent_to_concurrently,
);

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// The bodies a receiver got, parsed.
#[derive(Default)]
struct Received {
    bodies: Mutex<Vec<serde_json::Value>>,
}

impl Received {
    /// The events of type `kind` it got.
    fn of(&self, kind: &str) -> Vec<serde_json::Value> {
        self.bodies
            .lock()
            .unwrap()
            .iter()
            .filter(|b| b["type"] == kind)
            .cloned()
            .collect()
    }
}

/// A webhook receiver on a free port of 127.0.0.1 answering `status` at `/hook`.
async fn receiver(status: u16) -> (String, Arc<Received>, tokio::task::JoinHandle<()>) {
    let got = Arc::new(Received::default());
    let sink = Arc::clone(&got);
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |body: String| {
            let sink = Arc::clone(&sink);
            async move {
                let json = serde_json::from_str(&body).unwrap_or(serde_json::Value::Null);
                sink.bodies.lock().unwrap().push(json);
                axum::http::StatusCode::from_u16(status).unwrap()
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let handle = tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    (url, got, handle)
}

#[task(name = "alerts.fails")]
async fn alerts_fails(ctx: TaskContext) -> Result<(), std::io::Error> {
    let _guard = recorder(&ctx).enter(&ctx);
    Err(std::io::Error::other("the upstream refused"))
}

/// A webhook URL whose path and query are its credential (Slack, Teams, Discord style;
/// `?api_key=`), unreachable: every failed attempt is recorded, and neither the delivery log
/// nor the settings' `Debug` shows the path or the key.
async fn a_webhook_url_s_secrets_never_reach_the_delivery_log(db: &TestDb) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!(
        "http://127.0.0.1:{port}/services/T00000000/B00000000/PathSecretXyz?api_key=QuerySecretAbc"
    );
    let webhook = scheduler::webhook::WebhookSettings::new(&url, SECRET).unwrap();
    let debug = format!("{webhook:?}");
    for secret in ["PathSecretXyz", "QuerySecretAbc"] {
        assert!(!debug.contains(secret), "{debug}");
    }
    let n = start(
        node(db, "a", tasks("alerts.fails"))
            .config_document(doc(vec![entry("alerts.fails", "0 0 1 1 *")]))
            .webhook(webhook)
            .state(Arc::new(Recorder::default()))
            .build()
            .unwrap(),
    );
    trigger_all_now(db, 1).await;
    wait_until(Duration::from_secs(60), "a failed delivery", || async {
        db.api()
            .deliveries(10)
            .await
            .unwrap()
            .iter()
            .any(|d| d.error.is_some())
    })
    .await;
    n.stop().await;
    let log = db.api().deliveries(10).await.unwrap();
    for d in &log {
        let error = d.error.as_deref().unwrap_or("");
        assert!(!error.is_empty(), "{d:?}");
        for secret in ["PathSecretXyz", "QuerySecretAbc", "/services/"] {
            assert!(!error.contains(secret), "{secret} in {error}");
        }
    }
}

#[task(name = "alerts.kept")]
async fn alerts_kept() {}

#[task(name = "alerts.removed")]
async fn alerts_removed() {}

/// A node reading its config from `file` (re-read every 200 ms), posting every alert to `url`.
fn watching_node(db: &TestDb, id: &str, file: &std::path::Path, url: &str) -> RunningNode {
    let webhook = scheduler::webhook::WebhookSettings::new(url, SECRET).unwrap();
    start(
        node(db, id, tasks("alerts."))
            .config(file.to_str().unwrap())
            .config_poll_interval(Duration::from_millis(200))
            .webhook(webhook)
            .state(Arc::new(Recorder::default()))
            .build()
            .unwrap(),
    )
}

fn write_config(file: &std::path::Path, entries: &[(&str, &str)]) {
    let tasks: Vec<serde_json::Value> = entries
        .iter()
        .map(|(name, cron)| serde_json::json!({"name": name, "cron": cron, "enabled": true}))
        .collect();
    let text = serde_json::json!({ "tasks": tasks }).to_string();
    // Write then rename, so the watcher never reads half a document.
    let tmp = file.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, file).unwrap();
}

/// The config gains one entry, for a task no node has: that refusal is the document's only
/// news (no row changes), and `config.refused` still reaches the webhook receiver, once per
/// document (the same document reordered is not new).
async fn a_document_whose_only_news_is_a_refused_entry_reaches_the_webhook(db: &TestDb) {
    let (url, got, server) = receiver(204).await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tasks.json");
    write_config(&file, &[("alerts.kept", "0 0 1 1 *")]);
    let n = watching_node(db, "a", &file, &url);
    wait_until(
        Duration::from_secs(60),
        "the first document applied",
        || async { db.try_task("alerts.kept").await.is_some() },
    )
    .await;
    write_config(
        &file,
        &[("alerts.kept", "0 0 1 1 *"), ("alerts.nobody", "0 0 1 1 *")],
    );
    wait_until(
        Duration::from_secs(60),
        "config.refused delivered",
        || async { !got.of("config.refused").is_empty() },
    )
    .await;
    let refused = got.of("config.refused");
    assert_eq!(refused[0]["data"]["task"], "alerts.nobody", "{refused:?}");
    // The same document again (reordered) raises nothing more; a new document that still
    // holds the refused entry says so again: two in all.
    write_config(
        &file,
        &[("alerts.nobody", "0 0 1 1 *"), ("alerts.kept", "0 0 1 1 *")],
    );
    write_config(
        &file,
        &[("alerts.kept", "0 0 2 1 *"), ("alerts.nobody", "0 0 1 1 *")],
    );
    wait_until(
        Duration::from_secs(60),
        "the last document applied",
        || async { db.task("alerts.kept").await.cron == "0 0 2 1 *" },
    )
    .await;
    outbox_delivered(db).await;
    n.stop().await;
    server.abort();
    let refused = got.of("config.refused");
    assert_eq!(refused.len(), 2, "{refused:?}");
    assert!(refused.iter().all(|r| r["data"]["task"] == "alerts.nobody"));
}

/// A task whose entry leaves the config while its code is still deployed is disabled and
/// reported `task.removed` to the webhook receiver, once however often the config is read.
async fn a_task_removed_from_the_config_reaches_the_webhook_once(db: &TestDb) {
    let (url, got, server) = receiver(204).await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tasks.json");
    write_config(
        &file,
        &[
            ("alerts.kept", "0 0 1 1 *"),
            ("alerts.removed", "0 0 1 1 *"),
        ],
    );
    let n = watching_node(db, "a", &file, &url);
    wait_until(Duration::from_secs(60), "both rows", || async {
        db.try_task("alerts.removed")
            .await
            .is_some_and(|t| t.enabled)
            && db.try_task("alerts.kept").await.is_some()
    })
    .await;
    write_config(&file, &[("alerts.kept", "0 0 1 1 *")]);
    wait_until(
        Duration::from_secs(60),
        "task.removed delivered",
        || async { !got.of("task.removed").is_empty() },
    )
    .await;
    assert!(
        !db.task("alerts.removed").await.enabled,
        "disabled, not deleted"
    );
    // Later documents (and a second node reading them) raise it no more.
    write_config(&file, &[("alerts.kept", "0 0 2 1 *")]);
    let m = watching_node(db, "b", &file, &url);
    wait_until(
        Duration::from_secs(60),
        "the next document applied",
        || async { db.task("alerts.kept").await.cron == "0 0 2 1 *" },
    )
    .await;
    write_config(&file, &[("alerts.kept", "0 0 3 1 *")]);
    wait_until(
        Duration::from_secs(60),
        "the last document applied",
        || async { db.task("alerts.kept").await.cron == "0 0 3 1 *" },
    )
    .await;
    outbox_delivered(db).await;
    n.stop().await;
    m.stop().await;
    server.abort();
    let removed = got.of("task.removed");
    assert_eq!(removed.len(), 1, "{removed:?}");
    assert_eq!(removed[0]["data"]["task"], "alerts.removed");
}

/// An endpoint that accepts connections and never answers: how many it holds open at once, and
/// the most it ever held.
#[derive(Default)]
struct Hanging {
    open: std::sync::atomic::AtomicUsize,
    most: std::sync::atomic::AtomicUsize,
}

async fn hanging_endpoint() -> (String, Arc<Hanging>, tokio::task::JoinHandle<()>) {
    use std::sync::atomic::Ordering;
    use tokio::io::AsyncReadExt;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let state = Arc::new(Hanging::default());
    let counts = Arc::clone(&state);
    let handle = tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                return;
            };
            let counts = Arc::clone(&counts);
            let now = counts.open.fetch_add(1, Ordering::SeqCst) + 1;
            counts.most.fetch_max(now, Ordering::SeqCst);
            tokio::spawn(async move {
                // Read the request and never answer, until the client gives up.
                let mut buf = [0u8; 4096];
                while matches!(stream.read(&mut buf).await, Ok(n) if n > 0) {}
                counts.open.fetch_sub(1, Ordering::SeqCst);
            });
        }
    });
    (url, state, handle)
}

/// Eight alerts at once (eight refused entries) for an endpoint that never answers, with room
/// for three: the five oldest are given up (failed, never sent again), the outbox keeps three
/// pending, and those three are posted at once, not one after another.
async fn a_hanging_endpoint_keeps_the_outbox_bounded_and_is_sent_to_concurrently(db: &TestDb) {
    let (url, hanging, server) = hanging_endpoint().await;
    let mut webhook = scheduler::webhook::WebhookSettings::new(&url, SECRET).unwrap();
    webhook.timeout = Duration::from_secs(30);
    webhook.max_pending = 3;
    let nobody: Vec<scheduler::config::TaskConfig> = (0..8)
        .map(|i| entry(&format!("alerts.nobody{i}"), "0 0 1 1 *"))
        .chain([entry("alerts.kept", "0 0 1 1 *")])
        .collect();
    let n = start(
        node(db, "a", tasks("alerts.kept"))
            .config_document(doc(nobody))
            .webhook(webhook)
            .build()
            .unwrap(),
    );
    wait_until(
        Duration::from_secs(60),
        "three deliveries in flight at once",
        || async { hanging.most.load(std::sync::atomic::Ordering::SeqCst) >= 3 },
    )
    .await;
    let outbox = db.outbox().await;
    n.stop().await;
    server.abort();
    assert_eq!(outbox.len(), 8, "{outbox:?}");
    let given_up = outbox.iter().filter(|(_, s)| s == "failed").count();
    let pending = outbox.iter().filter(|(_, s)| s == "pending").count();
    assert_eq!((given_up, pending), (5, 3), "{outbox:?}");
    assert!(
        outbox[..5].iter().all(|(attempts, _)| *attempts == 0),
        "the oldest were given up unsent: {outbox:?}"
    );
}
