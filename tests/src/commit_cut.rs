//! A TCP proxy in front of PostgreSQL that loses the answer to one write: the server does the
//! write (commits it) but the client never hears so, because the proxy closes both sides
//! instead of relaying the reply. This is the "unknown outcome" of a COMMIT whose connection
//! died at the wrong moment (a failover, a network cut, a killed backend).
//!
//! The proxy reads the client's protocol messages (it forwards the bytes unchanged):
//! simple queries (`Q`), and for the extended protocol each statement's text (`P`), its
//! executions (`B`) and their end (`S`). Armed with [`CommitCut::arm_commit_after`], it cuts the
//! next `COMMIT` (a simple query, as sqlx sends it) of a transaction that ran a statement
//! containing the marker; armed with [`CommitCut::arm_statement`], the next execution of a
//! statement containing the marker (a statement committed on its own). The cut waits for the
//! server's first reply bytes after the message (PostgreSQL answers after it committed, and
//! flushes only at the end of the query), swallows them and closes both connections. Every
//! arming cuts once.
//!
//! It can also **hang** a connection, as a frozen server process or a partition that keeps TCP
//! up does: from the armed message on, nothing more is relayed either way, and both sockets stay
//! open until the client closes its own. [`CommitCut::hang_release_checks`] hangs the next
//! connections that send a bare `Sync` (sqlx's check of a connection handed back to its pool: a
//! `Sync` with no statement before it), [`CommitCut::hang_statements`] the next that run a
//! statement containing a marker (`UNLISTEN`, say).
//!
//! ```no_run
//! # async fn example() {
//! let target = "127.0.0.1:5432".parse().unwrap();
//! let proxy = scheduler_tests::commit_cut::CommitCut::start(target).await.unwrap();
//! proxy.arm_commit_after("INSERT INTO ledger");
//! // ... a client connected to proxy.addr() commits a transaction that inserted into ledger:
//! // the row is there, and the client sees its connection lost.
//! # }
//! ```

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// What an arming cuts.
#[derive(Debug, Clone)]
enum Arm {
    /// The `COMMIT` of a transaction that ran a statement containing this text.
    CommitAfter(String),
    /// The execution of a statement containing this text.
    Statement(String),
}

/// What one client message does to its connection.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
enum Act {
    /// Relayed.
    #[default]
    Pass,
    /// The server's reply swallowed, both connections closed.
    Cut,
    /// Nothing more relayed; the connection stays open.
    Hang,
}

#[derive(Debug, Default)]
struct Shared {
    armed: Mutex<Option<Arm>>,
    cuts: AtomicUsize,
    /// Bare `Sync`s still to hang.
    hang_syncs: AtomicUsize,
    /// A statement's text to hang at, and how many more times.
    hang_marker: Mutex<Option<(String, usize)>>,
    hung: AtomicUsize,
}

impl Shared {
    fn armed(&self) -> Option<Arm> {
        self.armed.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Takes the arming if it is still there (one cut per arming).
    fn take(&self) -> bool {
        self.armed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
            .is_some()
    }

    /// Takes one of the bare `Sync`s to hang, if any are left.
    fn take_hang_sync(&self) -> bool {
        self.hang_syncs
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
    }

    /// Whether `text` is a statement to hang at (and takes one of its times).
    fn take_hang_statement(&self, text: &str) -> bool {
        let mut marker = self.hang_marker.lock().unwrap_or_else(|e| e.into_inner());
        match marker.as_mut() {
            Some((wanted, left)) if *left > 0 && text.contains(wanted.as_str()) => {
                *left -= 1;
                true
            }
            _ => false,
        }
    }
}

/// The proxy; stops when dropped.
pub struct CommitCut {
    addr: SocketAddr,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl CommitCut {
    /// Listens on a free port of 127.0.0.1 and forwards to `target`.
    pub async fn start(target: SocketAddr) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared::default());
        let for_task = Arc::clone(&shared);
        let task = tokio::spawn(async move {
            let mut connections = tokio::task::JoinSet::new();
            loop {
                let Ok((client, _)) = listener.accept().await else {
                    continue;
                };
                let shared = Arc::clone(&for_task);
                connections.spawn(async move {
                    if let Ok(server) = TcpStream::connect(target).await {
                        relay(client, server, &shared).await;
                    }
                });
                while connections.try_join_next().is_some() {}
            }
        });
        Ok(Self { addr, shared, task })
    }

