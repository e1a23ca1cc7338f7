//! [`Store`](crate::store::Store) on PostgreSQL. The operations both backends run alike are
//! written once (`store/reads.rs`, `store/writes.rs`) over `Dialect`, which `exec.rs`
//! implements; the others are a function here or in the module of their concept, running the
//! `queries/*.sql` they need on a connection acquired and used within the store's timeouts (see
//! the module docs of `postgres`): batches as one statement over arrays (`UNNEST`), and the
//! commit's outcome read back where a lost answer must not be mistaken (`commit.rs`). The
//! operation files import what they share from the leaf modules `exec.rs` (the macros, the
//! timeouts, the audit entry) and `columns.rs` (the arrays several bind); this module only
//! declares them and forwards. The `impl Store` that calls the operations is generated
//! (`store_fns!`).

use super::PgStore;
use crate::store::{ChangeListener, StoreResult};

// First: the macros the operation files use.
#[macro_use]
mod exec;

mod backfill;
mod claim;
mod columns;
mod commit;
mod config;
mod finish;
mod history;
mod incidents;
mod instances;
mod nodes;
mod operator;
mod outbox;
mod renew;
mod server;
mod wake;

use backfill::*;
use claim::*;
use config::*;
use finish::*;
use history::*;
use incidents::*;
use instances::*;
use nodes::*;
use operator::*;
use outbox::*;
use renew::*;
// The operations written once for both backends.
use crate::store::limits::{limits, save_limits};
use crate::store::reads::*;
use crate::store::writes::*;
use server::*;
use wake::*;

store_fns!(PgStore);

fn describe(store: &PgStore) -> String {
    store.description.to_string()
}

async fn migrate(store: &PgStore) -> StoreResult<()> {
    let mut guard = crate::store::in_use::InUse::new(store.acquire("migrate").await?);
    let result =
        super::migrate::run(&mut guard.conn, &store.schema, store.transaction_begin()).await;
    if result.is_ok() {
        guard.done();
    }
    result
}

async fn listener(store: &PgStore) -> StoreResult<Box<dyn ChangeListener>> {
    Ok(store.change_listener())
}

async fn notify(store: &PgStore) -> StoreResult<()> {
    timed!(store, "notify", |conn| exec::notify_on(
        conn, store, "request"
    )
    .await)
}
