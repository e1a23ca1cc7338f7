use scheduler::task;

#[task(name = "parseUploads", isolation = "process", max_processes = 4)]
async fn parse_uploads() {}

fn main() {}
