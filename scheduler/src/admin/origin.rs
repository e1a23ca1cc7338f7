//! Which names and web origins the admin server answers: its guard against DNS rebinding.
//!
//! A web page whose name re-resolves to 127.0.0.1 can make a browser send requests to a
//! loopback admin server, where reads need no token; the browser then names the attacker's site
//! in `Host` (and, for a cross-origin request, in `Origin`). So every request is refused (403)
//! unless:
//!
//! - its `Host` (if it sends one) is the bound address, a loopback name (`localhost`, a loopback
//!   IP), any IP literal when the server listens on every interface (`0.0.0.0`, `::`; an IP
//!   involves no DNS), or an entry of the allow-list `SCHEDULER_ADMIN_HOSTS` (`name` for any
//!   port, `name:port` for that port);
//! - its `Origin` (if it sends one) is the request's own origin (same host and port as `Host`)
//!   or an allow-listed name. `Origin: null` (a sandboxed frame, a file) is refused.
//!
//! This module decides; it does not route, authenticate or serve.

use std::net::{IpAddr, SocketAddr};

use axum::http::HeaderMap;
use axum::http::header::{HOST, ORIGIN};

use super::error::ApiError;
use crate::{Error, Result};

/// The names and origins a server bound to one address answers.
#[derive(Debug, Clone)]
pub(crate) struct HostRule {
    bound: IpAddr,
    /// Allow-listed `(name, port)`, names lowercase without a trailing dot.
    allowed: Vec<(String, Option<u16>)>,
}

impl HostRule {
    /// The rule of a server bound to `bound`, with the allow-list `allowed` (names or
    /// `name:port`, as in `SCHEDULER_ADMIN_HOSTS`).
    pub(crate) fn new(bound: SocketAddr, allowed: &[String]) -> Result<Self> {
        let allowed = allowed
            .iter()
            .map(|entry| {
                let trimmed = entry.trim();
                let invalid = || Error::InvalidSetting {
                    name: crate::vars::ADMIN_HOSTS.into(),
                    message: format!(
                        "`{trimmed}` is not a host name or `name:port` (no scheme, path or user)"
                    ),
                };
                if trimmed.is_empty()
                    || trimmed.contains(['/', '@', '?', '#', ' ', '\t', '*'])
                    || trimmed.chars().any(char::is_control)
                {
                    return Err(invalid());
                }
                authority(trimmed).ok_or_else(invalid)
            })
            .collect::<Result<_>>()?;
        Ok(Self {
            bound: bound.ip(),
            allowed,
        })
    }

    fn allow_listed(&self, name: &str, port: Option<u16>) -> bool {
        self.allowed
            .iter()
            .any(|(n, p)| n == name && p.is_none_or(|p| Some(p) == port))
    }

    /// Whether a request with `Host: value` may be answered.
    fn admits_host(&self, value: &str) -> bool {
        let Some((name, port)) = authority(value) else {
            return false;
        };
        if name == "localhost" || self.allow_listed(&name, port) {
            return true;
        }
        let literal = name
            .strip_prefix('[')
            .and_then(|n| n.strip_suffix(']'))
            .unwrap_or(&name);
        match literal.parse::<IpAddr>() {
            Ok(ip) => is_loopback(ip) || ip == self.bound || self.bound.is_unspecified(),
            Err(_) => false,
        }
    }

    /// Whether a request from the page at `origin`, sent with `Host: host`, may be answered.
    fn admits_origin(&self, origin: &str, host: Option<&str>) -> bool {
        let Ok(url) = url::Url::parse(origin.trim()) else {
            return false;
        };
        if !matches!(url.scheme(), "http" | "https") {
            return false;
        }
        let (Some(name), Some(port)) = (url.host_str(), url.port_or_known_default()) else {
            return false;
        };
        let name = name.to_ascii_lowercase();
        let same_origin = host.and_then(authority).is_some_and(|(h, p)| {
            h == name && p.unwrap_or(if url.scheme() == "https" { 443 } else { 80 }) == port
        });
        same_origin || self.allow_listed(&name, Some(port))
    }

