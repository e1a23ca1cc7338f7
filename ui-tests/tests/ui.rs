//! Compile-fail cases of `#[task]`; see `README.md` for how to re-bless.
//!
//! The accepted shapes (`tests/pass/`) are test targets of their own (`Cargo.toml`), built with
//! the rest of the workspace: trybuild then only checks, and never builds the dependencies a
//! second time for running.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/fail/*.rs");
}
