use scheduler::{TaskContext, task};

// The generated handler's own `ctx` does not shadow a user function of that name.
#[task(name = "ctx")]
async fn ctx(ctx: TaskContext) {
    let _ = ctx;
}

// Compiling is the test: there is nothing to run.
