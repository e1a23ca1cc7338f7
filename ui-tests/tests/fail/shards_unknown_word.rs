use scheduler::task;

#[task(name = "warmCaches", shards = "all")]
async fn warm_caches() {}

fn main() {}
