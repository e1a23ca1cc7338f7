//! A node for looking at the dashboard: tasks that succeed, fail now and then, fail every time
//! (each tick retried twice), overrun their interval (so ticks are skipped), time out, run
//! nightly or monthly, one split into shards, one run on every node (a broadcast), one that
//! runs only when triggered, and one with instances declared in the config (a schedule per
//! tenant, each with its arguments). The admin
//! server serves the dashboard at `/`.
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

use scheduler::{SchedulerBuilder, TaskContext, task};

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

/// Scheduled once a year: run it from the dashboard.
/// A tenant's sync: the task's instances (one per tenant, declared in `dashboard_demo.json`)
/// each read their tenant from their arguments.
#[task(name = "demo.tenants")]
async fn tenants(ctx: TaskContext) -> anyhow::Result<()> {
    let tenant: Option<serde_json::Value> = ctx.args()?;
    tracing::info!(key = ?ctx.key(), ?tenant, "tenant synced");
    Ok(())
}

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

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    scheduler::init_tracing();
    let config = std::env::var("SCHEDULER_CONFIG")
        .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/dashboard_demo.json").to_owned());
    SchedulerBuilder::from_env()?
        .config(config)
        .state(Counter::default())
        .build()?
        .run_until(scheduler::shutdown_signal())
        .await?;
    Ok(())
}
