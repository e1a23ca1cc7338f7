use scheduler::task;

#[task(name = "io.result")]
async fn io_result() -> std::io::Result<()> {
    Err(std::io::Error::other("disk full"))
}

fn main() {}
