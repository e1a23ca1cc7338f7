use scheduler::task;

#[task(name = "syncReport", name = "syncReport2")]
async fn sync_report() {}

#[task(name = "syncOther", crate = ::scheduler, crate = ::scheduler)]
async fn sync_other() {}

fn main() {}
