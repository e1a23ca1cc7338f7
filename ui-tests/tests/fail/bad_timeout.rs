use scheduler::task;

#[task(name = "syncReport", timeout = "3 parsecs")]
async fn sync_report() {}

fn main() {}
