//! The webhook outbox's cost per event: one task every second, each run raising one
//! `run.succeeded` event posted to a webhook (a real HTTP server on 127.0.0.1, answering 200),
//! against the same node with no webhook. The difference in store calls (both backends) and in
//! server-counted statements (PostgreSQL, `pg_stat_statements`), divided by the events
//! delivered, is the outbox's cost per event; "tick -> delivered" is when the receiver got the
//! event, after the scheduled tick.
//!
//! `scripts/bench outbox_cost` (`BENCH_BACKENDS`; `OUTBOX_TICKS`, default 30).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::Utc;
use scheduler::Scheduler;
use scheduler::webhook::WebhookSettings;
use scheduler_bench::engine_support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// When each webhook request arrived.
#[derive(Default)]
struct Received(Mutex<Vec<chrono::DateTime<Utc>>>);

/// A minimal HTTP/1.1 server: reads each request (headers, then `content-length` bytes), records
/// its arrival and answers `200 OK`; keeps connections alive.
async fn receiver(received: Arc<Received>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            let received = Arc::clone(&received);
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 8192];
                loop {
                    let head_end = loop {
                        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                            break i + 4;
                        }
                        match sock.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    };
                    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
                    let len: usize = head
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:"))
                        .and_then(|v| v.trim().parse().ok())
                        .unwrap_or(0);
                    while buf.len() < head_end + len {
                        match sock.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                    received.0.lock().unwrap().push(Utc::now());
                    buf.drain(..head_end + len);
                    let reply = b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n";
                    if sock.write_all(reply).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    format!("http://{addr}/hook")
}

struct Outcome {
    calls: f64,
    statements: Option<f64>,
    delivered: usize,
    delays: Vec<f64>,
}

async fn measure(backend: Backend, webhook: bool, ticks: usize) -> Outcome {
    let name = format!("bench_outbox_{}", if webhook { "on" } else { "off" });
    let store = fresh_store(backend, &name).await;
    let registry = synthetic_registry("outbox.", 1);
    let doc = config_for(&registry, "* * * * * *");
    let lags = Arc::new(Lags::default());
    let received = Arc::new(Received::default());
    let mut builder = Scheduler::builder()
        .store(Arc::clone(&store.counted))
        .node_id("bench")
        .registry(registry)
        .config_document(doc)
        .state(Arc::clone(&lags));
    if webhook {
        let url = receiver(Arc::clone(&received)).await;
        let settings = WebhookSettings::new(&url, "bench-webhook-secret-0123456789")
            .unwrap()
            .events(["run.succeeded"])
            .unwrap();
        builder = builder.webhook(settings);
    }
    let scheduler = builder.build().unwrap();
    let stop = CancellationToken::new();
    let s = stop.clone();
    let node = tokio::spawn(async move { scheduler.run_until(s.cancelled_owned()).await });
    let wait_runs = async |n: usize| {
        while lags.0.lock().unwrap().len() < n {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    let pg_counter = match &store.pg {
        Some(pool) => PgStatements::find(pool).await,
        None => None,
    };
    wait_runs(1).await;
    // Let the first run's event go out, then count from zero for `ticks` runs.
    tokio::time::sleep(Duration::from_millis(500)).await;
    store.calls.reset();
    let before = received.0.lock().unwrap().len();
    if let Some(c) = &pg_counter {
        c.reset().await;
    }
    let first_counted = lags.0.lock().unwrap().len();
    wait_runs(first_counted + ticks).await;
    // The last run's event: give it the same half second.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let calls = store.calls.total() as f64;
    let statements = match &pg_counter {
        Some(c) => Some(c.count().await as f64),
        None => None,
    };
    let delivered = received.0.lock().unwrap().len() - before;
    stop.cancel();
    node.await.unwrap().unwrap();
    // Delay of each delivery after its run's tick: receipts are in tick order, one per run.
    let runs = store.raw.recent_runs(None, 1000).await.unwrap();
    let mut ticks_sorted: Vec<_> = runs.iter().map(|r| r.scheduled_at).collect();
    ticks_sorted.sort();
    let receipts = received.0.lock().unwrap().clone();
    let delays = receipts
        .iter()
        .zip(&ticks_sorted)
        .map(|(got, tick)| (*got - *tick).num_microseconds().unwrap() as f64 / 1000.0)
        .collect();
    if let Some(pool) = store.pg {
        pool.close().await;
    }
    Outcome {
        calls: calls / ticks as f64,
        statements: statements.map(|s| s / ticks as f64),
        delivered,
        delays,
    }
}

#[tokio::main]
async fn main() {
    let ticks: usize = std::env::var("OUTBOX_TICKS")
        .ok()
        .and_then(|t| t.parse().ok())
        .unwrap_or(30);
    println!(
        "| store | runs | events delivered | store calls per run, no webhook | with webhook | store calls per event | PostgreSQL statements per run, no webhook | with webhook | statements per event | tick -> delivered p50 ms | p99 ms | load (1/5/15 min) |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
    for backend in backends() {
        let off = measure(backend, false, ticks).await;
        let mut on = measure(backend, true, ticks).await;
        let per_event = |a: f64, b: f64| (b - a) * ticks as f64 / on.delivered.max(1) as f64;
        let fmt = |v: Option<f64>| v.map_or("n/a".to_owned(), |v| format!("{v:.1}"));
        let stmt_per_event = match (off.statements, on.statements) {
            (Some(a), Some(b)) => Some(per_event(a, b)),
            _ => None,
        };
        let (p50, p99) = p50_p99(&mut on.delays);
        println!(
            "| {} | {ticks} | {} | {:.1} | {:.1} | {:.1} | {} | {} | {} | {p50:.1} | {p99:.1} | {} |",
            backend.name(),
            on.delivered,
            off.calls,
            on.calls,
            per_event(off.calls, on.calls),
            fmt(off.statements),
            fmt(on.statements),
            fmt(stmt_per_event),
            load_average(),
        );
    }
}