    /// The address to connect to instead of the target.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Cuts the next `COMMIT` of a transaction that ran a statement containing `marker`.
    pub fn arm_commit_after(&self, marker: &str) {
        *self.shared.armed.lock().unwrap_or_else(|e| e.into_inner()) =
            Some(Arm::CommitAfter(marker.to_owned()));
    }

    /// Cuts the next execution of a statement containing `marker`.
    pub fn arm_statement(&self, marker: &str) {
        *self.shared.armed.lock().unwrap_or_else(|e| e.into_inner()) =
            Some(Arm::Statement(marker.to_owned()));
    }

    /// Whether an arming waits for its message.
    pub fn is_armed(&self) -> bool {
        self.shared.armed().is_some()
    }

    /// Hangs the next `n` connections that send a bare `Sync`: sqlx's check of a connection
    /// handed back to its pool, never answered.
    pub fn hang_release_checks(&self, n: usize) {
        self.shared.hang_syncs.store(n, Ordering::SeqCst);
    }

    /// Hangs the next `n` connections that run a statement containing `marker`.
    pub fn hang_statements(&self, marker: &str, n: usize) {
        *self
            .shared
            .hang_marker
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some((marker.to_owned(), n));
    }

    /// How many connections were hung so far.
    pub fn hung(&self) -> usize {
        self.shared.hung.load(Ordering::SeqCst)
    }

    /// How many replies were swallowed so far.
    pub fn cuts(&self) -> usize {
        self.shared.cuts.load(Ordering::SeqCst)
    }
}

impl Drop for CommitCut {
    fn drop(&mut self) {
        // Aborting the accept loop drops its JoinSet, which aborts every relayed connection.
        self.task.abort();
    }
}

/// Relays one connection until either side closes or a cut ends it; a hung one relays
/// nothing more until the client closes.
async fn relay(client: TcpStream, server: TcpStream, shared: &Shared) {
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let cut = AtomicBool::new(false);
    let hung = AtomicBool::new(false);
    let upstream = async {
        let mut reader = Reader::default();
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match client_read.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            if hung.load(Ordering::SeqCst) {
                continue;
            }
            // Decided before the bytes go on, so the reply cannot come before the flag is up.
            match reader.feed(&buf[..n], shared) {
                Act::Pass => {}
                Act::Cut => cut.store(true, Ordering::SeqCst),
                Act::Hang => {
                    hung.store(true, Ordering::SeqCst);
                    shared.hung.fetch_add(1, Ordering::SeqCst);
                    continue;
                }
            }
            if server_write.write_all(&buf[..n]).await.is_err() {
                return;
            }
        }
    };
    let downstream = async {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match server_read.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            if hung.load(Ordering::SeqCst) {
                continue;
            }
            if cut.load(Ordering::SeqCst) {
                shared.cuts.fetch_add(1, Ordering::SeqCst);
                return;
            }
            if client_write.write_all(&buf[..n]).await.is_err() {
                return;
            }
        }
    };
    // The first to end ends both: every half is dropped here, closing both sockets.
    tokio::select! {
        () = upstream => {}
        () = downstream => {}
    }
}

/// The client's side of one connection, read message by message.
#[derive(Default)]
struct Reader {
    pending: Vec<u8>,
    /// After the startup message, every message starts with its type byte.
    started: bool,
    /// Prepared statements' texts by name (`""`: the unnamed one).
    statements: HashMap<String, String>,
    /// The texts run since the current transaction began.
    in_transaction: Vec<String>,
    /// What the `Sync` ending the bound executions does (a cut or hang comes at it).
    at_sync: Act,
    /// An extended-protocol message came since the last `Sync` (a `Sync` without one is bare).
    extended: bool,
}

