use scheduler::task;

#[task(name = "")]
async fn sync_report() {}

fn main() {}
