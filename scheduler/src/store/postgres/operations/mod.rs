//! [`Store`](crate::store::Store) on PostgreSQL: each operation is a function here or in the
//! module of its concept, running the `queries/*.sql` it needs on a connection acquired and used
//! within the store's timeouts (see the module docs of `postgres`). The `impl Store` that calls
//! them is generated (`store_fns!`).

use std::time::Duration;

use sqlx::Postgres;
use sqlx::pool::PoolConnection;

use super::{PgStore, classify};
use crate::store::{AuditEntry, ChangeListener, StoreError, StoreResult};

macro_rules! query {
    ($file:literal) => {
        include_str!(concat!("../queries/", $file, ".sql"))
    };
}

/// A statement that releases locks (`release_locks`, `finish_runs`), with its
/// `-- @include release_requeue.sql` line replaced by that file: the one place the release of a
/// lock and the requeue the engine decided are written.
macro_rules! releasing_query {
    ($file:literal) => {{
        static SQL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
            crate::store::postgres::operations::include_release(query!($file))
        });
        SQL.as_str()
    }};
}

/// Runs `$body` (an expression using `$conn: &mut PgConnection`) on a pooled connection within
/// the operation timeout; on timeout or a broken connection, or if the operation is dropped
/// half-way, the connection is closed instead of returned to the pool.
///
/// Through a transaction-mode pooler, `$body` runs in one transaction opened with the store's
/// `SET LOCAL`s (see `PgStore::transaction_begin`): the pooler keeps the server connection for
/// the whole operation, and an inner `begin()` becomes a savepoint.
macro_rules! timed {
    ($store:ident, $op:literal, |$conn:ident| $body:expr) => {{
        let mut guard = crate::store::in_use::InUse::new($store.acquire($op).await?);
        let result = {
            let conn: &mut sqlx::PgConnection = &mut guard.conn;
            tokio::time::timeout($store.op_timeout, async {
                match $store.transaction_begin() {
                    None => {
                        let $conn = conn;
                        $body
                    }
                    Some(begin) => {
                        let mut tx = sqlx::Connection::begin_with(conn, begin).await?;
                        let value: Result<_, sqlx::Error> = {
                            let $conn: &mut sqlx::PgConnection = &mut tx;
                            $body
                        };
                        let value = value?;
                        tx.commit().await?;
                        Ok(value)
                    }
                }
            })
            .await
        };
        $store.settle($op, guard.done(), result)
    }};
}

mod backfill;
mod claim;
mod columns;
mod commit;
mod config;
mod finish;
mod history;
mod incidents;
mod nodes;
mod operator;
mod outbox;
mod renew;
mod server;
mod wake;

use backfill::*;
use claim::*;
use columns::*;
use config::*;
use finish::*;
use history::*;
use incidents::*;
use nodes::*;
use operator::*;
use outbox::*;
use renew::*;
use server::*;
use wake::*;

impl PgStore {
    async fn acquire(&self, operation: &'static str) -> StoreResult<PoolConnection<Postgres>> {
        // The pool has its own acquire timeout; this one also covers a connect that hangs, and
        // the choice of server before it (several hosts or a target_session_attrs).
        let acquire = async {
            if let Some(servers) = &self.servers {
                servers
                    .ensure(&self.pool)
                    .await
                    .map_err(sqlx::Error::Protocol)?;
            }
            self.pool.acquire().await
        };
        match tokio::time::timeout(self.acquire_timeout + Duration::from_secs(1), acquire).await {
            Ok(Ok(conn)) => Ok(conn),
            Ok(Err(e)) => {
                self.doubt_server(&e);
                Err(classify(operation, e))
            }
            Err(_) => {
                if let Some(servers) = &self.servers {
                    servers.suspect();
                }
                Err(StoreError::Timeout {
                    operation,
                    timeout: self.acquire_timeout,
                })
            }
        }
    }

    fn settle<T>(
        &self,
        operation: &'static str,
        conn: &mut PoolConnection<Postgres>,
        result: Result<Result<T, sqlx::Error>, tokio::time::error::Elapsed>,
    ) -> StoreResult<T> {
        match result {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) => {
                // A lost connection, or a server that shut down or no longer takes writes:
                // this connection is not reused, and the next one chooses the server again.
                if self.doubt_server(&e) {
                    conn.close_on_drop();
                }
                Err(classify(operation, e))
            }
            Err(_) => {
                conn.close_on_drop();
                Err(StoreError::Timeout {
                    operation,
                    timeout: self.op_timeout,
                })
            }
        }
    }
}

/// `statement` with its `-- @include release_requeue.sql` line replaced by that file.
fn include_release(statement: &str) -> String {
    const LINE: &str = "    -- @include release_requeue.sql\n";
    assert!(
        statement.contains(LINE),
        "a releasing statement includes the release"
    );
    statement.replace(LINE, query!("release_requeue"))
}

/// Records an audit entry on `conn`.
async fn insert_audit(conn: &mut sqlx::PgConnection, a: &AuditEntry) -> Result<(), sqlx::Error> {
    sqlx::query(query!("audit_insert"))
        .bind(&a.actor)
        .bind(&a.action)
        .bind(&a.task)
        .bind(&a.detail)
        .bind(&a.source)
        .execute(conn)
        .await
        .map(drop)
}

store_fns!(PgStore);

fn describe(store: &PgStore) -> String {
    store.description.to_string()
}

async fn migrate(store: &PgStore) -> StoreResult<()> {
    let mut conn = store.acquire("migrate").await?;
    super::migrate::run(&mut conn, &store.schema, store.transaction_begin()).await
}

async fn listener(store: &PgStore) -> StoreResult<Box<dyn ChangeListener>> {
    Ok(store.change_listener())
}

async fn notify(store: &PgStore) -> StoreResult<()> {
    timed!(store, "notify", |conn| {
        sqlx::query(query!("notify"))
            .bind(&store.channel)
            .bind("request")
            .execute(conn)
            .await
            .map(drop)
    })
}
