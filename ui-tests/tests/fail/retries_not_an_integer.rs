use scheduler::task;

#[task(name = "syncReport", retries = "3")]
async fn sync_report() {}

fn main() {}
