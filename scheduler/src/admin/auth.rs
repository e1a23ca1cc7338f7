//! Who may read and who may change (the rule is in the module docs of [`crate::admin`]):
//! extractors that admit a request or refuse it with a JSON error.

use std::net::SocketAddr;

use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::request::Parts;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::AdminState;
use super::error::ApiError;
use crate::operate::Actor;
use crate::{Error, Result};

/// The actor name of a mutation made with the admin token and no `X-Scheduler-Actor` header.
pub(crate) const TOKEN_ACTOR: &str = "admin-token";
/// The header naming the person behind a mutation, for the audit trail.
pub(crate) const ACTOR_HEADER: &str = "x-scheduler-actor";
const MIN_TOKEN_LEN: usize = 16;
const MAX_ACTOR_LEN: usize = 100;

/// The configured token (as a digest, so comparing takes the same time whatever the input's
/// length) and whether the server listens on loopback.
pub(crate) struct Auth {
    token: Option<[u8; 32]>,
    loopback: bool,
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

impl Auth {
    pub(crate) fn new(token: Option<&str>, loopback: bool) -> Result<Self> {
        if let Some(token) = token {
            let invalid = |message: &str| Error::InvalidSetting {
                name: crate::vars::ADMIN_TOKEN.into(),
                message: message.to_owned(),
            };
            if token.chars().count() < MIN_TOKEN_LEN {
                return Err(invalid(
                    "must be at least 16 characters (use a long random string)",
                ));
            }
            if token.chars().any(|c| c.is_whitespace() || c.is_control()) {
                return Err(invalid("must not contain spaces or control characters"));
            }
        }
        Ok(Self {
            token: token.map(digest),
            loopback,
        })
    }

    /// The bearer token of the request, if it presents one.
    fn presented(parts: &Parts) -> Result<Option<&str>, ApiError> {
        let Some(value) = parts.headers.get(axum::http::header::AUTHORIZATION) else {
            return Ok(None);
        };
        value
            .to_str()
            .ok()
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(|t| Some(t.trim()))
            .ok_or_else(|| {
                ApiError::unauthorized("the Authorization header must be `Bearer <token>`")
            })
    }

    /// Whether `presented` is the configured token (constant time).
    fn matches(&self, presented: &str) -> bool {
        self.token
            .is_some_and(|token| bool::from(token.ct_eq(&digest(presented))))
    }

    /// Checks a presented token; `Ok(true)`: the right one, `Ok(false)`: none presented.
    fn check_presented(&self, parts: &Parts) -> Result<bool, ApiError> {
        match Self::presented(parts)? {
            None => Ok(false),
            Some(t) if self.matches(t) => Ok(true),
            Some(_) if self.token.is_none() => Err(ApiError::unauthorized(
                "this admin server has no token configured (SCHEDULER_ADMIN_TOKEN); send none",
            )),
            Some(_) => Err(ApiError::unauthorized("wrong admin token")),
        }
    }

    pub(crate) fn admit_read(&self, parts: &Parts) -> Result<(), ApiError> {
        if self.check_presented(parts)? || self.loopback {
            return Ok(());
        }
        match self.token {
            Some(_) => Err(ApiError::unauthorized(
                "this admin server listens beyond loopback: send `Authorization: Bearer <SCHEDULER_ADMIN_TOKEN>`",
            )),
            None => Err(ApiError::forbidden(
                "reads are refused on a non-loopback address without a token: set SCHEDULER_ADMIN_TOKEN",
            )),
        }
    }

    pub(crate) fn admit_mutation(&self, parts: &Parts) -> Result<(), ApiError> {
        if self.token.is_none() {
            return Err(ApiError::forbidden(
                "mutations are disabled: set SCHEDULER_ADMIN_TOKEN on the node to enable them",
            ));
        }
        if self.check_presented(parts)? {
            Ok(())
        } else {
            Err(ApiError::unauthorized(
                "mutations need `Authorization: Bearer <SCHEDULER_ADMIN_TOKEN>`",
            ))
        }
    }
}

/// Admits a read (see the rule).
pub(crate) struct Reader;

impl FromRequestParts<AdminState> for Reader {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AdminState) -> Result<Self, ApiError> {
        state.auth.admit_read(parts)?;
        Ok(Reader)
    }
}

