use scheduler::{TaskContext, task};

#[task(name = "syncAdvertiserReport")]
async fn sync_advertiser_report(ctx: TaskContext) -> anyhow::Result<()> {
    anyhow::ensure!(!ctx.task_name().is_empty(), "no name");
    Ok(())
}

// Compiling is the test: there is nothing to run.
