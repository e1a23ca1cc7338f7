use scheduler::task;

// A memory limit applies to a process of the task's own.
#[task(name = "parseUploads", memory_limit = "512MiB")]
async fn parse_uploads() {}

#[task(name = "resizeImages", isolation = "in-process", memory_limit = "1GiB")]
async fn resize_images() {}

fn main() {}
