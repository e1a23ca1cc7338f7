//! The smallest application: one task, the engine on an SQLite file, a config fixed in code.
//! Built with `default-features = false, features = ["sqlite"]`: no PostgreSQL driver, no admin
//! server, no HTTP client, no command line.
//!
//! ```sh
//! cargo run -p scheduler-example-minimal   # state in ./scheduler.db; Ctrl-C to stop
//! ```

use scheduler::config::ConfigDocument;
use scheduler::{Scheduler, TaskContext, task};

#[task(name = "minimalHeartbeat")]
async fn heartbeat(ctx: TaskContext) -> anyhow::Result<()> {
    tracing::info!(tick = %ctx.scheduled_at(), "beat");
    Ok(())
}

const TASKS: &str =
    r#"{"tasks": [{"name": "minimalHeartbeat", "enabled": true, "cron": "*/5 * * * * *"}]}"#;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    scheduler::init_tracing();
    Scheduler::builder()
        .database_url("sqlite://scheduler.db")
        .config_document(ConfigDocument::from_json(TASKS)?)
        .build()?
        .run_until(scheduler::shutdown_signal())
        .await?;
    Ok(())
}
