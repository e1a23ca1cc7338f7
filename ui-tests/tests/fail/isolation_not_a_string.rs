use scheduler::task;

// Isolation is written as a string, not as the enum's variant.
#[task(name = "parseUploads", isolation = scheduler::Isolation::Process)]
async fn parse_uploads() {}

fn main() {}
