use scheduler::task;

#[task(name = "syncReport", backoff = "")]
async fn sync_report() {}

fn main() {}
