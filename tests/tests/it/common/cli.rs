//! The application binary (`test_node`) run as an operator runs it: against a test's store
//! (`TestDb::cli_store_args`), with no registry, no config and none of the environment's store
//! settings.

use std::process::{Command, Output};

use super::TestDb;

/// The application binary with `args` against `db`'s store: what it did.
pub fn app_output(db: &TestDb, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_test_node"))
        .args(args)
        .args(db.cli_store_args())
        .env_remove("DATABASE_URL")
        .env_remove("SCHEDULER_DATABASE_URL")
        .env_remove("SCHEDULER_SCHEMA")
        .output()
        .expect("run the application binary")
}

/// [`app_output`]'s exit code and all it printed (stdout, then stderr).
pub fn run_app(db: &TestDb, args: &[&str]) -> (i32, String) {
    let out = app_output(db, args);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap() + &String::from_utf8(out.stderr).unwrap(),
    )
}
