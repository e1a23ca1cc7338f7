//! One node process of the `scale` benchmark, started by it (not meant to be run by hand).
//!
//! Registers `SCALE_TASKS` no-op tasks `s.00000`.. on `SCALE_CRON` in schema `SCALE_SCHEMA` of
//! `DATABASE_URL` as node `SCALE_NODE_ID` (with `SCALE_INSTANCES`, `scale` makes instances
//! `k00000`.. of `s.00000`, and a run's number is its key's). Every handler notes (task, tick,
//! start time); on
//! SIGTERM the node stops cleanly and writes them to `SCALE_RECORD`, one `task tick_ms start_ms`
//! line per run, then `# rss_kb min max hwm` (resident memory sampled every 250 ms after
//! start-up: the minimum is the node at rest between ticks, the maximum during a burst).

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::Utc;
use scheduler::__private::TaskFuture;
use scheduler::{Scheduler, TaskContext};

/// What the handlers ran: (task number, tick ms, start ms).
#[derive(Default)]
struct Ran(Mutex<Vec<(u32, i64, i64)>>);

fn handler(ctx: TaskContext) -> TaskFuture {
    Box::pin(async move {
        let start = Utc::now().timestamp_millis();
        // A task `s.NNNNN`, or an instance `kNNNNN` of `s.00000` (SCALE_INSTANCES).
        let number = match ctx.key() {
            Some(key) => key.strip_prefix('k'),
            None => ctx.task_name().strip_prefix("s."),
        };
        let task: u32 = number.and_then(|n| n.parse().ok()).unwrap_or(u32::MAX);
        if let Ok(ran) = ctx.state::<Arc<Ran>>() {
            ran.0
                .lock()
                .unwrap()
                .push((task, ctx.scheduled_at().timestamp_millis(), start));
        }
        Ok(())
    })
}

fn env(name: &str) -> Result<String, String> {
    std::env::var(name).map_err(|_| format!("{name} is not set: scale_node is started by `scale`"))
}

/// (VmRSS, VmHWM) in KiB.
fn rss_kb() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    if std::env::var_os("RUST_LOG").is_some() {
        scheduler::init_tracing();
    }
    let url = env("DATABASE_URL")?;
    let schema = env("SCALE_SCHEMA")?;
    let node_id = env("SCALE_NODE_ID")?;
    let tasks: usize = env("SCALE_TASKS")?.parse()?;
    let cron = env("SCALE_CRON")?;
    let record = env("SCALE_RECORD")?;
    let registry = scheduler_bench::engine_support::registry_with("s.", tasks, handler);
    let doc = scheduler_bench::engine_support::config_for(&registry, &cron);
    let ran = Arc::new(Ran::default());
    let mut builder = Scheduler::builder()
        .store(Arc::new(
            scheduler::store::PgStore::builder(&url)
                .schema(&schema)
                .connect_lazy()?,
        ))
        .node_id(&node_id)
        .registry(registry)
        .config_document(doc)
        .state(Arc::clone(&ran));
    if let Ok(n) = std::env::var("SCALE_MAX_CONCURRENT") {
        builder = builder.max_concurrent(n.parse()?);
    }
    let scheduler = builder.build()?;
    let metrics = scheduler.metrics();
    let rss = Arc::new(Mutex::new((u64::MAX, 0u64)));
    let sampler = {
        let rss = Arc::clone(&rss);
        tokio::spawn(async move {
            // Start-up (config reconcile) first, then sample.
            tokio::time::sleep(Duration::from_secs(3)).await;
            loop {
                let (now, _) = rss_kb();
                {
                    let mut r = rss.lock().unwrap();
                    r.0 = r.0.min(now);
                    r.1 = r.1.max(now);
                }
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        })
    };
    scheduler.run_until(scheduler::shutdown_signal()).await?;
    sampler.abort();
    let (min, max) = *rss.lock().unwrap();
    let (_, hwm) = rss_kb();
    let mut out = std::io::BufWriter::new(std::fs::File::create(&record)?);
    for (task, tick, start) in ran.0.lock().unwrap().iter() {
        writeln!(out, "{task} {tick} {start}")?;
    }
    writeln!(out, "# rss_kb {min} {max} {hwm}")?;
    // Handler threads replaced as held by their handlers (none should be: the handlers are
    // no-ops, so a replacement here is a thread merely taken off its CPU).
    let replaced = metrics
        .encode()
        .lines()
        .find_map(|l| l.strip_prefix("scheduler_handler_threads_replaced_total "))
        .map_or(0, |v| v.trim().parse::<f64>().unwrap_or(0.0) as u64);
    writeln!(out, "# replaced {replaced}")?;
    // The process's CPU time, user and system, in clock ticks (Linux's USER_HZ: 100 a second).
    if let Some((user, system)) = cpu_ticks() {
        writeln!(out, "# cpu_ticks {user} {system}")?;
    }
    out.flush()?;
    Ok(())
}

/// This process's user and system CPU time so far, in clock ticks, from `/proc/self/stat`
/// (fields 14 and 15; the command name before them may hold spaces, so count from its `)`).
fn cpu_ticks() -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let after = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    // `after` starts at field 3 (the state): utime is field 14, stime field 15.
    Some((fields.get(11)?.parse().ok()?, fields.get(12)?.parse().ok()?))
}
