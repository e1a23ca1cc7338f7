use scheduler::task;

#[task(name = "countRows")]
async fn count_rows() -> i32 {
    0
}

#[task(name = "countOk")]
async fn count_ok() -> Result<i32, std::io::Error> {
    Ok(0)
}

fn main() {}
