//! What the `ConfigWatcher` logs: each distinct failure once, recovery once, nothing on idle polls.
//!
//! Alone in its own test binary: `tracing` caches per-callsite interest globally, and a test on
//! another thread without a subscriber can make a thread-local capture miss events.

mod config_support;

use std::fs;

use config_support::{LogCapture, doc_json};
use scheduler::config::{ConfigWatcher, FileSource, PollOutcome};

fn changed_version(outcome: PollOutcome) -> Option<i64> {
    match outcome {
        PollOutcome::Changed(doc) => doc.version,
        other => panic!("expected a new document, got {other:?}"),
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_persisting_failure_is_logged_once_and_recovery_is_logged() {
    let logs = LogCapture::start();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tasks.json");
    fs::write(&path, doc_json(1)).unwrap();
    let mut watcher = ConfigWatcher::new(FileSource::new(&path));
    assert_eq!(changed_version(watcher.poll_once().await), Some(1));
    assert_eq!(logs.count("loaded new config document"), 1);

    fs::remove_file(&path).unwrap();
    for _ in 0..3 {
        assert!(matches!(watcher.poll_once().await, PollOutcome::Failed(_)));
    }
    assert_eq!(
        logs.count("keeping the last good document"),
        1,
        "{}",
        logs.text()
    );

    // A different error is logged again.
    fs::write(&path, "garbage").unwrap();
    for _ in 0..3 {
        watcher.poll_once().await;
    }
    assert_eq!(
        logs.count("keeping the last good document"),
        2,
        "{}",
        logs.text()
    );

    fs::write(&path, doc_json(1)).unwrap();
    // Same document as the last good one: nothing new, but the source works again.
    assert!(matches!(watcher.poll_once().await, PollOutcome::Unchanged));
    assert_eq!(logs.count("config source recovered"), 1, "{}", logs.text());
    // Idle polls log nothing at INFO or above.
    let before = logs.text().lines().count();
    for _ in 0..3 {
        assert!(matches!(watcher.poll_once().await, PollOutcome::Unchanged));
    }
    let idle: Vec<String> = logs
        .text()
        .lines()
        .skip(before)
        .filter(|l| !l.contains("DEBUG"))
        .map(str::to_owned)
        .collect();
    assert!(idle.is_empty(), "{idle:?}");
}
