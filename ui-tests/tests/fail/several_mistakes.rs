use scheduler::task;

// Every mistake is reported at once, each at its own token.
#[task(name = "sync report", retry = 3, timeout = "3 parsecs", misfire = "later")]
fn sync_report<T>(_a: u32, _b: u32) {}

fn main() {}
