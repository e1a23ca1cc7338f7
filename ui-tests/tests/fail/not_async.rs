use scheduler::{TaskContext, task};

#[task(name = "syncReport")]
fn sync_report(_ctx: TaskContext) -> anyhow::Result<()> {
    Ok(())
}

fn main() {
    // The function is still emitted, so callers do not get a second error.
    let _ = sync_report(TaskContext::standalone("syncReport"));
}