/// Admits a mutation and says who makes it, from where.
pub(crate) struct Operator(pub(crate) Actor);

impl FromRequestParts<AdminState> for Operator {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AdminState) -> Result<Self, ApiError> {
        state.auth.admit_mutation(parts)?;
        let name = match parts
            .headers
            .get(ACTOR_HEADER)
            .map(|v| actor_name(v.as_bytes()))
        {
            Some(name) if !name.is_empty() => format!("{name} ({TOKEN_ACTOR})"),
            _ => TOKEN_ACTOR.to_owned(),
        };
        let source = match parts.extensions.get::<ConnectInfo<SocketAddr>>() {
            Some(ConnectInfo(peer)) => format!("http@{peer}"),
            None => "http@unknown".to_owned(),
        };
        Ok(Operator(Actor::new(name, source)))
    }
}

/// The `X-Scheduler-Actor` value as an audit name: printable, trimmed, at most 100 characters
/// (what a client sends is recorded, never refused).
fn actor_name(value: &[u8]) -> String {
    String::from_utf8_lossy(value)
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect::<String>()
        .trim()
        .chars()
        .take(MAX_ACTOR_LEN)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(auth: Option<&str>) -> Parts {
        let mut request = axum::http::Request::builder();
        if let Some(auth) = auth {
            request = request.header("authorization", auth);
        }
        request.body(()).unwrap().into_parts().0
    }

    #[test]
    fn actor_names_are_printable_and_bounded() {
        assert_eq!(actor_name(b" alice "), "alice");
        assert_eq!(actor_name(b"a\tb"), "a b");
        assert_eq!(actor_name(&[b'x'; 300]).len(), 100);
        assert_eq!(actor_name(b""), "");
    }

    #[test]
    fn short_tokens_are_refused_at_start() {
        let e = Auth::new(Some("short"), true).err().unwrap().to_string();
        assert!(
            e.contains("SCHEDULER_ADMIN_TOKEN") && e.contains("16"),
            "{e}"
        );
    }

    #[test]
    fn the_rule_of_reads_and_mutations() {
        let token = "0123456789abcdef-token";
        let good = format!("Bearer {token}");
        let none = Auth::new(None, true).unwrap();
        assert!(none.admit_read(&parts(None)).is_ok());
        assert_eq!(none.admit_mutation(&parts(None)).unwrap_err().status, 403);
        assert_eq!(
            none.admit_mutation(&parts(Some(&good))).unwrap_err().status,
            403
        );

        let open = Auth::new(None, false).unwrap();
        assert_eq!(open.admit_read(&parts(None)).unwrap_err().status, 403);

        let remote = Auth::new(Some(token), false).unwrap();
        assert_eq!(remote.admit_read(&parts(None)).unwrap_err().status, 401);
        assert!(remote.admit_read(&parts(Some(&good))).is_ok());
        assert!(remote.admit_mutation(&parts(Some(&good))).is_ok());
        let wrong = parts(Some("Bearer 0123456789abcdef-tokeN"));
        assert_eq!(remote.admit_mutation(&wrong).unwrap_err().status, 401);
        assert_eq!(remote.admit_read(&wrong).unwrap_err().status, 401);
        let basic = parts(Some("Basic dXNlcjpwYXNz"));
        assert_eq!(remote.admit_mutation(&basic).unwrap_err().status, 401);

        let local = Auth::new(Some(token), true).unwrap();
        assert!(local.admit_read(&parts(None)).is_ok());
        assert_eq!(local.admit_mutation(&parts(None)).unwrap_err().status, 401);
    }
}
