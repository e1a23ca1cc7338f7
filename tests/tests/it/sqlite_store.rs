//! The SQLite store's one-process rule across processes: the lock beside the database refuses a
//! second process while the holder lives, and is released by the kernel when the holder dies,
//! however it dies (here: SIGKILL, which runs no destructor).

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use scheduler::store::{ConfigStore, SqliteStore, Store, StoreError};

#[tokio::test]
async fn the_kernel_releases_the_lock_when_its_holder_is_killed() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("jobs.db");
    let mut child = Command::new(env!("CARGO_BIN_EXE_sqlite_holder"))
        .arg(&db)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("the holder starts");
    let pid = child.id();
    let stdout = child.stdout.take().unwrap();
    let line = tokio::time::timeout(
        Duration::from_secs(60),
        tokio::task::spawn_blocking(move || {
            let mut line = String::new();
            BufReader::new(stdout).read_line(&mut line).map(|_| line)
        }),
    )
    .await
    .expect("the holder reports within a minute")
    .unwrap()
    .unwrap();
    assert_eq!(
        line.trim(),
        format!("holding {pid}"),
        "the holder failed to open the store"
    );

    let error = SqliteStore::builder(&db).connect().unwrap_err();
    let StoreError::Setup { message } = &error else {
        panic!("not a setup error: {error}");
    };
    assert!(message.contains(&format!("pid {pid} ")), "{message}");
    assert!(message.contains("another scheduler process"), "{message}");
    assert!(message.contains("postgres://"), "{message}");

    child.kill().unwrap(); // SIGKILL
    let status = child.wait().unwrap();
    assert!(!status.success());

    let store = SqliteStore::builder(&db)
        .connect()
        .expect("the dead holder's lock is gone");
    store.migrate().await.unwrap();
    let (_, rows) = store.load_tasks().await.unwrap();
    assert!(
        rows.is_empty(),
        "the holder's database is intact and usable"
    );
}
