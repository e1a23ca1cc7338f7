use scheduler::task;

#[task(name = "parseUploads", isolation = "thread")]
async fn parse_uploads() {}

fn main() {}
