//! The capacity model's measured figure: runs per second one PostgreSQL core sustains for the
//! claim + finish path.
//!
//! PostgreSQL (every process of the private cluster: the postmaster before any connection, so the
//! backends it forks later inherit it) is pinned to CPU `CAPACITY_PG_CPU` (0), this process (the
//! nodes) to `CAPACITY_NODE_CPU` (1). For each rate in `CAPACITY_RATES` (runs per second:
//! that many no-op tasks every second), `CAPACITY_NODES` nodes (1, in this process, each
//! registering every task) run a `CAPACITY_SECONDS` window (30) after a warm-up, on a fresh
//! schema. Reported per rate: runs started per second (the handlers' own record), lag p50 / p99,
//! PostgreSQL's CPU (utime + stime of the postmaster, of its children, and of its children that
//! exited, from `/proc`, over the window, divided by its wall time), the nodes' CPU, and runs
//! per PostgreSQL CPU-second.
//!
//! `scripts/bench capacity` (it pins the cluster `scripts/bench` starts, found by
//! `PG_THROWAWAY_DIR`; it refuses to run without one). About 45 s per rate.

use std::sync::Arc;
use std::time::{Duration, Instant};

use scheduler::Scheduler;
use scheduler_bench::engine_support::*;
use tokio_util::sync::CancellationToken;

const SCHEMA: &str = "bench_capacity";
const WARM_UP: Duration = Duration::from_secs(6);

fn knob(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.into())
}

fn number(name: &str, default: u64) -> u64 {
    knob(name, &default.to_string())
        .parse()
        .unwrap_or_else(|_| panic!("{name} must be a number"))
}

/// `taskset -a -pc <cpu> <pid>`: every thread of `pid` on `cpu`.
fn pin(pid: u32, cpu: u64) {
    let out = std::process::Command::new("taskset")
        .args(["-a", "-pc", &cpu.to_string(), &pid.to_string()])
        .output()
        .expect("run taskset (util-linux)");
    assert!(
        out.status.success(),
        "taskset -a -pc {cpu} {pid}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Fields of `/proc/<pid>/stat` after the command name (field 3, the state, is index 0).
fn stat_fields(pid: u32) -> Option<Vec<u64>> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &text[text.rfind(')')? + 2..];
    Some(
        rest.split_whitespace()
            .map(|f| f.parse::<i64>().unwrap_or(0).max(0) as u64)
            .collect(),
    )
}

/// The children of `parent` (by `/proc/*/stat`'s ppid).
fn children(parent: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| stat_fields(pid).is_some_and(|f| f[1] as u32 == parent))
        .collect()
}

/// CPU ticks of the cluster: the postmaster's own and its reaped children's (utime, stime,
/// cutime, cstime), and its living children's (utime, stime).
fn cluster_ticks(postmaster: u32) -> u64 {
    let own = stat_fields(postmaster).expect("the postmaster is running");
    let mut ticks = own[11] + own[12] + own[13] + own[14];
    for child in children(postmaster) {
        if let Some(f) = stat_fields(child) {
            ticks += f[11] + f[12];
        }
    }
    ticks
}

fn own_ticks() -> u64 {
    let f = stat_fields(std::process::id()).unwrap();
    f[11] + f[12]
}

fn clock_ticks_per_second() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok()?.trim().parse().ok())
        .unwrap_or(100.0)
}

struct Step {
    rate: usize,
    load: String,
    runs_per_s: f64,
    lag: (f64, f64),
    pg_cpu: f64,
    node_cpu: f64,
    per_pg_cpu_s: f64,
}

