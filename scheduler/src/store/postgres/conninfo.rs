//! Every connection string libpq takes, read into one shape before anything connects: a URL
//! with one host or a list (`postgres://h1:p1,h2:p2/db`, `postgres://h1,h2/db?port=p1,p2`) and
//! the keyword form (`host=h1,h2 port=p1,p2 dbname=app user=app password='...'`).
//!
//! What comes out is the list of hosts, the three libpq parameters that say how to pick one of
//! them (`target_session_attrs`, `load_balance_hosts`, `connect_timeout`), and a URL naming the
//! first host with everything else (user, password, database, TLS and other parameters), which
//! the rest of the store reads as before (`database_url.rs`). Errors name the part that is wrong
//! and never quote a password (the caller adds the redacted URL).

use std::time::Duration;

use crate::store::dsn::is_keyword_form;
use crate::store::{StoreError, StoreResult};

/// One host of the list, with its port if one was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct HostPort {
    /// A name, an IP address (IPv6 without brackets) or a Unix socket directory (`/...`).
    pub(super) host: String,
    /// `None`: the default port (`PGPORT`, else 5432).
    pub(super) port: Option<u16>,
}

/// libpq's `target_session_attrs`: which session a host must offer to be chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TargetSessionAttrs {
    /// Any session (no check).
    Any,
    /// `SHOW transaction_read_only` is `off`.
    ReadWrite,
    /// `SHOW transaction_read_only` is `on`.
    ReadOnly,
    /// `pg_is_in_recovery()` is false.
    Primary,
    /// `pg_is_in_recovery()` is true.
    Standby,
    /// A standby if any host is one, else any session.
    PreferStandby,
}

impl TargetSessionAttrs {
    /// The value as written in a URL.
    pub fn name(self) -> &'static str {
        match self {
            Self::Any => "any",
            Self::ReadWrite => "read-write",
            Self::ReadOnly => "read-only",
            Self::Primary => "primary",
            Self::Standby => "standby",
            Self::PreferStandby => "prefer-standby",
        }
    }

    fn parse(value: &str) -> StoreResult<Self> {
        Ok(match value {
            "any" => Self::Any,
            "read-write" => Self::ReadWrite,
            "read-only" => Self::ReadOnly,
            "primary" => Self::Primary,
            "standby" => Self::Standby,
            "prefer-standby" => Self::PreferStandby,
            other => {
                return Err(StoreError::setup(format!(
                    "target_session_attrs `{}` is not one of any, read-write, read-only, primary, standby, prefer-standby",
                    other.escape_debug()
                )));
            }
        })
    }
}

/// A connection string taken apart.
#[derive(Debug)]
pub(super) struct ConnInfo {
    /// At least one.
    pub(super) hosts: Vec<HostPort>,
    /// The first host's URL with every other part (the multi-host parameters taken out).
    pub(super) url: String,
    /// `None`: not written.
    pub(super) target: Option<TargetSessionAttrs>,
    /// `load_balance_hosts=random`: hosts tried in a random order.
    pub(super) load_balance: bool,
    /// libpq's `connect_timeout` (per host); `None`: not written, or 0 (no limit).
    pub(super) connect_timeout: Option<Duration>,
}

/// Reads `s`, a URL or the keyword form.
pub(super) fn parse(s: &str) -> StoreResult<ConnInfo> {
    let url = if is_keyword_form(s) {
        keyword_form_to_url(s)?
    } else {
        s.trim().to_owned()
    };
    parse_url(&url)
}

