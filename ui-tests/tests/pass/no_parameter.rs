use scheduler::task;

#[task(name = "noParameter")]
async fn no_parameter() {}

// Compiling is the test: there is nothing to run.
