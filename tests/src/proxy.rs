//! A TCP proxy on 127.0.0.1 that a test can cut: a node connected through it loses the
//! database while the database stays up for everyone else (a partition of one node).
//!
//! [`CutProxy::start`] forwards every connection to a target address. [`CutProxy::cut`] closes
//! every forwarded connection and refuses new ones (accepted and dropped at once) until
//! [`CutProxy::heal`].

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// A cuttable TCP proxy; stops when dropped.
pub struct CutProxy {
    addr: SocketAddr,
    cut: Arc<AtomicBool>,
    generation: watch::Sender<u64>,
    task: tokio::task::JoinHandle<()>,
}

impl CutProxy {
    /// Listens on a free port of 127.0.0.1 and forwards to `target`.
    pub async fn start(target: SocketAddr) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let cut = Arc::new(AtomicBool::new(false));
        let (generation, _) = watch::channel(0u64);
        let (is_cut, gen_tx) = (Arc::clone(&cut), generation.clone());
        let task = tokio::spawn(async move {
            loop {
                let Ok((client, _)) = listener.accept().await else {
                    continue;
                };
                if is_cut.load(Ordering::SeqCst) {
                    drop(client);
                    continue;
                }
                let mut cuts = gen_tx.subscribe();
                tokio::spawn(async move {
                    let Ok(server) = TcpStream::connect(target).await else {
                        return;
                    };
                    let (mut client, mut server) = (client, server);
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                        _ = cuts.changed() => {}
                    }
                });
            }
        });
        Ok(Self {
            addr,
            cut,
            generation,
            task,
        })
    }

    /// The address to connect to instead of the target.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Closes every forwarded connection and refuses new ones.
    pub fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
        self.generation.send_modify(|g| *g += 1);
    }

    /// Forwards new connections again.
    pub fn heal(&self) {
        self.cut.store(false, Ordering::SeqCst);
    }
}

impl Drop for CutProxy {
    fn drop(&mut self) {
        self.task.abort();
        self.generation.send_modify(|g| *g += 1);
    }
}
