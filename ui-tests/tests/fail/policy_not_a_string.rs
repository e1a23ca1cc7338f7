use scheduler::task;

// Policies are written as strings, not as the enum's variants.
#[task(name = "syncReport", misfire = Skip, recovery = scheduler::Recovery::Never)]
async fn sync_report() {}

fn main() {}