async fn step(url: &str, rate: usize, nodes: usize, seconds: u64, postmaster: u32) -> Step {
    fresh_schema(url, SCHEMA).await.close().await;
    let registry_doc = {
        let r = synthetic_registry("cap.", rate);
        config_for(&r, "* * * * * *")
    };
    let lags = Arc::new(Lags::default());
    let stop = CancellationToken::new();
    let mut handles = Vec::new();
    for i in 0..nodes {
        let scheduler = Scheduler::builder()
            .store(pg_store(url, SCHEMA))
            .node_id(format!("capacity-{i}"))
            .registry(synthetic_registry("cap.", rate))
            .config_document(registry_doc.clone())
            .state(Arc::clone(&lags))
            .build()
            .unwrap();
        let s = stop.clone();
        handles.push(tokio::spawn(async move {
            scheduler.run_until(s.cancelled_owned()).await
        }));
    }
    tokio::time::sleep(WARM_UP).await;
    let hz = clock_ticks_per_second();
    lags.0.lock().unwrap().clear();
    let (pg0, me0, t0) = (cluster_ticks(postmaster), own_ticks(), Instant::now());
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    let mut window = std::mem::take(&mut *lags.0.lock().unwrap());
    let (pg1, me1, wall) = (cluster_ticks(postmaster), own_ticks(), t0.elapsed());
    let load = load_average();
    stop.cancel();
    for h in handles {
        h.await.unwrap().unwrap();
    }
    let wall = wall.as_secs_f64();
    let pg_s = (pg1 - pg0) as f64 / hz;
    let runs = window.len();
    let lag = if window.is_empty() {
        (f64::NAN, f64::NAN)
    } else {
        p50_p99(&mut window)
    };
    Step {
        rate,
        load,
        runs_per_s: runs as f64 / wall,
        lag,
        pg_cpu: pg_s / wall,
        node_cpu: (me1 - me0) as f64 / hz / wall,
        per_pg_cpu_s: runs as f64 / pg_s,
    }
}

#[tokio::main]
async fn main() {
    let rates: Vec<usize> = knob("CAPACITY_RATES", "500,1000,2000,3000,4000")
        .split(',')
        .map(|r| r.trim().parse().expect("CAPACITY_RATES: numbers"))
        .collect();
    let nodes = number("CAPACITY_NODES", 1) as usize;
    let seconds = number("CAPACITY_SECONDS", 30);
    let pg_cpu = number("CAPACITY_PG_CPU", 0);
    let node_cpu = number("CAPACITY_NODE_CPU", 1);
    let dir = std::env::var("PG_THROWAWAY_DIR")
        .expect("capacity pins the private cluster's processes: run it with scripts/bench");
    let pid_file = std::path::Path::new(&dir).join("data/postmaster.pid");
    let postmaster: u32 = std::fs::read_to_string(&pid_file)
        .expect("read postmaster.pid")
        .lines()
        .next()
        .and_then(|l| l.trim().parse().ok())
        .expect("postmaster.pid starts with the pid");
    pin(postmaster, pg_cpu);
    for child in children(postmaster) {
        pin(child, pg_cpu);
    }
    pin(std::process::id(), node_cpu);
    let url = database_url();
    println!(
        "PostgreSQL (postmaster {postmaster} and its children) on CPU {pg_cpu}, {nodes} node(s) \
         in this process on CPU {node_cpu}; {seconds} s per rate; load {}",
        load_average()
    );
    println!(
        "| offered runs/s | load avg (1/5/15, at end) | runs started/s | lag p50 / p99 ms | \
         PostgreSQL CPU (cores) | nodes' CPU (cores) | runs per PostgreSQL CPU-second |"
    );
    println!("|---|---|---|---|---|---|---|");
    for rate in rates {
        let s = step(&url, rate, nodes, seconds, postmaster).await;
        println!(
            "| {} | {} | {:.0} | {:.0} / {:.0} | {:.2} | {:.2} | {:.0} |",
            s.rate, s.load, s.runs_per_s, s.lag.0, s.lag.1, s.pg_cpu, s.node_cpu, s.per_pg_cpu_s
        );
    }
    let admin = sqlx::PgPool::connect(&url).await.unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "DROP SCHEMA IF EXISTS {SCHEMA} CASCADE"
    )))
    .execute(&admin)
    .await
    .unwrap();
}
