//! A test's node set up as most tests set it up: [`node`](super::node) on the test's database
//! running a config document, its handlers sharing the test's state ([`node_with`]), built and
//! started once the store has the rows the test needs ([`started`]; several nodes at once:
//! [`started_all`]), with its admin server on a free loopback port when the test reads the
//! admin API ([`admin_node`]).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use scheduler::config::ConfigDocument;
use scheduler::{SchedulerBuilder, Schedules, TaskRegistry};

use super::{RunningNode, TestDb, node, start, wait_until};

/// [`node`](super::node) `id` on `db` running `registry`'s tasks by the config document
/// `config`, its handlers sharing `state` (`ctx.state::<Arc<S>>()`).
pub fn node_with<S: Send + Sync + 'static>(
    db: &TestDb,
    id: &str,
    registry: TaskRegistry,
    config: ConfigDocument,
    state: &Arc<S>,
) -> SchedulerBuilder {
    node(db, id, registry)
        .config_document(config)
        .state(Arc::clone(state))
}

/// A node started by [`admin_node`]: its run, its admin server's address and its handle on
/// the instances of its tasks.
pub struct AdminNode {
    pub running: RunningNode,
    pub addr: SocketAddr,
    pub schedules: Schedules,
}

impl AdminNode {
    /// The address of `path` (`/api/...`) on its admin server.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

/// Builds `builder` (a [`node`](super::node)'s, with whatever the test sets: a token, a
/// webhook...) with its admin server on a free loopback port and starts it; returns once the
/// store has every row of `rows` (its config applied).
pub async fn admin_node(db: &TestDb, builder: SchedulerBuilder, rows: &[&str]) -> AdminNode {
    let scheduler = builder
        .admin_addr("127.0.0.1:0".parse().unwrap())
        .build()
        .unwrap();
    let addr = scheduler.admin_addr().unwrap();
    let running = start(scheduler);
    let schedules = running.schedules.clone();
    rows_written(db, rows).await;
    AdminNode {
        running,
        addr,
        schedules,
    }
}

/// Builds and starts `builder`; returns once the store has every row of `rows` (its config
/// applied).
pub async fn started(db: &TestDb, builder: SchedulerBuilder, rows: &[&str]) -> RunningNode {
    let running = start(builder.build().unwrap());
    rows_written(db, rows).await;
    running
}

/// Builds and starts every node of `builders` (each starts before any waits); returns them, in
/// their order, once the store has every row of `rows`.
pub async fn started_all(
    db: &TestDb,
    builders: impl IntoIterator<Item = SchedulerBuilder>,
    rows: &[&str],
) -> Vec<RunningNode> {
    let running = builders
        .into_iter()
        .map(|builder| start(builder.build().unwrap()))
        .collect();
    rows_written(db, rows).await;
    running
}

/// Returns once the store has every row of `rows`.
pub async fn rows_written(db: &TestDb, rows: &[&str]) {
    for row in rows {
        wait_until(
            Duration::from_secs(60),
            &format!("the row {row} written"),
            || async { db.try_task(row).await.is_some() },
        )
        .await;
    }
}
