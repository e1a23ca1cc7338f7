//! [`Store`](crate::store::Store) on SQLite. The operations both backends run alike are written
//! once (`store/reads.rs`, `store/writes.rs`) over [`Dialect`], which `exec.rs` implements; the
//! others are a function here or in the module of their concept (as on PostgreSQL), running the
//! `queries/*.sql` they need on one pooled connection, writes in one `BEGIN IMMEDIATE`
//! transaction, within the operation timeout (see the module docs of `sqlite`). SQLite has no
//! array parameters, so a batch is one statement per item inside the operation's transaction:
//! still one commit, and statements are prepared once and cached per connection. The
//! operation files import what they share from the leaf modules `exec.rs` (the macros, the
//! timeouts), `bind.rs` (values as SQLite stores them) and `writes.rs` (rows several write);
//! this module only declares them and forwards. The `impl Store` that calls the operations is
//! generated (`store_fns!`).

use super::listener::SqliteChangeListener;
use super::{MIGRATION_TIMEOUT, SqliteStore, migrate};
use crate::store::dialect::Dialect;
use crate::store::{ChangeListener, StoreResult};

// First: the macros the operation files use.
#[macro_use]
mod exec;
mod bind;
mod writes;

mod backfill;
mod claim;
mod config;
mod finish;
mod history;
mod incidents;
mod instances;
mod nodes;
mod operator;
mod outbox;
mod renew;

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

/// The stored form of a time, which the migrations also write.
pub(super) use bind::micros;

store_fns!(SqliteStore);

fn describe(store: &SqliteStore) -> String {
    store.inner.description.clone()
}

/// An SQLite store has no server: nothing to fail over, nothing to report.
fn database_server(_: &SqliteStore) -> Option<crate::store::DatabaseServer> {
    None
}

/// No replication: one file.
async fn replication(_: &SqliteStore) -> StoreResult<Option<crate::store::Replication>> {
    Ok(None)
}

async fn migrate(store: &SqliteStore) -> StoreResult<()> {
    store.refuse_operator("migrate the database")?;
    let path = store.inner.path.clone();
    let applied = write_tx!(store, "migrate", limit = MIGRATION_TIMEOUT, |tx, now| {
        match migrate::apply_all(&mut tx, now, &path).await? {
            Ok(applied) => Ok(applied),
            // Refused: roll back whatever was created, and say why.
            Err(refusal) => return Ok(Err(refusal)),
        }
    })??;
    for version in applied {
        tracing::info!(version, path = %path.display(), "applied migration");
    }
    Ok(())
}

async fn listener(store: &SqliteStore) -> StoreResult<Box<dyn ChangeListener>> {
    Ok(Box::new(SqliteChangeListener::new(
        store.inner.cancels.subscribe(),
        store.inner.changes.subscribe(),
        std::sync::Arc::downgrade(&store.inner),
    )))
}

async fn notify(store: &SqliteStore) -> StoreResult<()> {
    // Listeners in this process wake now; one in another (a node beside this operator
    // store) sees the commit through `PRAGMA data_version`.
    store.inner.wake();
    Ok(())
}
