use scheduler::task;

// Every allowed kind of character, and exactly the 128-character limit.
#[task(
    name = "ab.CD:0-9_ab.CD:0-9_ab.CD:0-9_ab.CD:0-9_ab.CD:0-9_ab.CD:0-9_ab.CD:0-9_ab.CD:0-9_ab.CD:0-9_ab.CD:0-9_ab.CD:0-9_ab.CD:0-9_abcdefgh"
)]
async fn longest_name() {}

#[task(name = "a")]
async fn shortest_name() {}

#[test]
fn as_declared() {
    let registry = scheduler::TaskRegistry::collect().unwrap();
    assert!(registry.contains("ab.CD:0-9_ab.CD:0-9_ab.CD:0-9_ab.CD:0-9_ab.CD:0-9_ab.CD:0-9_ab.CD:0-9_ab.CD:0-9_ab.CD:0-9_ab.CD:0-9_ab.CD:0-9_ab.CD:0-9_abcdefgh"));
    assert!(registry.contains("a"));
}
