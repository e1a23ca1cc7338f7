use scheduler::task;

#[task(name = "parseUploads", isolation = "process", cpu_limit = "1500ms")]
async fn parse_uploads() {}

#[task(name = "resizeImages", isolation = "process", cpu_limit = "2years")]
async fn resize_images() {}

fn main() {}
