use scheduler::task;

#[task(name = "parseUploads", max_processes = 64, cpu_limit = "10m", max_file_size = "1GiB")]
async fn parse_uploads() {}

fn main() {}