impl Reader {
    /// Takes in bytes from the client; what they do to the connection (the strongest act of a
    /// message among them).
    fn feed(&mut self, bytes: &[u8], shared: &Shared) -> Act {
        self.pending.extend_from_slice(bytes);
        let mut act = Act::Pass;
        loop {
            let header = if self.started { 5 } else { 4 };
            if self.pending.len() < header {
                break;
            }
            let at = header - 4;
            let length = u32::from_be_bytes([
                self.pending[at],
                self.pending[at + 1],
                self.pending[at + 2],
                self.pending[at + 3],
            ]) as usize;
            let total = at + length;
            if length < 4 || self.pending.len() < total {
                break;
            }
            let message: Vec<u8> = self.pending.drain(..total).collect();
            if self.started {
                act = act.max(self.message(message[0], &message[5..], shared));
            } else if message.len() >= 8 && message[4..8] == [0, 3, 0, 0] {
                // The startup message (protocol 3.0); SSL and GSS requests come before it.
                self.started = true;
            }
        }
        act
    }

    /// One typed message: what it does to the connection.
    fn message(&mut self, kind: u8, body: &[u8], shared: &Shared) -> Act {
        let mut fields = body.split(|b| *b == 0).map(String::from_utf8_lossy);
        match kind {
            b'Q' => {
                let text = fields.next().unwrap_or_default().into_owned();
                self.executed(text, shared, true)
            }
            b'P' => {
                self.extended = true;
                let name = fields.next().unwrap_or_default().into_owned();
                let text = fields.next().unwrap_or_default().into_owned();
                self.statements.insert(name, text);
                Act::Pass
            }
            b'B' => {
                self.extended = true;
                let _portal = fields.next();
                let name = fields.next().unwrap_or_default().into_owned();
                let text = self.statements.get(&name).cloned().unwrap_or_default();
                let act = self.executed(text, shared, false);
                self.at_sync = self.at_sync.max(act);
                Act::Pass
            }
            b'S' => {
                let bare = !std::mem::take(&mut self.extended);
                let act = std::mem::replace(&mut self.at_sync, Act::Pass);
                if bare && shared.take_hang_sync() {
                    Act::Hang
                } else {
                    act
                }
            }
            _ => {
                self.extended = true;
                Act::Pass
            }
        }
    }

