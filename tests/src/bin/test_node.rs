//! A scheduler node in its own process, for tests that kill it (`kill -9`). Configured entirely
//! through the environment, like any application built on `scheduler::run()`.

use std::time::Duration;

use scheduler::{TaskContext, task};

/// Runs until killed.
#[task(name = "kill.slow")]
async fn kill_slow(ctx: TaskContext) {
    tracing::info!(run_id = ctx.run_id(), "victim started the slow task");
    tokio::time::sleep(Duration::from_secs(3600)).await;
}

/// Runs until killed; at most once per tick (a run whose outcome is unknown is not rerun).
#[task(name = "kill.never", recovery = "never")]
async fn kill_never(ctx: TaskContext) {
    tracing::info!(
        run_id = ctx.run_id(),
        "victim started the at-most-once task"
    );
    tokio::time::sleep(Duration::from_secs(3600)).await;
}

#[tokio::main]
async fn main() -> scheduler::Result<()> {
    scheduler::run().await
}
