use scheduler::task;

#[task(name = "parseUploads", isolation = "process", max_file_size = "100B")]
async fn parse_uploads() {}

#[task(name = "resizeImages", isolation = "process", max_file_size = "1G")]
async fn resize_images() {}

fn main() {}