    /// A statement run (a simple query is run at once, an extended one at its `Sync`): what the
    /// armings ask of it (a cut takes its arming, a hang one of its times).
    fn executed(&mut self, text: String, shared: &Shared, simple: bool) -> Act {
        let word = text
            .trim()
            .trim_end_matches(';')
            .trim()
            .to_ascii_uppercase();
        let ends = matches!(word.as_str(), "COMMIT" | "ROLLBACK" | "END" | "ABORT");
        let wanted = match shared.armed() {
            Some(Arm::CommitAfter(marker)) => {
                simple
                    && word == "COMMIT"
                    && self.in_transaction.iter().any(|t| t.contains(&marker))
            }
            Some(Arm::Statement(marker)) => text.contains(&marker),
            None => false,
        };
        let hang = shared.take_hang_statement(&text);
        if ends || word.starts_with("BEGIN") {
            self.in_transaction.clear();
        } else {
            self.in_transaction.push(text);
        }
        if hang {
            Act::Hang
        } else if wanted && shared.take() {
            Act::Cut
        } else {
            Act::Pass
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn typed(kind: u8, body: &[u8]) -> Vec<u8> {
        let mut m = vec![kind];
        m.extend_from_slice(&u32::try_from(body.len() + 4).unwrap().to_be_bytes());
        m.extend_from_slice(body);
        m
    }

    fn startup() -> Vec<u8> {
        let body = b"\0\x03\0\0user\0postgres\0\0";
        let mut m = u32::try_from(body.len() + 4)
            .unwrap()
            .to_be_bytes()
            .to_vec();
        m.extend_from_slice(body);
        m
    }

    #[test]
    fn the_commit_after_the_marked_statement_is_cut_once() {
        let shared = Shared::default();
        let mut reader = Reader::default();
        assert_eq!(reader.feed(&startup(), &shared), Act::Pass);
        *shared.armed.lock().unwrap() = Some(Arm::CommitAfter("INSERT INTO ledger".into()));
        assert_eq!(reader.feed(&typed(b'Q', b"BEGIN\0"), &shared), Act::Pass);
        assert_eq!(
            reader.feed(&typed(b'Q', b"COMMIT\0"), &shared),
            Act::Pass,
            "not marked"
        );
        let mut batch = typed(b'P', b"s1\0INSERT INTO ledger VALUES ($1)\0\0\0");
        batch.extend(typed(b'S', b""));
        assert_eq!(reader.feed(&batch, &shared), Act::Pass);
        assert_eq!(reader.feed(&typed(b'Q', b"BEGIN\0"), &shared), Act::Pass);
        let mut run = typed(b'B', b"\0s1\0\0\0\0\0");
        run.extend(typed(b'E', b"\0\0\0\0\0"));
        run.extend(typed(b'S', b""));
        assert_eq!(reader.feed(&run, &shared), Act::Pass);
        let commit = typed(b'Q', b"COMMIT\0");
        // Split across reads, the message is still found.
        assert_eq!(reader.feed(&commit[..3], &shared), Act::Pass);
        assert_eq!(reader.feed(&commit[3..], &shared), Act::Cut);
        assert!(shared.armed().is_none(), "one cut per arming");
    }

    #[test]
    fn an_execution_of_the_marked_statement_is_cut_at_its_sync() {
        let shared = Shared::default();
        let mut reader = Reader::default();
        assert_eq!(reader.feed(&startup(), &shared), Act::Pass);
        *shared.armed.lock().unwrap() = Some(Arm::Statement("UPDATE leases".into()));
        assert_eq!(
            reader.feed(&typed(b'P', b"\0UPDATE leases SET x = 1\0\0\0"), &shared),
            Act::Pass
        );
        assert_eq!(
            reader.feed(&typed(b'B', b"\0\0\0\0\0\0"), &shared),
            Act::Pass
        );
        assert_eq!(reader.feed(&typed(b'S', b""), &shared), Act::Cut);
    }

    #[test]
    fn a_bare_sync_hangs_and_a_statement_s_sync_does_not() {
        let shared = Shared::default();
        let mut reader = Reader::default();
        assert_eq!(reader.feed(&startup(), &shared), Act::Pass);
        shared.hang_syncs.store(1, Ordering::SeqCst);
        let mut run = typed(b'P', b"\0SELECT 1\0\0\0");
        run.extend(typed(b'B', b"\0\0\0\0\0\0"));
        run.extend(typed(b'E', b"\0\0\0\0\0"));
        run.extend(typed(b'S', b""));
        assert_eq!(reader.feed(&run, &shared), Act::Pass, "a statement's Sync");
        assert_eq!(reader.feed(&typed(b'S', b""), &shared), Act::Hang);
        assert_eq!(
            reader.feed(&typed(b'S', b""), &shared),
            Act::Pass,
            "one hang armed"
        );
    }

    #[test]
    fn a_marked_statement_hangs_as_many_times_as_armed() {
        let shared = Shared::default();
        let mut reader = Reader::default();
        assert_eq!(reader.feed(&startup(), &shared), Act::Pass);
        *shared.hang_marker.lock().unwrap() = Some(("UNLISTEN".into(), 2));
        assert_eq!(reader.feed(&typed(b'Q', b"LISTEN x\0"), &shared), Act::Pass);
        assert_eq!(
            reader.feed(&typed(b'Q', b"UNLISTEN *\0"), &shared),
            Act::Hang
        );
        assert_eq!(
            reader.feed(&typed(b'Q', b"UNLISTEN *\0"), &shared),
            Act::Hang
        );
        assert_eq!(
            reader.feed(&typed(b'Q', b"UNLISTEN *\0"), &shared),
            Act::Pass
        );
    }
}
