//! Choosing the server: the hosts of a connection string tried in order (or shuffled with
//! `load_balance_hosts=random`), each within `connect_timeout`, each session checked as libpq
//! checks it for `target_session_attrs`. sqlx connects to one host; a pool is pointed at the
//! host found here (`Pool::set_connect_options`) before its connections are opened, and
//! pointed again when the store sees that the server it had is gone or no longer passes
//! ([`Servers::suspect`]: a lost connection, an administrator's shutdown, a read-only error).
//! Connections opened before a new choice are not handed out again (`fresh_since`).
//!
//! One host is chosen the same way (a search is then one connection), so a server behind one
//! address that changed (a front door moved to a promoted standby, a primary demoted while it
//! stays up) is left as a host list's former server is: after a doubt the next search opens a
//! new connection, the older ones are not handed out again. Each search reads the server's WAL
//! timeline: another host, or the same address on another timeline, is a failover. Every
//! search is announced ([`Servers::searches`]), so the change listener moves too.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use sqlx::postgres::{PgConnectOptions, PgConnection};
use sqlx::{ConnectOptions, Connection, Row};

use super::conninfo::{HostPort, TargetSessionAttrs};

/// One host, ready to connect to. No `Debug`: sqlx's options print the password.
#[derive(Clone)]
pub(super) struct Candidate {
    /// `host:port`, for messages.
    pub(super) label: String,
    pub(super) options: PgConnectOptions,
}

/// A server that passed the check, with the connection that checked it.
pub(super) struct Found {
    pub(super) index: usize,
    pub(super) connection: PgConnection,
}

/// The hosts of one connection string and which of them the pool uses now.
pub(super) struct Servers {
    candidates: Vec<Candidate>,
    target: TargetSessionAttrs,
    load_balance: bool,
    connect_timeout: Option<Duration>,
    state: Mutex<State>,
    search: tokio::sync::Mutex<()>,
    /// How many searches completed: the change listener's `LISTEN` connection follows.
    searches: tokio::sync::watch::Sender<u64>,
}

/// Hosts by `host:port` only: sqlx's options would print the password.
impl std::fmt::Debug for Servers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let hosts: Vec<&str> = self.candidates.iter().map(|c| c.label.as_str()).collect();
        f.debug_struct("Servers")
            .field("hosts", &hosts)
            .field("target", &self.target)
            .field("load_balance", &self.load_balance)
            .field("connect_timeout", &self.connect_timeout)
            .field("current", &self.current())
            .finish_non_exhaustive()
    }
}

#[derive(Debug)]
struct State {
    /// The host the pool points at, if one passed since the last doubt.
    current: Option<usize>,
    /// When the pool was last pointed at a host.
    chosen_at: Option<Instant>,
    /// The host last chosen (kept through doubts: a choice of another one is a failover).
    last: Option<usize>,
    /// Choices of another host than the last one, or of a server on another timeline behind
    /// the same address: failovers and switchovers.
    failovers: u64,
    /// The WAL timeline of the server chosen last, if it could be read.
    timeline: Option<u32>,
}

impl Servers {
    /// `hosts` over `base` (every other option, TLS included: each host is checked under its
    /// own name).
    pub(super) fn new(
        base: &PgConnectOptions,
        hosts: &[HostPort],
        target: TargetSessionAttrs,
        load_balance: bool,
        connect_timeout: Option<Duration>,
    ) -> Self {
        let default_port = std::env::var("PGPORT")
            .ok()
            .and_then(|p| p.parse().ok())
            .unwrap_or(5432);
        let candidates = hosts
            .iter()
            .map(|h| {
                let port = h.port.unwrap_or(default_port);
                let mut options = base.clone().port(port);
                if !h.host.is_empty() {
                    options = options.host(&h.host);
                }
                Candidate {
                    label: label_of(&options),
                    options,
                }
            })
            .collect();
        Self {
            candidates,
            target,
            load_balance,
            connect_timeout,
            state: Mutex::new(State {
                current: None,
                chosen_at: None,
                last: None,
                failovers: 0,
                timeline: None,
            }),
            search: tokio::sync::Mutex::new(()),
            searches: tokio::sync::watch::Sender::new(0),
        }
    }

    /// Changes each time a search chose a server (after a doubt: maybe another one).
    pub(super) fn searches(&self) -> tokio::sync::watch::Receiver<u64> {
        self.searches.subscribe()
    }

