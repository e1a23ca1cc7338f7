//! Tests of the `#[task]` attribute; this library is empty.
//!
//! - `tests/ui.rs` compiles every `tests/fail/*.rs` (one file per mistake, each with the reviewed
//!   compiler output in a `.stderr` beside it) and every `tests/pass/*.rs` (one per accepted shape).
//! - `tests/registry.rs` checks that tasks from several modules and from a second crate
//!   (`tests/second-crate`) are registered with the right metadata and that their handlers run.
//! - `tests/options.rs` checks that the policy options written in the attribute (`timeout`,
//!   `retries`, `backoff`, `misfire`, `lock_lifetime`, `recovery`) reach the descriptor exactly,
//!   and that a task without them registers `TaskOptions::DEFAULT`.
//! - `tests/duplicate_names.rs` checks that two tasks sharing a name are rejected at start-up.
