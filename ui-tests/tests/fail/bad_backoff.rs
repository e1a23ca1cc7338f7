use scheduler::task;

// A unit is required: humantime does not assume seconds.
#[task(name = "syncReport", retries = 3, backoff = "30")]
async fn sync_report() {}

fn main() {}
