//! `FileSource` and `ConfigWatcher` against real files: content changes, atomic replacement,
//! Kubernetes ConfigMap symlink swaps, missing files and garbage.

mod config_support;

use std::fs;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use config_support::doc_json;
use scheduler::config::{
    ConfigDocument, ConfigError, ConfigFormat, ConfigSource, ConfigWatcher, Fetched, FileSource,
    PollOutcome,
};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

fn changed_text(fetched: Fetched) -> String {
    match fetched {
        Fetched::Changed(raw) => raw.text,
        Fetched::Unchanged => panic!("expected a change"),
    }
}

fn changed_version(outcome: PollOutcome) -> Option<i64> {
    match outcome {
        PollOutcome::Changed(doc) => doc.version,
        other => panic!("expected a new document, got {other:?}"),
    }
}

/// Writes `text` to a temp file beside `path`, then renames it over `path`.
fn replace_atomically(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    fs::write(&tmp, text).unwrap();
    fs::rename(&tmp, path).unwrap();
}

#[tokio::test]
async fn content_change_is_detected_and_same_content_is_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tasks.json");
    fs::write(&path, doc_json(1)).unwrap();
    let mut source = FileSource::new(&path);
    assert_eq!(source.describe(), path.display().to_string());

    let Fetched::Changed(raw) = source.fetch().await.unwrap() else {
        panic!("first fetch must return the text");
    };
    assert_eq!(raw.text, doc_json(1));
    assert_eq!(raw.format, Some(ConfigFormat::Json));
    assert!(raw.revision.as_deref().unwrap().starts_with("sha256:"));
    assert_eq!(source.fetch().await.unwrap(), Fetched::Unchanged);

    fs::write(&path, doc_json(2)).unwrap();
    assert_eq!(changed_text(source.fetch().await.unwrap()), doc_json(2));

    // Rewriting identical bytes (a new mtime) is not a change.
    fs::write(&path, doc_json(2)).unwrap();
    assert_eq!(source.fetch().await.unwrap(), Fetched::Unchanged);
}

#[tokio::test]
async fn atomic_rename_replacement_is_detected() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tasks.json");
    fs::write(&path, doc_json(1)).unwrap();
    let mut watcher = ConfigWatcher::new(FileSource::new(&path));
    assert_eq!(changed_version(watcher.poll_once().await), Some(1));

    replace_atomically(&path, &doc_json(2));
    assert_eq!(changed_version(watcher.poll_once().await), Some(2));
    assert!(matches!(watcher.poll_once().await, PollOutcome::Unchanged));
}

/// The layout kubelet writes for a ConfigMap volume: `tasks.yaml -> ..data/tasks.yaml`,
/// `..data -> ..<timestamp>`, and an update retargets `..data` by renaming a new symlink over it.
#[cfg(unix)]
#[tokio::test]
async fn configmap_symlink_swap_is_detected() {
    use std::os::unix::fs::symlink;

    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let first = root.join("..2026_11_30_10_00_00.000000001");
    fs::create_dir(&first).unwrap();
    fs::write(first.join("tasks.yaml"), yaml_doc(1)).unwrap();
    symlink("..2026_11_30_10_00_00.000000001", root.join("..data")).unwrap();
    symlink("..data/tasks.yaml", root.join("tasks.yaml")).unwrap();

    let mut watcher = ConfigWatcher::new(FileSource::new(root.join("tasks.yaml")));
    assert_eq!(changed_version(watcher.poll_once().await), Some(1));
    assert!(matches!(watcher.poll_once().await, PollOutcome::Unchanged));

    let second = root.join("..2026_11_30_10_05_00.000000002");
    fs::create_dir(&second).unwrap();
    fs::write(second.join("tasks.yaml"), yaml_doc(2)).unwrap();
    symlink("..2026_11_30_10_05_00.000000002", root.join("..data_tmp")).unwrap();
    fs::rename(root.join("..data_tmp"), root.join("..data")).unwrap();
    fs::remove_dir_all(&first).unwrap();

    assert_eq!(changed_version(watcher.poll_once().await), Some(2));
    assert!(matches!(watcher.poll_once().await, PollOutcome::Unchanged));
}

#[cfg(unix)]
fn yaml_doc(version: i64) -> String {
    format!(
        "version: {version}\ntasks:\n  - name: purgeSessions\n    enabled: true\n    cron: 0 0 3 * * *\n"
    )
}

#[tokio::test]
async fn missing_file_is_an_error_then_recovers_when_it_appears() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tasks.json");
    let mut watcher = ConfigWatcher::new(FileSource::new(&path));

    match watcher.poll_once().await {
        PollOutcome::Failed(ConfigError::Io { source, .. }) => {
            assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
        }
        other => panic!("expected a not-found error, got {other:?}"),
    }
    assert!(watcher.current().is_none());

    fs::write(&path, doc_json(1)).unwrap();
    assert_eq!(changed_version(watcher.poll_once().await), Some(1));
}

