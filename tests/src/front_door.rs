//! A front door to a database that moves: one address on 127.0.0.1 forwarding each new
//! connection to the server it points at now, as a virtual IP, HAProxy or a Kubernetes `-rw`
//! Service does for a primary that fails over.
//!
//! [`FrontDoor::point_at`] changes where new connections go. A connection already forwarded
//! stays with its server, as behind a real front door (a VIP that moved leaves the established
//! connections to the old machine; HAProxy and kube-proxy keep them unless told to cut them):
//! a client holding one keeps talking to the former server until it drops the connection or
//! that server goes away.
//!
//! ```no_run
//! # async fn example(a: std::net::SocketAddr, b: std::net::SocketAddr) -> std::io::Result<()> {
//! use scheduler_tests::front_door::FrontDoor;
//!
//! let door = FrontDoor::open(a).await?;
//! let url = format!("postgres://postgres@{}/postgres", door.addr());
//! // ... the primary fails over to b:
//! door.point_at(b);
//! # Ok(()) }
//! ```

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// A TCP front door on 127.0.0.1; stops, with every connection it forwards, when dropped.
pub struct FrontDoor {
    addr: SocketAddr,
    target: Arc<Mutex<SocketAddr>>,
    closing: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl FrontDoor {
    /// Listens on a free port of 127.0.0.1 and forwards each connection to `target`.
    pub async fn open(target: SocketAddr) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let target = Arc::new(Mutex::new(target));
        let (closing, _) = watch::channel(false);
        let (now, on_close) = (Arc::clone(&target), closing.clone());
        let task = tokio::spawn(async move {
            loop {
                let Ok((mut client, _)) = listener.accept().await else {
                    continue;
                };
                // Where this connection goes is settled as it arrives.
                let to = *now.lock().unwrap_or_else(|e| e.into_inner());
                let mut closed = on_close.subscribe();
                tokio::spawn(async move {
                    let Ok(mut server) = TcpStream::connect(to).await else {
                        return;
                    };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                        _ = closed.changed() => {}
                    }
                });
            }
        });
        Ok(Self {
            addr,
            target,
            closing,
            task,
        })
    }

    /// The address clients connect to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Sends new connections to `target` from now on; forwarded ones stay where they are.
    pub fn point_at(&self, target: SocketAddr) {
        *self.target.lock().unwrap_or_else(|e| e.into_inner()) = target;
    }
}

impl Drop for FrontDoor {
    fn drop(&mut self) {
        self.task.abort();
        let _ = self.closing.send(true);
    }
}
