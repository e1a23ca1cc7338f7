use scheduler::task;

#[task(name = "io.result")]
async fn io_result() -> std::io::Result<()> {
    Err(std::io::Error::other("disk full"))
}

// Compiling is the test: there is nothing to run.
