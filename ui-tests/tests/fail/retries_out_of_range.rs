use scheduler::task;

#[task(name = "syncReport", retries = 1000)]
async fn sync_report() {}

#[task(name = "syncOther", retries = -1)]
async fn sync_other() {}

fn main() {}
