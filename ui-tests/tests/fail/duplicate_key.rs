use scheduler::task;

#[task(name = "syncReport", name = "syncReport2")]
async fn sync_report() {}

#[task(name = "syncOther", crate = ::scheduler, crate = ::scheduler)]
async fn sync_other() {}

// A repeated key is reported even when its first value is invalid.
#[task(name = 5, name = "syncThird")]
async fn sync_third() {}

#[task(name = "syncFourth", timeout = "1m", retries = 2, timeout = "2m")]
async fn sync_fourth() {}

fn main() {}
