//! The scenarios: each starts its own cluster (or pg_auto_failover formation) and nodes, injects
//! one family of faults, stops everything and hands the history to the judge.

mod autofailover;
mod clock;
mod config_chaos;
mod config_race;
mod db;
mod handlers;
mod instances;
mod kill;
mod rolling;
mod sigstop;

use crate::formation::Timings;
use crate::harness::{Options, Outcome, Result};

/// Every scenario, in the order `all` runs them.
pub const ALL: &[&str] = &[
    "kill",
    "db",
    "sigstop",
    "clock",
    "rolling",
    "config-race",
    "config-chaos",
    "handlers",
    "instances",
    "autofailover",
    "autofailover-defaults",
];

/// Runs the scenario called `name`.
pub async fn run(name: &str, opts: &Options) -> Result<Outcome> {
    match name {
        "kill" => kill::run(opts).await,
        "db" => db::run(opts).await,
        "sigstop" => sigstop::run(opts).await,
        "clock" => clock::run(opts).await,
        "rolling" => rolling::run(opts).await,
        "config-race" => config_race::run(opts).await,
        "config-chaos" => config_chaos::run(opts).await,
        "handlers" => handlers::run(opts).await,
        "instances" => instances::run(opts).await,
        "autofailover" => autofailover::run(opts, "autofailover", Timings::shortened()).await,
        "autofailover-defaults" => {
            autofailover::run(opts, "autofailover-defaults", Timings::defaults()).await
        }
        other => Err(format!("unknown scenario `{other}`").into()),
    }
}
