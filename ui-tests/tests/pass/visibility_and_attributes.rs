pub mod jobs {
    use scheduler::{TaskContext, task};

    /// Doc comments and other attributes are kept on the function.
    #[task(name = "public.task")]
    #[allow(clippy::needless_return)]
    #[must_use = "the run's outcome"]
    pub async fn public_task(_ctx: TaskContext) -> anyhow::Result<()> {
        return Ok(());
    }

    #[task(name = "crate.task")]
    pub(crate) async fn crate_task() {}
}

#[test]
fn as_declared() {
    // Still callable like any function.
    drop(jobs::public_task(scheduler::TaskContext::standalone(
        "public.task",
    )));
    drop(jobs::crate_task());
}
