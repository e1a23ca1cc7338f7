use scheduler::task;

#[task(name = "syncReport", name = "syncReport2")]
async fn sync_report() {}

#[task(name = "syncOther", crate = ::scheduler, crate = ::scheduler)]
async fn sync_other() {}

// A repeated key is reported even when its first value is invalid.
#[task(name = 5, name = "syncThird")]
async fn sync_third() {}

fn main() {}
