//! Engine lag under admin load: one node on PostgreSQL (a fresh schema of DATABASE_URL, the
//! default pool of 4 connections, which the admin API shares with the engine),
//! `ADMIN_LOAD_TASKS` (1,000) no-op tasks every 5 s, its admin server on 127.0.0.1:0. Lag is
//! taken inside the handlers (handler start minus tick, by the handler's own clock).
//!
//! `ADMIN_LOAD_WINDOWS` (7) windows of `ADMIN_LOAD_TICKS` ticks each (6: 30 s), after a
//! warm-up tick, alternating quiet and loaded (quiet first and last), so a burst of other work
//! on a shared machine spoils one window, not the comparison: the summary compares the median
//! of the quiet windows' p99 with the loaded ones'. Under load, `ADMIN_LOAD_CLIENTS` (50) clients on a runtime of
//! their own read `/api/ticks`, `/api/runs` and `/api/tasks` in turn, back to back (each at most
//! `ADMIN_LOAD_MAX_REQUESTS`, 100,000; 127.0.0.1 only; the node serves `ADMIN_LOAD_READS` of
//! them at once, default the server's), from half a tick before the window's
//! first tick to half a tick before the next window's. Per window: the handlers' lag (p50, p99,
//! max), the lag the history records (`started_at - scheduled_at`), lock renewal statements
//! and lock losses (the node's own `/metrics`), and for the loaded window the requests answered
//! by status, their rate and latency. Last, how far each run's recorded `started_at` is from
//! its handler's own clock at its start (all windows).
//!
//! `scripts/bench admin_load` (or with DATABASE_URL set:
//! `cargo run --release -p scheduler-bench --bin admin_load`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, DurationRound, TimeDelta, Utc};
use scheduler::__private::TaskFuture;
use scheduler::{Scheduler, TaskContext};
use scheduler_bench::engine_support::*;
use sqlx::Row;
use tokio_util::sync::CancellationToken;

const SCHEMA: &str = "bench_admin_load";
const EVERY: i64 = 5;
const ROUTES: [&str; 3] = ["/api/ticks", "/api/runs", "/api/tasks"];

/// One handler's start: task, tick, its own clock.
type Start = (String, DateTime<Utc>, DateTime<Utc>);

/// What each handler saw at its start.
#[derive(Default)]
struct Starts(Mutex<Vec<Start>>);

fn record_start(ctx: TaskContext) -> TaskFuture {
    Box::pin(async move {
        let now = Utc::now();
        if let Ok(starts) = ctx.state::<Arc<Starts>>() {
            starts
                .0
                .lock()
                .unwrap()
                .push((ctx.task_name().to_owned(), ctx.scheduled_at(), now));
        }
        Ok(())
    })
}

/// One answered (or failed) admin request: its route (index in [`ROUTES`]), status (0: no
/// answer) and latency in ms.
type Answer = (usize, u16, f64);

/// A client reading the routes in turn until `stop`, at most `max` requests.
async fn client(
    http: reqwest::Client,
    base: String,
    first: usize,
    max: u64,
    stop: CancellationToken,
    answers: Arc<Mutex<Vec<Answer>>>,
) {
    let mut mine = Vec::new();
    for i in 0..max {
        if stop.is_cancelled() {
            break;
        }
        let route = (first + i as usize) % ROUTES.len();
        let path = ROUTES[route];
        let sent = std::time::Instant::now();
        let status = match http.get(format!("{base}{path}")).send().await {
            Ok(response) => {
                let status = response.status().as_u16();
                match response.bytes().await {
                    Ok(_) => status,
                    Err(_) => 0,
                }
            }
            Err(_) => 0,
        };
        mine.push((route, status, sent.elapsed().as_secs_f64() * 1000.0));
    }
    answers.lock().unwrap().extend(mine);
}

