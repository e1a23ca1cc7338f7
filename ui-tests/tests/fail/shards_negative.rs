use scheduler::task;

#[task(name = "reindex", shards = -1)]
async fn reindex() {}

fn main() {}
