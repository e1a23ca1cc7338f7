//! LISTEN/NOTIFY: wakes a node when another one released a lock or applied a config, and tells
//! it when an operator asked to cancel a run (payload `cancel`), so the node running it learns
//! at once.
//!
//! Notifications are not replicated, and those sent while nobody listened are gone: after a
//! lost connection (a server shut down, a failover, a killed session) the listener chooses the
//! server as the store does (the new primary), listens there, and only then returns
//! [`Change::Unknown`], so the engine looks at everything once (due runs, manual runs, cancels)
//! and misses nothing sent before its new LISTEN.
//!
//! A LISTEN connection can also outlive its server's role: a primary demoted while it stays up
//! (read-only, behind a front door that sends new connections elsewhere) keeps the session,
//! and it never writes, so it never hears of it. The listener therefore follows the store:
//! each time the store chooses its server again (after a lost connection or a read-only error
//! on any of its connections), the listener leaves its connection, listens on a new one and
//! returns [`Change::Unknown`].
//!
//! Each LISTEN connection has a pool of its own, made when the listener connects. A listener
//! that leaves its connection sends `UNLISTEN *` on it (sqlx does, with no timeout) before the
//! connection goes: on a server that stopped answering (a frozen server process, a partition
//! that keeps TCP up) that waits until the server answers, and it waits holding only its own
//! pool, not a place of the store's pool nor of the next LISTEN connection.
//!
//! A LISTEN connection that silently died (a dead network gives no error) would only cost
//! early wake-ups, since the claim loop polls anyway; still, the connection is checked with a
//! cheap round trip after a long silence, so a dead one is replaced.
//!
//! Through a transaction-mode pooler `LISTEN` cannot work (the server connection that listened
//! goes to another client after each transaction). The listener then uses its own direct URL
//! (`SCHEDULER_LISTEN_URL`), or, without one, there is none and the poll interval brings other
//! nodes' changes. `NOTIFY` works through the pooler, so nodes that listen directly still hear
//! every node.

use std::time::Duration;

use async_trait::async_trait;
use sqlx::PgPool;
use sqlx::postgres::{PgListener, PgPoolOptions};

use std::sync::Arc;

use tokio::sync::watch;

use super::servers::Servers;
use super::{CANCEL_PAYLOAD, Listen, PgStore, classify};
use crate::store::{Change, ChangeListener, StoreError, StoreResult};

/// After this long without a notification, the connection is checked.
const CHECK_AFTER_SILENCE: Duration = Duration::from_secs(300);

impl PgStore {
    /// The change listener for this store's [`Listen`] setting.
    pub(super) fn change_listener(&self) -> Box<dyn ChangeListener> {
        let (options_pool, servers, own_servers) = match &self.listen {
            Listen::Pool => (self.pool.clone(), self.servers.clone(), false),
            Listen::Direct(direct) => {
                let (options_pool, servers) = direct.as_ref().clone();
                (options_pool, servers, true)
            }
            Listen::Unavailable => {
                tracing::info!(
                    "LISTEN does not work through a transaction-mode pooler: other nodes' changes \
                     arrive within the poll interval; set SCHEDULER_LISTEN_URL to a direct \
                     connection to hear them at once"
                );
                return Box::new(NoListener);
            }
        };
        let store_moves = self.servers.as_ref().map(|s| s.searches());
        Box::new(PgChangeListener::new(
            options_pool,
            servers,
            own_servers,
            store_moves,
            self.channel.clone(),
            self.op_timeout,
            self.acquire_timeout,
        ))
    }
}

/// No `LISTEN` possible: never wakes the node (its poll interval does).
struct NoListener;

#[async_trait]
impl ChangeListener for NoListener {
    async fn recv(&mut self) -> StoreResult<Change> {
        std::future::pending().await
    }
}

pub(super) struct PgChangeListener {
    /// The pool whose options say where LISTEN connections go (the store's, or the listen
    /// URL's): its choice of server sets them.
    options_pool: PgPool,
    /// The choice of server the LISTEN connections follow (several hosts or a session check).
    servers: Option<Arc<Servers>>,
    /// Whether `servers` are the listener's own (a direct listen URL), not the store's.
    own_servers: bool,
    /// The store's searches for its server: each one may have moved the store elsewhere.
    store_moves: Option<watch::Receiver<u64>>,
    channel: String,
    timeout: Duration,
    acquire_timeout: Duration,
    listener: Option<PgListener>,
}

impl PgChangeListener {
    pub(super) fn new(
        options_pool: PgPool,
        servers: Option<Arc<Servers>>,
        own_servers: bool,
        store_moves: Option<watch::Receiver<u64>>,
        channel: String,
        timeout: Duration,
        acquire_timeout: Duration,
    ) -> Self {
        Self {
            options_pool,
            servers,
            own_servers,
            store_moves,
            channel,
            timeout,
            acquire_timeout,
            listener: None,
        }
    }

