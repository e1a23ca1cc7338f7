use scheduler::task;

#[task(name = "parseUploads", isolation = "process", memory_limit = "16MiB")]
async fn parse_uploads() {}

fn main() {}
