//! Two functions registered under one name make `TaskRegistry::collect()` fail, naming both.

use scheduler::TaskRegistry;

const FIRST_LINE: u32 = line!() + 6;
const SECOND_LINE: u32 = line!() + 12;

mod billing {
    use scheduler::task;

    #[task(name = "dup")]
    async fn close_invoices() {}
}

mod reports {
    use scheduler::{TaskContext, task};

    #[task(name = "dup")]
    async fn export(_ctx: TaskContext) -> anyhow::Result<()> {
        Ok(())
    }
}

#[test]
fn duplicate_name_is_rejected_with_both_locations() {
    let error = TaskRegistry::collect().expect_err("`dup` is registered twice");
    let message = error.to_string();
    assert!(message.contains("`dup`"), "{message}");
    let first = format!("{}:{FIRST_LINE} (duplicate_names::billing)", file!());
    let second = format!("{}:{SECOND_LINE} (duplicate_names::reports)", file!());
    assert!(message.contains(&first), "{message} should name {first}");
    assert!(message.contains(&second), "{message} should name {second}");
}
