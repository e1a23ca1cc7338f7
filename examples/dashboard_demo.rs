//! A node for looking at the dashboard: tasks that succeed, fail now and then, fail every time
//! (each tick retried twice), overrun their interval (so ticks are skipped), time out, run
//! nightly or monthly, one split into shards, one run on every node (a broadcast), one that
//! runs only when triggered, one with instances declared in the config (a schedule per
//! tenant, each with its arguments), one whose instances are made at run time from Rust (a
//! schedule per advertiser, `Scheduler::schedules`), one whose own ticks succeed while one
//! of its instances made at run time fails every run (so the task is failing), and two sharing a limit of one run at a
//! time (the long warehouse load holds it: the report's ticks wait, an hourglass on its strip).
//! The admin server serves the dashboard at `/`.
//!
//! ```sh
//! SCHEDULER_DATABASE_URL=sqlite:///tmp/demo.db SCHEDULER_ADMIN_ADDR=127.0.0.1:9870 \
//!   SCHEDULER_ADMIN_TOKEN=a-long-random-secret-token \
//!   cargo run -p scheduler-examples --example dashboard_demo
//! # then open http://127.0.0.1:9870/
//! ```
//!
//! The schedules are in `dashboard_demo.json` (`SCHEDULER_CONFIG` names another). The browser
//! test (`scripts/dashboard-test`) runs against this node.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use scheduler::{Schedule, SchedulerBuilder, Schedules, TaskContext, task};
use serde_json::json;

/// Counts runs, so the flaky task fails every other time.
#[derive(Default)]
struct Counter(AtomicU64);

#[task(name = "demo.succeeds")]
async fn succeeds(ctx: TaskContext) -> anyhow::Result<()> {
    tracing::info!(tick = %ctx.scheduled_at(), "report synced");
    tokio::time::sleep(Duration::from_millis(50 + ctx.run_id() as u64 % 5 * 40)).await;
    Ok(())
}

#[task(name = "demo.flaky", retries = 1, backoff = "500ms")]
async fn flaky(ctx: TaskContext) -> anyhow::Result<()> {
    let n = ctx.state::<Counter>()?.0.fetch_add(1, Ordering::Relaxed);
    tracing::info!(run = ctx.run_id(), "calling the upstream API");
    if n % 3 != 0 {
        tracing::warn!("upstream answered 503");
        anyhow::bail!("upstream answered 503 Service Unavailable");
    }
    Ok(())
}

/// Fails every time, and each failed tick is retried twice: three failed runs per tick.
#[task(name = "demo.broken", retries = 2, backoff = "200ms")]
async fn broken(ctx: TaskContext) -> anyhow::Result<()> {
    tracing::info!(tick = %ctx.scheduled_at(), "loading the exchange rates");
    anyhow::bail!(
        "exchange rate feed: certificate expired (run {})",
        ctx.run_id()
    )
}

/// Nightly at 03:00 UTC.
#[task(name = "demo.nightly")]
async fn nightly() {
    tracing::info!("nightly compaction");
}

/// Takes longer than its interval: the ticks due meanwhile are skipped (`overlap`).
#[task(name = "demo.slow")]
async fn slow(ctx: TaskContext) -> anyhow::Result<()> {
    tracing::info!("rebuilding the search index");
    tokio::select! {
        _ = ctx.cancelled() => return Err(ctx.interrupted().into()),
        _ = tokio::time::sleep(Duration::from_secs(5)) => {}
    }
    tracing::info!("search index rebuilt");
    Ok(())
}

/// Runs past its timeout: told to stop, it stops (`timed_out`).
#[task(name = "demo.times_out", timeout = "1s")]
async fn times_out(ctx: TaskContext) -> anyhow::Result<()> {
    tracing::info!("exporting to the partner SFTP");
    tokio::select! {
        _ = ctx.cancelled() => return Err(ctx.interrupted().into()),
        _ = tokio::time::sleep(Duration::from_secs(3)) => {}
    }
    Ok(())
}

/// A tenant's sync: the task's instances (one per tenant, declared in `dashboard_demo.json`)
/// each read their tenant from their arguments.
#[task(name = "demo.tenants")]
async fn tenants(ctx: TaskContext) -> anyhow::Result<()> {
    let tenant: Option<serde_json::Value> = ctx.args()?;
    tracing::info!(key = ?ctx.key(), ?tenant, "tenant synced");
    Ok(())
}

/// Scheduled once a year: run it from the dashboard.
#[task(name = "demo.on_demand")]
async fn on_demand(ctx: TaskContext) -> anyhow::Result<()> {
    tracing::info!(run = ctx.run_id(), "on-demand cleanup ran");
    Ok(())
}

/// Four shards a tick (`shards = 4`): each tick is one mark of the strip, folded from its
/// shards, and lists them on the task page.
#[task(name = "demo.sharded", shards = 4)]
async fn sharded(ctx: TaskContext) -> anyhow::Result<()> {
    let shard = ctx.shard();
    tracing::info!(%shard, "reindexing a partition");
    tokio::time::sleep(Duration::from_millis(100 + u64::from(shard.index) * 150)).await;
    Ok(())
}

