use scheduler::{TaskContext, task};

#[task]
async fn sync_report(_ctx: TaskContext) {}

#[task(crate = ::scheduler)]
async fn sync_other(_ctx: TaskContext) {}

fn main() {}
