//! A webhook receiver on a free port of 127.0.0.1 that takes everything, for a test that judges
//! the alerts a node sent by what the receiver took, and the wait for them to be sent.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::task::JoinHandle;

use super::{TestDb, wait_until};

/// What a receiver took: each request's JSON body (`null` for a body that is not JSON).
pub type Bodies = Arc<Mutex<Vec<Value>>>;

/// A receiver that answers every request `204 No Content`: its URL (`http://127.0.0.1:N/hook`),
/// what it took, and its server (abort it when done).
pub async fn webhook_receiver() -> (String, Bodies, JoinHandle<()>) {
    let got: Bodies = Arc::default();
    let sink = Arc::clone(&got);
    let app = axum::Router::new().fallback(move |body: String| {
        let sink = Arc::clone(&sink);
        async move {
            sink.lock()
                .unwrap()
                .push(serde_json::from_str(&body).unwrap_or(Value::Null));
            reqwest::StatusCode::NO_CONTENT
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let handle = tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    (url, got, handle)
}

/// Waits until every alert written to the outbox was delivered (none is pending).
pub async fn outbox_delivered(db: &TestDb) {
    wait_until(Duration::from_secs(60), "the outbox delivered", || async {
        db.outbox()
            .await
            .iter()
            .all(|(_, state)| state != "pending")
    })
    .await;
}