/// The node's counters whose name starts with `metric` (every label set), summed per label set.
async fn counters(http: &reqwest::Client, base: &str, metric: &str) -> HashMap<String, f64> {
    let text = http
        .get(format!("{base}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .filter(|l| l.starts_with(metric))
        .filter_map(|l| {
            let (name, value) = l.rsplit_once(' ')?;
            Some((name.to_owned(), value.parse().ok()?))
        })
        .collect()
}

/// Renewal statements (ok, failed) and lock losses so far.
async fn lock_counts(http: &reqwest::Client, base: &str) -> (f64, f64, f64) {
    let renewals = counters(http, base, "scheduler_lock_renewals_total").await;
    let of = |result: &str| {
        renewals
            .iter()
            .filter(|(k, _)| k.contains(&format!("result=\"{result}\"")))
            .map(|(_, v)| v)
            .sum::<f64>()
    };
    let losses = counters(http, base, "scheduler_lock_losses_total")
        .await
        .values()
        .sum();
    (of("ok"), of("failed"), losses)
}

fn ms(delta: TimeDelta) -> f64 {
    delta.num_microseconds().unwrap_or(i64::MAX) as f64 / 1000.0
}

async fn sleep_until(at: DateTime<Utc>) {
    if let Ok(d) = (at - Utc::now()).to_std() {
        tokio::time::sleep(d).await;
    }
}

#[tokio::main]
async fn main() {
    if std::env::var_os("RUST_LOG").is_some() {
        scheduler::init_tracing();
    }
    let tasks = knob("ADMIN_LOAD_TASKS", 1_000) as usize;
    let ticks = knob("ADMIN_LOAD_TICKS", 6) as i64;
    let windows = knob("ADMIN_LOAD_WINDOWS", 7) as usize;
    let clients = knob("ADMIN_LOAD_CLIENTS", 50) as usize;
    let max_requests = knob("ADMIN_LOAD_MAX_REQUESTS", 100_000);
    let reads = knob(
        "ADMIN_LOAD_READS",
        scheduler::admin::MAX_CONCURRENT_READS as u64,
    );

    let url = database_url();
    let pool = fresh_schema(&url, SCHEMA).await;
    let registry = registry_with("load.", tasks, record_start);
    let doc = config_for(&registry, &format!("*/{EVERY} * * * * *"));
    let starts = Arc::new(Starts::default());
    let scheduler = Scheduler::builder()
        .store(pg_store(&url, SCHEMA))
        .node_id("admin-load")
        .registry(registry)
        .config_document(doc)
        .state(Arc::clone(&starts))
        .admin_addr("127.0.0.1:0".parse().unwrap())
        .admin_limits(scheduler::admin::AdminLimits::default().max_concurrent_reads(reads as usize))
        .build()
        .unwrap();
    let base = format!("http://{}", scheduler.admin_addr().unwrap());
    let stop_node = CancellationToken::new();
    let s = stop_node.clone();
    let node = tokio::spawn(async move { scheduler.run_until(s.cancelled_owned()).await });

    // Warm-up: one whole tick run, then the windows start at the next tick.
    while starts.0.lock().unwrap().len() < tasks {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let tick = TimeDelta::seconds(EVERY);
    let first = Utc::now().duration_trunc(tick).unwrap() + tick;
    let window = tick * i32::try_from(ticks).unwrap();
    let half = tick / 2;
    let bounds: Vec<DateTime<Utc>> = (0..=windows)
        .map(|i| first + window * i32::try_from(i).unwrap())
        .collect();
    let loaded = |w: usize| w % 2 == 1;
    let http = reqwest::Client::builder().build().unwrap();

    println!(
        "{tasks} no-op tasks every {EVERY} s on one node (PostgreSQL, default pool of 4), \
         windows of {ticks} ticks; lag inside the handlers; {reads} API requests served at once\n"
    );
    let mut locks = Vec::new();
    let mut load: Vec<Option<(Vec<Answer>, f64)>> = vec![None; windows];
    let mut loads = Vec::new();
    for w in 0..windows {
        sleep_until(bounds[w] - half).await;
        locks.push(lock_counts(&http, &base).await);
        loads.push(load_average());
        eprintln!("{} window {w} starts", Utc::now());
        if loaded(w) {
            // Clients on a runtime of their own, as a separate program's would be.
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            let stop = CancellationToken::new();
            let answers = Arc::new(Mutex::new(Vec::new()));
            let started = std::time::Instant::now();
            let handles: Vec<_> = (0..clients)
                .map(|i| {
                    let http = reqwest::Client::builder()
                        .timeout(Duration::from_secs(60))
                        .build()
                        .unwrap();
                    runtime.spawn(client(
                        http,
                        base.clone(),
                        i,
                        max_requests,
                        stop.clone(),
                        Arc::clone(&answers),
                    ))
                })
                .collect();
            sleep_until(bounds[w + 1] - half).await;
            stop.cancel();
            for h in handles {
                let _ = h.await;
            }
            let seconds = started.elapsed().as_secs_f64();
            runtime.shutdown_background();
            let answers = std::mem::take(&mut *answers.lock().unwrap());
            load[w] = Some((answers, seconds));
        }
    }
    sleep_until(bounds[windows] - half).await;
    locks.push(lock_counts(&http, &base).await);
    loads.push(load_average());
    // Every run of the last window started.
    let want = tasks * (1 + windows * ticks as usize);
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while starts.0.lock().unwrap().len() < want && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    stop_node.cancel();
    node.await.unwrap().unwrap();

    let starts = std::mem::take(&mut *starts.0.lock().unwrap());
    let window_of =
        |tick: DateTime<Utc>| (0..windows).find(|&w| tick >= bounds[w] && tick < bounds[w + 1]);
    let mut handler_lags: Vec<Vec<f64>> = vec![Vec::new(); windows];
    let mut handler_at = HashMap::new();
    for (task, tick, at) in &starts {
        if let Some(w) = window_of(*tick) {
            handler_lags[w].push(ms(*at - *tick));
        }
        handler_at.insert((task.clone(), *tick), *at);
    }
    let rows = sqlx::query("SELECT task_name, scheduled_at, started_at FROM scheduler_runs")
        .fetch_all(&pool)
        .await
        .unwrap();
    let mut history_lags: Vec<Vec<f64>> = vec![Vec::new(); windows];
    let mut signed_by_window: Vec<Vec<f64>> = vec![Vec::new(); windows];
    let mut apart = Vec::new();
    let mut signed = Vec::new();
    let mut never_started = 0;
    for row in &rows {
        let task: String = row.get("task_name");
        let tick: DateTime<Utc> = row.get("scheduled_at");
        let started: Option<DateTime<Utc>> = row.get("started_at");
        let Some(started) = started else {
            never_started += 1;
            continue;
        };
        if let Some(w) = window_of(tick) {
            history_lags[w].push(ms(started - tick));
        }
        if let Some(at) = handler_at.get(&(task, tick)) {
            if let Some(w) = window_of(tick) {
                signed_by_window[w].push(ms(started - *at));
            }
            signed.push(ms(started - *at));
            apart.push(ms(started - *at).abs());
        }
    }

    println!(
        "| window | runs | handler lag p50 / p99 / max ms | recorded lag p50 / p99 ms | \
         recorded minus handler's start p1 / p50 / p99 ms | renewal statements ok / failed | \
         lock losses | admin requests | load (1/5/15 min) at start |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    let mut p99s: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
    for w in 0..windows {
        let lags = &mut handler_lags[w];
        let (ok, failed, lost) = (
            locks[w + 1].0 - locks[w].0,
            locks[w + 1].1 - locks[w].1,
            locks[w + 1].2 - locks[w].2,
        );
        let requests = match &load[w] {
            Some((answers, seconds)) => {
                let by = |s: u16| answers.iter().filter(|(_, st, _)| *st == s).count();
                let other = answers.len() - by(200) - by(503);
                let mut latencies: Vec<f64> = answers.iter().map(|(_, _, l)| *l).collect();
                let (p50, p99) = p50_p99(&mut latencies);
                format!(
                    "{} ({} × 200, {} × 503, {other} other) in {seconds:.0} s, {:.0}/s, \
                     p50 {p50:.0} / p99 {p99:.0} ms",
                    answers.len(),
                    by(200),
                    by(503),
                    answers.len() as f64 / seconds
                )
            }
            _ => "none".to_owned(),
        };
        let (hp50, hp99) = p50_p99(lags);
        p99s[usize::from(loaded(w))].push(hp99);
        let max = percentile(lags, 100.0);
        let (rp50, rp99) = p50_p99(&mut history_lags[w]);
        let d = &mut signed_by_window[w];
        let (d1, d50, d99) = (percentile(d, 1.0), percentile(d, 50.0), percentile(d, 99.0));
        println!(
            "| {} | {} | {hp50:.1} / {hp99:.1} / {max:.1} | {rp50:.1} / {rp99:.1} | {d1:+.2} / {d50:+.2} / {d99:+.2} | {ok} / {failed} | {lost} | {requests} | {} |",
            if loaded(w) {
                format!("{} loaded ({clients} clients)", w + 1)
            } else {
                format!("{} quiet", w + 1)
            },
            lags.len(),
            loads[w],
        );
    }
    let [quiet, busy] = &mut p99s;
    let (q, b) = (percentile(quiet, 50.0), percentile(busy, 50.0));
    println!(
        "\nmedian of the windows' handler lag p99: quiet {q:.1} ms, loaded {b:.1} ms: {:.2}x\n",
        b / q
    );
    let answers: Vec<Answer> = load
        .iter()
        .flatten()
        .flat_map(|(a, _)| a.iter().copied())
        .collect();
    if !answers.is_empty() {
        println!("| route under load (all loaded windows) | requests | p50 / p99 ms |");
        println!("|---|---|---|");
        for (r, route) in ROUTES.iter().enumerate() {
            let mut l: Vec<f64> = answers
                .iter()
                .filter(|(x, _, _)| *x == r)
                .map(|(_, _, l)| *l)
                .collect();
            if l.is_empty() {
                continue;
            }
            let (p50, p99) = p50_p99(&mut l);
            println!("| GET {route} | {} | {p50:.0} / {p99:.0} |", l.len());
        }
    }
    let (a50, a99) = p50_p99(&mut apart);
    let amax = percentile(&mut apart, 100.0);
    let (s50, _) = p50_p99(&mut signed);
    println!(
        "\nrecorded started_at vs the handler's own clock at its start, {} runs: |difference| \
         p50 {a50:.2} / p99 {a99:.2} / max {amax:.2} ms (signed median {s50:+.2} ms: recorded \
         minus handler); {never_started} runs never started\n",
        apart.len()
    );
    println!("load average at the end: {}", load_average());
    pool.close().await;
}
