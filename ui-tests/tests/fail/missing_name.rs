use scheduler::{TaskContext, task};

#[task]
async fn sync_report(_ctx: TaskContext) {}

#[task(crate = ::scheduler)]
async fn sync_other(_ctx: TaskContext) {}

// An unknown option does not hide the missing name.
#[task(retry = 3)]
async fn sync_third() {}

// Nor do valid policy options stand in for it.
#[task(timeout = "30m", retries = 3)]
async fn sync_fourth() {}

fn main() {}
