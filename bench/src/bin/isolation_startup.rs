//! What starting a run costs with `isolation = "process"`, beside the in-process ways to start a
//! handler: a no-op handler, started `ISOLATION_ROUNDS` times (default 300, after 10 warm-up
//! rounds) each way, one at a time.
//!
//! - **child process**: `ChildCommand::spawn` of this very binary (release build), as the engine
//!   will: fork on the spawner thread, exec, the child's `main` and tokio runtime, the handler
//!   looked up by name. "handler entered" is the child's own clock when it enters the handler
//!   (the clock the node reads before spawning, same machine) minus the spawn call; "ended" is
//!   when `ChildRun::wait` returns (the child exited, was reaped and its output read to its
//!   end). Its log goes to a SQLite file's run log, as a run's would (finished after the clock
//!   stops).
//! - **own thread**: a new OS thread with a current-thread tokio runtime, the handler run on it,
//!   the thread joined.
//! - **tokio::spawn**: the handler spawned on the running (multi-thread) runtime, awaited.
//!
//! `cargo run --release -p scheduler-bench --bin isolation_startup` (no database needed;
//! `BENCH_DIR` for the SQLite file, default the temp directory). `ISOLATION_PARENT_MB` (default
//! 0) first allocates and touches that many MiB in the parent, like a node with a large heap:
//! the fork copies the parent's page tables, so its cost grows with the parent's memory.
//!
//! This program is also the child: like `scheduler::run()`, its `main` asks
//! `scheduler::child_request()` first.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use chrono::Utc;
use scheduler::run_log::RunLogCapture;
use scheduler::store::{SqliteStore, Store};
use scheduler::testing::isolation::{ChildCommand, ChildExit, RunIdentity};
use scheduler::{TaskContext, TaskRegistry, task};
use scheduler_bench::engine_support::{knob, load_average, p50_p99};

#[task(name = "bench.noop", isolation = "process")]
async fn noop() {}

/// When the in-process handler was last entered.
static ENTERED: Mutex<Option<Instant>> = Mutex::new(None);

#[task(name = "bench.noop.in_process")]
async fn noop_in_process() {
    *ENTERED.lock().unwrap() = Some(Instant::now());
}

fn entered() -> Instant {
    ENTERED.lock().unwrap().take().expect("the handler ran")
}

/// Milliseconds from `from` to `to`.
fn ms(from: Instant, to: Instant) -> f64 {
    (to - from).as_secs_f64() * 1000.0
}

struct Figures {
    entered: Vec<f64>,
    ended: Vec<f64>,
}

impl Figures {
    fn new(rounds: usize) -> Self {
        Self {
            entered: Vec::with_capacity(rounds),
            ended: Vec::with_capacity(rounds),
        }
    }

    fn print(mut self, way: &str) {
        let (e50, e99) = p50_p99(&mut self.entered);
        let (x50, x99) = p50_p99(&mut self.ended);
        println!("| {way} | {e50:.3} | {e99:.3} | {x50:.3} | {x99:.3} |");
    }
}

#[tokio::main]
async fn main() {
    if let Some(request) = scheduler::child_request() {
        scheduler::run_child(request).await;
    }
    let rounds = knob("ISOLATION_ROUNDS", 300) as usize;
    let parent_mb = knob("ISOLATION_PARENT_MB", 0) as usize;
    let heap: Vec<u8> = vec![1; parent_mb << 20];
    let warmup = 10;
    let registry = TaskRegistry::collect().unwrap();
    let handler = registry.get("bench.noop.in_process").unwrap().handler;

    let dir = std::env::var_os("BENCH_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(std::env::temp_dir)
        .join("scheduler-bench-isolation");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let store = SqliteStore::builder(dir.join("runs.db")).connect().unwrap();
    store.migrate().await.unwrap();
    let store: Arc<dyn Store> = Arc::new(store);

    println!(
        "{rounds} rounds each (after {warmup} warm-up), no-op handler, parent heap {parent_mb} MiB \
         touched; load average before: {}",
        load_average()
    );
    println!();
    println!("| started as | handler entered p50 ms | p99 ms | ended p50 ms | p99 ms |");
    println!("|---|---|---|---|---|");

    let mut child = Figures::new(rounds);
    for round in 0..warmup + rounds {
        let run_id = round as i64 + 1;
        let capture = RunLogCapture::external(run_id, Arc::clone(&store));
        let identity = RunIdentity::new("bench.noop", run_id, Utc::now(), "bench");
        let spawned_wall = Utc::now();
        let spawned = Instant::now();
        let mut run = ChildCommand::new(identity)
            .spawn(capture.lines())
            .await
            .expect("start the child");
        let exit = run.wait().await;
        let ended = Instant::now();
        assert_eq!(exit, ChildExit::Succeeded);
        let entered = run.handler_started_at().expect("the child said when");
        capture.finish().await;
        if round >= warmup {
            let entered_ms = (entered - spawned_wall).num_microseconds().unwrap() as f64 / 1000.0;
            child.entered.push(entered_ms);
            child.ended.push(ms(spawned, ended));
        }
    }
    child.print("child process (`isolation = \"process\"`)");

    let mut thread = Figures::new(rounds);
    for round in 0..warmup + rounds {
        let spawned = Instant::now();
        std::thread::spawn(move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap()
                .block_on(handler(TaskContext::standalone("bench.noop.in_process")))
                .unwrap();
        })
        .join()
        .unwrap();
        let ended = Instant::now();
        if round >= warmup {
            thread.entered.push(ms(spawned, entered()));
            thread.ended.push(ms(spawned, ended));
        }
    }
    thread.print("own thread (current-thread runtime)");

    let mut spawn = Figures::new(rounds);
    for round in 0..warmup + rounds {
        let spawned = Instant::now();
        tokio::spawn(handler(TaskContext::standalone("bench.noop.in_process")))
            .await
            .unwrap()
            .unwrap();
        let ended = Instant::now();
        if round >= warmup {
            spawn.entered.push(ms(spawned, entered()));
            spawn.ended.push(ms(spawned, ended));
        }
    }
    spawn.print("tokio::spawn (multi-thread runtime)");
    println!();
    println!("load average after: {}", load_average());
    std::hint::black_box(&heap);
    let _ = std::fs::remove_dir_all(&dir);
}
