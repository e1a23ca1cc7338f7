//! One node process of the `shards` benchmark, started by it (not meant to be run by hand).
//!
//! Registers one task, `sb.00000`, with `SHARDS_COUNT` shards on `SHARDS_CRON`, in schema
//! `SHARDS_SCHEMA` of `DATABASE_URL`, as node `SHARDS_NODE_ID` (lock lifetime
//! `SHARDS_LOCK_LIFETIME` seconds if set, else the engine's default). Each shard's handler
//! appends `start <tick ms> <shard> <node> <ms> <run id>` when it starts, works for
//! `SHARDS_WORK_MS`, then appends `end ...` the same way, to `SHARDS_RECORD`: one write per line
//! on a file opened for appending, so a node killed with SIGKILL leaves every line it wrote
//! (the handlers' own record, which the benchmark judges).

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::Utc;
use scheduler::__private::TaskFuture;
use scheduler::{Scheduler, TaskContext};

/// The handlers' record file and how long each shard works.
struct Record {
    file: Mutex<std::fs::File>,
    work: Duration,
}

impl Record {
    fn line(&self, kind: &str, ctx: &TaskContext, at_ms: i64) {
        let line = format!(
            "{kind} {} {} {} {at_ms} {}\n",
            ctx.scheduled_at().timestamp_millis(),
            ctx.shard().index,
            ctx.node_id(),
            ctx.run_id()
        );
        // One write of the whole line: appended whole, kept by the kernel if the process dies.
        let _ = self.file.lock().unwrap().write_all(line.as_bytes());
    }
}

fn handler(ctx: TaskContext) -> TaskFuture {
    Box::pin(async move {
        let start = Utc::now().timestamp_millis();
        let record = ctx.state::<Arc<Record>>()?;
        record.line("start", &ctx, start);
        tokio::time::sleep(record.work).await;
        record.line("end", &ctx, Utc::now().timestamp_millis());
        Ok(())
    })
}

fn env(name: &str) -> Result<String, String> {
    std::env::var(name)
        .map_err(|_| format!("{name} is not set: shards_node is started by `shards`"))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    if std::env::var_os("RUST_LOG").is_some() {
        scheduler::init_tracing();
    }
    let url = env("DATABASE_URL")?;
    let schema = env("SHARDS_SCHEMA")?;
    let node_id = env("SHARDS_NODE_ID")?;
    let shards: u32 = env("SHARDS_COUNT")?.parse()?;
    let cron = env("SHARDS_CRON")?;
    let work = Duration::from_millis(env("SHARDS_WORK_MS")?.parse()?);
    let record = Arc::new(Record {
        file: Mutex::new(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(env("SHARDS_RECORD")?)?,
        ),
        work,
    });
    let registry = scheduler_bench::engine_support::registry_with("sb.", 1, handler);
    // The config document as an operator writes it.
    let doc = scheduler::config::ConfigDocument::from_json(&format!(
        r#"{{"tasks":[{{"name":"sb.00000","enabled":true,"cron":"{cron}","timezone":"UTC","shards":{shards}}}]}}"#
    ))?;
    let mut builder = Scheduler::builder()
        .store(Arc::new(
            scheduler::store::PgStore::builder(&url)
                .schema(&schema)
                .connect_lazy()?,
        ))
        .node_id(&node_id)
        .registry(registry)
        .config_document(doc)
        .state(record);
    if let Ok(s) = std::env::var("SHARDS_LOCK_LIFETIME") {
        builder = builder.lock_lifetime(Duration::from_secs(s.parse()?));
    }
    builder
        .build()?
        .run_until(scheduler::shutdown_signal())
        .await?;
    Ok(())
}
