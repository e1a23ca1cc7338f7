use scheduler::task;

#[task(name = "parseUploads", isolation = "process", memory_limit = "half a gig")]
async fn parse_uploads() {}

#[task(name = "resizeImages", isolation = "process", memory_limit = "512")]
async fn resize_images() {}

fn main() {}