    async fn connect(&mut self) -> StoreResult<()> {
        let connect = async {
            if let Some(servers) = &self.servers {
                servers
                    .ensure(&self.options_pool)
                    .await
                    .map_err(sqlx::Error::Protocol)?;
            }
            // A pool of its own for this connection (see the module's docs), on the server
            // chosen so far.
            let pool = super::builder::pool_starting_at(
                PgPoolOptions::new()
                    .max_connections(1)
                    .acquire_timeout(self.acquire_timeout)
                    .test_before_acquire(false)
                    // The listener holds its connection: nothing to reap, no upkeep task.
                    .idle_timeout(None)
                    .max_lifetime(None),
                (*self.options_pool.connect_options()).clone(),
                self.servers.as_ref(),
            );
            let mut listener = PgListener::connect_with(&pool).await?;
            // A lost connection is replaced here, through the choice of server, not by sqlx
            // (which would reconnect to whichever host the pool pointed at).
            listener.eager_reconnect(false);
            listener.listen(&self.channel).await?;
            Ok::<_, sqlx::Error>(listener)
        };
        match tokio::time::timeout(self.timeout, connect).await {
            Ok(Ok(listener)) => {
                self.listener = Some(listener);
                // The searches so far led here (this one's own included, on the store's pool).
                if let Some(moves) = &mut self.store_moves {
                    moves.borrow_and_update();
                }
                Ok(())
            }
            Ok(Err(e)) => Err(self.failed(e)),
            Err(_) => {
                self.doubt(None);
                Err(StoreError::Timeout {
                    operation: "listen",
                    timeout: self.timeout,
                })
            }
        }
    }

    /// A listen error: the server may be gone (then the next connection chooses again).
    fn failed(&self, error: sqlx::Error) -> StoreError {
        self.doubt(Some(&error));
        classify("listen", error)
    }

    fn doubt(&self, error: Option<&sqlx::Error>) {
        if let Some(servers) = &self.servers
            && error.is_none_or(super::server_lost)
        {
            servers.suspect();
        }
    }
}

#[async_trait]
impl ChangeListener for PgChangeListener {
    async fn recv(&mut self) -> StoreResult<Change> {
        if self.listener.is_none() {
            self.connect().await?;
            // Whatever happened while we were not listening may have been a change.
            return Ok(Change::Unknown);
        }
        let listener = self.listener.as_mut().expect("connected above");
        let store_moved = async {
            match &mut self.store_moves {
                Some(moves) => {
                    if moves.changed().await.is_err() {
                        std::future::pending::<()>().await;
                    }
                }
                None => std::future::pending().await,
            }
        };
        let heard = tokio::select! {
            heard = tokio::time::timeout(CHECK_AFTER_SILENCE, listener.try_recv()) => Some(heard),
            () = store_moved => None,
        };
        let Some(heard) = heard else {
            // The store chose its server again: this connection may be on the former one
            // (still up, read-only), where nobody notifies any more. On the store's pool the
            // new connection goes where the store chose; a direct URL chooses again.
            self.listener = None;
            if self.own_servers
                && let Some(servers) = &self.servers
            {
                servers.suspect();
            }
            self.connect().await?;
            return Ok(Change::Unknown);
        };
        let listener = self.listener.as_mut().expect("connected above");
        match heard {
            Ok(Ok(Some(notification))) => Ok(if notification.payload() == CANCEL_PAYLOAD {
                Change::CancelRequested
            } else {
                Change::Schedule
            }),
            // The connection was lost (its server shut down, failed over, or ended the
            // session): the server is chosen again and LISTEN set up on the new connection
            // at once; only then is the caller told to look at everything, so nothing notified
            // before the new LISTEN is missed.
            Ok(Ok(None)) => {
                self.listener = None;
                self.doubt(None);
                self.connect().await?;
                Ok(Change::Unknown)
            }
            Ok(Err(e)) => {
                self.listener = None;
                Err(self.failed(e))
            }
            Err(_) => {
                // Silence: make sure the connection is still there.
                let check = sqlx::query("SELECT 1").execute(&mut *listener);
                match tokio::time::timeout(self.timeout, check).await {
                    Ok(Ok(_)) => Ok(Change::Unknown),
                    Ok(Err(e)) => {
                        self.listener = None;
                        Err(self.failed(e))
                    }
                    Err(_) => {
                        self.listener = None;
                        Err(StoreError::Timeout {
                            operation: "listen",
                            timeout: self.timeout,
                        })
                    }
                }
            }
        }
    }
}