#[tokio::test]
async fn garbage_keeps_the_last_good_document() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tasks.json");
    fs::write(&path, doc_json(1)).unwrap();
    let mut watcher = ConfigWatcher::new(FileSource::new(&path));
    assert_eq!(changed_version(watcher.poll_once().await), Some(1));

    replace_atomically(&path, "{\"tasks\": [ not json");
    match watcher.poll_once().await {
        PollOutcome::Failed(e) => {
            assert!(e.is_parse(), "{e}");
            assert!(e.to_string().contains("tasks.json"), "{e}");
        }
        other => panic!("expected a parse failure, got {other:?}"),
    }
    assert_eq!(watcher.current().unwrap().version, Some(1));
    // The broken file has not changed since: nothing to do, still the last good document.
    assert!(matches!(watcher.poll_once().await, PollOutcome::Unchanged));
    assert_eq!(watcher.current().unwrap().version, Some(1));

    // A truncated write (empty file) is garbage too, not "no tasks".
    fs::write(&path, "").unwrap();
    assert!(matches!(watcher.poll_once().await, PollOutcome::Failed(_)));
    assert_eq!(watcher.current().unwrap().version, Some(1));

    fs::write(&path, doc_json(3)).unwrap();
    assert_eq!(changed_version(watcher.poll_once().await), Some(3));
}

#[tokio::test]
async fn reformatted_text_with_the_same_document_is_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tasks.json");
    fs::write(&path, doc_json(1)).unwrap();
    let mut watcher = ConfigWatcher::new(FileSource::new(&path));
    assert_eq!(changed_version(watcher.poll_once().await), Some(1));

    let doc: serde_json::Value = serde_json::from_str(&doc_json(1)).unwrap();
    fs::write(&path, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
    assert!(matches!(watcher.poll_once().await, PollOutcome::Unchanged));
}

#[tokio::test]
async fn format_comes_from_the_extension_else_is_sniffed() {
    let dir = tempfile::tempdir().unwrap();
    let toml = dir.path().join("tasks.toml");
    fs::write(&toml, "version = 5\ntasks = []\n").unwrap();
    let mut watcher = ConfigWatcher::new(FileSource::new(&toml));
    assert_eq!(changed_version(watcher.poll_once().await), Some(5));

    let no_ext = dir.path().join("tasks");
    fs::write(&no_ext, "version: 6\ntasks: []\n").unwrap();
    let mut watcher = ConfigWatcher::new(FileSource::new(&no_ext));
    assert_eq!(changed_version(watcher.poll_once().await), Some(6));

    // `.json` on YAML text: the extension wins, and the error says JSON.
    let lying = dir.path().join("lying.json");
    fs::write(&lying, "version: 7\ntasks: []\n").unwrap();
    let mut watcher = ConfigWatcher::new(FileSource::new(&lying));
    let PollOutcome::Failed(e) = watcher.poll_once().await else {
        panic!("YAML in a .json file must not parse");
    };
    assert!(e.to_string().contains("invalid JSON config"), "{e}");
}

#[tokio::test]
async fn run_publishes_new_documents_until_shutdown() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tasks.json");
    fs::write(&path, doc_json(1)).unwrap();
    let watcher =
        ConfigWatcher::new(FileSource::new(&path)).poll_interval(Duration::from_millis(100));
    let (tx, mut rx) = watch::channel::<Option<Arc<ConfigDocument>>>(None);
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(watcher.run(shutdown.clone(), tx));

    let wait_for_version = |rx: &mut watch::Receiver<Option<Arc<ConfigDocument>>>, v: i64| {
        let mut rx = rx.clone();
        async move {
            tokio::time::timeout(
                Duration::from_secs(20),
                rx.wait_for(|doc| doc.as_ref().and_then(|d| d.version) == Some(v)),
            )
            .await
            .expect("the watcher publishes the new document")
            .expect("the watcher is running")
            .clone()
        }
    };
    wait_for_version(&mut rx, 1).await;
    fs::write(&path, "garbage").unwrap();
    fs::write(&path, doc_json(2)).unwrap();
    let doc = wait_for_version(&mut rx, 2).await.unwrap();
    assert_eq!(doc.tasks[0].name, "syncAdvertiserReport");

    shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(20), task)
        .await
        .expect("run stops on shutdown")
        .unwrap();
}

/// A file larger than the document size limit is refused, naming the limit, and read no
/// further than it (a sparse 1 GiB file; a path to /dev/zero would never end otherwise).
#[tokio::test]
async fn a_file_over_the_size_limit_is_refused_without_reading_it_whole() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tasks.json");
    fs::File::create(&path)
        .unwrap()
        .set_len(1024 * 1024 * 1024)
        .unwrap();
    let mut source = FileSource::new(&path);
    let e = source.fetch().await.unwrap_err();
    let shown = e.to_string();
    assert!(
        shown.contains("larger than the limit of 8388608 bytes"),
        "{shown}"
    );
    assert!(shown.contains("tasks.json"), "{shown}");
    // Refused again on the next poll: not taken for a file caught mid-write.
    assert!(source.fetch().await.is_err());
}
