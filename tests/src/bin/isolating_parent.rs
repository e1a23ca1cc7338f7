//! A node's side of one isolated run and nothing else, in its own process, for the test that
//! kills it with SIGKILL: its child must die with it.
//!
//! `isolating_parent PROGRAM TASK RUN_ID SQLITE_FILE` starts `PROGRAM` as run `RUN_ID` of `TASK`
//! (its log kept in `SQLITE_FILE`), prints `child PID`, and waits until killed.

use std::io::Write as _;
use std::sync::Arc;

use scheduler::run_log::RunLogCapture;
use scheduler::store::{SqliteStore, Store};
use scheduler::testing::isolation::{ChildCommand, RunIdentity};

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [program, task, run_id, db] = args.as_slice() else {
        eprintln!("usage: isolating_parent PROGRAM TASK RUN_ID SQLITE_FILE");
        std::process::exit(2);
    };
    let run_id: i64 = run_id.parse().expect("RUN_ID is an integer");
    let store = SqliteStore::builder(db).connect().expect("open the store");
    store.migrate().await.expect("migrate the store");
    let store: Arc<dyn Store> = Arc::new(store);
    let capture = RunLogCapture::external(run_id, store);
    let identity = RunIdentity::new(
        task.as_str(),
        run_id,
        chrono::Utc::now(),
        "isolating-parent",
    );
    let mut child = ChildCommand::new(identity)
        .program(program)
        .spawn(capture.lines())
        .await
        .expect("start the child");
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "child {}", child.pid()).unwrap();
    stdout.flush().unwrap();
    drop(stdout);
    let exit = child.wait().await;
    eprintln!("the child ended before its parent was killed: {exit}");
    std::process::exit(1);
}
