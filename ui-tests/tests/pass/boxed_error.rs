use std::error::Error;

use scheduler::task;

#[task(name = "boxedError")]
async fn boxed_error() -> Result<(), Box<dyn Error + Send + Sync>> {
    Err("no data".into())
}

// Compiling is the test: there is nothing to run.