    /// Admits the request with `headers`, or refuses it (403).
    pub(crate) fn admit(&self, headers: &HeaderMap) -> Result<(), ApiError> {
        let host = match headers.get(HOST).map(|v| v.to_str()) {
            None => None,
            Some(Ok(host)) if self.admits_host(host) => Some(host),
            Some(_) => {
                return Err(ApiError::forbidden(
                    "this admin server answers only to its own address, loopback names and the \
                     names in SCHEDULER_ADMIN_HOSTS; the Host header named another (a page on \
                     another site, or a name to add to SCHEDULER_ADMIN_HOSTS)",
                ));
            }
        };
        if let Some(origin) = headers.get(ORIGIN) {
            let admitted = origin
                .to_str()
                .is_ok_and(|origin| self.admits_origin(origin, host));
            if !admitted {
                return Err(ApiError::forbidden(
                    "cross-origin requests are refused: the Origin header is neither this \
                     server's own origin nor a name in SCHEDULER_ADMIN_HOSTS",
                ));
            }
        }
        Ok(())
    }
}

fn is_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => {
            v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
    }
}

/// `name[:port]` or `[v6]:port` as (lowercase name without a trailing dot, IPv6 in brackets;
/// port); `None` when it is neither.
fn authority(value: &str) -> Option<(String, Option<u16>)> {
    let value = value.trim();
    let (name, port) = if value.starts_with('[') {
        let close = value.find(']')?;
        let (name, rest) = value.split_at(close + 1);
        match rest {
            "" => (name, None),
            _ => (name, Some(rest.strip_prefix(':')?)),
        }
    } else {
        match value.split_once(':') {
            None => (value, None),
            Some((name, port)) => (name, Some(port)),
        }
    };
    let port = match port {
        None => None,
        Some(p) => Some(p.parse::<u16>().ok()?),
    };
    let name = name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase();
    let valid = !name.is_empty()
        && name.bytes().all(|b| {
            b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_' | b'[' | b']' | b':')
        });
    valid.then_some((name, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(bound: &str, allowed: &[&str]) -> HostRule {
        let allowed: Vec<String> = allowed.iter().map(|s| (*s).to_owned()).collect();
        HostRule::new(bound.parse().unwrap(), &allowed).unwrap()
    }

    #[test]
    fn hosts() {
        let r = rule("127.0.0.1:9870", &["ops.example", "Admin.Example.:8443"]);
        for ok in [
            "127.0.0.1:9870",
            "127.0.0.1",
            "localhost",
            "LocalHost:1",
            "[::1]:9870",
            "127.1.2.3",
            "ops.example:1",
            "OPS.example.",
            "admin.example:8443",
        ] {
            assert!(r.admits_host(ok), "{ok}");
        }
        for refused in [
            "evil.example",
            "evil.example:9870",
            "localhost.evil.example",
            "admin.example",
            "admin.example:8444",
            "10.0.0.1:9870",
            "",
            "a b",
            "127.0.0.1:x",
        ] {
            assert!(!r.admits_host(refused), "{refused}");
        }
        let anywhere = rule("0.0.0.0:9870", &[]);
        assert!(anywhere.admits_host("10.1.2.3:9870"));
        assert!(anywhere.admits_host("[2001:db8::1]:9870"));
        assert!(!anywhere.admits_host("host.example:9870"));
    }

    #[test]
    fn origins() {
        let r = rule("127.0.0.1:9870", &["ops.example:443"]);
        assert!(r.admits_origin("http://127.0.0.1:9870", Some("127.0.0.1:9870")));
        assert!(r.admits_origin("http://LOCALHOST:9870", Some("localhost:9870")));
        assert!(r.admits_origin("http://localhost", Some("localhost")));
        assert!(r.admits_origin("https://ops.example", Some("127.0.0.1:9870")));
        assert!(!r.admits_origin("http://localhost:3000", Some("localhost:9870")));
        assert!(!r.admits_origin("http://127.0.0.1:9871", Some("127.0.0.1:9870")));
        assert!(!r.admits_origin("http://evil.example", Some("127.0.0.1:9870")));
        assert!(!r.admits_origin("null", Some("127.0.0.1:9870")));
        assert!(!r.admits_origin("http://127.0.0.1:9870", None));
    }

    #[test]
    fn bad_allow_list_entries_are_refused_naming_the_variable() {
        for bad in [
            "https://ops.example",
            "ops.example/x",
            "u@ops.example",
            "*",
            "a:b",
            "",
        ] {
            let e = HostRule::new("127.0.0.1:1".parse().unwrap(), &[bad.to_owned()])
                .unwrap_err()
                .to_string();
            assert!(e.contains("SCHEDULER_ADMIN_HOSTS"), "{bad}: {e}");
        }
    }
}
