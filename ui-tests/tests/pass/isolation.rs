// Process isolation, with and without a memory limit, in every unit family; and in-process
// written out.
use scheduler::{Isolation, TaskRegistry, task};

#[task(name = "isolated", isolation = "process")]
async fn isolated() {}

#[task(
    memory_limit = "512MiB",
    isolation = "process",
    name = "isolatedBinary"
)]
async fn isolated_binary() -> Result<(), std::io::Error> {
    Ok(())
}

#[task(
    name = "isolatedDecimal",
    isolation = "process",
    memory_limit = "2 GB",
    timeout = "5m"
)]
async fn isolated_decimal(_ctx: scheduler::TaskContext) {}

#[task(name = "inProcess", isolation = "in-process")]
async fn in_process() {}

#[test]
fn as_declared() {
    let registry = TaskRegistry::collect().unwrap();
    let options = |name| registry.get(name).unwrap().options;
    assert_eq!(options("isolated").isolation, Some(Isolation::Process));
    assert_eq!(options("isolated").memory_limit, None);
    assert_eq!(options("isolatedBinary").memory_limit, Some(512 << 20));
    assert_eq!(options("isolatedDecimal").memory_limit, Some(2_000_000_000));
    assert_eq!(options("inProcess").isolation, Some(Isolation::InProcess));
}
