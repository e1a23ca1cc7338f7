//! Making 10,000 instances of one task through the admin API over real HTTP (issue 39: within
//! 10 s): one node with its admin server on 127.0.0.1:0, on PostgreSQL (a fresh schema of
//! DATABASE_URL, the store's default pool), its two tasks yearly and so are the instances
//! (nothing runs meanwhile: the making alone is timed). First (a) one `PUT
//! /api/tasks/{task}/instances/{key}` per instance, `INSTANCES_API_AT_ONCE` (16) in flight at
//! once, of the first task; then (b) `PUT /api/tasks/{task}/instances` with lists of
//! `INSTANCES_API_BATCH` (500), one after the other, of the second task (the first's rows are
//! in the table by then). `INSTANCES_API_COUNT` (10,000) instances each. Each answer is checked
//! (200, every instance written) and the instances counted in the store afterwards. Prints the
//! seconds, the rate and the latency of one request, with the load average before and after
//! (the machine is shared).
//!
//! `scripts/bench instances_api`, or
//! `scripts/pg-throwaway run -c fsync=on -c synchronous_commit=on -- target/release/instances_api`
//! (a durable cluster: every commit waits for its flush, as in production).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use scheduler::Scheduler;
use scheduler_bench::engine_support::*;
use tokio_util::sync::CancellationToken;

const SCHEMA: &str = "bench_instances_api";
const TOKEN: &str = "bench-instances-api-token-0123456789";
const YEARLY: &str = "0 0 0 1 1 *";

fn instance_body(i: usize) -> String {
    format!(r#"{{"cron": "{YEARLY}", "args": {{"tenant": {i}}}}}"#)
}

fn batch_body(keys: std::ops::Range<usize>) -> String {
    let items: Vec<String> = keys
        .map(|i| format!(r#"{{"key": "k{i:05}", "cron": "{YEARLY}", "args": {{"tenant": {i}}}}}"#))
        .collect();
    format!("[{}]", items.join(","))
}

async fn put(client: &reqwest::Client, url: &str, body: String) -> String {
    let r = client
        .put(url)
        .bearer_auth(TOKEN)
        .header("content-type", "application/json")
        .header("X-Scheduler-Actor", "bench")
        .body(body)
        .send()
        .await
        .unwrap();
    let status = r.status();
    let text = r.text().await.unwrap();
    assert!(status.is_success(), "PUT {url}: {status} {text}");
    text
}

/// `n` single PUTs of `task`'s instances, `at_once` in flight: the seconds, and each one's ms.
async fn singles(
    client: &reqwest::Client,
    base: &str,
    task: &str,
    n: usize,
    at_once: usize,
) -> (f64, Vec<f64>) {
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let workers: Vec<_> = (0..at_once)
        .map(|_| {
            let (client, next) = (client.clone(), Arc::clone(&next));
            let prefix = format!("{base}/api/tasks/{task}/instances");
            tokio::spawn(async move {
                let mut ms = Vec::new();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= n {
                        return ms;
                    }
                    let t = Instant::now();
                    put(&client, &format!("{prefix}/k{i:05}"), instance_body(i)).await;
                    ms.push(t.elapsed().as_secs_f64() * 1000.0);
                }
            })
        })
        .collect();
    let mut ms = Vec::with_capacity(n);
    for w in workers {
        ms.extend(w.await.unwrap());
    }
    (started.elapsed().as_secs_f64(), ms)
}

/// `n` instances of `task` in PUTs of lists of `batch`, one after the other: the seconds, and
/// each request's ms.
async fn batches(
    client: &reqwest::Client,
    base: &str,
    task: &str,
    n: usize,
    batch: usize,
) -> (f64, Vec<f64>) {
    let url = format!("{base}/api/tasks/{task}/instances");
    let started = Instant::now();
    let mut ms = Vec::new();
    for from in (0..n).step_by(batch) {
        let to = (from + batch).min(n);
        let t = Instant::now();
        let answer = put(client, &url, batch_body(from..to)).await;
        ms.push(t.elapsed().as_secs_f64() * 1000.0);
        let written = format!(r#""written":{}"#, to - from);
        assert!(answer.contains(&written), "not all written: {answer:.300}");
    }
    (started.elapsed().as_secs_f64(), ms)
}

#[tokio::main]
async fn main() {
    let n = knob("INSTANCES_API_COUNT", 10_000) as usize;
    let at_once = knob("INSTANCES_API_AT_ONCE", 16) as usize;
    let batch = knob("INSTANCES_API_BATCH", 500) as usize;
    let url = database_url();
    fresh_schema(&url, SCHEMA).await.close().await;
    let store = pg_store(&url, SCHEMA);
    let registry = synthetic_registry("ia.", 2);
    let scheduler = Scheduler::builder()
        .store(Arc::clone(&store))
        .node_id("bench-node")
        .registry(registry.clone())
        .config_document(config_for(&registry, "0 0 1 1 *"))
        .admin_addr("127.0.0.1:0".parse().unwrap())
        .admin_token(TOKEN)
        .build()
        .unwrap();
    let base = format!("http://{}", scheduler.admin_addr().unwrap());
    let stop = CancellationToken::new();
    let s = stop.clone();
    let node = tokio::spawn(async move { scheduler.run_until(s.cancelled_owned()).await });
    while store.task_states(None).await.unwrap().len() < 2 {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let client = reqwest::Client::new();
    println!("### {n} instances of one task through the admin API (PostgreSQL, one node)\n");
    println!("load average before: {}\n", load_average());
    println!("| how | requests | seconds | instances a second | request p50 ms | request p99 ms |");
    println!("|---|---|---|---|---|---|");
    let (took, mut ms) = singles(&client, &base, "ia.00000", n, at_once).await;
    let (p50, p99) = p50_p99(&mut ms);
    println!(
        "| (a) `PUT .../instances/{{key}}`, {at_once} at once | {} | {took:.2} | {:.0} | {p50:.1} | {p99:.1} |",
        ms.len(),
        n as f64 / took
    );
    let (took, mut ms) = batches(&client, &base, "ia.00001", n, batch).await;
    let (p50, p99) = p50_p99(&mut ms);
    println!(
        "| (b) `PUT .../instances`, lists of {batch}, one at a time | {} | {took:.2} | {:.0} | {p50:.1} | {p99:.1} |",
        ms.len(),
        n as f64 / took
    );
    println!("\nload average after: {}\n", load_average());
    for task in ["ia.00000", "ia.00001"] {
        assert_eq!(store.instances(task).await.unwrap().len(), n, "{task}");
    }
    stop.cancel();
    node.await.unwrap().unwrap();
}
