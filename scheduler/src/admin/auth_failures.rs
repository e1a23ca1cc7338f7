//! Failed authentications to the admin server: why a request was refused, and a rate limit on
//! the warning lines they cause (at most one line per peer address per [`LOG_EVERY`], the next
//! one saying how many were left out), so a client retrying a wrong token, or a scan, cannot
//! flood the log. Every failure is counted in the metrics whatever the log shows
//! (`scheduler_admin_auth_failures_total{reason}`). Owns no token and logs nothing itself:
//! [`super::auth`] decides, and logs what this module admits.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// At most one warning line per peer address in this long.
pub(crate) const LOG_EVERY: Duration = Duration::from_secs(60);

/// Peers remembered at once; beyond them (a scan from many addresses) the others share one
/// window, as if they were one peer.
const MAX_PEERS: usize = 1024;

/// Why a request failed to authenticate: the `reason` label of the metric and of the log line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Failure {
    /// No token, where one is needed (a read beyond loopback, any mutation).
    Missing,
    /// An `Authorization` header that is not `Bearer <token>`.
    Malformed,
    /// A token that is neither the operator's nor the viewer's.
    WrongToken,
    /// The viewer token, presented for a mutation.
    ViewerToken,
}

impl Failure {
    /// The label value.
    pub(crate) fn reason(self) -> &'static str {
        match self {
            Failure::Missing => "missing",
            Failure::Malformed => "malformed",
            Failure::WrongToken => "wrong_token",
            Failure::ViewerToken => "viewer_token",
        }
    }
}

/// The warning lines' rate limit, per peer address.
#[derive(Default)]
pub(crate) struct FailureLog {
    peers: Mutex<HashMap<Option<IpAddr>, Window>>,
}

struct Window {
    logged_at: Instant,
    suppressed: u64,
}

impl FailureLog {
    /// A failure from `peer` (`None`: unknown) at `now`: `Some(n)` when a line is to be logged,
    /// `n` being the failures of that peer left out of the log since its last line; `None` when
    /// this one is left out.
    pub(crate) fn admit(&self, peer: Option<IpAddr>, now: Instant) -> Option<u64> {
        let mut peers = self.peers.lock().unwrap_or_else(|e| e.into_inner());
        let mut key = peer;
        if !peers.contains_key(&key) && peers.len() >= MAX_PEERS {
            peers.retain(|_, w| now.saturating_duration_since(w.logged_at) < LOG_EVERY);
            if peers.len() >= MAX_PEERS {
                key = None;
            }
        }
        match peers.get_mut(&key) {
            Some(w) if now.saturating_duration_since(w.logged_at) < LOG_EVERY => {
                w.suppressed += 1;
                None
            }
            Some(w) => {
                let suppressed = w.suppressed;
                *w = Window {
                    logged_at: now,
                    suppressed: 0,
                };
                Some(suppressed)
            }
            None => {
                peers.insert(
                    key,
                    Window {
                        logged_at: now,
                        suppressed: 0,
                    },
                );
                Some(0)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(last: u8) -> Option<IpAddr> {
        Some(IpAddr::from([10, 0, 0, last]))
    }

    #[test]
    fn one_line_per_peer_per_window_then_the_count_left_out() {
        let log = FailureLog::default();
        let t0 = Instant::now();
        assert_eq!(log.admit(ip(1), t0), Some(0));
        assert_eq!(log.admit(ip(1), t0 + Duration::from_secs(1)), None);
        assert_eq!(log.admit(ip(1), t0 + Duration::from_secs(59)), None);
        // Another peer has its own window.
        assert_eq!(log.admit(ip(2), t0 + Duration::from_secs(2)), Some(0));
        assert_eq!(log.admit(ip(1), t0 + LOG_EVERY), Some(2));
        assert_eq!(log.admit(ip(1), t0 + LOG_EVERY), None);
        assert_eq!(log.admit(ip(1), t0 + 3 * LOG_EVERY), Some(1));
    }

    #[test]
    fn a_scan_from_many_addresses_shares_one_window_beyond_the_bound() {
        let log = FailureLog::default();
        let t0 = Instant::now();
        let mut lines = 0;
        for n in 0..(MAX_PEERS as u32 + 500) {
            let peer = Some(IpAddr::from(n.to_be_bytes()));
            lines += usize::from(log.admit(peer, t0).is_some());
        }
        // One line per remembered peer, then one for all the others together.
        assert_eq!(lines, MAX_PEERS + 1);
        assert!(log.peers.lock().unwrap().len() <= MAX_PEERS + 1);
        // Once their window is over the remembered peers make room again.
        let later = t0 + LOG_EVERY;
        assert_eq!(
            log.admit(Some(IpAddr::from([192, 0, 2, 1])), later),
            Some(0)
        );
    }
}
