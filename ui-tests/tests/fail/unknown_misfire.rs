use scheduler::task;

#[task(name = "syncReport", misfire = "later")]
async fn sync_report() {}

fn main() {}
