//! Tasks from several modules of this file and from a second crate all reach
//! `TaskRegistry::collect()`, with the right metadata, and their handlers run.

use scheduler::{TaskContext, TaskRegistry};
// Nothing else from the second crate is used: this keeps it linked, with its registrations.
use scheduler_test_tasks as _;

/// The line of the `#[task]` attribute of `reports::sync`, checked against its descriptor.
const SYNC_LINE: u32 = line!() + 5;

mod reports {
    use scheduler::{TaskContext, task};

    #[task(name = "registry.reports.sync")]
    pub async fn sync(ctx: TaskContext) -> anyhow::Result<()> {
        anyhow::ensure!(
            ctx.task_name() != "fail",
            "advertiser report for {} is missing",
            ctx.task_name()
        );
        Ok(())
    }
}

mod maintenance {
    pub mod nightly {
        use scheduler::task;

        #[derive(Debug, thiserror::Error)]
        #[error("vacuum failed on table {0}")]
        pub struct VacuumError(pub &'static str);

        #[task(name = "registry.maintenance.vacuum")]
        async fn vacuum() -> Result<(), VacuumError> {
            Err(VacuumError("runs"))
        }

        #[task(name = "registry.maintenance.noop")]
        async fn noop() {}
    }
}

fn run(name: &str, ctx_name: &str) -> Result<(), String> {
    let registry = TaskRegistry::collect().expect("no duplicate task names");
    let task = registry
        .get(name)
        .unwrap_or_else(|| panic!("task `{name}` is not registered"));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    runtime
        .block_on((task.handler)(TaskContext::standalone(ctx_name)))
        .map_err(|error| error.to_string())
}

#[test]
fn collects_tasks_from_every_module_and_crate() {
    let registry = TaskRegistry::collect().expect("no duplicate task names");
    assert_eq!(
        registry.names().collect::<Vec<_>>(),
        [
            "registry.maintenance.noop",
            "registry.maintenance.vacuum",
            "registry.reports.sync",
            "second-crate.cleanup.purge",
            "second-crate.reports.export",
        ]
    );
}

#[test]
fn descriptor_records_where_the_task_is_defined() {
    let registry = TaskRegistry::collect().unwrap();

    let sync = registry.get("registry.reports.sync").unwrap();
    assert_eq!(sync.file, file!());
    assert_eq!(sync.line, SYNC_LINE);
    assert_eq!(sync.module_path, "registry::reports");
    assert_eq!(sync.location(), format!("{}:{SYNC_LINE}", file!()));
    assert_eq!(sync.options, scheduler::__private::TaskOptions::DEFAULT);

    let vacuum = registry.get("registry.maintenance.vacuum").unwrap();
    assert_eq!(vacuum.module_path, "registry::maintenance::nightly");

    let export = registry.get("second-crate.reports.export").unwrap();
    assert_eq!(export.module_path, "scheduler_test_tasks::reports");
    assert!(export.file.ends_with("src/lib.rs"), "{}", export.file);
    assert_eq!(export.line, scheduler_test_tasks::reports::EXPORT_LINE);
}

#[test]
fn handler_runs_the_function_with_its_context() {
    assert_eq!(run("registry.reports.sync", "ok"), Ok(()));
    assert_eq!(
        run("registry.reports.sync", "fail"),
        Err("advertiser report for fail is missing".to_owned())
    );
}

#[test]
fn handler_returns_the_functions_error() {
    assert_eq!(
        run("registry.maintenance.vacuum", "x"),
        Err("vacuum failed on table runs".to_owned())
    );
    assert_eq!(
        run("second-crate.reports.export", "fail"),
        Err("export failed".to_owned())
    );
}

#[test]
fn handlers_without_context_or_result_succeed() {
    assert_eq!(run("registry.maintenance.noop", "x"), Ok(()));
    assert_eq!(run("second-crate.cleanup.purge", "x"), Ok(()));
    assert_eq!(run("second-crate.reports.export", "x"), Ok(()));
}