    /// What sessions are wanted.
    pub(super) fn target(&self) -> TargetSessionAttrs {
        self.target
    }

    /// The options of the first host (what a pool starts with).
    pub(super) fn first_options(&self) -> PgConnectOptions {
        self.candidates[0].options.clone()
    }

    /// `host:port` of candidate `index`.
    pub(super) fn label(&self, index: usize) -> String {
        self.candidates[index].label.clone()
    }

    /// `host:port` of the host the pool uses now, if one was chosen.
    pub(super) fn current(&self) -> Option<String> {
        let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.current.map(|i| self.candidates[i].label.clone())
    }

    /// How many hosts the connection string lists.
    pub(super) fn hosts(&self) -> usize {
        self.candidates.len()
    }

    /// The host last chosen (through doubts), how many failovers were seen after the first
    /// choice, and the timeline of the server chosen last; `None` before the first choice.
    pub(super) fn last_choice(&self) -> Option<(String, u64, Option<u32>)> {
        let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.last.map(|i| {
            (
                self.candidates[i].label.clone(),
                state.failovers,
                state.timeline,
            )
        })
    }

    /// The server may be gone or changed role: the next connection searches again.
    pub(super) fn suspect(&self) {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).current = None;
    }

    /// Whether a connection of this `age` was opened after the pool was last pointed (an older
    /// one may be on the former server and is not handed out again).
    pub(super) fn fresh(&self, age: Duration) -> bool {
        let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.chosen_at.is_none_or(|at| age <= at.elapsed())
    }

    /// Points `pool` at a host that passes, unless it already is. One search at a time; a
    /// caller that waited for another's search uses its result.
    pub(super) async fn ensure(&self, pool: &sqlx::PgPool) -> Result<(), String> {
        if self.current().is_some() {
            return Ok(());
        }
        let _search = self.search.lock().await;
        if self.current().is_some() {
            return Ok(());
        }
        let mut found = self.find().await?;
        let timeline = timeline(&mut found.connection).await;
        let _ = found.connection.close().await;
        let candidate = &self.candidates[found.index];
        pool.set_connect_options(candidate.options.clone());
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let other_host = state.last.is_some_and(|last| last != found.index);
        let other_timeline =
            matches!((state.timeline, timeline), (Some(was), Some(now)) if was != now);
        if other_host || other_timeline {
            state.failovers += 1;
        }
        if other_host || timeline.is_some() {
            state.timeline = timeline;
        }
        // After a doubt every search is a new choice, even of the same host: the connections
        // opened before it may be on a server that left (behind the same address).
        state.current = Some(found.index);
        state.last = Some(found.index);
        state.chosen_at = Some(Instant::now());
        drop(state);
        self.searches.send_modify(|n| *n += 1);
        if self.candidates.len() > 1 {
            tracing::info!(server = %candidate.label, target_session_attrs = self.target.name(), "database server chosen");
        }
        Ok(())
    }

    /// The first host (in order, or shuffled) whose session passes; for `prefer-standby`, a
    /// standby if any, else the first host that answers. The error lists each host's reason.
    pub(super) async fn find(&self) -> Result<Found, String> {
        let mut order: Vec<usize> = (0..self.candidates.len()).collect();
        if self.load_balance {
            shuffle(&mut order);
        }
        let mut reasons = Vec::new();
        let first_pass = match self.target {
            TargetSessionAttrs::PreferStandby => TargetSessionAttrs::Standby,
            other => other,
        };
        let mut answered = None;
        for &index in &order {
            match self.try_host(index, first_pass).await {
                Ok(Ok(connection)) => return Ok(Found { index, connection }),
                Ok(Err((connection, reason))) => {
                    reasons.push(format!("{}: {reason}", self.candidates[index].label));
                    if answered.is_none() {
                        answered = Some((index, connection));
                    } else {
                        let _ = connection.close().await;
                    }
                }
                Err(reason) => {
                    reasons.push(format!("{}: {reason}", self.candidates[index].label));
                }
            }
        }
        if self.target == TargetSessionAttrs::PreferStandby
            && let Some((index, connection)) = answered
        {
            return Ok(Found { index, connection });
        }
        if let Some((_, connection)) = answered {
            let _ = connection.close().await;
        }
        Err(format!(
            "no server passes target_session_attrs={} ({})",
            self.target.name(),
            reasons.join("; ")
        ))
    }

    /// Connects to one host and checks its session: `Err` if it cannot be reached, `Ok(Err)`
    /// with the connection if it answers but does not pass.
    async fn try_host(
        &self,
        index: usize,
        target: TargetSessionAttrs,
    ) -> Result<Result<PgConnection, (PgConnection, String)>, String> {
        let options = &self.candidates[index].options;
        let connect = options.connect();
        let connected = match self.connect_timeout {
            Some(limit) => tokio::time::timeout(limit, connect)
                .await
                .map_err(|_| format!("no answer within {}s (connect_timeout)", limit.as_secs()))?,
            None => connect.await,
        };
        let mut connection = connected.map_err(|e| super::describe(&e))?;
        match check(&mut connection, target).await {
            Ok(None) => Ok(Ok(connection)),
            Ok(Some(reason)) => Ok(Err((connection, reason))),
            Err(e) => {
                let _ = connection.close_hard().await;
                Err(super::describe(&e))
            }
        }
    }
}

