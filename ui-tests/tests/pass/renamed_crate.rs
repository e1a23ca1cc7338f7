// The dependency is reached under another name, as after `sched = { package = "scheduler" }`.
pub extern crate scheduler as sched;

mod reexport {
    pub use sched as runtime;
}

#[sched::task(name = "renamed.path", crate = sched)]
async fn renamed_path(_ctx: sched::TaskContext) {}

#[sched::task(name = "renamed.nested", crate = crate::reexport::runtime)]
async fn renamed_nested() {}

#[sched::task(name = "renamed.string", crate = "sched")]
async fn renamed_string() {}

// Compiling is the test: there is nothing to run.
