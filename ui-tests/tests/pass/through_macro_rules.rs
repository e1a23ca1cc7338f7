// Values passed through a `macro_rules!` fragment arrive wrapped in an invisible group.
macro_rules! define_task {
    ($name:expr, $krate:path, $func:ident) => {
        #[scheduler::task(name = $name, crate = $krate)]
        async fn $func() {}
    };
}

define_task!("viaMacro", ::scheduler, via_macro);

macro_rules! define_task_with_policy {
    ($name:expr, $timeout:expr, $retries:expr, $misfire:expr, $func:ident) => {
        #[scheduler::task(name = $name, timeout = $timeout, retries = $retries, misfire = $misfire)]
        async fn $func() {}
    };
}

define_task_with_policy!("viaMacroPolicy", "10s", 2, "skip", via_macro_policy);

#[test]
fn as_declared() {
    let registry = scheduler::TaskRegistry::collect().unwrap();
    assert!(registry.contains("viaMacro"));
    let policy = registry.get("viaMacroPolicy").unwrap().options;
    assert_eq!(policy.timeout, Some(std::time::Duration::from_secs(10)));
    assert_eq!(policy.retries, Some(2));
    assert_eq!(policy.misfire, Some(scheduler::Misfire::Skip));
}
