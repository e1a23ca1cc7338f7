use scheduler::{TaskContext, TaskRegistry, task};

#[task(name = "first")]
async fn first(_ctx: TaskContext) {}

#[task(name = "second")]
async fn second() -> anyhow::Result<()> {
    Ok(())
}

mod nested {
    #[scheduler::task(name = "third")]
    async fn third() {}
}

#[task(name = "fourth")]
async fn fourth() {}

#[test]
fn as_declared() {
    let registry = TaskRegistry::collect().unwrap();
    assert_eq!(
        registry.names().collect::<Vec<_>>(),
        ["first", "fourth", "second", "third"]
    );
}
