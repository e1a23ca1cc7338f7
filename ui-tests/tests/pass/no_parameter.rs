use scheduler::task;

#[task(name = "noParameter")]
async fn no_parameter() {}

fn main() {}
