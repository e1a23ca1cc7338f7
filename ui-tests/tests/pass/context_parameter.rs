use scheduler::{TaskContext, task};

#[task(name = "contextParameter")]
async fn context_parameter(ctx: TaskContext) {
    let _ = ctx.task_name();
}

// Any pattern and any path to the type are accepted.
#[task(name = "contextPath")]
async fn context_path(_: scheduler::TaskContext) {}

#[task(name = "contextUnused")]
async fn context_unused(_ctx: ::scheduler::TaskContext) {}

// Compiling is the test: there is nothing to run.
