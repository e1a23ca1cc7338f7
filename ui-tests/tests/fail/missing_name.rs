use scheduler::{TaskContext, task};

#[task]
async fn sync_report(_ctx: TaskContext) {}

#[task(crate = ::scheduler)]
async fn sync_other(_ctx: TaskContext) {}

// An unknown option does not hide the missing name.
#[task(retries = 3)]
async fn sync_third() {}

fn main() {}
