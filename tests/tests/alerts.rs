//! Alerts that always arrive, and never carry a secret: real nodes on each store post to a real
//! webhook receiver (an HTTP server on 127.0.0.1), and what reaches it, the delivery log and the
//! outbox is judged.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use scheduler::{TaskContext, task};

on_both_backends!(
    threads = 2;
    a_webhook_url_s_secrets_never_reach_the_delivery_log,
);

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

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
