use scheduler::task;

// A bare number has no unit: is it seconds or minutes?
#[task(name = "syncReport", timeout = 30)]
async fn sync_report() {}

fn main() {}
