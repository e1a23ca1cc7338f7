use scheduler::{TaskContext, task};

#[task(name = "syncAdvertiserReport")]
async fn sync_advertiser_report(ctx: TaskContext) -> anyhow::Result<()> {
    anyhow::ensure!(!ctx.task_name().is_empty(), "no name");
    Ok(())
}

fn main() {}
