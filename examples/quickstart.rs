//! The quickstart: two tasks written as code, scheduled by `quickstart.json`. Run it with
//! `scripts/quickstart`: with no database configured it keeps its run state in an SQLite file
//! (`target/quickstart.db`; nothing to install), with `DATABASE_URL=postgres://...` (or
//! `--postgres`, which finds or starts a server) in PostgreSQL. Or run it directly:
//! `cargo run -p scheduler-examples --example quickstart` uses `SCHEDULER_DATABASE_URL`, else
//! `DATABASE_URL`, else `./scheduler.db`, like any application built with
//! [`SchedulerBuilder::from_env`].
//!
//! Edit `examples/quickstart.json` while it runs: schedule changes apply within seconds. On
//! PostgreSQL, start a second copy in another terminal: every tick still runs exactly once (on
//! SQLite the second copy is refused: the file belongs to one process). Ctrl-C drains gracefully.

use std::sync::atomic::{AtomicU64, Ordering};

use scheduler::{SchedulerBuilder, TaskContext, task};

/// Application state shared with every handler (a database pool or HTTP client in real code).
#[derive(Default)]
struct ReportClient {
    synced: AtomicU64,
}

#[task(name = "syncAdvertiserReport")]
async fn sync_advertiser_report(ctx: TaskContext) -> anyhow::Result<()> {
    let client = ctx.state::<ReportClient>()?;
    let n = client.synced.fetch_add(1, Ordering::Relaxed) + 1;
    tracing::info!(tick = %ctx.scheduled_at(), synced = n, "synced the advertiser report");
    Ok(())
}

#[task(name = "refreshMaterialCache")]
async fn refresh_material_cache(ctx: TaskContext) -> anyhow::Result<()> {
    for shard in 0..3 {
        // Long work watches for cancellation (shutdown, or a lock that could not be kept). Not
        // done? Say so: the run is recorded `interrupted` and its tick runs again elsewhere.
        ctx.check_cancelled()?;
        tokio::select! {
            _ = ctx.cancelled() => return Err(ctx.interrupted().into()),
            _ = tokio::time::sleep(std::time::Duration::from_millis(100)) => {
                tracing::debug!(shard, "material cache shard refreshed");
            }
        }
    }
    tracing::info!(run_id = ctx.run_id(), "material cache refreshed");
    Ok(())
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    scheduler::init_tracing();
    match run().await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            // The message says what to do (e.g. the SQLite file is held by another process).
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run() -> anyhow::Result<()> {
    let config = std::env::var("SCHEDULER_CONFIG")
        .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/quickstart.json").to_owned());
    SchedulerBuilder::from_env()?
        .config(config)
        .state(ReportClient::default())
        .build()?
        .run_until(scheduler::shutdown_signal())
        .await?;
    Ok(())
}
