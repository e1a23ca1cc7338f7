//! A scheduler application that builds its scheduler itself ([`scheduler::SchedulerBuilder`],
//! [`scheduler::Scheduler::run_until`]) and never asks whether it is an isolated run's child, as an
//! application with its own `main` may well do. Configured through the environment.
//!
//! Its one task, `selfbuilt.iso`, runs in a child process (`isolation = "process"`): the node
//! starts this binary again for each run, with the node's environment minus its secrets (so
//! with the node's fixed admin address and without its database URL). Each run records itself
//! in a file under `$ISO_RECORD_DIR` (the handler's own record).

use scheduler::{TaskContext, task};

/// Records the run in `$ISO_RECORD_DIR/ran-<run id>`.
#[task(name = "selfbuilt.iso", isolation = "process")]
async fn selfbuilt_iso(ctx: TaskContext) {
    let dir = std::path::PathBuf::from(std::env::var_os("ISO_RECORD_DIR").expect("ISO_RECORD_DIR"));
    std::fs::create_dir_all(&dir).expect("create the record directory");
    let path = dir.join(format!("ran-{}", ctx.run_id()));
    std::fs::write(path.with_extension("tmp"), std::process::id().to_string())
        .expect("write a record");
    std::fs::rename(path.with_extension("tmp"), path).expect("publish a record");
}

#[tokio::main]
async fn main() -> scheduler::Result<()> {
    scheduler::init_tracing();
    scheduler::SchedulerBuilder::from_env()?
        .build()?
        .run_until(scheduler::shutdown_signal())
        .await
}
