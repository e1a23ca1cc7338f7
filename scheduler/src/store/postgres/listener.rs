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
use sqlx::postgres::PgListener;

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
        let (pool, servers, own_servers) = match &self.listen {
            Listen::Pool => (self.pool.clone(), self.servers.clone(), false),
            Listen::Direct(direct) => {
                let (pool, servers) = direct.as_ref().clone();
                (pool, servers, true)
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
            pool,
            servers,
            own_servers,
            store_moves,
            self.channel.clone(),
            self.op_timeout,
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
    pool: PgPool,
    /// The choice of server of the listener's pool (several hosts or a session check).
    servers: Option<Arc<Servers>>,
    /// Whether `servers` are the listener's own (a direct listen URL), not the store's.
    own_servers: bool,
    /// The store's searches for its server: each one may have moved the store elsewhere.
    store_moves: Option<watch::Receiver<u64>>,
    channel: String,
    timeout: Duration,
    listener: Option<PgListener>,
}

impl PgChangeListener {
    pub(super) fn new(
        pool: PgPool,
        servers: Option<Arc<Servers>>,
        own_servers: bool,
        store_moves: Option<watch::Receiver<u64>>,
        channel: String,
        timeout: Duration,
    ) -> Self {
        Self {
            pool,
            servers,
            own_servers,
            store_moves,
            channel,
            timeout,
            listener: None,
        }
    }

    async fn connect(&mut self) -> StoreResult<()> {
        let connect = async {
            if let Some(servers) = &self.servers {
                servers
                    .ensure(&self.pool)
                    .await
                    .map_err(sqlx::Error::Protocol)?;
            }
            let mut listener = PgListener::connect_with(&self.pool).await?;
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
