//! The policy and isolation options written in `#[task(...)]` reach the registered descriptor
//! exactly, and a task that writes none registers `TaskOptions::DEFAULT`, so the scheduler's
//! defaults apply.

use std::time::Duration;

use scheduler::registry::TaskOptions;
use scheduler::{Isolation, Misfire, Recovery, TaskRegistry, task};

#[task(
    name = "options.every",
    timeout = "30m",
    retries = 3,
    backoff = "30s",
    misfire = "skip",
    lock_lifetime = "2m",
    recovery = "never"
)]
async fn every_option() {}

#[task(
    name = "options.some",
    retries = 0,
    misfire = "once",
    recovery = "rerun"
)]
async fn some_options() {}

#[task(name = "options.precise", timeout = "1h 30m 250ms", backoff = "1500us")]
async fn precise_durations() {}

#[task(name = "options.none")]
async fn no_options() {}

#[task(
    name = "options.isolated",
    isolation = "process",
    memory_limit = "512MiB"
)]
async fn isolated() {}

#[task(
    name = "options.limited",
    isolation = "process",
    max_processes = 64,
    cpu_limit = "10m",
    max_file_size = "1GiB"
)]
async fn limited() {}

fn options(name: &str) -> TaskOptions {
    TaskRegistry::collect()
        .expect("no duplicate task names")
        .get(name)
        .unwrap_or_else(|| panic!("task `{name}` is not registered"))
        .options
}

#[test]
fn every_option_is_registered_with_its_value() {
    let options = options("options.every");
    assert_eq!(options.timeout, Some(Duration::from_secs(30 * 60)));
    assert_eq!(options.retries, Some(3));
    assert_eq!(options.backoff, Some(Duration::from_secs(30)));
    assert_eq!(options.misfire, Some(Misfire::Skip));
    assert_eq!(options.lock_lifetime, Some(Duration::from_secs(2 * 60)));
    assert_eq!(options.recovery, Some(Recovery::Never));
    assert_eq!(
        options,
        TaskOptions::DEFAULT
            .timeout(Duration::from_secs(1800))
            .retries(3)
            .backoff(Duration::from_secs(30))
            .misfire(Misfire::Skip)
            .lock_lifetime(Duration::from_secs(120))
            .recovery(Recovery::Never)
    );
}

#[test]
fn options_left_out_stay_unset() {
    assert_eq!(
        options("options.some"),
        TaskOptions::DEFAULT
            .retries(0)
            .misfire(Misfire::Once)
            .recovery(Recovery::Rerun)
    );
}

#[test]
fn durations_keep_sub_second_precision() {
    let options = options("options.precise");
    assert_eq!(
        options.timeout,
        Some(Duration::from_secs(90 * 60) + Duration::from_millis(250))
    );
    assert_eq!(options.backoff, Some(Duration::from_micros(1500)));
}

#[test]
fn a_task_without_options_registers_the_default() {
    assert_eq!(options("options.none"), TaskOptions::DEFAULT);
    assert_eq!(options("options.none"), TaskOptions::default());
}

#[test]
fn isolation_and_its_memory_limit_are_registered() {
    let isolated = options("options.isolated");
    assert_eq!(isolated.isolation, Some(Isolation::Process));
    assert_eq!(isolated.memory_limit, Some(512 * 1024 * 1024));
    assert_eq!(
        isolated,
        TaskOptions::DEFAULT
            .isolation(Isolation::Process)
            .memory_limit(512 << 20)
    );
    // Left out: the handler runs in the node's process, without a limit.
    assert_eq!(options("options.none").isolation, None);
    assert_eq!(options("options.none").memory_limit, None);
}

#[test]
fn the_process_limits_are_registered() {
    assert_eq!(
        options("options.limited"),
        TaskOptions::DEFAULT
            .isolation(Isolation::Process)
            .max_processes(64)
            .cpu_limit(Duration::from_secs(600))
            .max_file_size(1 << 30)
    );
    let none = options("options.none");
    assert_eq!(
        (none.max_processes, none.cpu_limit, none.max_file_size),
        (None, None, None)
    );
}
