//! Holds a SQLite store open until it is killed: the other process of the lock-release test
//! (`tests/tests/it/sqlite_store.rs`).
//!
//! Usage: `sqlite_holder <database path>`. Prints `holding <pid>` once the store's lock is held
//! and its schema migrated, then waits forever. Exits with status 2 and the store's message on
//! stderr if the store cannot be opened.

use std::io::Write;

use scheduler::store::{SqliteStore, Store};

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let Some(path) = std::env::args_os().nth(1) else {
        eprintln!("usage: sqlite_holder <database path>");
        std::process::exit(2);
    };
    let store = match SqliteStore::builder(path).connect() {
        Ok(store) => store,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    if let Err(e) = store.migrate().await {
        eprintln!("{e}");
        std::process::exit(2);
    }
    let mut out = std::io::stdout().lock();
    writeln!(out, "holding {}", std::process::id()).expect("stdout");
    out.flush().expect("stdout");
    drop(out);
    std::future::pending::<()>().await;
}
