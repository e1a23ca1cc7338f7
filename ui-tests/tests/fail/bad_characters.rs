use scheduler::task;

#[task(name = "sync report")]
async fn with_space() {}

#[task(name = "reports/sync")]
async fn with_slash() {}

fn main() {}
