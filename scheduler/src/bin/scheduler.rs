//! The `scheduler` command: schedule previews and config checks for operators.

fn main() {}
