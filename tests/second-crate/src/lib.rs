//! Tasks defined outside the test binary, in two modules, to check that `#[task]` registrations
//! from a dependency crate reach `TaskRegistry::collect()`.

/// Reporting tasks.
pub mod reports {
    use scheduler::{TaskContext, task};

    /// The line of the `#[task]` attribute below, for the registry test.
    pub const EXPORT_LINE: u32 = line!() + 2;

    #[task(name = "second-crate.reports.export")]
    pub async fn export(ctx: TaskContext) -> Result<(), std::io::Error> {
        if ctx.task_name() == "fail" {
            return Err(std::io::Error::other("export failed"));
        }
        Ok(())
    }
}

/// Housekeeping tasks.
pub mod cleanup {
    use scheduler::task;

    #[task(name = "second-crate.cleanup.purge")]
    pub(crate) async fn purge() {}
}
