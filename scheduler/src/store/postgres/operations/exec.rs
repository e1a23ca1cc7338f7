//! How an operation runs on PostgreSQL: the macros every operation file uses (`query!`,
//! `releasing_query!`, `timed!`), the connection they acquire within the store's timeouts and
//! what becomes of it when the operation fails or times out, the audit entry more than one
//! operation writes, and the statements written once for both backends (`store/dialect.rs`)
//! as PostgreSQL binds and runs them.

use std::time::Duration;

use async_trait::async_trait;
use sqlx::pool::PoolConnection;
use sqlx::postgres::{PgArguments, PgQueryResult, PgRow};
use sqlx::query::Query;
use sqlx::{PgConnection, Postgres};

use super::columns::millis;
use crate::store::dialect::{self, Dialect, Fetch, Fetched, Own, Statement, bind_all};
use crate::store::in_use::InUse;
use crate::store::postgres::{PgStore, classify};
use crate::store::writes;
use crate::store::{AuditEntry, StoreError, StoreResult};

macro_rules! query {
    ($file:literal) => {
        include_str!(concat!("../queries/", $file, ".sql"))
    };
}

/// A statement that releases locks (`release_locks`, `finish_runs`), with its
/// `-- @include release_requeue.sql` and `-- @include release_backfill.sql` lines replaced by
/// those files: the one place the release of a lock and the requeue the engine decided are
/// written, and the one place the backfill of a backfill's tick handed back is found.
macro_rules! releasing_query {
    ($file:literal) => {
        assembled_query!(
            crate::store::postgres::operations::exec::include_release,
            query!($file)
        )
    };
}

/// Runs `$body` (an expression using `$conn: &mut PgConnection`) on a pooled connection within
/// the operation timeout; on timeout or a broken connection, or if the operation is dropped
/// half-way, the connection is closed instead of returned to the pool.
///
/// Through a transaction-mode pooler, `$body` runs in one transaction opened with the store's
/// `SET LOCAL`s (see `PgStore::transaction_begin`): the pooler keeps the server connection for
/// the whole operation, and an inner `begin()` becomes a savepoint.
macro_rules! timed {
    ($store:ident, $op:expr, |$conn:ident| $body:expr) => {{
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
        $store.settle($op, &mut guard, result)
    }};
}

/// `timed!` in SQLite's shapes (`sqlite/operations/exec.rs`): `read!` runs `$body`, an expression
/// evaluating to the operation's value (`?` inside), with `$conn`; `write_tx!` runs it in a
/// transaction `$tx`, committed when `$body` has its value (`return` from it leaves without the
/// commit: roll back first, or commit first). `$now` is `()`: PostgreSQL's statements read their
/// clock, `now()`.
macro_rules! read {
    ($store:ident, $op:expr, |$conn:ident, $now:pat_param| $body:expr) => {
        timed!($store, $op, |conn| {
            let $conn: &mut sqlx::PgConnection = conn;
            let $now = ();
            Ok::<_, sqlx::Error>($body)
        })
    };
}

/// See `read!`.
macro_rules! write_tx {
    ($store:ident, $op:expr, |$tx:ident, $now:pat_param| $body:expr) => {
        timed!($store, $op, |conn| {
            let mut $tx = sqlx::Acquire::begin(conn).await?;
            let $now = ();
            let value = $body;
            $tx.commit().await?;
            Ok::<_, sqlx::Error>(value)
        })
    };
}

impl PgStore {
    pub(super) async fn acquire(
        &self,
        operation: &'static str,
    ) -> StoreResult<PoolConnection<Postgres>> {
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

    /// The operation's answer (see `InUse::settle`). A lost connection, or a server that shut
    /// down or no longer takes writes, is not reused, and the next connection chooses the
    /// server again.
    pub(super) fn settle<T>(
        &self,
        operation: &'static str,
        guard: &mut InUse<Postgres>,
        result: Result<Result<T, sqlx::Error>, tokio::time::error::Elapsed>,
    ) -> StoreResult<T> {
        let broken = |e: &sqlx::Error| self.doubt_server(e);
        guard.settle(operation, result, self.op_timeout, broken, classify)
    }
}

/// `statement` with its `-- @include release_requeue.sql` and
/// `-- @include release_backfill.sql` lines replaced by those files.
pub(super) fn include_release(statement: &str) -> String {
    use crate::store::queries::include;
    let requeue = include(statement, "release_requeue.sql", query!("release_requeue"));
    include(&requeue, "release_backfill.sql", query!("release_backfill"))
}

/// Records an audit entry on `conn` (`store/writes.rs`), in the operation's transaction.
pub(super) async fn insert_audit(
    conn: &mut PgConnection,
    a: &AuditEntry,
) -> Result<(), sqlx::Error> {
    writes::insert_audit::<PgStore>(conn, (), a).await
}

/// Sends `payload` on the store's change channel through `conn`: inside a transaction, the
/// nodes hear it when it commits (`queries/notify.sql`).
pub(super) async fn notify_on(
    conn: &mut PgConnection,
    store: &PgStore,
    payload: &str,
) -> Result<(), sqlx::Error> {
    sqlx::query(query!("notify"))
        .bind(&store.channel)
        .bind(payload)
        .execute(conn)
        .await
        .map(drop)
}

/// A value PostgreSQL represents its own way (see `store/dialect.rs`), bound.
fn bind<'q>(
    query: Query<'q, Postgres, PgArguments>,
    value: Own<'_>,
) -> Query<'q, Postgres, PgArguments> {
    match value {
        Own::Time(v) => query.bind(v),
        Own::Names(v) => query.bind(v),
        Own::Ids(v) => query.bind(v),
        Own::Ago(d) => query.bind(millis(d)),
        // Not bound: the statement reads the database's clock.
        Own::Now => query,
    }
}

#[async_trait]
impl Dialect for PgStore {
    type Row = PgRow;
    type Conn = PgConnection;
    type Clock = ();

    async fn run(
        conn: &mut PgConnection,
        (): (),
        statement: Statement<'_>,
        fetch: Fetch,
    ) -> Result<Fetched<PgRow>, sqlx::Error> {
        let query = bind_all(sqlx::query(statement.sql.postgres), statement.params, bind);
        dialect::fetch(conn, query, fetch, PgQueryResult::rows_affected).await
    }

    async fn once(&self, statement: Statement<'_>, fetch: Fetch) -> StoreResult<Fetched<PgRow>> {
        // One statement: on its own in autocommit (in the pooler's transaction, through one).
        let store = self;
        read!(store, statement.operation, |conn, ()| {
            Self::run(conn, (), statement, fetch).await?
        })
    }
}
