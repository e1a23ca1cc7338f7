//! Support shared by the benchmark programs in `src/bin/` (see BENCHMARKS.md).

pub mod counting_store;
pub mod engine_support;
pub mod node_procs;
