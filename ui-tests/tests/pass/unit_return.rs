use scheduler::{TaskContext, task};

#[task(name = "implicitUnit")]
async fn implicit_unit(_ctx: TaskContext) {}

#[task(name = "explicitUnit")]
#[allow(clippy::unused_unit)]
async fn explicit_unit(_ctx: TaskContext) -> () {}

// Compiling is the test: there is nothing to run.