fn parse_url(s: &str) -> StoreResult<ConnInfo> {
    let (scheme, rest) = s.split_once("://").ok_or_else(|| {
        StoreError::setup("it is neither a postgres:// URL nor host=... keywords")
    })?;
    let (before_query, query) = match rest.split_once('?') {
        Some((a, q)) => (a, Some(q)),
        None => (rest, None),
    };
    let (authority, path) = match before_query.find('/') {
        Some(i) => (&before_query[..i], &before_query[i..]),
        None => (before_query, ""),
    };
    let (userinfo, hostspec) = match authority.rfind('@') {
        Some(i) => (Some(&authority[..i]), &authority[i + 1..]),
        None => (None, authority),
    };
    let mut hosts = parse_hostspec(hostspec)?;

    let mut target = None;
    let mut load_balance = false;
    let mut connect_timeout = None;
    let mut query_hosts = None;
    let mut query_ports = None;
    let mut kept = Vec::new();
    for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let decoded = percent_decode(value);
        match key {
            "target_session_attrs" => target = Some(TargetSessionAttrs::parse(&decoded)?),
            "load_balance_hosts" => {
                load_balance = match decoded.as_str() {
                    "disable" => false,
                    "random" => true,
                    other => {
                        return Err(StoreError::setup(format!(
                            "load_balance_hosts `{}` is not one of disable, random",
                            other.escape_debug()
                        )));
                    }
                }
            }
            "connect_timeout" => connect_timeout = parse_connect_timeout(&decoded)?,
            "host" if decoded.contains(',') || !hosts_given(&hosts) => {
                query_hosts = Some(decoded);
            }
            "port" => query_ports = Some(decoded),
            _ => kept.push(pair),
        }
    }
    if let Some(list) = query_hosts {
        hosts = list
            .split(',')
            .map(|host| HostPort {
                host: host.to_owned(),
                port: None,
            })
            .collect();
    }
    if let Some(list) = query_ports {
        apply_ports(&mut hosts, &list)?;
    }
    if hosts.len() > 1 && hosts.iter().any(|h| h.host.is_empty()) {
        return Err(StoreError::setup(
            "the host list has an empty entry (write each host, separated by commas)",
        ));
    }
    if hosts.len() > 1 && kept.iter().any(|p| p.starts_with("hostaddr=")) {
        return Err(StoreError::setup(
            "hostaddr is not supported with several hosts: list the addresses in host",
        ));
    }

    let first = &hosts[0];
    let mut url = format!("{scheme}://");
    if let Some(userinfo) = userinfo {
        url.push_str(userinfo);
        url.push('@');
    }
    if first.host.starts_with('/') {
        // A socket directory travels as sqlx's `host` parameter (below).
    } else if first.host.contains(':') {
        url.push_str(&format!("[{}]", first.host));
    } else {
        url.push_str(&first.host);
    }
    if let Some(port) = first.port {
        url.push_str(&format!(":{port}"));
    }
    url.push_str(path);
    let socket_param = first
        .host
        .starts_with('/')
        .then(|| format!("host={}", percent_encode(&first.host)));
    let params: Vec<&str> = kept.into_iter().chain(socket_param.as_deref()).collect();
    if !params.is_empty() {
        url.push('?');
        url.push_str(&params.join("&"));
    }
    Ok(ConnInfo {
        hosts,
        url,
        target,
        load_balance,
        connect_timeout,
    })
}

/// Whether the URL's authority named a host (else a `host` parameter may name it).
fn hosts_given(hosts: &[HostPort]) -> bool {
    !(hosts.len() == 1 && hosts[0].host.is_empty())
}

/// `h1:p1,[::1]:p2,h3`: the hosts of a URL, each with its port if written.
fn parse_hostspec(spec: &str) -> StoreResult<Vec<HostPort>> {
    spec.split(',')
        .enumerate()
        .map(|(i, entry)| {
            let (host, port) = if let Some(rest) = entry.strip_prefix('[') {
                let (host, after) = rest.split_once(']').ok_or_else(|| {
                    StoreError::setup(format!(
                        "host {} of the list has an unclosed `[` (an IPv6 address is written [::1]:5432)",
                        i + 1
                    ))
                })?;
                (host.to_owned(), after.strip_prefix(':'))
            } else {
                match entry.rsplit_once(':') {
                    Some((host, port)) => (percent_decode(host), Some(port)),
                    None => (percent_decode(entry), None),
                }
            };
            let port = match port {
                None | Some("") => None,
                Some(port) => Some(parse_port(port, i, "of the URL")?),
            };
            Ok(HostPort { host, port })
        })
        .collect()
}

fn parse_port(port: &str, index: usize, whence: &str) -> StoreResult<u16> {
    port.trim()
        .parse::<u16>()
        .ok()
        .filter(|p| *p != 0)
        .ok_or_else(|| {
            StoreError::setup(format!(
                "the port of host {} {whence} (`{}`) is not a port number from 1 to 65535",
                index + 1,
                port.escape_debug()
            ))
        })
}

