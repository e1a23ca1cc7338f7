use scheduler::task;

// Every mistake is reported at once, each at its own token.
#[task(name = "sync report", retries = 3)]
fn sync_report<T>(_a: u32, _b: u32) {}

fn main() {}
