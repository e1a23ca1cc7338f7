use scheduler::task;

#[task("syncReport")]
async fn sync_report() {}

fn main() {}