/// A broadcast (`shards = "nodes"`): each tick runs once on every node alive at it, and its
/// mark counts them ("1/1 nodes ran" on this lone node).
#[task(name = "demo.broadcast", shards = "nodes")]
async fn broadcast(ctx: TaskContext) {
    tracing::info!(shard = %ctx.shard(), "clearing this node's local cache");
}

/// Monthly at 02:30 New York time: its next fire times cross a DST change (and one falls in
/// the spring-forward gap).
#[task(name = "demo.monthly", misfire = "skip")]
async fn monthly() {
    tracing::info!("monthly invoice run");
}

/// An advertiser's report: one instance per advertiser, made at run time by
/// [`make_instances`], each with its own schedule and arguments.
#[task(name = "demo.advertisers")]
async fn advertisers(ctx: TaskContext) -> anyhow::Result<()> {
    let advertiser: serde_json::Value = ctx.args()?;
    tracing::info!(key = ?ctx.key(), %advertiser, "advertiser report pulled");
    Ok(())
}

/// Mirrors the catalogue: its own ticks to our bucket, its instances (one per partner, made at
/// run time by [`make_instances`]) to the partner's bucket named in their arguments. Partner
/// `globex` revoked our access key: its runs fail every time, while the task's own runs and
/// `initech`'s succeed; the task fails through that instance alone.
#[task(name = "demo.mirrors")]
async fn mirrors(ctx: TaskContext) -> anyhow::Result<()> {
    let bucket = match ctx.key() {
        None => "our-catalogue".to_owned(),
        Some(_) => ctx.args::<serde_json::Value>()?["bucket"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
    };
    tracing::info!(key = ?ctx.key(), %bucket, "mirroring the catalogue");
    if ctx.key() == Some("globex") {
        anyhow::bail!("403 Forbidden from {bucket}: our access key AKIA-DEMO was revoked");
    }
    Ok(())
}

/// Loads the warehouse for 8 s every 10 s, holding the limit `warehouse-db` (one run at a time
/// across tasks and nodes: `limits` in `dashboard_demo.json`).
#[task(name = "demo.warehouse_load", limit = "warehouse-db")]
async fn warehouse_load(ctx: TaskContext) -> anyhow::Result<()> {
    tracing::info!("loading the warehouse");
    tokio::select! {
        _ = ctx.cancelled() => return Err(ctx.interrupted().into()),
        _ = tokio::time::sleep(Duration::from_secs(8)) => {}
    }
    Ok(())
}

/// Quick, but shares `warehouse-db` with the load: while the load holds it, its ticks wait
/// (`waiting`, naming the limit and its holder) and start late.
#[task(name = "demo.warehouse_report", limit = "warehouse-db")]
async fn warehouse_report() {
    tracing::info!("warehouse report written");
}

/// The advertisers' and the mirrors' instances, made from Rust once the node has written their
/// task's row (its first reconcile, shortly after start).
async fn make_instances(schedules: Schedules) -> scheduler::Result<()> {
    let advertisers = [
        ("adv-101", "*/2 * * * * *", "UTC"),
        ("adv-102", "*/3 * * * * *", "Europe/Berlin"),
        ("brand-7", "*/4 * * * * *", "UTC"),
    ]
    .map(|(key, cron, zone)| {
        Schedule::new("demo.advertisers", key)
            .cron(cron)
            .timezone(zone)
            .args(json!({"advertiser": key}))
    });
    let mirrors = [
        ("initech", "*/3 * * * * *", "initech-catalogue"),
        ("globex", "*/4 * * * * *", "globex-catalogue"),
    ]
    .map(|(key, cron, bucket)| {
        Schedule::new("demo.mirrors", key)
            .cron(cron)
            .args(json!({"bucket": bucket}))
    });
    for schedule in advertisers.into_iter().chain(mirrors) {
        let mut tries = 0;
        loop {
            match schedules.upsert(schedule.clone()).await {
                Ok(_) => break,
                // Not in the store yet (or its tables not made yet): the node is starting.
                Err(_) if tries < 120 => {
                    tries += 1;
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
                Err(e) => return Err(e),
            }
        }
    }
    tracing::info!("advertisers' and mirrors' instances made");
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    scheduler::init_tracing();
    let config = std::env::var("SCHEDULER_CONFIG")
        .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/dashboard_demo.json").to_owned());
    let scheduler = SchedulerBuilder::from_env()?
        .config(config)
        .state(Counter::default())
        .build()?;
    let schedules = scheduler.schedules();
    tokio::spawn(async move {
        if let Err(e) = make_instances(schedules).await {
            tracing::error!(%e, "the instances made at run time were not made");
        }
    });
    scheduler.run_until(scheduler::shutdown_signal()).await?;
    Ok(())
}
