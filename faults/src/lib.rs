//! The fault-injection suite of the scheduler workspace.
//!
//! Real nodes (`fault_node`) run in their own processes against a private PostgreSQL cluster;
//! the `faults` harness breaks them from outside (SIGKILL, SIGSTOP, database outages and
//! killed connections, skewed clocks, rolling restarts, config races and garbage) and then
//! [`judge`]s the run by the nodes' own record of what their handlers did ([`record`]), the
//! harness's own [`timeline`] of what it did, and the rows the engine left in the database.
//!
//! Nothing here reaches into the engine: it is judged from outside, through its environment
//! contract, its task API and its tables, so it can be rewritten underneath.

pub mod chaos;
pub mod formation;
pub mod harness;
pub mod judge;
pub mod prng;
pub mod record;
pub mod report;
pub mod scenarios;
pub mod timeline;
