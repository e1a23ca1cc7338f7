use scheduler::task;

#[task(name = "reindex", shards = 0)]
async fn reindex() {}

fn main() {}
