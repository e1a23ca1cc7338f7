use scheduler::task;

#[task(name = "syncReport", timeout = "0s")]
async fn sync_report() {}

fn main() {}
