use scheduler::{Shard, TaskContext, task};

#[task(name = "warmCaches", shards = "nodes")]
async fn warm_caches(ctx: TaskContext) {
    let Shard { index, total } = ctx.shard();
    assert!(index < total && ctx.is_broadcast());
}

// Compiling is the test: there is nothing to run.
