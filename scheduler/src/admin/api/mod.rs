//! The JSON API, one module per resource (`instances_write`: the instances' mutations and a
//! manual run's arguments); the views several of them answer with are in
//! `views`, the refusals every read or mutation may answer with in `refusals`.

mod actions;
mod backfills;
mod cluster;
mod config;
mod incidents;
mod instance_ticks;
mod instances;
mod instances_batch;
mod instances_write;
mod limits;
mod refusals;
mod runs;
mod tasks;
mod tick_waits;
mod ticks;
mod views;

use utoipa_axum::router::OpenApiRouter;

use super::state::AdminState;

pub(super) fn router() -> OpenApiRouter<AdminState> {
    OpenApiRouter::new()
        .merge(tasks::router())
        .merge(instances::router())
        .merge(ticks::router())
        .merge(actions::router())
        .merge(backfills::router())
        .merge(config::router())
        .merge(runs::router())
        .merge(cluster::router())
        .merge(incidents::router())
        .merge(instances_write::router())
        .merge(instances_batch::router())
        .merge(limits::router())
}
