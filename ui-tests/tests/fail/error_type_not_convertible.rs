use scheduler::task;

#[derive(Debug)]
struct NotAnError;

#[task(name = "syncReport")]
async fn sync_report() -> Result<(), NotAnError> {
    Err(NotAnError)
}

fn main() {}