/// `host:port` of `options` (`[host]:port` for an IPv6 address), for messages.
pub(super) fn label_of(options: &PgConnectOptions) -> String {
    let (host, port) = (options.get_host(), options.get_port());
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// How long reading a new server's timeline may take (it only names the failover).
const TIMELINE_WAIT: Duration = Duration::from_secs(2);

/// The WAL timeline of the primary `connection` is on: the one its WAL is written on now
/// (`pg_walfile_name` of the current WAL position, exact at once after a promotion), else the
/// last checkpoint's (`pg_control_checkpoint`, which may still show the former timeline until
/// the first checkpoint after a promotion). `None` if the role may read neither, or the server
/// does not answer in time: the timeline only names a failover, it never stops one.
async fn timeline(connection: &mut PgConnection) -> Option<u32> {
    let read = async {
        let wal = sqlx::query("SELECT pg_walfile_name(pg_current_wal_lsn())")
            .fetch_one(&mut *connection)
            .await
            .ok()
            .and_then(|row| row.try_get::<String, _>(0).ok())
            .and_then(|name| u32::from_str_radix(name.get(..8)?, 16).ok());
        if wal.is_some() {
            return wal;
        }
        sqlx::query("SELECT timeline_id FROM pg_control_checkpoint()")
            .fetch_one(&mut *connection)
            .await
            .ok()
            .and_then(|row| row.try_get::<i32, _>(0).ok())
            .and_then(|t| u32::try_from(t).ok())
    };
    tokio::time::timeout(TIMELINE_WAIT, read)
        .await
        .ok()
        .flatten()
}

/// A random order (Fisher-Yates over std's per-process random hash keys: no new dependency).
fn shuffle(order: &mut [usize]) {
    use std::hash::{BuildHasher, Hasher};
    for i in (1..order.len()).rev() {
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_usize(i);
        let j = usize::try_from(hasher.finish() % (i as u64 + 1)).unwrap_or(0);
        order.swap(i, j);
    }
}

/// libpq's check of a session for `target`: `None` if it passes, else why not.
pub(super) async fn check(
    connection: &mut PgConnection,
    target: TargetSessionAttrs,
) -> Result<Option<String>, sqlx::Error> {
    use TargetSessionAttrs as T;
    Ok(match target {
        T::Any | T::PreferStandby => None,
        T::ReadWrite | T::ReadOnly => {
            let row = sqlx::query("SHOW transaction_read_only")
                .fetch_one(&mut *connection)
                .await?;
            let read_only = row.try_get::<String, _>(0)? == "on";
            match (target, read_only) {
                (T::ReadWrite, true) => Some("the session is read-only".to_owned()),
                (T::ReadOnly, false) => Some("the session is read-write".to_owned()),
                _ => None,
            }
        }
        T::Primary | T::Standby => {
            let row = sqlx::query("SELECT pg_is_in_recovery()")
                .fetch_one(&mut *connection)
                .await?;
            let standby: bool = row.try_get(0)?;
            match (target, standby) {
                (T::Primary, true) => Some("the server is a standby".to_owned()),
                (T::Standby, false) => Some("the server is not a standby".to_owned()),
                _ => None,
            }
        }
    })
}
