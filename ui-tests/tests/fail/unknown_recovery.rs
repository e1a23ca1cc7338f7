use scheduler::task;

#[task(name = "syncReport", recovery = "sometimes")]
async fn sync_report() {}

fn main() {}
