use scheduler::task;

#[task(name = "syncReport", retry = 3)]
async fn sync_report() {}

fn main() {}
