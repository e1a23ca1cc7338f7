//! Compile-fail and compile-pass cases of `#[task]`; see `README.md` for how to re-bless.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/fail/*.rs");
    t.pass("tests/pass/*.rs");
}