/// `port=p1,p2`: one port for every host, or one per host (libpq's rule).
fn apply_ports(hosts: &mut [HostPort], list: &str) -> StoreResult<()> {
    let ports: Vec<&str> = list.split(',').collect();
    if ports.len() != 1 && ports.len() != hosts.len() {
        return Err(StoreError::setup(format!(
            "port lists {} ports for {} hosts: give one port for all hosts, or one per host",
            ports.len(),
            hosts.len()
        )));
    }
    for (i, host) in hosts.iter_mut().enumerate() {
        let port = ports[if ports.len() == 1 { 0 } else { i }];
        host.port = if port.is_empty() {
            None
        } else {
            Some(parse_port(port, i, "in the port parameter")?)
        };
    }
    Ok(())
}

/// libpq's `connect_timeout`: whole seconds; 0 or less means no limit; 1 means 2.
fn parse_connect_timeout(value: &str) -> StoreResult<Option<Duration>> {
    let seconds: i64 = value.trim().parse().map_err(|_| {
        StoreError::setup(format!(
            "connect_timeout `{}` is not a whole number of seconds",
            value.escape_debug()
        ))
    })?;
    Ok(match seconds {
        ..=0 => None,
        1 => Some(Duration::from_secs(2)),
        n => Some(Duration::from_secs(n.unsigned_abs())),
    })
}

/// The keyword form as a URL: user, password and database in their places, every other
/// keyword a query parameter.
fn keyword_form_to_url(s: &str) -> StoreResult<String> {
    let mut user = None;
    let mut password = None;
    let mut dbname = None;
    let mut params = Vec::new();
    for (key, value) in keyword_pairs(s)? {
        match key.as_str() {
            "user" => user = Some(value),
            "password" => password = Some(value),
            "dbname" => dbname = Some(value),
            _ => params.push(format!("{key}={}", percent_encode(&value))),
        }
    }
    let mut url = "postgres://".to_owned();
    if let Some(user) = &user {
        url.push_str(&percent_encode(user));
    }
    if let Some(password) = &password {
        url.push(':');
        url.push_str(&percent_encode(password));
    }
    if user.is_some() || password.is_some() {
        url.push('@');
    }
    if let Some(dbname) = &dbname {
        url.push('/');
        url.push_str(&percent_encode(dbname));
    }
    if !params.is_empty() {
        url.push('?');
        url.push_str(&params.join("&"));
    }
    Ok(url)
}

/// `key = value` pairs of the keyword form; a value may be single-quoted, with `\'` and `\\`.
/// An error names the keyword, never a value.
fn keyword_pairs(s: &str) -> StoreResult<Vec<(String, String)>> {
    let mut pairs = Vec::new();
    let mut chars = s.chars().peekable();
    loop {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        if chars.peek().is_none() {
            return Ok(pairs);
        }
        let mut key = String::new();
        while let Some(c) = chars.next_if(|c| *c != '=' && !c.is_whitespace()) {
            key.push(c);
        }
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        if chars.next() != Some('=') {
            return Err(StoreError::setup(format!(
                "keyword `{}` has no `=` after it (write key=value pairs)",
                key.escape_debug()
            )));
        }
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        let mut value = String::new();
        if chars.next_if_eq(&'\'').is_some() {
            loop {
                match chars.next() {
                    Some('\\') => value.extend(chars.next()),
                    Some('\'') => break,
                    Some(c) => value.push(c),
                    None => {
                        return Err(StoreError::setup(format!(
                            "the value of `{}` has an unclosed quote",
                            key.escape_debug()
                        )));
                    }
                }
            }
        } else {
            while let Some(c) = chars.next_if(|c| !c.is_whitespace()) {
                if c == '\\' {
                    value.extend(chars.next());
                } else {
                    value.push(c);
                }
            }
        }
        pairs.push((key, value));
    }
}

fn percent_encode(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes())
        .collect::<String>()
        .replace('+', "%20")
}

fn percent_decode(s: &str) -> String {
    url::form_urlencoded::parse(format!("x={}", s.replace('+', "%2B")).as_bytes())
        .next()
        .map(|(_, v)| v.into_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests;
