// Values passed through a `macro_rules!` fragment arrive wrapped in an invisible group.
macro_rules! define_task {
    ($name:expr, $krate:path, $func:ident) => {
        #[scheduler::task(name = $name, crate = $krate)]
        async fn $func() {}
    };
}

define_task!("viaMacro", ::scheduler, via_macro);

fn main() {
    let registry = scheduler::TaskRegistry::collect().unwrap();
    assert!(registry.contains("viaMacro"));
}
