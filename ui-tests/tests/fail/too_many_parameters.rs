use scheduler::{TaskContext, task};

#[task(name = "syncReport")]
async fn sync_report(_ctx: TaskContext, _retries: u32, _dry_run: bool) {}

fn main() {}
