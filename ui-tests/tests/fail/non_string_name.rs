use scheduler::task;

#[task(name = 5)]
async fn sync_report() {}

fn main() {}
