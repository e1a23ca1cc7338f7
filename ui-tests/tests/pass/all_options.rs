// Every policy option at once, in a different order than documented, with humantime forms.
use scheduler::task;

#[task(
    recovery = "never",
    name = "allOptions",
    timeout = "1h 30m",
    retries = 0,
    backoff = "1500us",
    misfire = "skip",
    lock_lifetime = "1s"
)]
async fn all_options() {}

#[task(
    name = "otherPolicies",
    misfire = "once",
    recovery = "rerun",
    retries = 100
)]
async fn other_policies() {}

#[test]
fn as_declared() {
    let registry = scheduler::TaskRegistry::collect().unwrap();
    assert!(registry.contains("allOptions"));
    assert!(registry.contains("otherPolicies"));
}
