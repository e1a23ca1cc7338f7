use scheduler::task;

#[task(name = "syncReport", lock_lifetime = "500ms")]
async fn sync_report() {}

fn main() {}
