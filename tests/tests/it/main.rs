//! The engine's integration tests, one test binary (`--test it`): one link instead of one per
//! file. Each former `tests/tests/X.rs` is the module `X` here, so a test's name is
//! `X::...` (`engine::on_postgres::...`): the `on_postgres::` segment that `scripts/test
//! --sqlite-only` skips is kept.
//!
//! A new test file: `tests/tests/it/X.rs` and `mod X;` below; it reaches the helpers with
//! `use crate::common;` (`use crate::admin_support;`), and their macros (`quick_tasks!`,
//! `on_both_backends!`) by name. The files that stay binaries of their own, next to this
//! directory, install a process-wide tracing subscriber (`admin_hardening`, `run_logs`) or are
//! the store's contract suite (`store_contract`, built alone by `scripts/test --quick`).
//!
//! All modules share one process under `cargo test` (cargo-nextest runs each test in a process
//! of its own): a test here must not set environment variables, install a global subscriber or
//! rely on being the only one to register tasks (each node takes the tasks it needs by name,
//! from `TaskRegistry::collect()`; task names are unique across the binary).

#[macro_use]
mod common;
mod admin_support;

mod admin;
mod admin_props;
mod alerts;
mod app_cli;
mod backfill;
mod bounds;
mod broadcast;
mod calendars;
mod cancel;
mod catch_up;
mod channels;
mod commit_outcome;
mod config_instance_shards;
mod config_instances;
mod connecting;
mod connections;
mod dashboard;
mod engine;
mod failover;
mod failover_visible;
mod faults;
mod guarantees;
mod handed_back;
mod handlers;
mod harness;
mod held_row;
mod hot_reload;
mod hung_release;
mod incidents;
mod instance_backfill;
mod instance_broadcast;
mod instance_calendar;
mod instance_calendar_reload;
mod instance_limits;
mod instance_reshard;
mod instance_shards;
mod instance_sla;
mod instance_sla_api;
mod instance_strips;
mod instance_tags;
mod instance_wakes;
mod instances;
mod instances_api;
mod instances_read;
mod isolation;
mod jitter;
mod jitter_pages;
mod jitter_shown;
mod jitter_starts;
mod limit_strips;
mod listen_again;
mod migrations;
mod otel;
mod overview_rows;
mod pgbouncer;
mod policies;
mod reconcile;
mod services;
mod shards;
mod shared_limits;
mod slots;
mod sqlite_store;
mod store;
mod tls;

/// The modules' tasks share one registry here: `TaskRegistry::collect()`, where every node of
/// these tests starts from, fails on a name two of them give their tasks.
#[test]
fn task_names_are_unique_across_the_binary() {
    if let Err(e) = scheduler::TaskRegistry::collect() {
        panic!("two test modules register a task by one name (rename one): {e}");
    }
}
