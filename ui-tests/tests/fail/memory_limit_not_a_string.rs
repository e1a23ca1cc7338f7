use scheduler::task;

#[task(name = "parseUploads", isolation = "process", memory_limit = 536870912)]
async fn parse_uploads() {}

fn main() {}
