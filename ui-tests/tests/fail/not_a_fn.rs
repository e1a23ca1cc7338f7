use scheduler::task;

#[task(name = "syncReport")]
struct SyncReport;

fn main() {
    let _ = SyncReport;
}
