use scheduler::task;

#[task(name = "parseUploads", isolation = "process", memory_limit = "512M")]
async fn parse_uploads() {}

fn main() {}
